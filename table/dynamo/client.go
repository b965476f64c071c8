package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
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

// NewClient returns a DynamoDB client configured by o. With an Endpoint and no credentials anywhere
// (DynamoDB Local), it uses fixed dummy credentials, which DynamoDB Local accepts.
func NewClient(ctx context.Context, o ClientOptions) (*dynamodb.Client, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.AccessKeyID != "" && o.SecretAccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
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
	if o.Endpoint != "" {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil || cfg.Credentials == nil {
			cfg.Credentials = credentials.NewStaticCredentialsProvider("rookery", "rookery", "")
		}
	}
	return dynamodb.NewFromConfig(cfg, func(do *dynamodb.Options) {
		if o.Endpoint != "" {
			do.BaseEndpoint = aws.String(o.Endpoint)
			// DynamoDB Local's CRC32 response header does not match its (compressed) bodies.
			do.DisableValidateResponseChecksum = true
		}
	}), nil
}
