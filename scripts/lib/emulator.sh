# emulator.sh — what scripts/dynamodb-local.sh and scripts/sqs-local.sh share: sourced, after the
# script sets $name (for messages) and defines install, launch PORT LOGFILE (starts the emulator in
# the background) and ready PORT (succeeds once it answers). It runs the command line:
#
#   SCRIPT install   install into the cache (idempotent); prints the directory
#   SCRIPT start     install if needed, start on a free port, wait until it answers;
#                    prints "ENDPOINT PID" on stdout
#   SCRIPT stop PID  stop the instance started with that PID

log() { printf '%s: %s\n' "$name" "$*" >&2; }
die() { log "$*"; exit 1; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
	install >/dev/null
	local port pid logf
	port=$(free_port)
	logf=$cache/$name-$port.log
	launch "$port" "$logf"
	pid=$!
	for _ in $(seq 1 150); do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$logf" >&2
			die "it exited during start-up"
		fi
		if ready "$port"; then
			echo "http://127.0.0.1:$port $pid"
			return
		fi
		sleep 0.2
	done
	kill "$pid" 2>/dev/null || true
	die "it did not answer on port $port within 30s (log: $logf)"
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
