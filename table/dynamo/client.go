package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/awsconf"
)

// ClientOptions say how to reach DynamoDB (internal/awsconf).
type ClientOptions = awsconf.Options

// NewClient returns a DynamoDB client configured by o. With an Endpoint (DynamoDB Local) and neither
// explicit keys nor AWS_ACCESS_KEY_ID, it uses fixed dummy credentials, which DynamoDB Local accepts,
// and it never asks the EC2 metadata service.
func NewClient(ctx context.Context, o ClientOptions) (*dynamodb.Client, error) {
	cfg, err := awsconf.Load(ctx, o)
	if err != nil {
		return nil, rookery.E(rookery.Op("dynamo.NewClient"), rookery.Invalid, "cannot load the AWS configuration", err)
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.Endpoint != "" {
			do.BaseEndpoint = aws.String(o.Endpoint)
			// DynamoDB Local's CRC32 response header does not match its (compressed) bodies.
			do.DisableValidateResponseChecksum = true
		}
	}), nil
}

// NewStreamsClient returns a DynamoDB Streams client configured by o, as NewClient does.
func NewStreamsClient(ctx context.Context, o ClientOptions) (*dynamodbstreams.Client, error) {
	cfg, err := awsconf.Load(ctx, o)
	if err != nil {
		return nil, rookery.E(rookery.Op("dynamo.NewStreamsClient"), rookery.Invalid, "cannot load the AWS configuration", err)
	}
	return dynamodbstreams.NewFromConfig(cfg, func(do *dynamodbstreams.Options) {
		if o.Endpoint != "" {
			do.BaseEndpoint = aws.String(o.Endpoint)
		}
	}), nil
}
