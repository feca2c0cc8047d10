#!/usr/bin/env bats
# tests/bats/python.bats - Python's socket stacks without and with the
# library: asyncio (epoll), selectors (epoll, poll, select), threads with
# blocking sockets, fork per connection, socket.sendfile, half-close and
# connection errors.
#
# Server and clients are tests/tools/app_asyncio_echo.py. Every message is
# checked byte for byte by the client; the server reports what it echoed
# and must agree with the client; the four server:client combinations must
# print the same digest.

load helpers
load ../tools/app_helpers

setup() {
	app_setup
	T=$BATS_TEST_TMPDIR
	COMBOS=()
	ECHO=$APP_TOOLS/app_asyncio_echo.py
	ECHO_N=0
}

teardown() {
	app_teardown
}

# echo_start SIDE PORT IMPL [ARGS...]: start the echo server; ECHO_PID.
echo_start() {
	local side=$1 port=$2 impl=$3 host=127.0.0.1
	shift 3
	[[ " $* " == *" ::1 "* ]] && host=::1
	ECHO_LOG=$T/echo-$port.$((++ECHO_N)).log
	app_spawn "$side" "$ECHO_LOG" "$APP_PY" "$ECHO" server --port "$port" \
		--impl "$impl" "$@"
	ECHO_PID=$APP_PID
	wait_port "$host" "$port" || {
		cat "$ECHO_LOG" >&2
		return 1
	}
	app_check_side "$ECHO_PID" "$side"
}

# echo_stop CONNS BYTES: SIGTERM the server; it must exit 0 having served
# CONNS connections (the clients' plus wait_port's probe) and BYTES bytes.
echo_stop() {
	app_stop "$ECHO_PID" TERM 10
	[[ $APP_RC == 0 ]] || {
		echo "echo server exited with status $APP_RC" >&2
		cat "$ECHO_LOG" >&2
		return 1
	}
	app_expect_eq "server report" "served conns=$1 bytes=$2" \
		"$(tail -1 "$ECHO_LOG")"
}

# matrix IMPL CONNS CLIENT-ARGS...: the combinations in COMBOS (default
# all four) against servers run with SERVER_ARGS; one digest for all.
matrix() {
	local impl=$1 conns=$2 combo srv cli port out first='' combos
	shift 2
	combos=("${APP_COMBOS[@]}")
	((${#COMBOS[@]} == 0)) || combos=("${COMBOS[@]}")
	port=$(app_port)
	for combo in "${combos[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		echo_start "$srv" "$port" "$impl" "${SERVER_ARGS[@]}"
		out=$(app_run "$cli" "$APP_PY" "$ECHO" client --port "$port" \
			--conns "$conns" "$@") || {
			echo "$combo: client failed: $out" >&2
			return 1
		}
		[[ $out =~ ^conns=$conns\ msgs=[0-9]+\ bytes=([0-9]+)\ sha256= ]] || {
			echo "$combo: $out" >&2
			return 1
		}
		echo_stop "$((conns + 1))" "${BASH_REMATCH[1]}"
		first=${first:-$out}
		app_expect_eq "$combo vs plain:plain" "$first" "$out"
	done
	MATRIX_OUT=$first
}

@test "python: asyncio echo, 50 concurrent connections of up to 1 MiB messages, all four combinations" {
	SERVER_ARGS=()
	matrix asyncio 50 --impl asyncio --msgs 2
	[[ $MATRIX_OUT == "conns=50 msgs=100 "* ]]
	app_check_stats python3 50
}

@test "python: selectors (epoll) server, blocking-socket threaded client, all four combinations" {
	SERVER_ARGS=(--selector epoll)
	matrix selectors 8 --impl blocking --msgs 4
	[[ $MATRIX_OUT == "conns=8 msgs=32 "* ]]
}

@test "python: selectors with poll(2) and select(2), and a forking server (fork per connection), plain and preloaded" {
	local sel
	COMBOS=(plain:plain xsock:xsock)
	for sel in poll select; do
		SERVER_ARGS=(--selector "$sel")
		matrix selectors 20 --impl asyncio --msgs 3 --seed 5
		[[ $MATRIX_OUT == "conns=20 msgs=60 "* ]]
	done
	# socketserver.ForkingTCPServer: the parent closes its copy of each
	# accepted socket, the child echoes on it and leaves with os._exit.
	SERVER_ARGS=()
	matrix forking 20 --impl asyncio --msgs 3 --seed 5
	[[ $MATRIX_OUT == "conns=20 msgs=60 "* ]]
}

@test "python: socket.sendfile() client against the threaded server, all four combinations" {
	SERVER_ARGS=()
	matrix threads 4 --impl blocking --msgs 3 --sendfile --seed 9
	[[ $MATRIX_OUT == "conns=4 msgs=12 "* ]]
	# The same bytes as with sendall().
	local port out
	port=$(app_port)
	echo_start plain "$port" threads
	out=$(env -u LD_PRELOAD "$APP_PY" "$ECHO" client --port "$port" \
		--impl blocking --conns 4 --msgs 3 --seed 9)
	app_expect_eq "sendfile vs sendall" "$MATRIX_OUT" "$out"
}

@test "python: IPv6 loopback ::1, asyncio server and client, all four combinations" {
	python_has_ipv6 || skip "no ::1 on this host"
	SERVER_ARGS=(--host ::1)
	matrix asyncio 10 --impl asyncio --msgs 3 --host ::1
	[[ $MATRIX_OUT == "conns=10 msgs=30 "* ]]
}

python_has_ipv6() {
	"$APP_PY" -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null
}

@test "python: connecting to a closed port fails with ECONNREFUSED the same way with and without the library" {
	local port side out host expected
	expected='blocking ECONNREFUSED
nonblocking EINPROGRESS SO_ERROR=ECONNREFUSED
asyncio ECONNREFUSED'
	port=$(app_port)
	for host in 127.0.0.1 ::1; do
		[[ $host == ::1 ]] && ! python_has_ipv6 && continue
		for side in plain xsock; do
			out=$(app_run "$side" "$APP_PY" "$ECHO" refused --host "$host" \
				--port "$port")
			app_expect_eq "$side $host" "$expected" "$out"
		done
	done
	app_check_stats python3 3
}
