// Package sqstest gives tests an SNS/SQS to run against: fauxqs, started by scripts/sqs-local.sh
// (which installs it into a cache outside the repository on first use), or the one named by
// ROOKERY_TEST_SQS_ENDPOINT (make test starts one and sets it, so that all packages share it). An
// emulator that cannot be started fails the tests: it never skips them.
package sqstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	var pid string
	script := filepath.Join(repoRoot(), "scripts", "sqs-local.sh")
	if endpoint == "" {
		out, err := exec.Command("bash", script, "start").Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			fmt.Fprintf(os.Stderr, "sqstest: cannot start the SNS/SQS emulator with %s: %v\n%s", script, err, stderr)
			os.Exit(1)
		}
		fields := strings.Fields(string(out))
		if len(fields) != 2 {
			fmt.Fprintf(os.Stderr, "sqstest: unexpected output from %s: %q\n", script, out)
			os.Exit(1)
		}
		endpoint, pid = fields[0], fields[1]
		os.Setenv(EnvEndpoint, endpoint) // for the processes the tests start
	}
	code := run()
	if pid != "" {
		exec.Command("bash", script, "stop", pid).Run()
	}
	return code
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
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
