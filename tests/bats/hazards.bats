#!/usr/bin/env bats
# Call patterns that once hung, crashed or leaked output through the
# library (tests/tools/hazards.c), and hostile configuration files. Each
# runs under a hard timeout outside the preload.

load helpers

setup() {
	[[ -f $XSOCK_LIB ]] || skip "$XSOCK_LIB not built (make)"
	H=$XSOCK_TOOLS/hazards
	T=$BATS_TEST_TMPDIR
}

@test "hazards: socket()/close() in a signal handler do not deadlock" {
	run timeout -s KILL 60 env LD_PRELOAD="$XSOCK_LIB" "$H" sighandler
	echo "$output"
	((status == 0))
	[[ "$output" == "sighandler done handler_runs=some" ]]
}

@test "hazards: fork() while threads use sockets, logging on: no child hangs" {
	run timeout -s KILL 120 env LD_PRELOAD="$XSOCK_LIB" \
		XSOCK_LOG="debug:$T/log" "$H" forkrace 100
	echo "$output"
	((status == 0))
	[[ "$output" == "forkrace forks=100 ok=100 hung=0 other=0" ]]
	[[ -s $T/log ]]
}

@test "hazards: a file that took over fd 2 never receives log or stats lines" {
	run timeout -s KILL 30 env LD_PRELOAD="$XSOCK_LIB" XSOCK_LOG=debug \
		XSOCK_STATS=1 "$H" stderr-reuse "$T/appdata.txt"
	echo "$output"
	((status == 0))
	cat "$T/appdata.txt"
	[[ "$(cat "$T/appdata.txt")" == $'APPDATA begin\nAPPDATA end' ]]
}

@test "hazards: a FIFO as rules, log or stats file never blocks" {
	mkfifo "$T/fifo"
	run timeout -s KILL 20 env LD_PRELOAD="$XSOCK_LIB" XSOCK_RULES="$T/fifo" \
		sh -c 'echo ran'
	echo "$output"
	((status == 0))
	[[ "${lines[0]}" == "xsock: XSOCK_RULES: $T/fifo: not a regular file (all sockets use kernel TCP)" ]]
	[[ "${lines[1]}" == ran ]]
	run timeout -s KILL 20 env LD_PRELOAD="$XSOCK_LIB" XSOCK_LOG="debug:$T/fifo" \
		XSOCK_STATS="$T/fifo" "$XS_PY" -c 'import socket; socket.socket().close(); print("ran")'
	echo "$output"
	((status == 0))
	[[ "$output" == *ran* ]]
}

@test "hazards: a newline in a path still gives exactly one error line" {
	run timeout -s KILL 20 env LD_PRELOAD="$XSOCK_LIB" \
		XSOCK_RULES=$'/nonexistent/a\nb' sh -c 'echo ran'
	echo "$output"
	((status == 0))
	[[ ${#lines[@]} == 2 ]]
	[[ "${lines[0]}" == 'xsock: XSOCK_RULES: /nonexistent/a\x0ab: cannot open rules file: No such file or directory (all sockets use kernel TCP)' ]]
}
