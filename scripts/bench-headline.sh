#!/usr/bin/env bash
# bench-headline.sh — issue 25's headline comparison in one command: Rookery (embedded default)
# against the baselines behind an HTTP front with Rookery's auth and reply shape (PostgreSQL fan-out
# on read; seed 002's naive Redis lists) and the front's fixed reply (the floor of HTTP here), on
# this machine, each measure repeated RUNS times (default 3); then one table of medians, ranges
# and ratios (rookery bench headline), which docs/performance.md leads with.
#
#   scripts/bench-headline.sh [OUT_DIR]        (default bench-results/headline)
#   RUNS=1 MEASURES="feed posts" scripts/bench-headline.sh   (some of: feed capacity posts)
#   MEASURES=capacity CAPACITY_ON=epinions scripts/bench-headline.sh   (some of: reed98 epinions)
#
# Measures: feed reads only on socfb-Reed98 at 2,000/s (pages of 20); capacity sweeps of the dsb mix
# (p99 <= 50 ms, errors <= 1%, steps of 1.2x, then 2 refined between the knee and the step that
# failed: the knee to within 1.047x; each 10 s and at least 500 posts; a step that fails is tried
# once more, and fails only if both tries do: one pause of the host spoils one try) on Reed98 and
# soc-Epinions1; posts only on soc-Epinions1 at 1,000/s by authors picked by followers. Each graph
# is imported into Rookery once; every Rookery run starts from a fresh copy of that data directory.
# Needs PostgreSQL (127.0.0.1:5432, database test) and Redis (127.0.0.1:6379): scripts/test.sh
# starts them on a machine without. Takes about an hour and a half on 2 cores (the capacity sweeps,
# whose failed steps are tried twice, 70 minutes of it for RUNS=3; the Epinions import 3-5 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
measures=" ${MEASURES:-feed capacity posts} "
capacity_on=" ${CAPACITY_ON:-reed98 epinions} "
out=${1:-bench-results/headline}
graphs=${GRAPHS:-../shared/data/graphs}
reed=$graphs/socfb-Reed98.edges
epin=$graphs/soc-Epinions1.txt.gz
mkdir -p "$out" bin
rm -f "$out"/*.json
go build -o bin/rookery ./cmd/rookery
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
# The disk the runs write to, alone first: a synced commit (a POST) waits for the disk's syncs, and
# on some hosts they stall for hundreds of milliseconds whatever runs.
bin/rookery bench disk --dir "$work" --duration 20s --out "$out/disk.json"
front() { # target graph [flags...]: loads the graph into the baseline, then serves it on 18090
	local target=$1 graph=$2; shift 2
	bin/rookery bench front --target "$target" --graph "$graph" --data-dir "$work/$(basename "$graph")" \
		--addr 127.0.0.1:18090 --baseline-name "rookeryhead$$" "$@" >"$work/front.log" 2>&1 &
	pid=$!
	ready http://127.0.0.1:18090 "$work/front.log"
}
bench() { bin/rookery bench "$@"; }

load_graph() { # graph [--symmetric]: into $work/<graph name>, with posts made by a dsb run
	local graph=$1; shift
	local dir=$work/$(basename "$graph")
	echo "== importing $graph into Rookery (once)"
	serve "$dir"
	bench --graph "$graph" "$@" --import --server http://127.0.0.1:18080 --data-dir "$dir" \
		--mix dsb --rate 300 --duration 15s --catch-up-wait 1m >/dev/null
	stop
}
fresh() { # graph: a fresh copy of its import, served
	copy "$work/$(basename "$1")" "$work/run"
	serve "$work/run"
}
# measure name graph [flags...]: every target, RUNS times each, into $out/<name>-<target>-<n>.json.
# The targets take turns (Rookery, then each front, RUNS rounds): a host that slows down for a
# while, as shared ones do, then slows a round of all of them rather than one target's runs.
measure() {
	local name=$1 graph=$2; shift 2
	local flags=("$@")
	local targets=(postgres redis-list)
	[ "$name" = feed ] && targets+=(fixed)
	local sym=()
	[ "$graph" = "$reed" ] && sym=(--symmetric)
	for run in $(seq 1 "$runs"); do
		echo "== $name: rookery, run $run of $runs"
		fresh "$graph"
		bench --graph "$graph" --server http://127.0.0.1:18080 --data-dir "$work/run" \
			--out "$out/$name-rookery-$run.json" "${flags[@]}"
		stop
		for target in "${targets[@]}"; do
			echo "== $name: $target behind the front, run $run of $runs"
			# Each run from the same state, as each Rookery run starts from a fresh copy: the graph
			# loaded again, and posts made as Rookery's import made them (not measured). The fixed
			# reply is the size of Rookery's page of 20 (about 4,900 bytes).
			front "$target" "$graph" "${sym[@]}" --fixed-bytes 4900
			bench --graph "$graph" --server http://127.0.0.1:18090 --data-dir "$work/$(basename "$graph")" \
				--mix dsb --rate 300 --duration 15s --catch-up-wait 0 "${sym[@]}" >/dev/null
			# The front's CPU per request from its /metrics (not its database's).
			bench --graph "$graph" --server http://127.0.0.1:18090 --data-dir "$work/$(basename "$graph")" \
				--catch-up-wait 5s --out "$out/$name-$target-$run.json" "${flags[@]}"
			stop
		done
	done
}

wants() { [[ $measures == *" $1 "* ]]; }
capacity() { wants capacity && [[ $capacity_on == *" $1 "* ]]; } # capacity is measured on graph $1
if wants feed || capacity reed98; then
	load_graph "$reed" --symmetric
fi
if wants feed; then
	measure feed "$reed" --symmetric --mix feed --feed-limit 20 --rate 2000 --duration 15s --warmup 10s --lag-sample 0
fi
# A sweep stops at its first failed step; its last step is set above the highest knee any target
# reached on the fastest host measured (docs/performance.md), so that a knee is always found: the
# Redis-lists front passed soc-Epinions1's 9,201/s on two hosts, so that ladder goes to 15,900/s.
if capacity reed98; then
	measure capacity-reed98 "$reed" --symmetric --mix dsb --sweep --rate 400 --steps 20 --duration 10s --warmup 10s --catch-up-wait 20s
fi
if capacity epinions || wants posts; then
	load_graph "$epin"
fi
if capacity epinions; then
	measure capacity-epinions "$epin" --mix dsb --sweep --rate 200 --steps 25 --duration 10s --warmup 10s --catch-up-wait 20s
fi
if wants posts; then
	for run in $(seq 1 "$runs"); do
		echo "== posts: rookery, run $run of $runs"
		fresh "$epin"
		bench --graph "$epin" --server http://127.0.0.1:18080 --data-dir "$work/run" --out "$out/posts-rookery-$run.json" \
			--mix post --users followers --rate 1000 --duration 30s --lag-sample 0.005
		stop
	done
fi
echo "== headline ($(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; CPU of the PostgreSQL and Redis fronts excludes the database's)"
bin/rookery bench headline "$out"
