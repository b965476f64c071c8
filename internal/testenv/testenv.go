// Package testenv names the servers the tests use: the ones scripts/test.sh started for the run
// (on free ports of its own), or the ones the ROOKERY_TEST_* variables point at, or the usual
// local ports when neither is set (`go test` by hand on a machine that runs them).
package testenv

import "os"

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
