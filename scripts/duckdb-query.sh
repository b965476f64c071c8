#!/usr/bin/env bash
# duckdb-query.sh — runs SQL on DuckDB, to check that the analytics export reads in a standard
# engine (export's TestDuckDBReadsTheExport).
#
#   scripts/duckdb-query.sh 'SQL'    prints the result rows as one JSON array
#
# DuckDB comes from the npm package @duckdb/node-api (pinned below; its platform package carries
# the engine), installed into ROOKERY_CACHE (default ~/.cache/rookery), never into the repository.
set -euo pipefail

version=1.3.2-alpha.25
cache=${ROOKERY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rookery}
dir=$cache/duckdb-node-$version

log() { printf 'duckdb-query: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ $# -eq 1 ] || die "usage: duckdb-query.sh 'SQL'"
if [ ! -f "$dir/.installed" ]; then
	command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"
	log "installing @duckdb/node-api@$version into $dir (one time)"
	mkdir -p "$dir"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "@duckdb/node-api@$version" >&2) ||
		die "npm install @duckdb/node-api@$version failed"
	touch "$dir/.installed"
fi
cat >"$dir/query.mjs" <<'JS'
import { DuckDBInstance } from '@duckdb/node-api';
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const r = await c.runAndReadAll(process.argv[2]);
console.log(JSON.stringify(r.getRowObjectsJson()));
JS
cd "$dir" && exec node query.mjs "$1"
