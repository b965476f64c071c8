#!/usr/bin/env bash
# openapi-lint.sh — lints docs/openapi.json with Redocly CLI (rules in redocly.yaml) and fails on
# any error or warning. Redocly CLI comes from npm (pinned below: later versions need Node 22),
# installed on first use into a cache outside the repository ($ROOKERY_CACHE, default
# ~/.cache/rookery).
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.77.0
cache=${ROOKERY_CACHE:-$HOME/.cache/rookery}
dir=$cache/redocly-cli-$version
if [ ! -x "$dir/node_modules/.bin/redocly" ]; then
	echo "openapi-lint: installing @redocly/cli@$version into $dir" >&2
	mkdir -p "$dir"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "@redocly/cli@$version" >&2)
fi
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$dir/node_modules/.bin/redocly" lint docs/openapi.json --config redocly.yaml --max-problems 1000 --format stylish 2>&1 | grep -v -e '║' -e '╔' -e '╚' || true
# lint's exit code counts errors only: fail on warnings too.
out=$("$dir/node_modules/.bin/redocly" lint docs/openapi.json --config redocly.yaml --format summary 2>&1 || true)
if ! grep -q "Your API description is valid" <<<"$out" || grep -qE "You have [0-9]+ warning" <<<"$out"; then
	echo "openapi-lint: docs/openapi.json has errors or warnings (above)" >&2
	exit 1
fi
echo "openapi-lint: docs/openapi.json lints clean"
