package dynamo

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rookery/rookery"
)

// ClientOptions say how to reach DynamoDB. Unset fields come from the AWS default chain
// (environment, shared config and credentials files, instance roles).
type ClientOptions struct {
	Endpoint string // e.g. http://127.0.0.1:8000 for DynamoDB Local; "" for AWS
	Region   string
	// AccessKeyID and SecretAccessKey, when both set, are used instead of the default chain.
	AccessKeyID, SecretAccessKey string
	// MaxAttempts is the SDK's attempts per call, retries of throttling included; 0 means 8.
	MaxAttempts int
}

// NewClient returns a DynamoDB client configured by o. With an Endpoint (DynamoDB Local) and neither
// explicit keys nor AWS_ACCESS_KEY_ID, it uses fixed dummy credentials, which DynamoDB Local accepts,
// and it never asks the EC2 metadata service.
func NewClient(ctx context.Context, o ClientOptions) (*dynamodb.Client, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	switch {
	case o.AccessKeyID != "" && o.SecretAccessKey != "":
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	case o.Endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "":
		// A custom endpoint (DynamoDB Local) with no credentials configured: dummy ones, which it
		// accepts, rather than the default chain, which would probe the EC2 metadata service.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("rookery", "rookery", "")))
	}
	if o.Endpoint != "" {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	attempts := o.MaxAttempts
	if attempts == 0 {
		attempts = 8
	}
	opts = append(opts, config.WithRetryer(func() aws.Retryer {
		return retry.AddWithMaxAttempts(retry.NewStandard(), attempts)
	}))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, rookery.E(rookery.Op("dynamo.NewClient"), rookery.Invalid, "cannot load the AWS configuration", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.Endpoint != "" {
			do.BaseEndpoint = aws.String(o.Endpoint)
			// DynamoDB Local's CRC32 response header does not match its (compressed) bodies.
			do.DisableValidateResponseChecksum = true
		}
	}), nil
}
