#!/usr/bin/env bash
# bench-compare.sh — the comparison of docs/performance.md: one workload on one graph against
# Rookery (embedded, timelines in the store), Rookery with Redis timelines, and the two baselines
# (fan-out on read in PostgreSQL; seed 002's naive Redis lists), in the same run, on this machine.
#
#   scripts/bench-compare.sh GRAPH [rookery bench flags...]
#   scripts/bench-compare.sh ../shared/data/graphs/socfb-Reed98.edges --symmetric --rate 500 --duration 30s
#
# Results go to bench-results/<graph>-<target>.json and a table per target on stdout. Needs
# PostgreSQL (127.0.0.1:5432, database test) and Redis (127.0.0.1:6379).
set -euo pipefail
cd "$(dirname "$0")/.."
graph=$1; shift
name=$(basename "$graph" | cut -d. -f1)
mkdir -p bench-results bin
go build -o bin/rookery ./cmd/rookery
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

serve() { # timelines
	bin/rookery serve --data-dir "$work/$1" --addr 127.0.0.1:18080 --timelines "$1" --redis-prefix "rookerybench$$" \
		--log-level warn >"$work/$1.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do curl -fs http://127.0.0.1:18080/readyz >/dev/null 2>&1 && return; sleep 0.1; done
	echo "the server did not start:"; cat "$work/$1.log"; exit 1
}

for timelines in store redis; do
	echo "== rookery, $timelines timelines"
	serve "$timelines"
	bin/rookery bench --graph "$graph" --import --server http://127.0.0.1:18080 --data-dir "$work/$timelines" \
		--out "bench-results/$name-rookery-$timelines.json" "$@"
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
for target in postgres redis-list; do
	echo "== baseline: $target"
	bin/rookery bench --graph "$graph" --target "$target" --baseline-name "rookerybench$$" \
		--out "bench-results/$name-$target.json" "$@"
done
r=bench-results/$name
for base in postgres redis-list; do
	echo "== ratios to the $base baseline"
	bin/rookery bench report "$r-$base.json" "$r-rookery-table.json" "$r-rookery-redis.json"
done
