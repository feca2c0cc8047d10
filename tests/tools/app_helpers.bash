# tests/tools/app_helpers.bash - shared by the application bats files
# (redis.bats, memcached.bats, python.bats, curl.bats).
#
# Load it after the suite's helpers:  load helpers; load ../tools/app_helpers
#
# Every process of a differential test runs on one "side":
#   plain  LD_PRELOAD removed, the program talks to libc directly;
#   xsock  started through with_xsock, XSOCK_STATS pointed at $APP_STATS.
# APP_COMBOS lists the four server:client pairs each differential test walks
# through; the results of all four must be identical and equal to what the
# test expects. Servers are started with app_spawn and recorded in APP_PIDS;
# app_teardown kills every recorded process, also when the test failed.
# Nothing here sleeps blindly: every wait has a deadline.

# The python that runs the tests/tools/app_*.py clients and servers. The
# system one starts in ~30 ms; a pyenv shim on PATH costs ~0.5 s a start.
if [[ -n ${XSOCK_PYTHON:-} ]]; then
	APP_PY=$XSOCK_PYTHON
elif [[ -x /usr/bin/python3 ]]; then
	APP_PY=/usr/bin/python3
else
	APP_PY=$(command -v python3)
fi
# shellcheck disable=SC2034 # used by the bats files that load this one
APP_TOOLS=$XSOCK_ROOT/tests/tools
# shellcheck disable=SC2034
APP_COMBOS=(plain:plain xsock:xsock xsock:plain plain:xsock)

# app_setup: per-test state; call from setup().
app_setup() {
	APP_PIDS=()
	APP_STATS=$BATS_TEST_TMPDIR/xsock-stats
	: >"$APP_STATS"
}

# app_teardown: stop every process app_spawn or app_track recorded.
app_teardown() {
	local pid
	for pid in "${APP_PIDS[@]}"; do
		if app_alive "$pid"; then
			app_stop "$pid" TERM 5 2>/dev/null || true
		fi
	done
	APP_PIDS=()
	return 0
}

# app_exec SIDE CMD...: replace this (sub)shell with CMD run on SIDE.
app_exec() {
	local side=$1
	shift
	# SIGINT as the default action: a shell without job control (make
	# check started in the background) has it ignored, and python's
	# http.server would never see its orderly-exit signal.
	case $side in
	plain) exec env -u LD_PRELOAD --default-signal=INT "$@" ;;
	xsock) XSOCK_STATS=$APP_STATS with_xsock exec env --default-signal=INT "$@" ;;
	*)
		echo "app_exec: unknown side '$side'" >&2
		exit 2
		;;
	esac
}

# app_run SIDE CMD...: run CMD on SIDE in the foreground, return its status.
app_run() {
	(app_exec "$@")
}

# app_spawn SIDE LOG CMD...: start CMD on SIDE in the background, output to
# LOG; APP_PID is its pid (the program itself: the subshell execs it).
app_spawn() {
	local side=$1 log=$2
	shift 2
	(app_exec "$side" "$@") </dev/null >"$log" 2>&1 3>&- &
	APP_PID=$!
	APP_PIDS+=("$APP_PID")
}

# app_track PID: have app_teardown kill PID too (e.g. a daemon's pid).
app_track() {
	APP_PIDS+=("$1")
}

# app_alive PID: true while PID runs (a zombie counts as gone).
app_alive() {
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# app_wait_gone PID [SECONDS]: wait until PID has exited.
app_wait_gone() {
	local pid=$1 deadline=$((SECONDS + ${2:-10}))
	while app_alive "$pid"; do
		if ((SECONDS >= deadline)); then
			echo "app_wait_gone: pid $pid still running after ${2:-10}s" >&2
			return 1
		fi
		sleep 0.02
	done
}

# app_stop PID [SIGNAL] [SECONDS]: signal PID (default TERM; "none": it is
# exiting already), wait for it, KILL it past the deadline. APP_RC is its
# exit status when PID is a child of this shell (a daemon's is unknown: 0).
# Fails when KILL was needed.
app_stop() {
	local pid=$1 sig=${2:-TERM} secs=${3:-10} killed=0
	[[ $sig == none ]] || kill -s "$sig" "$pid" 2>/dev/null || true
	if ! app_wait_gone "$pid" "$secs"; then
		kill -s KILL "$pid" 2>/dev/null || true
		app_wait_gone "$pid" 5 || true
		killed=1
	fi
	APP_RC=0
	wait "$pid" 2>/dev/null || APP_RC=$?
	# 127: not a child of this shell, its status is not ours to know.
	((APP_RC != 127)) || APP_RC=0
	((killed == 0))
}

# app_wait_file PATH [SECONDS]: wait until PATH exists and is not empty.
app_wait_file() {
	local f=$1 deadline=$((SECONDS + ${2:-10}))
	until [[ -s $f ]]; do
		if ((SECONDS >= deadline)); then
			echo "app_wait_file: $f not written after ${2:-10}s" >&2
			return 1
		fi
		sleep 0.02
	done
}

# app_wait_closed HOST PORT [SECONDS]: wait until HOST:PORT refuses.
app_wait_closed() {
	local host=$1 port=$2 deadline=$((SECONDS + ${3:-10}))
	while (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			echo "app_wait_closed: $host:$port still open" >&2
			return 1
		fi
		sleep 0.02
	done
}

# app_port: free_port, with the fast python first on PATH.
app_port() {
	PATH="${APP_PY%/*}:$PATH" free_port
}

# app_check_side PID SIDE: the library is mapped into PID iff SIDE is xsock.
app_check_side() {
	local pid=$1 side=$2 lib
	lib=$(basename "$XSOCK_LIB")
	if grep -q "/$lib\$" "/proc/$pid/maps"; then
		[[ $side == xsock ]] && return 0
		echo "pid $pid ($side) has $lib mapped" >&2
	else
		[[ $side == plain ]] && return 0
		echo "pid $pid ($side) does not have $lib mapped" >&2
	fi
	return 1
}

# app_check_stats PROG [MIN]: some process named PROG that exited under the
# library wrote an XSOCK_STATS summary counting >= MIN (1) stream sockets.
# XSOCK_MODE=off: the library tracks nothing and prints no summary.
app_check_stats() {
	local prog=$1 min=${2:-1} n
	[[ ${XSOCK_MODE:-} == off ]] && return 0
	n=$(sed -n "s/^xsock stats pid [0-9]* ($prog): \([0-9]*\) stream sockets.*/\1/p" \
		"$APP_STATS" | sort -n | tail -1)
	if [[ -z $n ]] || ((n < min)); then
		echo "no XSOCK_STATS summary from $prog with >= $min stream sockets:" >&2
		cat "$APP_STATS" >&2
		return 1
	fi
}

# app_check_stats_pid PID [MIN]: the same for one pid.
app_check_stats_pid() {
	local pid=$1 min=${2:-1} n
	[[ ${XSOCK_MODE:-} == off ]] && return 0
	n=$(sed -n "s/^xsock stats pid $pid ([^)]*): \([0-9]*\) stream sockets.*/\1/p" \
		"$APP_STATS")
	if [[ -z $n ]] || ((n < min)); then
		echo "no XSOCK_STATS summary from pid $pid with >= $min stream sockets:" >&2
		cat "$APP_STATS" >&2
		return 1
	fi
}

# app_expect_eq WHAT EXPECTED ACTUAL: fail with a diff when they differ.
app_expect_eq() {
	if [[ "$2" != "$3" ]]; then
		echo "$1: unexpected result" >&2
		diff -u <(printf '%s\n' "$2") <(printf '%s\n' "$3") | sed 1,2d >&2 ||
			true
		return 1
	fi
}

# app_sha FILE: the sha256 of FILE, hex only.
app_sha() {
	sha256sum "$1" | cut -d' ' -f1
}
