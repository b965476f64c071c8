package main

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/auth"
	exports3 "github.com/rookery/rookery/export/s3"
	"github.com/rookery/rookery/internal/awsconf"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/metrics"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
)

// config is every setting of every subcommand; each subcommand registers the flags it reads.
type config struct {
	dataDir    string
	store      string
	blockCache int // MiB
	walSync    time.Duration

	dynamoEndpoint, dynamoTable, dynamoRegion string
	awsAccessKeyID, awsSecretAccessKey        string
	s3Endpoint, s3Region                      string

	authSecret   string
	authKeys     string
	cursorSecret string
}

// minSecret is the shortest HS256 secret accepted: 32 bytes, the hash's size.
const minSecret = 32

func (c *config) addStoreFlags(f *pflag.FlagSet) {
	f.StringVar(&c.dataDir, "data-dir", "./data", "directory of the embedded store and generated secrets")
	f.StringVar(&c.store, "store", "pebble", "durable store: pebble (embedded) or dynamo")
	f.IntVar(&c.blockCache, "block-cache-mib", 128, "the embedded store's block cache in MiB (its event log and timelines share it): more keeps more of a large store's blocks decoded in memory")
	f.DurationVar(&c.walSync, "wal-sync-interval", pebblekit.DefaultWALSyncInterval, "the least time between two syncs of the embedded store's write-ahead log: more commits share a sync, for less CPU, and a synced write may wait this much longer (0: sync as soon as a commit asks)")
	c.addDynamoFlags(f)
}

func (c *config) addDynamoFlags(f *pflag.FlagSet) {
	f.StringVar(&c.dynamoEndpoint, "dynamo-endpoint", "", "DynamoDB endpoint URL (empty: AWS's, by region)")
	f.StringVar(&c.dynamoTable, "dynamo-table", "rookery", "DynamoDB table name")
	f.StringVar(&c.dynamoRegion, "dynamo-region", "", "AWS region (empty: from the AWS configuration, else us-east-1)")
	c.addAWSFlags(f)
}

// addAWSFlags registers the AWS credentials and the S3 endpoint (DynamoDB's endpoint is its own).
func (c *config) addAWSFlags(f *pflag.FlagSet) {
	f.StringVar(&c.awsAccessKeyID, "aws-access-key-id", "", "AWS access key id (empty: the AWS default credential chain)")
	f.StringVar(&c.awsSecretAccessKey, "aws-secret-access-key", "", "AWS secret access key (empty: the AWS default credential chain)")
	c.addS3Flags(f)
}

// addClientFlags registers what the commands that call a running server (token, dlq, import,
// bench, streaks) need to mint its tokens: where its secret is, or the secret.
func (c *config) addClientFlags(f *pflag.FlagSet) {
	f.StringVar(&c.dataDir, "data-dir", "./data", "the server's data directory, which holds its generated secret (embedded store)")
	f.StringVar(&c.store, "store", "pebble", "the server's store: pebble (its secret is in --data-dir unless --auth-secret is set) or dynamo (--auth-secret is required)")
	f.StringVar(&c.authSecret, "auth-secret", "", "the server's HS256 token secret")
}

func (c *config) addAuthFlags(f *pflag.FlagSet) {
	f.StringVar(&c.authSecret, "auth-secret", "", "HS256 token secret, at least 32 bytes (embedded: generated into the data dir if empty)")
	f.StringVar(&c.authKeys, "auth-public-keys", "", "PEM file of Ed25519 and RSA public keys that verify EdDSA and RS256 tokens")
	f.StringVar(&c.cursorSecret, "cursor-secret", "", "key that signs list cursors (empty: derived from the auth secret)")
}

// secret returns the HS256 secret: the configured one, or with the embedded store the one in the
// data directory, generated (0600) on first use if generate (serve), so `serve` and `token` on one
// data dir agree. With DynamoDB and no secret it returns nil (public keys only). The commands that
// mint tokens for a server never generate one: a new secret would only mint tokens the server
// rejects.
func (c *config) secret(generate bool) ([]byte, error) {
	if c.authSecret != "" {
		if len(c.authSecret) < minSecret {
			return nil, fmt.Errorf("--auth-secret must be at least %d bytes", minSecret)
		}
		return []byte(c.authSecret), nil
	}
	if c.store != "pebble" {
		return nil, nil
	}
	path := filepath.Join(c.dataDir, "auth.secret")
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < minSecret {
			return nil, fmt.Errorf("%s holds a secret shorter than %d bytes", path, minSecret)
		}
		return []byte(s), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if !generate {
		abs, _ := filepath.Abs(path)
		return nil, fmt.Errorf("no secret at %s: point --data-dir (ROOKERY_DATA_DIR) at the server's data directory, "+
			"or set --auth-secret (ROOKERY_AUTH_SECRET) to the server's secret (`rookery serve` generates one in its data directory on first start)", abs)
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	s := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return c.secret(false) // another process made it first
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	return []byte(s), f.Close()
}

// verifier returns the token verifier and the cursor key.
func (c *config) verifier(clock rookery.Clock) (*auth.Verifier, []byte, error) {
	secret, err := c.secret(true)
	if err != nil {
		return nil, nil, err
	}
	var keys []crypto.PublicKey
	if c.authKeys != "" {
		pemData, err := os.ReadFile(c.authKeys)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-public-keys: %w", err)
		}
		if keys, err = auth.ParsePublicKeys(pemData); err != nil {
			return nil, nil, fmt.Errorf("--auth-public-keys %s: %w", c.authKeys, err)
		}
	}
	if secret == nil && keys == nil {
		return nil, nil, errors.New("no token key configured: set --auth-secret (ROOKERY_AUTH_SECRET) or --auth-public-keys")
	}
	v, err := auth.NewVerifier(secret, keys, clock)
	if err != nil {
		return nil, nil, err
	}
	var cursorKey []byte
	switch {
	case c.cursorSecret != "":
		cursorKey = []byte(c.cursorSecret)
	case secret != nil:
		h := hmac.New(sha256.New, secret)
		h.Write([]byte("rookery cursor key v1"))
		cursorKey = h.Sum(nil)
	default:
		return nil, nil, errors.New("with only public keys configured, set --cursor-secret (shared by all API nodes)")
	}
	return v, cursorKey, nil
}

// openDynamo opens the DynamoDB table store (the embedded one comes from openBackends).
func (c *config) openDynamo(ctx context.Context, clock rookery.Clock, cursorKey []byte, m *metrics.Metrics) (table.Table, error) {
	if c.store != "dynamo" {
		return nil, fmt.Errorf("--store must be pebble or dynamo, not %q", c.store)
	}
	client, err := c.dynamoClient(ctx)
	if err != nil {
		return nil, err
	}
	return dynamo.New(client, dynamo.Options{
		Table: c.dynamoTable, Schema: app.Schema, Clock: clock, CursorKey: cursorKey, Capacity: m.ObserveCapacity,
	})
}

func (c *config) dynamoClient(ctx context.Context) (*dynamoClient, error) {
	return dynamo.NewClient(ctx, dynamo.ClientOptions{
		Endpoint: c.dynamoEndpoint, Region: c.dynamoRegion,
		AccessKeyID: c.awsAccessKeyID, SecretAccessKey: c.awsSecretAccessKey,
	})
}

// addS3Flags registers where s3:// URLs (--export-dir, --backup-dir, restore --from) are served.
func (c *config) addS3Flags(f *pflag.FlagSet) {
	f.StringVar(&c.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for s3:// URLs (empty: AWS's, by region; an emulator or MinIO: addressed by path)")
	f.StringVar(&c.s3Region, "s3-region", "", "AWS region of s3:// buckets (empty: from the AWS configuration, else us-east-1); credentials are --aws-access-key-id and --aws-secret-access-key, else the AWS default chain")
}

// s3Store returns the files under an s3://bucket/prefix URL.
func (c *config) s3Store(ctx context.Context, u string) (*exports3.Store, error) {
	bucket, prefix, ok := exports3.ParseURL(u)
	if !ok {
		return nil, fmt.Errorf("%q is not s3://bucket/prefix", u)
	}
	client, err := exports3.NewClient(ctx, awsconf.Options{Endpoint: c.s3Endpoint, Region: c.s3Region,
		AccessKeyID: c.awsAccessKeyID, SecretAccessKey: c.awsSecretAccessKey})
	if err != nil {
		return nil, err
	}
	return exports3.New(client, bucket, prefix), nil
}
