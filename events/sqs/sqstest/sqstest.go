// Package sqstest gives tests an SNS/SQS to run against: fauxqs, started by scripts/sqs-local.sh
// (which installs it into a cache outside the repository on first use), or the one named by
// ROOKERY_TEST_SQS_ENDPOINT (make test starts one and sets it, so that all packages share it). An
// emulator that cannot be started fails the tests: it never skips them.
package sqstest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testenv"
)

// EnvEndpoint names the environment variable that points tests at a running SNS/SQS.
const EnvEndpoint = "ROOKERY_TEST_SQS_ENDPOINT"

var endpoint string

// Main is TestMain for packages that use SNS/SQS: it makes sure an emulator runs for the package's
// tests (starting fauxqs unless EnvEndpoint is set), runs them, and stops what it started.
func Main(m *testing.M) { os.Exit(Run(m.Run)) }

// Run is Main without the exit, around run (m.Run, or another server's Run of m): it returns run's
// code.
func Run(run func() int) int {
	endpoint = os.Getenv(EnvEndpoint)
	if endpoint == "" {
		ep, stop, err := testenv.StartScript("sqs-local.sh")
		if err != nil {
			fmt.Fprintf(os.Stderr, "sqstest: cannot start the SNS/SQS emulator: %v\n", err)
			return 1
		}
		defer stop()
		endpoint = ep
		os.Setenv(EnvEndpoint, endpoint) // for the processes the tests start
	}
	return run()
}

// Endpoint returns the endpoint of the test SNS/SQS; the package must use Main.
func Endpoint(t testing.TB) string {
	t.Helper()
	if endpoint == "" {
		t.Fatal("sqstest: no SNS/SQS endpoint; the package's TestMain must call sqstest.Main")
	}
	return endpoint
}

var seq atomic.Int64

// Prefix returns a topic and queue prefix no other test uses (at most 20 characters).
func Prefix() string {
	return fmt.Sprintf("t%d-%d-%d", os.Getpid()%100000, time.Now().UnixNano()%1e6, seq.Add(1))
}
