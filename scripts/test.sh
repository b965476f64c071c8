#!/usr/bin/env bash
# test.sh — runs every test of Rookery with the servers the tests need. `make test` calls it.
#
# DynamoDB Local is installed (once, into ~/.cache/rookery) and started on a free port for the run,
# and every package that needs it uses that one instance (ROOKERY_TEST_DYNAMO_ENDPOINT). If it cannot
# be installed or started, the run fails with the reason: DynamoDB tests never skip.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestConformance ./table/...).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "test.sh: Go is not installed" >&2; exit 1; }

if [ -z "${ROOKERY_TEST_DYNAMO_ENDPOINT:-}" ]; then
	echo "== starting DynamoDB Local"
	read -r endpoint pid < <(scripts/dynamodb-local.sh start)
	trap 'scripts/dynamodb-local.sh stop "$pid"' EXIT
	export ROOKERY_TEST_DYNAMO_ENDPOINT=$endpoint
	echo "   $endpoint (pid $pid)"
fi

# The event log tests use NATS JetStream (ROOKERY_TEST_NATS_URL, default nats://127.0.0.1:4222);
# .ci/run starts it when it is not running. Say so early rather than through a test failure.
if [ -z "${ROOKERY_TEST_NATS_URL:-}" ] && ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then
	echo "test.sh: NATS is not answering on 127.0.0.1:4222 (start it: see README, Test it)" >&2
	exit 1
fi

if [ -z "${ROOKERY_TEST_REDIS_ADDR:-}" ] && ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
	echo "test.sh: Redis is not answering on 127.0.0.1:6379 (start it: see README, Test it)" >&2
	exit 1
fi

if [ -z "${ROOKERY_TEST_POSTGRES_URL:-}" ] && ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
	echo "test.sh: PostgreSQL is not answering on 127.0.0.1:5432 (start it: see README, Test it)" >&2
	exit 1
fi

args=("$@")
# The fault test (./faults) runs alone, after the rest: it starts servers of its own and times
# their faults, and other packages' tests on the same two cores would slow it past its timeouts.
[ ${#args[@]} -gt 0 ] || mapfile -t args < <(go list ./... | grep -v '/faults$')
echo "== go test -race ${args[*]}"
go test -race -count=1 -timeout 20m "${args[@]}"

if [ $# -eq 0 ]; then
	# The HTTP scenario tests once more, on DynamoDB Local instead of Pebble.
	echo "== ROOKERY_TEST_STORE=dynamo go test -race ./httpapi (scenario tests on DynamoDB Local)"
	ROOKERY_TEST_STORE=dynamo go test -race -count=1 ./httpapi

	# The fault test of the scaled-out deployment: the saved failing seeds and ROOKERY_FAULT_SEEDS
	# new ones (default 1); `make soak` runs it for longer.
	echo "== go test ./faults (the scale-out deployment under faults; seeds are printed)"
	go test -count=1 -timeout 30m -v -run TestFaults ./faults

	# A short fuzz run of the whole HTTP handler (longer runs by hand: -fuzztime 10m).
	echo "== go test -fuzz FuzzHandler -fuzztime 20s ./httpapi"
	go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 20s ./httpapi
fi
