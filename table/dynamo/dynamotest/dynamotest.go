// Package dynamotest gives tests a DynamoDB to run against: AWS DynamoDB Local, started by
// scripts/dynamodb-local.sh (which installs it into a cache outside the repository on first use), or
// the one named by ROOKERY_TEST_DYNAMO_ENDPOINT (make test starts one and sets it, so that all
// packages share it). A DynamoDB that cannot be started fails the tests: it never skips them.
package dynamotest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/dynamo"
)

// EnvEndpoint names the environment variable that points tests at a running DynamoDB.
const EnvEndpoint = "ROOKERY_TEST_DYNAMO_ENDPOINT"

var endpoint string

// Main is TestMain for packages that use DynamoDB: it makes sure one is running for the package's
// tests (starting DynamoDB Local unless EnvEndpoint is set), runs them, and stops what it started.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it returns m.Run's code (for a TestMain that needs more servers).
func Run(m *testing.M) int {
	endpoint = os.Getenv(EnvEndpoint)
	if endpoint == "" {
		ep, stop, err := testenv.StartScript("dynamodb-local.sh")
		if err != nil {
			fmt.Fprintf(os.Stderr, "dynamotest: cannot start DynamoDB Local: %v\n", err)
			return 1
		}
		defer stop()
		endpoint = ep
	}
	return m.Run()
}

// Endpoint returns the endpoint of the test DynamoDB; the package must use Main.
func Endpoint(t testing.TB) string {
	t.Helper()
	if endpoint == "" {
		t.Fatal("dynamotest: no DynamoDB endpoint; the package's TestMain must call dynamotest.Main")
	}
	return endpoint
}

// Client returns a client of the test DynamoDB.
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	c, err := dynamo.NewClient(context.Background(), dynamo.ClientOptions{Endpoint: Endpoint(t), Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var tables atomic.Int64

// NewTable migrates a table with a unique name and the given schema, drops it when the test ends,
// and returns its name.
func NewTable(t testing.TB, client *dynamodb.Client, schema table.Schema, opts ...dynamo.MigrateOption) string {
	t.Helper()
	name := fmt.Sprintf("rookery-test-%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9, tables.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.Migrate(ctx, client, name, schema, nil, opts...); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := dynamo.DropTable(context.Background(), client, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}
