// Package testenv names the servers the tests use: the ones scripts/test.sh started for the run
// (on free ports of its own), or the ones the ROOKERY_TEST_* variables point at, or the usual
// local ports when neither is set (`go test` by hand on a machine that runs them); and how a test
// waits for what runs in the background (Eventually).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// RedisAddr is the Redis tests use (ROOKERY_TEST_REDIS_ADDR).
func RedisAddr() string { return getenv("ROOKERY_TEST_REDIS_ADDR", "127.0.0.1:6379") }

// NATSURL is the NATS server with JetStream tests use (ROOKERY_TEST_NATS_URL).
func NATSURL() string { return getenv("ROOKERY_TEST_NATS_URL", "nats://127.0.0.1:4222") }

// PostgresURL is the PostgreSQL database tests use (ROOKERY_TEST_POSTGRES_URL).
func PostgresURL() string {
	return getenv("ROOKERY_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
}

// StartScript starts a server with a script of scripts/ ("dynamodb-local.sh", "sqs-local.sh") that
// prints "ENDPOINT PID" on start and stops the PID on "stop PID"; it returns the endpoint and what
// stops the server.
func StartScript(name string) (endpoint string, stop func(), err error) {
	script := filepath.Join(repoRoot(), "scripts", name)
	out, err := exec.Command("bash", script, "start").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", nil, fmt.Errorf("%s start: %w\n%s", script, err, stderr)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		return "", nil, fmt.Errorf("%s start printed %q, not ENDPOINT PID", script, out)
	}
	return fields[0], func() { exec.Command("bash", script, "stop", fields[1]).Run() }, nil
}

// repoRoot finds the module root from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Eventually fails t unless cond holds within the given time, checking it every 10 ms:
// how a test waits for what a background worker does.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
	}
}
