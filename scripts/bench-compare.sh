#!/usr/bin/env bash
# bench-compare.sh — the comparison of docs/performance.md: one workload on one graph against
# Rookery (embedded, timelines in the store), Rookery with Redis timelines, and the two baselines
# (fan-out on read in PostgreSQL; seed 002's naive Redis lists), in the same run, on this machine.
#
#   scripts/bench-compare.sh GRAPH [rookery bench flags...]
#   RUNS=3 scripts/bench-compare.sh ../shared/data/graphs/socfb-Reed98.edges --symmetric --rate 500 --duration 30s
#
# The graph is imported into Rookery once; every Rookery run starts from a fresh copy of that data
# directory, so that no run measures what an earlier one left. RUNS (default 1) repeats each
# target. Results go to bench-results/<graph>-<target>[-<run>].json, a table per run on stdout,
# then the ratios of each Rookery variant to each baseline (first run of each). Needs PostgreSQL
# (127.0.0.1:5432, database test) and Redis (127.0.0.1:6379).
set -euo pipefail
cd "$(dirname "$0")/.."
graph=$1; shift
name=$(basename "$graph" | cut -d. -f1)
runs=${RUNS:-1}
mkdir -p bench-results bin
go build -o bin/rookery ./cmd/rookery
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
# The flags of the measured runs, without those that only the import takes.
import_flags=()
args=("$@")
for i in "${!args[@]}"; do
	case ${args[$i]} in
	--symmetric|--prefix=*) import_flags+=("${args[$i]}");;
	--prefix) import_flags+=(--prefix "${args[$((i+1))]}");;
	esac
done

echo "== importing $graph into Rookery (once)"
serve "$work/imported" --timelines store --redis-prefix "rookerybench$$"
bin/rookery bench --graph "$graph" --import --server http://127.0.0.1:18080 --data-dir "$work/imported" \
	--mix post --rate 1 --duration 1s --catch-up-wait 0 "${import_flags[@]}" >/dev/null
stop

for timelines in store redis; do
	for run in $(seq 1 "$runs"); do
		echo "== rookery, $timelines timelines, run $run of $runs (a fresh copy of the import)"
		copy "$work/imported" "$work/run"
		serve "$work/run" --timelines "$timelines" --redis-prefix "rookerybench$$-$run" # Redis timelines: none of an earlier run's
		suffix=; [ "$run" -gt 1 ] && suffix=-$run
		bin/rookery bench --graph "$graph" --server http://127.0.0.1:18080 --data-dir "$work/run" \
			--out "bench-results/$name-rookery-$timelines$suffix.json" "$@"
		stop
		if [ "$timelines" = redis ] && command -v redis-cli >/dev/null; then
			# Keys are "{prefix:user}:tl" and the like (hash-tagged for a cluster): match inside the braces.
			redis-cli --scan --pattern "*rookerybench$$-$run:*" | xargs -r redis-cli del >/dev/null
		fi
	done
done
for target in postgres redis-list; do
	for run in $(seq 1 "$runs"); do
		echo "== baseline: $target, run $run of $runs"
		suffix=; [ "$run" -gt 1 ] && suffix=-$run
		bin/rookery bench --graph "$graph" --target "$target" --baseline-name "rookerybench$$" \
			--out "bench-results/$name-$target$suffix.json" "$@"
	done
done
r=bench-results/$name
for base in postgres redis-list; do
	echo "== ratios to the $base baseline"
	bin/rookery bench report "$r-$base.json" "$r-rookery-store.json" "$r-rookery-redis.json"
done
