// Package awsconf loads the AWS SDK configuration the way every AWS client of Rookery needs it
// (DynamoDB, S3): explicit keys when given, else the default chain; with a custom endpoint (an
// emulator) and no credentials, fixed dummy ones and no EC2 metadata service.
package awsconf

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Options say how to reach an AWS service. Unset fields come from the AWS default chain
// (environment, shared config and credentials files, instance roles).
type Options struct {
	Endpoint string // an emulator's URL, such as http://127.0.0.1:8000; "" for AWS
	Region   string // "" : from the AWS configuration, else us-east-1
	// AccessKeyID and SecretAccessKey, when both set, are used instead of the default chain.
	AccessKeyID, SecretAccessKey string
	// MaxAttempts is the SDK's attempts per call, retries of throttling included; 0 means 8.
	MaxAttempts int
}

// Load returns the SDK configuration o describes.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	switch {
	case o.AccessKeyID != "" && o.SecretAccessKey != "":
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	case o.Endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "":
		// A custom endpoint (an emulator) with no credentials configured: dummy ones, which it
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
		return aws.Config{}, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}
