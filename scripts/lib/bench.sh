# bench.sh — what scripts/bench-compare.sh and scripts/bench-headline.sh share: sourced. It makes
# $work (a temporary directory, removed on exit with the server started last) and the functions
# below; $pid is the process a script started and has not stopped yet.

work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# ready URL LOG: wait until URL/readyz answers (up to 5 minutes: a front loads its graph first).
ready() {
	for _ in $(seq 1 3000); do curl -fs "$1/readyz" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "did not start:"; tail -20 "$2"; exit 1
}

# serve DIR [flags...]: rookery serve on DIR at 127.0.0.1:18080, in the background, once ready.
serve() {
	local dir=$1; shift
	bin/rookery serve --data-dir "$dir" --addr 127.0.0.1:18080 --log-level warn "$@" >"$dir.log" 2>&1 &
	pid=$!
	ready http://127.0.0.1:18080 "$dir.log"
}

# copy SRC DST: DST becomes a fresh copy of the data directory SRC, on disk before anything runs on
# it, so that writing the copy back competes with no run's syncs (its own or the next target's).
copy() { rm -rf "$2"; cp -a "$1" "$2"; sync; }

# stop: stop the process started last.
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
