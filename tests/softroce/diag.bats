#!/usr/bin/env bats
# Diagnostics on real verbs: the counters a process publishes
# (/dev/shm/xsock-PID) read live by build/bin/xsock-stat against traffic of
# known size, a forced fallback and its reason, xsock-check over RDMA and
# against a server without xsock, and both tools on a redis-server under
# load. Topology one (and two, server and client on different guests, in
# make check-long).

load tier

bats_require_minimum_version 1.5.0

PY=tests/tools
STAT=build/bin/xsock-stat
CHECK=build/bin/xsock-check

# remote_pid CMDLINE - the pid of the server-side process whose command
# line starts with CMDLINE (anchored: in topology one, xs-remote's own
# command line, which holds the pattern, runs on the same guest). The
# oldest: the library's helper (xsock-cm, forked by the server when it
# listened) has the same command line.
remote_pid()
{
	"$XS_REMOTE" pgrep -o -f "^$1"
}

# json_check JSON PYEXPR... - each Python expression over the parsed
# document `d` holds (tests/tools/json_check.py).
json_check()
{
	python3 "$PY/json_check.py" "$@"
}

# wait_line FILE TEXT - wait (30 s at most) until FILE has a line TEXT.
wait_line()
{
	local i
	for ((i = 0; i < 300; i++)); do
		grep -qx "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "wait_line: no '$2' in $1:" >&2
	cat "$1" >&2
	return 1
}

# open_kinds PID KIND N [KIND N] [remote] - xsock-stat (on the server side
# with "remote") lists exactly N open sockets of each KIND for PID.
open_kinds()
{
	local pid=$1 doc
	shift
	if [[ "${*: -1}" == remote ]]; then
		doc=$("$XS_REMOTE" "$PWD/$STAT" --json -p "$pid") || return 1
		set -- "${@:1:$#-1}"
	else
		doc=$("$STAT" --json -p "$pid") || return 1
	fi
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])
k = [s["transport"] for p in d["processes"] for s in p["sockets"]]
want = dict(zip(sys.argv[2::2], map(int, sys.argv[3::2])))
sys.exit(0 if all(k.count(t) == n for t, n in want.items()) else 1)' "$doc" "$@"
}

# held_pair TOTAL SPEC [VAR=VALUE...] - diag_peer.py's server (dsrv, under
# xsock) and client (dcli, under xsock with the variables) after the client
# sent SPEC (TOTAL bytes) and both hold the connection open: $cli and $spid
# are their pids.
held_pair()
{
	local total=$1 spec=$2
	shift 2
	remote_bg dsrv env $(xsenv dsrv) python3 "$PY/diag_peer.py" serve \
		"$XS_ADDR_A" "$port" "$total"
	server_ready dsrv rdma
	env $(xsenv dcli) "$@" python3 "$PY/diag_peer.py" send "$XS_ADDR_A" \
		"$port" "$spec" >"$BATS_TEST_TMPDIR/cli.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	wait_line "$BATS_TEST_TMPDIR/cli.out" held
	spid=$(remote_pid "python3 $PY/diag_peer.py serve $XS_ADDR_A $port")
}

@test "diag: the counters of a known transfer match it on both sides, live (eager, inline, rendezvous)" {
	# 100 sends of 100 B (eager), then one of 256 KiB: four 64 KiB
	# rendezvous regions (XSOCK_RNDV_CHUNK) pulled with RDMA READ.
	local total=$((100 * 100 + 262144)) doc
	held_pair "$total" 100x100,1x262144

	run -0 "$STAT" --json -p "$cli"
	json_check "$output" \
		'len(d["processes"]) == 1' \
		'[s["transport"] for s in d["processes"][0]["sockets"]] == ["rdma"]' \
		'd["processes"][0]["sockets"][0]["counters"]["bytes_sent"] == 272144' \
		'd["processes"][0]["sockets"][0]["counters"]["bytes_received"] == 3' \
		'd["processes"][0]["sockets"][0]["counters"]["rndv_sent"] == 4' \
		'd["processes"][0]["sockets"][0]["counters"]["msgs_inline"] + d["processes"][0]["sockets"][0]["counters"]["msgs_eager"] == 100' \
		'd["processes"][0]["sockets"][0]["qp_num"] > 0' \
		'd["processes"][0]["sockets"][0]["device"].startswith("rxe")' \
		'd["processes"][0]["sockets"][0]["setup_us"] > 0' \
		'd["processes"][0]["sockets"][0]["peer"] == "'"$XS_ADDR_A:$port"'"'

	run -0 "$XS_REMOTE" "$PWD/$STAT" --json -p "$spid"
	doc=$output
	json_check "$doc" \
		'len(d["processes"]) == 1' \
		'sorted(s["transport"] for s in d["processes"][0]["sockets"]) == ["listen", "rdma"]'
	json_check "$doc" '[s for s in d["processes"][0]["sockets"] if s["transport"] == "rdma"][0]["counters"]["bytes_received"] == 272144' \
		'[s for s in d["processes"][0]["sockets"] if s["transport"] == "rdma"][0]["counters"]["bytes_sent"] == 3' \
		'[s for s in d["processes"][0]["sockets"] if s["transport"] == "rdma"][0]["counters"]["rndv_read"] == 4' \
		'[s for s in d["processes"][0]["sockets"] if s["transport"] == "rdma"][0]["counters"]["msgs_received"] == 104' \
		'[s for s in d["processes"][0]["sockets"] if s["transport"] == "rdma"][0]["recv_q"] == 0'

	# the table says the same, one row per socket
	run -0 "$STAT" -p "$cli"
	[[ "$output" == *rdma*ESTAB*"$XS_ADDR_A:$port"*272144* ]]

	kill -TERM "$cli"
	wait "$cli"
	"$XS_REMOTE" --wait dsrv --timeout 30
	# the exit summaries agree with the live figures, and the files are gone
	[[ "$(stat dcli sent)" == 272144 ]]
	[[ "$(stat dsrv received)" == 272144 ]]
	grep -q "rendezvous exposed 4 pulled 0" "$XS_RUN_DIR/dcli.stats"
	grep -q "rendezvous exposed 0 pulled 4" "$XS_RUN_DIR/dsrv.stats"
	[[ ! -e "/dev/shm/xsock-$cli" ]]
	run -1 "$XS_REMOTE" test -e "/dev/shm/xsock-$spid"
}

@test "diag: a forced fallback shows its reason on both sides" {
	held_pair 1000 10x100 XSOCK_MODE=tcp

	run -0 "$STAT" --json -p "$cli"
	json_check "$output" \
		'[(s["transport"], s["reason"]) for s in d["processes"][0]["sockets"]] == [("tcp", "mode")]' \
		'd["processes"][0]["totals"]["fallback"]["mode"] == 1' \
		'd["processes"][0]["sockets"][0]["peer"] == "'"$XS_ADDR_A:$port"'"'
	run -0 "$STAT" -p "$cli"
	[[ "$output" == *tcp*"$XS_ADDR_A:$port"*mode* ]]

	# the server accepted it on its kernel listener: the peer has no xsock
	run -0 "$XS_REMOTE" "$PWD/$STAT" --json -p "$spid"
	json_check "$output" \
		'sorted((s["transport"], s["reason"]) for s in d["processes"][0]["sockets"]) == [("listen", None), ("tcp", "peer-no-xsock")]'
	kill -TERM "$cli"
	wait "$cli"
}

@test "diag: XSOCK_LOG=debug names each connection's transport as it is decided: RDMA on both sides, a non-blocking connect's fallback and its reason" {
	local n ip='[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+'
	# over RDMA: the client's line and the server's, each with its peer
	remote_bg dsrv env $(xsenv dsrv) XSOCK_LOG=debug:"$XS_RUN_DIR/dsrv.log" \
		python3 "$PY/diag_peer.py" serve "$XS_ADDR_A" "$port" 1000
	server_ready dsrv rdma
	env $(xsenv dcli) XSOCK_LOG=debug:"$BATS_TEST_TMPDIR/dcli.log" \
		python3 "$PY/diag_peer.py" send "$XS_ADDR_A" "$port" 10x100 \
		>"$BATS_TEST_TMPDIR/cli.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	wait_line "$BATS_TEST_TMPDIR/cli.out" held
	grep -E "sock: connection with $XS_ADDR_A:$port over rdma \(rxe[0-9]+, qp [1-9][0-9]*\) in [1-9][0-9]* us$" \
		"$BATS_TEST_TMPDIR/dcli.log"
	grep -E "sock: connection with $ip:[1-9][0-9]* over rdma \(rxe[0-9]+, qp [1-9][0-9]*\) in [1-9][0-9]* us$" \
		"$XS_RUN_DIR/dsrv.log"
	run -1 grep -E 'over tcp' "$BATS_TEST_TMPDIR/dcli.log" "$XS_RUN_DIR/dsrv.log"
	kill -TERM "$cli"
	wait "$cli"

	# a non-blocking connect to a server without xsock: its worker
	# decides, and names the application's fd and the reason
	port=$((port + 1))
	remote_bg plain python3 "$PY/diag_peer.py" serve "$XS_ADDR_A" "$port" 1
	server_ready plain tcp
	run -0 env $(xsenv nbc) XSOCK_LOG=debug:"$BATS_TEST_TMPDIR/nbc.log" python3 -c '
import select, socket, sys
s = socket.socket()
s.setblocking(False)
s.connect_ex((sys.argv[1], int(sys.argv[2])))
select.select([], [s], [], 30)
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
s.setblocking(True)
s.sendall(b"x")
print(s.fileno())' "$XS_ADDR_A" "$port"
	n=$output
	grep -x "xsock\[[0-9.]*\] D sock: fd $n connects over tcp (peer-no-xsock)" "$BATS_TEST_TMPDIR/nbc.log"
	[[ "$(stat nbc peer-no-xsock)" == 1 ]]
}

@test "diag: xsock-check says RDMA, with device, QP and round trip, against xsock-check --server" {
	remote_bg chk "$PWD/$CHECK" --server "$XS_ADDR_A:$port"
	server_ready chk rdma
	run -0 "$CHECK" -n "$iters" "$XS_ADDR_A:$port"
	echo "$output"
	[[ "$output" == *"this side   rdma (device rxe"* ]]
	[[ "$output" == *"peer side   rdma (device rxe"* ]]
	[[ "$output" == *"round trip  $iters x 64 B: min "* ]]
	[[ "$output" == *"verdict: RDMA"* ]]
	note "xsock-check: $(grep 'round trip' <<<"$output")"

	run -0 "$CHECK" --json -n 50 -s 100000 "$XS_ADDR_A:$port"
	json_check "$output" 'd["transport"] == "rdma"' 'd["reason"] == "-"' \
		'd["qp_num"] > 0' 'd["device"].startswith("rxe")' \
		'd["peer"]["transport"] == "rdma"' 'd["peer"]["qp_num"] > 0' \
		'd["rtt"]["count"] == 50' 'd["rtt"]["bytes"] == 100000' \
		'0 < d["rtt"]["min_us"] <= d["rtt"]["p50_us"] <= d["rtt"]["p99_us"]'
	# the server's own line for each connection
	grep -q "^accepted $XS_ADDR_B:[0-9]* over rdma (device rxe" \
		"$XS_RUN_DIR/remote/chk.log"
}

@test "diag: xsock-check against a server without xsock says kernel TCP and why" {
	remote_bg plain "$PWD/build/tools/xsnet" serve "$XS_ADDR_A" "$port"
	server_ready plain tcp
	run -1 "$CHECK" -n 10 "$XS_ADDR_A:$port"
	echo "$output"
	[[ "$output" == *"this side   tcp (fallback: peer-no-xsock)"* ]]
	[[ "$output" == *"round trip  not measured: the peer is not an xsock-check --server"* ]]
	[[ "$output" == *"verdict: kernel TCP (peer-no-xsock)"* ]]
	# nothing listens: a failed connection is exit 2
	run -2 "$CHECK" -t 5 "$XS_ADDR_A:$((port + 1))"
}

@test "diag: xsock-stat on redis-server and redis-benchmark under load: every connection RDMA, counters moving" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	local rpid bench n1 n2 doc
	remote_bg redis env $(xsenv redis) redis-server --bind "$XS_ADDR_A" \
		--port "$port" --save '' --appendonly no --protected-mode no
	server_ready redis rdma
	rpid=$(remote_pid "redis-server $XS_ADDR_A:$port")
	env $(xsenv bench) redis-benchmark -h "$XS_ADDR_A" -p "$port" -c 20 \
		-n 100000000 -t get -q >"$BATS_TEST_TMPDIR/bench.out" 2>&1 &
	bench=$!
	locals+=("$bench")
	# all 20 connections up, over RDMA, on both sides
	retry_for 60 open_kinds "$bench" rdma 20
	retry_for 60 open_kinds "$rpid" rdma 20 listen 1 remote
	# the counters move while it runs
	n1=$("$STAT" --json -p "$bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["totals"]["sum"]["bytes_sent"])')
	sleep 2
	n2=$("$STAT" --json -p "$bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["totals"]["sum"]["bytes_sent"])')
	note "redis-benchmark sent $((n2 - n1)) bytes in 2 s (xsock-stat)"
	((n2 > n1))
	# the table and the watch mode on the loaded server
	run -0 "$XS_REMOTE" "$PWD/$STAT" -p "$rpid"
	(($(grep -c '^rdma ' <<<"$output") >= 20))
	run -0 "$XS_REMOTE" "$PWD/$STAT" -w 1 -n 2 -p "$rpid"
	(($(grep -c 'LISTEN' <<<"$output") == 2))
	kill -TERM "$bench" || true
	wait "$bench" || true
}
