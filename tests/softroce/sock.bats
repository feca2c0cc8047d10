#!/usr/bin/env bats
# Unmodified socket programs under LD_PRELOAD=libxsock.so on real verbs:
# the socket calls' semantics, echo at every size edge, a SHA-256-checked
# stream, many connections at once, fallback to kernel TCP both ways and
# rogue peers. Every test reads XSOCK_STATS to show which transport
# carried the bytes, so a silent fallback fails it. Topology one, and the
# tests tagged `two` in topology two as well (all of them in make
# check-long); the server runs through xs-remote.

load tier

bats_require_minimum_version 1.5.0

# The SHA-256 stream takes 25 s at 256 MiB (make check) and about 95 s at
# 1 GiB (make check-long) in topology one.
setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	export BATS_TEST_TIMEOUT=300
}

XSNET=build/tools/xsnet
LIB=build/libxsock.so

# xs_server NAME [N] - xsnet echo server under xsock (for N connections).
xs_server()
{
	[[ -x $XSNET && -f $LIB ]] || { echo "make first" >&2; return 1; }
	remote_bg "$1" env LD_PRELOAD="$PWD/$LIB" XSOCK_LOG="info:$XS_RUN_DIR/$1.log" \
		XSOCK_STATS="$XS_RUN_DIR/$1.stats" "$XSNET" serve "$XS_ADDR_A" "$port" ${2:-}
	server_ready "$1" rdma
}

# tcp_then_xsock NAME CONNS WANT SECONDS CMD... - CMD prints WANT and exits
# 0 without the library (kernel TCP), then again under it with its CONNS
# connections all over RDMA (NAME's counters); each run within SECONDS.
tcp_then_xsock()
{
	local name=$1 conns=$2 want=$3 t=$4
	shift 4
	run --separate-stderr timeout "$t" "$@"
	echo "kernel TCP: $output $stderr"
	[[ $status == 0 && $output == "$want" ]]
	run --separate-stderr timeout "$t" env $(xsenv "$name") "$@"
	echo "xsock: $output $stderr (status $status)"
	cat "$XS_RUN_DIR/$name.stats"
	[[ $status == 0 && $output == "$want" ]]
	[[ $(stat "$name" rdma) == "$conns" && $(stat "$name" tcp) == 0 ]]
}

# plain_server NAME [N] - the same server without xsock.
plain_server()
{
	remote_bg "$1" "$XSNET" serve "$XS_ADDR_A" "$port" ${2:-}
	server_ready "$1" tcp
}

# bats test_tags=two
@test "sock: socket calls over RDMA answer exactly as over kernel TCP" {
	xs_server "srv$BATS_TEST_NUMBER"
	run --separate-stderr timeout 60 env XSOCK_MODE=tcp "$XSNET" semantics "$XS_ADDR_A" "$port"
	local kernel=$output
	((status == 0))
	run --separate-stderr timeout 60 env $(xsenv cli) "$XSNET" semantics "$XS_ADDR_A" "$port"
	echo "$output"
	((status == 0))
	[[ "$output" != *FAILED* ]]
	[[ "$output" == "$kernel" ]]
	(($(echo "$output" | wc -l) == 34))
	# the checked connection went over RDMA
	cat "$XS_RUN_DIR/cli.stats"
	[[ $(stat cli connects) == 1 && $(stat cli rdma) == 1 && $(stat cli tcp) == 0 ]]
}

# ac_rounds NAME MODE N CLIENT WANT ROUNDS - tests/tools/acceptclose.py
# MODE under xsock for N connections (counters in NAME.stats); its CLIENT
# once without xsock, which must print WANT, then ROUNDS times under xsock
# (the last one's counters in NAMEc.stats), each printing what the
# kernel's did.
ac_rounds()
{
	local ac=tests/tools/acceptclose.py kernel round
	remote_bg "$1$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/$1.stats" \
		python3 "$ac" "$2" "$XS_ADDR_A" "$port" "$3"
	server_ready "$1$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 30 python3 "$ac" "$4" "$XS_ADDR_A" "$port"
	kernel=$output
	echo "kernel: $kernel $stderr"
	[[ "$kernel" == "$5" ]]
	for ((round = 1; round <= $6; round++)); do
		run --separate-stderr timeout 30 env $(xsenv "${1}c") python3 "$ac" "$4" "$XS_ADDR_A" "$port"
		echo "xsock $round: $output $stderr"
		[[ "$output" == "$kernel" ]]
	done
	"$XS_REMOTE" --wait "$1$BATS_TEST_NUMBER" --timeout 30
	cat "$XS_RUN_DIR/$1.stats" "$XS_RUN_DIR/${1}c.stats"
}

@test "sock: a server that accepts and closes unread: its xsock client sees EOF, as over kernel TCP" {
	# the xsock client's hello, unread, would make that close an RST; one
	# that arrives just after the close, an RST for the client's send
	# (a race: 11 of 40 rounds lost it before close() waited for it)
	ac_rounds acs serve 6 client "recv=0 send=1" 5
	[[ $(stat acs accepts) == 0 && $(stat acsc connects) == 0 ]] # nothing moved
}

@test "sock: a server that accepts without FD_CLOEXEC (C's accept()) and closes unread: its xsock client sees EOF, as over kernel TCP" {
	# a program that system() or popen() spawned might hold such a
	# socket, unseen; none took its handoff record, so none does
	ac_rounds aci serve-inheritable 6 client "recv=0 send=1" 5
	[[ $(stat aci accepts) == 0 && $(stat acic connects) == 0 ]]
}

@test "sock: a server that looks at a connection, then closes it or dies, before its client's first call: that client's first send succeeds, as over kernel TCP" {
	# the server's look (a non-blocking recv: EAGAIN at once) answers the
	# client's hello; the client connects its QP only at its first call,
	# after the server's side ended, and is refused: a fallback sent then
	# to the closed socket drew the RST that made the application's first
	# send fail with EPIPE (openssl s_client against an s_server whose
	# stdin was at its end)
	local ac=tests/tools/acceptclose.py end round cenv want
	for end in kill close; do
		want=$([[ $end == kill ]] && echo 137 || echo 0) # SIGKILL: 128 + 9
		for round in kernel 1 2; do
			remote_bg "al$end$round" env LD_PRELOAD="$PWD/$LIB" \
				python3 "$ac" "looked-$end" "$XS_ADDR_A" "$port"
			server_ready "al$end$round" rdma
			cenv=()
			[[ $round == kernel ]] || cenv=($(xsenv "al$end"))
			run --separate-stderr timeout 30 env "${cenv[@]}" python3 "$ac" client-late "$XS_ADDR_A" "$port"
			echo "$end $round: $output $stderr"
			[[ "$output" == "send=1 recv=0 send=EPIPE" ]]
			run "$XS_REMOTE" --wait "al$end$round" --timeout 30
			((status == want))
			port=$((port + 1))
		done
		cat "$XS_RUN_DIR/al$end.stats"
		[[ $(stat "al$end" connects) == 0 && $(stat "al$end" tcp) == 1 ]]
	done
}

@test "sock: a server that writes on a fresh non-blocking socket and closes at once: its client reads the line, then EOF, as over kernel TCP" {
	# the transport is still being decided when the server sends: the
	# send waits for it, as a connected kernel socket takes it at once
	ac_rounds acd deny 6 client-read "got=b'-DENIED Redis is running in protected mode\\r\\n' end=0" 5
	[[ $(stat acd rdma) == 5 && $(stat acd tcp) == 1 ]]
}

@test "sock: a server that closes with the client's data unread resets the connection, as over kernel TCP" {
	ac_rounds acg greet 2 client-send "recv=ECONNRESET send=EPIPE" 1
	[[ $(stat acgc rdma) == 1 ]]
}

@test "sock: a send blocked on a server that closes unread returns what went; the next fails with ECONNRESET, not EPIPE and SIGPIPE, as over kernel TCP" {
	# the reset that cuts a send short stays pending for the next call
	# (tcp_sendmsg() with bytes copied): EPIPE there raised SIGPIPE and
	# killed an echo server (rogue.bats' credit-overrun) that TCP keeps
	ac_rounds acf greet 4 client-flood "sends=part,ECONNRESET,EPIPE" 3
	[[ $(stat acf rdma) == 3 && $(stat acf tcp) == 1 ]]
}

@test "sock: a client writes 10,000 short lines before it reads, and the server answers each at once: every answer comes back, as over kernel TCP" {
	# 10,000 answers of 35 bytes, 350,000 bytes, wait unread in the
	# client's receive window, as in a kernel's receive buffer: packed
	# into its receive buffers, then beyond them into memory of its own.
	# Counted in messages, 32 of them filled it, and the server, blocked
	# in its send, stopped reading, so the client blocked in its own
	# (200 lines were enough)
	local tool=tests/tools/linechat.py n=10000 expect
	expect="sent $n lines, got $n lines, $((35 * n)) bytes, the lines in capitals"
	remote_bg lc env $(xsenv lc) python3 "$tool" serve "$XS_ADDR_A" "$port" 1
	server_ready lc rdma
	run timeout 60 env $(xsenv lcc) python3 "$tool" client "$XS_ADDR_A" "$port" "$n"
	echo "$output"
	"$XS_REMOTE" --wait lc --timeout 30
	cat "$XS_RUN_DIR/remote/lc.log" "$XS_RUN_DIR/lcc.stats"
	((status == 0))
	[[ "$output" == "$expect" ]]
	grep -qx "conn 0: lines=$n bytes=$((35 * n))" "$XS_RUN_DIR/remote/lc.log"
	[[ $(stat lcc rdma) == 1 && $(stat lcc tcp) == 0 ]]
	[[ $(stat lcc received) == $((35 * n)) ]]
	# one message per line each way: none was merged on the wire
	grep -q "messages inline $n eager 0 arrived $n " "$XS_RUN_DIR/lcc.stats"
	# the same client and server over kernel TCP
	remote_bg lt python3 "$tool" serve "$XS_ADDR_A" "$port" 1
	server_ready lt tcp
	run timeout 60 python3 "$tool" client "$XS_ADDR_A" "$port" "$n"
	[[ "$output" == "$expect" ]]
	"$XS_REMOTE" --wait lt --timeout 30
}

@test "sock: the same 10,000 lines while the client's pool, filled by 150 idle connections, keeps its receive window from growing: every answer comes back" {
	# XSOCK_POOL_MB=1: one superblock, about 113 receive rings. The
	# chat's connection takes its transport, and its ring of 4 data
	# buffers, with its first line; then the idle ones, each echoing a
	# byte, take the rest of the pool (the last ones go to kernel TCP,
	# reason resource), so the window soon cannot grow (the pool's last
	# buffers, fewer than a ring's, may give it one doubling): the answers
	# are packed as a full window's would be, every byte kept (with the
	# server's pool full too, unpacked they would block both sides)
	local tool=tests/tools/linechat.py n=10000 expect
	expect="sent $n lines, got $n lines, $((35 * n)) bytes, the lines in capitals"
	remote_bg lc env $(xsenv lc) python3 "$tool" serve "$XS_ADDR_A" "$port" 1
	server_ready lc rdma
	port=$((port + 1)) xs_server fill
	run timeout 90 env $(xsenv lcc) XSOCK_POOL_MB=1 \
		XSOCK_LOG="info:$XS_RUN_DIR/lcc.log" \
		LINECHAT_FILL="$XS_ADDR_A:$((port + 1)):150" \
		python3 "$tool" client "$XS_ADDR_A" "$port" "$n"
	echo "$output"
	cat "$XS_RUN_DIR/lcc.stats"
	grep 'receive window' "$XS_RUN_DIR/lcc.log" || true
	[[ "$output" == "$expect" ]]
	(($(stat lcc rdma) > 1 && $(stat lcc resource) > 0))
	grep -qE 'receive window (4|8): no pool buffers to grow to (8|16); packing' "$XS_RUN_DIR/lcc.log"
}

@test "sock: a reader that waits on another connection before it reads on: 128 KiB in 4 KiB writes, 150 KB in 100-byte writes and 5,000 one-byte writes reach it meanwhile, as over kernel TCP" {
	# The server reads a first byte, then waits for a signal on a second
	# connection that the client sends after its last write
	# (tests/tools/sidewait.py): the bytes between wait unread in the
	# server's process, taken in by its library's probe thread while the
	# program makes no call on the socket, as a kernel takes segments in
	# for a process that sleeps. Kept to a window of messages, the client
	# blocked in its writes (after 64 KiB of 4 KiB writes) and never sent
	# the signal the server waited for. The sizes stay well within what
	# kernel TCP's buffers hold in the guest (212,992 to 450,000 bytes
	# seen): a size near that fails over kernel TCP itself.
	local tool=tests/tools/sidewait.py cases=("131072 4096" "150000 100" "5000 1")
	local mode srv cli ready c i sum=0 log
	for mode in xsock kernel; do
		srv=() cli=() ready=tcp
		if [[ $mode == xsock ]]; then
			srv=(env $(xsenv sw)) cli=(env $(xsenv swc)) ready=rdma
		fi
		remote_bg "sw$mode" "${srv[@]}" python3 "$tool" serve "$XS_ADDR_A" "$port" "${#cases[@]}"
		server_ready "sw$mode" "$ready"
		i=0
		for c in "${cases[@]}"; do
			read -r bytes wsize <<<"$c"
			run timeout 60 "${cli[@]}" python3 "$tool" client "$XS_ADDR_A" "$port" "$bytes" "$wsize"
			echo "$mode, $bytes B in $wsize B writes: $output"
			((status == 0))
			[[ "$output" == "sent $bytes sha256 "* ]]
			log="$XS_RUN_DIR/remote/sw$mode.log"
			retry_for 10 grep -qx "pair $i: signal ! data $bytes sha256 ${output##* }" "$log"
			i=$((i + 1))
			[[ $mode == kernel ]] || sum=$((sum + bytes + 1))
		done
		"$XS_REMOTE" --wait "sw$mode" --timeout 30
		port=$((port + 1))
	done
	cat "$XS_RUN_DIR/sw.stats"
	# every connection of the server over RDMA, every byte counted there
	[[ $(stat sw rdma) == $((2 * ${#cases[@]})) && $(stat sw tcp) == 0 ]]
	[[ $(stat sw received) == "$sum" ]]
	# and each client's two
	[[ $(awk '$1 == "rdma" && NF == 2 && $2 == 2' "$XS_RUN_DIR/swc.stats" | wc -l) == "${#cases[@]}" ]]
}

@test "sock: a client that reads only the start of 5,000 short lines and is killed: the server reads ECONNRESET, as over kernel TCP" {
	# The client waits, reading nothing, while the lines arrive: past its
	# receive buffers, they wait in memory of its library's own. It then
	# reads all but the last 1,000, every one from its receive buffers
	# among them. A connection whose every credit came back looks read to
	# the end: its death would be a clean end (EOF), where its kernel's RST
	# for the bytes unread says they were lost.
	local tool=tests/tools/linechat.py n=5000 part=$((35 * 4000)) mode pid
	local srv cli ready
	for mode in xsock kernel; do
		rm -f "$BATS_TEST_TMPDIR/go"
		srv=() cli=() ready=tcp
		if [[ $mode == xsock ]]; then
			srv=(env $(xsenv lf)) cli=(env $(xsenv lfc)) ready=rdma
		fi
		remote_bg "lf$mode" "${srv[@]}" python3 "$tool" flood "$XS_ADDR_A" "$port" "$n"
		server_ready "lf$mode" "$ready"
		"${cli[@]}" python3 "$tool" idle "$XS_ADDR_A" "$port" "$part" \
			"$BATS_TEST_TMPDIR/go" >"$BATS_TEST_TMPDIR/lfc.out" 2>&1 &
		pid=$!
		locals+=("$pid")
		retry_for 60 grep -qx "sent $n lines" "$XS_RUN_DIR/remote/lf$mode.log"
		touch "$BATS_TEST_TMPDIR/go"
		retry_for 30 grep -qx "read $part" "$BATS_TEST_TMPDIR/lfc.out"
		# past the library's quiet return of credits (a second and up)
		sleep 3
		kill -KILL "$pid"
		"$XS_REMOTE" --wait "lf$mode" --timeout 60
		cat "$XS_RUN_DIR/remote/lf$mode.log"
		grep -qx "recv=ECONNRESET" "$XS_RUN_DIR/remote/lf$mode.log"
		port=$((port + 1))
	done
	[[ $(stat lf rdma) == 1 && $(stat lf tcp) == 0 ]]
}

@test "sock: urgent data both ways in the middle of a stream: every byte, the mark and the urgent byte where kernel TCP puts them" {
	local oob=tests/tools/oobstream.py kernel round
	remote_bg "oob$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/oobs.stats" \
		python3 "$oob" serve "$XS_ADDR_A" "$port" 4
	server_ready "oob$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 60 python3 "$oob" client "$XS_ADDR_A" "$port"
	kernel=$output
	echo "kernel: $kernel $stderr"
	[[ "$kernel" =~ ^client\ .*\ stream=10000\  ]]
	for ((round = 1; round <= 3; round++)); do
		run --separate-stderr timeout 60 env $(xsenv oobc) python3 "$oob" client "$XS_ADDR_A" "$port"
		echo "xsock $round: $output $stderr"
		# the bytes; where a mark that came before the first read
		# shows differs from run to run over kernel TCP itself
		[[ "${output##* stream=}" == "${kernel##* stream=}" ]]
		[[ $(stat oobc rdma) == 1 ]]
	done
	"$XS_REMOTE" --wait "oob$BATS_TEST_NUMBER" --timeout 30
	# the server's view of each connection: every byte, and the mark
	# with its urgent byte where kernel TCP shows it (which, over kernel
	# TCP too, now and then shows none: the byte is then left out)
	grep ^server "$XS_RUN_DIR/remote/oob$BATS_TEST_NUMBER.log"
	[[ $(grep -cE '^server (marks=\[102400\] oob=\[b.!.\]|marks=\[\] oob=\[\]) stream=204800 be70ca319ec8bf11$' "$XS_RUN_DIR/remote/oob$BATS_TEST_NUMBER.log") == 4 ]]
	(($(grep -c '^server marks=\[102400\]' "$XS_RUN_DIR/remote/oob$BATS_TEST_NUMBER.log") >= 2))
	cat "$XS_RUN_DIR/oobs.stats"
	[[ $(stat oobs rdma) == 3 && $(stat oobs tcp) == 1 ]]
}

@test "sock: a server that reads its connections one by one, the rest after their client was killed: every byte written, and none of ours" {
	local late=tests/tools/lateserve.py line i n sha full=0
	# the client's negotiations wait for a server that looks at none
	# before 1 s, then at the first only: each runs out (500 ms) and
	# falls back, its FALLBACK before its bytes; the server answers their
	# hellos once the client is dead, and that answer draws an RST: what
	# came before it is still looked at, and the FALLBACK is ours
	rm -f "$XS_RUN_DIR/late.stats"
	remote_bg late env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/late.stats" \
		python3 "$late" serve "$XS_ADDR_A" "$port" 12
	server_ready late rdma
	run timeout 4 env $(xsenv latec) XSOCK_CONNECT_TIMEOUT_MS=500 python3 "$late" client "$XS_ADDR_A" "$port" 12
	((status == 124)) # killed while it waited
	"$XS_REMOTE" --wait late --timeout 60
	cat "$XS_RUN_DIR/remote/late.log" "$XS_RUN_DIR/late.stats"
	for ((i = 0; i < 12; i++)); do
		line=$(grep "^conn $i: " "$XS_RUN_DIR/remote/late.log")
		n=$((1000 * (i + 1)))
		sha=$(python3 -c "import hashlib; n = $n; print(hashlib.sha256((hashlib.sha256(bytes([$i])).digest() * (n // 32 + 1))[:n]).hexdigest()[:16])")
		if [[ "$line" == "conn $i: bytes=$n sha=$sha" ]]; then
			full=$((full + 1))
		else
			[[ "$line" == "conn $i: bytes=0 sha=e3b0c44298fc1c14" ]]
		fi
	done
	note "$BATS_TEST_DESCRIPTION: $full of 12 connections written whole"
	((full >= 3))
	# each written one fell back (its negotiation ran out), counted so
	(($(stat late tcp) >= full))
}

# sockprobe's cases (tests/tools/sockprobe.c, which tests/bats/probes.bats
# runs over loopback) with both ends of each pair on an RDMA device's
# address: flags, timeouts, shutdown, EOF, SA_RESTART and EINTR, ioctl,
# readiness, fork. Under xsock each case runs in a process of its own:
# between cases sockprobe closes every fd that the case left open, the
# library's own among them. check-long adds the rest of those that pass.
PROBE_CASES="msg_dontwait msg_peek msg_waitall msg_trunc_oob blocking_send_full
	so_rcvtimeo shutdown_wr eof_while_blocked eintr zero_length_io ioctl
	epoll_et_rdhup fork_child_close fork_child_writes poll_high_fd so_rcvlowat"
PROBE_CASES_LONG="listen_autobind so_sndtimeo dup_family dup2_onto_socket
	close_range close_range_einval sockopts readv_writev mmsg select epoll_lt
	many_connections threads_echo fortify"

@test "sock: sockprobe's socket cases, both ends over RDMA, answer as over kernel TCP" {
	local probe=build/tools/sockprobe c cases kernel out n=0
	cases="$PROBE_CASES $(sized "" "$PROBE_CASES_LONG")"
	# shellcheck disable=SC2086 # the list's words
	run --separate-stderr timeout 120 env SOCKPROBE_ADDR="$XS_ADDR_A" "$probe" $cases
	((status == 0))
	kernel=$output
	for c in $cases; do
		run --separate-stderr timeout 60 env $(xsenv "probe_$c") SOCKPROBE_ADDR="$XS_ADDR_A" "$probe" "$c"
		echo "xsock: $output"
		echo "$stderr"
		((status == 0))
		out=$(grep "^$c: " <<<"$kernel")
		echo "kernel: $out"
		[[ "$output" == "$out" ]]
		# its connections went over RDMA (one block per process)
		(($(stat "probe_$c" rdma | awk '{ s += $1 } END { print s + 0 }') >= 1))
		n=$((n + 1))
	done
	note "sockprobe over RDMA: $n cases answer as over kernel TCP, SA_RESTART and EINTR among them"
}

# bats test_tags=two
@test "sock: echo from 1 B to 64 MiB across the inline, eager, rendezvous and ring edges" {
	xs_server "srv$BATS_TEST_NUMBER"
	local sizes=(1 2 63 64 65 247 248 249 255 256 257 4087 4088 4089 4095 4096
		4097 8176 8177 32768 32769 65535 65536 131072 131073 1048576 4194304
		16777216)
	[[ "$XS_TOPOLOGY" == two ]] || sizes+=(67108864)
	local total=0 s
	for s in "${sizes[@]}"; do total=$((total + s)); done
	run_or_dump 200 env $(xsenv cli) "$XSNET" sizes "$XS_ADDR_A" "$port" "${sizes[@]}"
	echo "$output"
	((status == 0))
	[[ $(grep -c ' echo ok$' <<<"$output") == "${#sizes[@]}" ]]
	cat "$XS_RUN_DIR/cli.stats"
	[[ $(stat cli connects) == 1 && $(stat cli tcp) == 0 ]]
	[[ $(stat cli sent) == "$total" && $(stat cli received) == "$total" ]]
	# a write of up to XSOCK_RNDV_THRESHOLD (32768) goes as eager
	# messages; beyond it as rendezvous regions of XSOCK_RNDV_CHUNK
	# (65536) until XSOCK_EAGER_LIMIT (4096) bytes or fewer remain
	local regions=0 left
	for s in "${sizes[@]}"; do
		((s > 32768)) || continue
		for ((left = s; left > 4096; left -= left < 65536 ? left : 65536)); do
			regions=$((regions + 1))
		done
	done
	[[ $(stat cli exposed) == "$regions" ]]
	# the echo server writes what each read returned: some of it large
	(($(stat cli pulled) > 0))
	# the server's receive window started at 4 buffers and grew with
	# the stream, twice at least: the echo's large sizes go as regions
	# (a credit each, 4 at a time), so 16 buffers may be all it needs
	# (topology two's sizes); with 64 MiB it reached 32 (topology one)
	grep 'receive window' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
	grep -q 'receive window 4 -> 8 buffers' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
	grep -q 'receive window 8 -> 16 buffers' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
	note "echo ${#sizes[@]} sizes, $total bytes each way over RDMA;" \
		"$regions regions exposed, $(stat cli pulled) pulled"
}

# bats test_tags=two
@test "sock: a stream checked by SHA-256 at both ends (64 MiB; 1 GiB in check-long)" {
	local mib
	rm -f "$XS_RUN_DIR"/source.sha "$XS_RUN_DIR"/sink.sha "$XS_RUN_DIR"/source.stats "$XS_RUN_DIR"/sink.stats
	mib=$(sized 64 1024)
	remote_bg "sink$BATS_TEST_NUMBER" bash -c "LD_PRELOAD='$PWD/$LIB' \
		XSOCK_STATS='$XS_RUN_DIR/sink.stats' '$XSNET' sink '$XS_ADDR_A' '$port' |
		sha256sum >'$XS_RUN_DIR/sink.sha'"
	server_ready "sink$BATS_TEST_NUMBER" rdma
	local t0=$EPOCHREALTIME
	run --separate-stderr timeout 280 bash -c "head -c ${mib}M /dev/urandom |
		tee >(sha256sum >'$XS_RUN_DIR/source.sha') |
		LD_PRELOAD='$PWD/$LIB' XSOCK_STATS='$XS_RUN_DIR/source.stats' \
		'$XSNET' source '$XS_ADDR_A' '$port' 65536"
	echo "$output"
	((status == 0))
	[[ "$output" == "OK $((mib << 20))" ]]
	"$XS_REMOTE" --wait "sink$BATS_TEST_NUMBER" --timeout 60
	# the tee'd sha256sum writes its line once the pipeline is done
	retry_for 10 grep -qE '^[0-9a-f]{64} ' "$XS_RUN_DIR/source.sha"
	cat "$XS_RUN_DIR/source.sha" "$XS_RUN_DIR/sink.sha"
	[[ -s "$XS_RUN_DIR/sink.sha" ]]
	[[ $(cat "$XS_RUN_DIR/source.sha") == $(cat "$XS_RUN_DIR/sink.sha") ]]
	[[ $(stat source connects) == 1 && $(stat source sent) == $((mib << 20)) ]]
	[[ $(stat sink accepts) == 1 && $(stat sink received) == $((mib << 20)) ]]
	note "stream $mib MiB, sha256 $(cut -c1-16 "$XS_RUN_DIR/sink.sha")... equal," \
		"$(awk -v a="$t0" -v b="$EPOCHREALTIME" -v m="$mib" 'BEGIN { printf "%.1f MiB/s", m / (b - a) }')"
}

# bats test_tags=two
@test "sock: a sender that ends by exit() or _exit() without close() delivers every byte, then EOF" {
	local how size
	# exit() with 3,000,000 B; _exit() right after a last send of 1 B,
	# 64 KiB (one region) and 8 MiB (rendezvous)
	for how in "exit 3000000" "_exit 1" "_exit 65536" "_exit 8388608"; do
		size=${how#* } how=${how% *}
		port=$((port + 1))
		rm -f "$XS_RUN_DIR/sink.stats"
		remote_bg "sink$how$size" bash -c "LD_PRELOAD='$PWD/$LIB' XSOCK_STATS='$XS_RUN_DIR/sink.stats' \
			'$XSNET' sink '$XS_ADDR_A' '$port' | wc -c >'$XS_RUN_DIR/sink.count';
			echo \${PIPESTATUS[0]} >'$XS_RUN_DIR/sink.status'"
		server_ready "sink$how$size" rdma
		run --separate-stderr timeout 60 env $(xsenv blast) "$XSNET" blast "$XS_ADDR_A" "$port" "$size" "$how"
		((status == 0))
		"$XS_REMOTE" --wait "sink$how$size" --timeout 60
		echo "$how $size: $(cat "$XS_RUN_DIR/sink.count") bytes, status $(cat "$XS_RUN_DIR/sink.status")"
		[[ $(cat "$XS_RUN_DIR/sink.count") == "$size" ]]
		[[ $(cat "$XS_RUN_DIR/sink.status") == 0 ]] # EOF, not a reset
		# over RDMA (the sender's counters are written at exit(): an
		# _exit() leaves none)
		[[ $(stat sink accepts) == 1 && $(stat sink received) == "$size" ]]
		[[ $how == _exit ]] || [[ $(stat blast connects) == 1 && $(stat blast sent) == "$size" ]]
	done
}

# blast_ended MODE NAME SIZE HOW - xsnet blast sends SIZE bytes to $port
# and ends by HOW (exit, _exit, kill, abort), under xsock (MODE xsock, its
# counters as NAME) or not; the sender's status must be that end's: 0 for
# exit and _exit, 137 for SIGKILL, 134 for SIGABRT.
blast_ended()
{
	local want=0
	if [[ $1 == xsock ]]; then
		run --separate-stderr timeout 60 env $(xsenv "$2") "$XSNET" blast "$XS_ADDR_A" "$port" "$3" "$4"
	else
		run --separate-stderr timeout 60 "$XSNET" blast "$XS_ADDR_A" "$port" "$3" "$4"
	fi
	[[ $4 == kill ]] && want=137
	[[ $4 == abort ]] && want=134
	((status == want))
}

# bats test_tags=two
@test "sock: a sender ended by exit(), _exit(), SIGKILL or abort() right after its last send: every byte, then EOF, as over kernel TCP; a region never READ is a reset" {
	local mode size count st env how
	# 1 B and 4000 B go eagerly (XSOCK_EAGER_LIMIT 4096): every message
	# is out before send() returns (rxe sends within the post's system
	# call). 64 KiB and 8 MiB go as regions the receiver READs: those the
	# killed process had exposed and not seen READ go with its memory,
	# and the receiver is told.
	for mode in kernel xsock; do
		for how in "exit 4000" "_exit 4000" "kill 1" "kill 4000" "kill 65536" "kill 8388608" "abort 4000"; do
			size=${how#* } how=${how% *}
			port=$((port + 1))
			rm -f "$XS_RUN_DIR/ksink.stats"
			env=()
			[[ $mode == xsock ]] && env=(LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/ksink.stats")
			remote_bg "ksink$mode$how$size" bash -c "${env[*]} '$XSNET' sink '$XS_ADDR_A' '$port' |
				wc -c >'$XS_RUN_DIR/ksink.count'; echo \${PIPESTATUS[0]} >'$XS_RUN_DIR/ksink.status'"
			server_ready "ksink$mode$how$size" "$([[ $mode == xsock ]] && echo rdma || echo tcp)"
			blast_ended "$mode" kblast "$size" "$how"
			"$XS_REMOTE" --wait "ksink$mode$how$size" --timeout 60
			count=$(cat "$XS_RUN_DIR/ksink.count") st=$(cat "$XS_RUN_DIR/ksink.status")
			echo "$mode $size: $count bytes, status $st"
			note "$how after $size B, $mode: receiver read $count B, then $([[ $st == 0 ]] && echo EOF || echo a reset)"
			if [[ $mode == kernel || $size -le 4000 || $how == *exit ]]; then
				[[ $count == "$size" && $st == 0 ]]
			else
				# all and EOF, or what came and a reset: never less
				# and EOF. A READ still in flight at the disconnect
				# is a reset even when it then completes: all, then
				# a reset.
				[[ ($count == "$size" && $st == 0) || $st != 0 ]]
				((count <= size))
			fi
			[[ $mode == kernel ]] || [[ $(stat ksink accepts) == 1 && $(stat ksink received) == "$count" ]]
		done
	done
}

@test "sock: socat writing a connection to a file (nc -l style) keeps every byte of a sender ended by exit(), _exit(), SIGKILL or abort(): SHA-256 as over kernel TCP" {
	local mode size how file st sum ksum env got reset
	for how in "exit 3000000" "_exit 1" "_exit 65536" "_exit 8388608" "kill 1" "kill 65536" "kill 8388608" "abort 4000"; do
		size=${how#* } how=${how% *}
		for mode in kernel xsock; do
			port=$((port + 1))
			file=$XS_RUN_DIR/ncfile.$mode
			rm -f "$file" "$XS_RUN_DIR/ncl.stats"
			env=()
			[[ $mode == xsock ]] && env=(LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/ncl.stats")
			remote_bg "ncl$mode$how$size" bash -c "${env[*]} socat -d -u \
				TCP-LISTEN:$port,bind=$XS_ADDR_A,reuseaddr OPEN:$file,creat,trunc;
				echo \$? >'$XS_RUN_DIR/ncl.status'"
			server_ready "ncl$mode$how$size" "$([[ $mode == xsock ]] && echo rdma || echo tcp)"
			blast_ended "$mode" ncb "$size" "$how"
			"$XS_REMOTE" --wait "ncl$mode$how$size" --timeout 60
			st=$(cat "$XS_RUN_DIR/ncl.status")
			sum=$(sha256sum <"$file" | cut -c1-64)
			got=$(wc -c <"$file")
			# socat warns of a read error (-d) and still exits 0
			reset=no
			grep -q 'read(.*Connection reset by peer' \
				"$XS_RUN_DIR/remote/ncl$mode$how$size.log" && reset=yes
			echo "$how $size $mode: $got B, socat status $st, reset $reset, sha256 $sum"
			if [[ $mode == kernel ]]; then
				ksum=$sum
				[[ $st == 0 && $reset == no && $got == "$size" ]]
				continue
			fi
			[[ $(stat ncl accepts) == 1 ]] # over RDMA
			note "socat to a file, sender ended by $how after $size B: kernel TCP ${ksum:0:16}..., xsock $got B ${sum:0:16}..., reset $reset"
			if [[ $how != kill || $size -le 4000 ]]; then
				[[ $st == 0 && $reset == no && $sum == "$ksum" ]]
			else
				# a region the killed sender exposed and the receiver
				# had not READ is lost with it: then socat reads a
				# reset (never a short file and a clean end)
				[[ ($reset == no && $sum == "$ksum") || $reset == yes ]]
				cmp -n "$got" "$file" "$XS_RUN_DIR/ncfile.kernel"
			fi
		done
	done
}

@test "sock: a server reading until EOF from a client killed by SIGKILL gets EOF and its reply goes, as over kernel TCP" {
	local mode env out
	for mode in kernel xsock; do
		port=$((port + 1))
		env=()
		[[ $mode == xsock ]] && env=(env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/kps.stats" XSOCK_LOG="info:$XS_RUN_DIR/kps.log")
		rm -f "$XS_RUN_DIR/kps.stats" "$XS_RUN_DIR/kps.log" "$XS_RUN_DIR/kpc.log"
		remote_bg "kps$mode" "${env[@]}" python3 tests/tools/killpeer.py serve "$XS_ADDR_A" "$port"
		server_ready "kps$mode" "$([[ $mode == xsock ]] && echo rdma || echo tcp)"
		if [[ $mode == xsock ]]; then
			env $(xsenv kpc) XSOCK_LOG="info:$XS_RUN_DIR/kpc.log" python3 tests/tools/killpeer.py stream "$XS_ADDR_A" "$port" \
				>"$BATS_TEST_TMPDIR/kpc$mode.out" 2>&1 &
		else
			python3 tests/tools/killpeer.py stream "$XS_ADDR_A" "$port" >"$BATS_TEST_TMPDIR/kpc$mode.out" 2>&1 &
		fi
		local cli=$!
		locals+=("$cli")
		retry_for 60 grep -qx streaming "$BATS_TEST_TMPDIR/kpc$mode.out"
		kill -KILL "$cli"
		if ! "$XS_REMOTE" --wait "kps$mode" --timeout 60; then
			dump_stacks "killpeer.py serve"
			"$XS_REMOTE" --timeout 10 ss -tanpoi | sed 's/^/# remote ss: /' >&3
			ss -tanpoi | sed 's/^/# local ss: /' >&3
			cat "$BATS_TEST_TMPDIR/kpc$mode.out" "$XS_RUN_DIR/kpc.log" "$XS_RUN_DIR/kpc.stats" 2>/dev/null | sed 's/^/# client: /' >&3
			cat "$XS_RUN_DIR/kps.stats" "$XS_RUN_DIR/kps.log" 2>/dev/null | tail -60
			false
		fi
		out=$(grep '^end=' "$XS_RUN_DIR/remote/kps$mode.log")
		echo "$mode: $out"
		note "python server, client SIGKILLed mid-stream, $mode: $out"
		[[ $out == "end=EOF bytes="*" sendall=ok" ]]
		if [[ $mode == xsock ]]; then
			cat "$XS_RUN_DIR/kps.stats" "$XS_RUN_DIR/kps.log"
			[[ $(stat kps accepts) == 1 ]]
			grep -q "the peer ended without a FIN, nothing lost" "$XS_RUN_DIR/kps.log"
		fi
	done
}

@test "sock: a server idle in recv, poll, select, epoll or a nested epoll set gets EOF from a client killed by SIGKILL, as over kernel TCP" {
	# Nothing arrives on the completion channel: the peer's end comes as
	# the CM thread's DISCONNECTED (or the kernel TCP connection's FIN),
	# which wakes each kind of wait its own way (a blocked call through
	# its thread's eventfd, poll and epoll through a note and their
	# threads' wake-ups, a nested set through its kernel-visible kick)
	local mode wait env out t0 ms
	for wait in recv poll select epoll nested; do
		for mode in kernel xsock; do
			port=$((port + 1))
			env=()
			[[ $mode == xsock ]] && env=(env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/kpi.stats")
			rm -f "$XS_RUN_DIR/kpi.stats"
			remote_bg "kpi$wait$mode" "${env[@]}" python3 tests/tools/killpeer.py serve "$XS_ADDR_A" "$port" "$wait"
			server_ready "kpi$wait$mode" "$([[ $mode == xsock ]] && echo rdma || echo tcp)"
			env=()
			[[ $mode == xsock ]] && env=(env $(xsenv kpic))
			"${env[@]}" python3 tests/tools/killpeer.py idle "$XS_ADDR_A" "$port" \
				>"$BATS_TEST_TMPDIR/kpi.out" 2>&1 &
			local cli=$!
			locals+=("$cli")
			retry_for 60 grep -qx idle "$BATS_TEST_TMPDIR/kpi.out"
			sleep 1 # the server reads the 100 bytes and waits
			t0=$EPOCHREALTIME
			kill -KILL "$cli"
			if ! "$XS_REMOTE" --wait "kpi$wait$mode" --timeout 30; then
				dump_stacks "killpeer.py serve"
				cat "$XS_RUN_DIR/kpi.stats" 2>/dev/null | tail -40
				false
			fi
			ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
			out=$(grep '^end=' "$XS_RUN_DIR/remote/kpi$wait$mode.log")
			echo "$wait $mode: $out after $ms ms"
			note "server idle in $wait, client SIGKILLed, $mode: $out after $ms ms"
			[[ $out == "end=EOF bytes=100 sendall=ok" ]]
			if [[ $mode == xsock ]]; then
				cat "$XS_RUN_DIR/kpi.stats"
				[[ $(stat kpi accepts) == 1 ]] # over RDMA
			fi
		done
	done
}

@test "sock: 1000 connections open at once in one process, each echoing, on default knobs" {
	# 1000 receive rings on each side, registered as the connections
	# come, within the default XSOCK_POOL_MB: an echo of 32 bytes leaves
	# each at its start (4 data and 4 control buffers of 4 KiB, and the
	# rendezvous spare: 36 KiB)
	remote_bg "srv$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" \
		XSOCK_STATS="$XS_RUN_DIR/srv.stats" "$XSNET" serve "$XS_ADDR_A" "$port" 1000
	server_ready "srv$BATS_TEST_NUMBER" rdma
	local t0=$EPOCHREALTIME
	run --separate-stderr timeout 280 env $(xsenv cli) \
		"$XSNET" many "$XS_ADDR_A" "$port" 1000
	echo "$output"
	echo "client $stderr"
	((status == 0))
	[[ "$output" == "connections 1000 open at once, echo mismatches 0" ]]
	cat "$XS_RUN_DIR/cli.stats"
	[[ $(stat cli connects) == 1000 && $(stat cli tcp) == 0 ]]
	# the client's fds while the 1000 are open: per connection its
	# socket and its completion channel (an infinibandevent, as is the
	# device's async event fd); the CM events of all go to one channel of
	# the process (core/cm.c), and a wait learns of news that no
	# completion announces through its thread's eventfd (core/wake.c):
	# 2,011 fds here, 3,010 with an eventfd per connection, 4,007 with a
	# CM channel per connection too
	local fds sock ev ibev cm
	read -r fds sock ev ibev cm < <(awk '$1 == "fds" { print $2 + 0, $4,
		$6, $8, $10 }' <<<"$stderr")
	((sock >= 1000 && ibev <= 1000 + 2 && ev <= 8 && cm <= 4 &&
		fds <= 2 * 1000 + 32))
	"$XS_REMOTE" --wait "srv$BATS_TEST_NUMBER" --timeout 60
	cat "$XS_RUN_DIR/srv.stats"
	[[ $(stat srv accepts) == 1000 && $(stat srv received) == 32000 ]]
	# the pool registered the rings as they came and gave them back
	# when they closed: at exit, no more than two superblocks remain; at
	# most 48 KiB a connection at the peak (36 KiB, and the superblocks
	# of the send buffers and the last ring's not filled)
	local who reg peak
	for who in srv cli; do
		read -r reg peak < <(awk '$1 == "registered" && $2 == "bytes" {
			print $3, $5 }' "$XS_RUN_DIR/$who.stats")
		echo "$who: registered $reg at exit, peak $peak"
		((peak >= 1000 * 8 * 4096 && peak <= 1000 * 49152 &&
			reg <= 2 * 4194304))
	done
	note "1000 RDMA connections in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }');" \
		"pool registered at peak $((peak >> 20)) MiB, at exit $((reg >> 20)) MiB;" \
		"the client's $stderr"
}

@test "sock: a server out of pool memory says busy; clients fall back per connection" {
	# XSOCK_POOL_MB=1 registers one 4 MiB superblock: about 110 receive
	# rings of 36 KiB, not 160
	remote_bg "srv$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" XSOCK_POOL_MB=1 \
		XSOCK_STATS="$XS_RUN_DIR/srv.stats" "$XSNET" serve "$XS_ADDR_A" "$port" 160
	server_ready "srv$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 120 env $(xsenv cli) "$XSNET" many "$XS_ADDR_A" "$port" 160
	echo "$output"
	((status == 0))
	[[ "$output" == "connections 160 open at once, echo mismatches 0" ]]
	cat "$XS_RUN_DIR/cli.stats"
	local rdma tcp
	rdma=$(stat cli rdma) tcp=$(stat cli tcp)
	((rdma > 0 && tcp > 0 && rdma + tcp == 160))
	[[ $(stat cli resource) == "$tcp" && $(stat cli peer-no-xsock) == 0 ]]
	note "pool 1 MiB: $rdma connections over RDMA, $tcp over TCP (busy)"
}

@test "sock: a pool of one superblock, taken by the receive rings: sends of every size go on over RDMA, as inline messages while no send buffer can be had; nothing hangs" {
	# XSOCK_POOL_MB=4: one 4 MiB superblock, bound to the receive rings'
	# size class; a send buffer of any other class cannot be had
	remote_bg "srv$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" XSOCK_POOL_MB=4 \
		XSOCK_STATS="$XS_RUN_DIR/psrv.stats" "$XSNET" serve "$XS_ADDR_A" "$port"
	server_ready "srv$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 60 env $(xsenv pcli) XSOCK_POOL_MB=4 \
		"$XSNET" sizes "$XS_ADDR_A" "$port" 100 1000 3000 5000 100000 1000000
	echo "$output $stderr (status $status)"
	cat "$XS_RUN_DIR/pcli.stats"
	((status == 0))
	[[ "$output" == $'size 100 echo ok\nsize 1000 echo ok\nsize 3000 echo ok\nsize 5000 echo ok\nsize 100000 echo ok\nsize 1000000 echo ok' ]]
	[[ $(stat pcli rdma) == 1 && $(stat pcli tcp) == 0 ]]
}

# bats test_tags=two
@test "sock: fallback both ways - xsock client to a plain server, plain client to an xsock server" {
	plain_server "plain$BATS_TEST_NUMBER"
	local t0=$EPOCHREALTIME
	run --separate-stderr timeout 60 env $(xsenv cli) "$XSNET" many "$XS_ADDR_A" "$port" 5
	echo "$output"
	((status == 0))
	[[ "$output" == "connections 5 open at once, echo mismatches 0" ]]
	run --separate-stderr timeout 60 env $(xsenv cli2) "$XSNET" sizes "$XS_ADDR_A" "$port" 1 4097 1048576
	echo "$output"
	[[ $(grep -c ' echo ok$' <<<"$output") == 3 ]]
	cat "$XS_RUN_DIR/cli.stats"
	[[ $(stat cli tcp) == 5 && $(stat cli peer-no-xsock) == 5 && $(stat cli connects) == 0 ]]
	[[ $(stat cli2 tcp) == 1 && $(stat cli2 peer-no-xsock) == 1 ]]
	note "xsock client to a plain server: 5 connections in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f s", b - a }')" \
		"(one rdma_cm reject, then remembered)"
	port=$((port + 1))
	xs_server "srv$BATS_TEST_NUMBER" 2
	run --separate-stderr timeout 60 "$XSNET" semantics "$XS_ADDR_A" "$port"
	echo "$output"
	[[ "$output" != *FAILED* ]]
	run --separate-stderr timeout 60 "$XSNET" sizes "$XS_ADDR_A" "$port" 1 4097 1048576
	[[ $(grep -c ' echo ok$' <<<"$output") == 3 ]]
	"$XS_REMOTE" --wait "srv$BATS_TEST_NUMBER" --timeout 60
	cat "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.stats"
	[[ $(stat "srv$BATS_TEST_NUMBER" accepts) == 0 ]]
	[[ $(stat "srv$BATS_TEST_NUMBER" tcp) == 2 && $(stat "srv$BATS_TEST_NUMBER" peer-no-xsock) == 2 ]]
}

@test "sock: rogue peers are dropped alone; other connections keep every byte" {
	xs_server "srv$BATS_TEST_NUMBER"
	# a good client streams through the server the whole time
	local sizes=(1048576 4194304 1048576 4194304 1048576 4194304)
	timeout 200 env $(xsenv good) XSOCK_LOG="debug:$XS_RUN_DIR/good.log" \
		"$XSNET" sizes "$XS_ADDR_A" "$port" "${sizes[@]}" >"$XS_RUN_DIR/good.out" 2>&1 &
	local good=$! kind
	for kind in length credits rndv-bad rndv-huge done-bogus; do
		run --separate-stderr timeout 60 build/rdma/conn_probe rogue "$XS_ADDR_A" "$port" "$kind"
		echo "$output"
		[[ "$output" == *"rogue $kind: sent 1"* ]]
		[[ "$output" == *"server dropped the connection: yes"* ]]
	done
	for kind in write read; do
		run --separate-stderr timeout 60 build/rdma/conn_probe rogue "$XS_ADDR_A" "$port" "$kind"
		echo "$output"
		[[ "$output" == "rogue $kind: "* && "$output" != *"rogue $kind: success"* ]]
		[[ "$output" != *"no completion"* ]]
	done
	for kind in none garbage version; do
		run --separate-stderr timeout 60 build/rdma/conn_probe hostile "$XS_ADDR_A" "$port" "$kind"
		echo "$output"
		[[ "$output" == "hostile $kind: RDMA_CM_EVENT_REJECTED" ]]
	done
	# a client still running after 100 s is stuck: show where, then fail
	local i
	for ((i = 0; i < 1000; i++)); do kill -0 "$good" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$good" 2>/dev/null; then
		dump_stacks "xsnet sizes"
		dump_stacks "xsnet serve"
	fi
	wait "$good" || { cat "$XS_RUN_DIR/good.out" "$XS_RUN_DIR/good.log" \
		"$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"; false; }
	cat "$XS_RUN_DIR/good.out"
	[[ $(grep -c ' echo ok$' "$XS_RUN_DIR/good.out") == "${#sizes[@]}" ]]
	[[ $(stat good connects) == 1 && $(stat good tcp) == 0 ]]
	# and the server still serves new connections over RDMA
	run --separate-stderr timeout 60 env $(xsenv after) "$XSNET" sizes "$XS_ADDR_A" "$port" 4097
	[[ "$output" == "size 4097 echo ok" && $(stat after connects) == 1 ]]
}

@test "sock: a rendezvous region is the peer's to READ once; nothing around it, never written" {
	# The rogue listens in place of a server; the victim is an xsock
	# client whose 65536-byte write goes out as one rendezvous region.
	local kind name
	for kind in in out before write after; do
		name="rx$kind$BATS_TEST_NUMBER"
		remote_bg "$name" build/rdma/conn_probe rogue-rx "$XS_ADDR_A" "$port" "$kind"
		server_ready "$name" rdma
		run --separate-stderr timeout 60 env $(xsenv victim) "$XSNET" sizes "$XS_ADDR_A" "$port" 65536
		"$XS_REMOTE" --wait "$name" --timeout 30
		cat "$XS_RUN_DIR/remote/$name.log"
		grep -qx 'rndv len=65536' "$XS_RUN_DIR/remote/$name.log"
		[[ $(stat victim connects) == 1 && $(stat victim exposed) == 1 ]]
		# the victim's connection is reset, never hung or crashed
		((status == 1)) && [[ "$stderr" == *"Connection reset by peer"* ]]
		case $kind in
		in) grep -qx 'rogue-rx in: success, 0 of 65536 bytes differ from what was sent' \
			"$XS_RUN_DIR/remote/$name.log" ;;
		after)
			grep -qx 'rogue-rx read before release: success' "$XS_RUN_DIR/remote/$name.log"
			grep -qx 'rogue-rx after: remote access error' "$XS_RUN_DIR/remote/$name.log"
			;;
		*) grep -qx "rogue-rx $kind: remote access error" "$XS_RUN_DIR/remote/$name.log" ;;
		esac
	done
}

@test "sock: a non-blocking connect answers EINPROGRESS and completes on its own, as over kernel TCP" {
	xs_server "srv$BATS_TEST_NUMBER"
	local how kernel plain_port=$((port + 1)) xs_port=$port
	port=$plain_port plain_server "plain$BATS_TEST_NUMBER"
	port=$xs_port
	# fork-HOW: a child forked while the connect runs waits, connects
	# again and echoes; it carries the connection over RDMA. Then a wait
	# of 300 ms with nothing to come sleeps (idle: quiet), as over kernel
	# TCP
	for how in poll epoll select sleep fork-poll fork-epoll fork-sleep; do
		run --separate-stderr timeout 30 env XSOCK_MODE=tcp "$XSNET" nbconnect "$XS_ADDR_A" "$port" "$how"
		kernel=$output
		[[ "$kernel" == $'connect: EINPROGRESS\nwritable: yes\nSO_ERROR: 0\nconnect again: 0\necho: ok\nidle: quiet' ]]
		run --separate-stderr timeout 30 env $(xsenv "nb$how") "$XSNET" nbconnect "$XS_ADDR_A" "$port" "$how"
		echo "$how: $output $stderr"
		[[ "$output" == "$kernel" ]]
		cat "$XS_RUN_DIR/nb$how.stats"
		# every process's block: one connection, over RDMA
		[[ $(awk '$1 == "rdma" && $2 == "connects" { c += $3 }
			$1 == "rdma" && NF == 2 { r += $2 } $1 == "tcp" && NF == 2 { t += $2 }
			END { print c + 0, r + 0, t + 0 }' "$XS_RUN_DIR/nb$how.stats") == "1 1 0" ]]
	done
	# a server without xsock: the worker falls back to the kernel's connect
	run --separate-stderr timeout 30 env $(xsenv nbplain) "$XSNET" nbconnect "$XS_ADDR_A" "$plain_port" epoll
	echo "plain: $output"
	[[ "$output" == "$kernel" ]]
	[[ $(stat nbplain tcp) == 1 && $(stat nbplain peer-no-xsock) == 1 ]]
	# nobody listens: the kernel's refusal reaches SO_ERROR. The port is
	# one that no listener on the server side holds (a process of
	# another test may hold a random one: named in the TAP stream)
	local none=$((port + 2))
	while "$XS_REMOTE" bash -c "ss -Hltnp 'sport = :$none' | grep ." >"$BATS_TEST_TMPDIR/held"; do
		note "port $none is taken: $(cat "$BATS_TEST_TMPDIR/held")"
		none=$((none + 1))
	done
	# The reference is the kernel's own answer, with no library loaded.
	# Its poll() can race the refusal: a first look that falls between
	# tcp_reset() setting sk_err and tcp_done() leaving SYN_SENT sees
	# POLLERR without POLLOUT ("writable: no", once in a make check). So
	# the kernel gets three tries to give its settled answer, which the
	# library must then give every time.
	local try
	for try in 1 2 3; do
		run --separate-stderr timeout 30 env XSOCK_MODE=tcp "$XSNET" nbconnect "$XS_ADDR_A" "$none" poll
		kernel=$output
		echo "kernel TCP, nobody on port $none, try $try: $kernel (status $status, stderr: $stderr)"
		[[ "$kernel" != $'connect: EINPROGRESS\nwritable: yes\nSO_ERROR: ECONNREFUSED' ]] || break
	done
	[[ "$kernel" == $'connect: EINPROGRESS\nwritable: yes\nSO_ERROR: ECONNREFUSED' ]]
	for how in poll epoll sleep; do
		run --separate-stderr timeout 30 env $(xsenv nbnobody) XSOCK_RDMA_RETRY_MS=0 \
			"$XSNET" nbconnect "$XS_ADDR_A" "$none" "$how"
		echo "nobody $how: $output"
		[[ "$output" == "$kernel" ]]
	done
}

@test "sock: sockets that an event loop's threads are told are writable while their non-blocking connects run each take the write at once, as over kernel TCP" {
	# wready: the main thread connects 50 sockets non-blocking into the
	# epoll sets of 4 threads that poll without sleeping and write as
	# soon as a socket is reported writable (redis-benchmark --threads'
	# way); a write refused with EAGAIN there left redis-benchmark
	# waiting for ever on one request
	local name=wr$BATS_TEST_NUMBER want
	remote_bg "$name" env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/$name.stats" \
		build/tools/storm serve "$XS_ADDR_A" "$port"
	server_ready "$name" rdma
	run --separate-stderr timeout 120 build/tools/wready "$XS_ADDR_A" "$port" 50 4 4
	echo "kernel TCP: $output $stderr"
	[[ $status == 0 && $output == "connections 200 eagain 0 failed 0 mismatches 0 stuck rounds 0" ]]
	want="connections 2000 eagain 0 failed 0 mismatches 0 stuck rounds 0"
	run --separate-stderr timeout 200 env $(xsenv wready) build/tools/wready "$XS_ADDR_A" "$port" 50 40 4
	echo "xsock: $output $stderr (status $status)"
	cat "$XS_RUN_DIR/wready.stats"
	[[ $status == 0 && $output == "$want" ]]
	[[ $(stat wready rdma) == 2000 && $(stat wready tcp) == 0 ]]
}

@test "sock: epoll_ctl MOD and DEL on sockets whose non-blocking connects fall back to kernel TCP meanwhile answer as over kernel TCP (never ENOENT)" {
	plain_server "plain$BATS_TEST_NUMBER"
	run --separate-stderr timeout 120 python3 tests/tools/modrace.py "$XS_ADDR_A" "$port" 300
	echo "kernel TCP: $output $stderr"
	[[ $status == 0 && $output == "rounds 300 errors {}" ]]
	# each connect probes (no memory of the server without xsock), and
	# falls back while the loop modifies the socket
	run --separate-stderr timeout 200 env $(xsenv modrace) XSOCK_RDMA_RETRY_MS=0 \
		python3 tests/tools/modrace.py "$XS_ADDR_A" "$port" 300
	echo "xsock: $output $stderr (status $status)"
	[[ $status == 0 && $output == "rounds 300 errors {}" ]]
	[[ $(stat modrace tcp) == 300 && $(stat modrace peer-no-xsock) == 300 ]]
}

@test "sock: epoll_ctl by one thread wakes another asleep in epoll_wait on the set when it makes a member ready (EPOLLONESHOT re-armed, EPOLLOUT added, a socket with bytes unread added), as over kernel TCP" {
	xs_server "srv$BATS_TEST_NUMBER"
	tcp_then_xsock ctlwake 4 $'oneshot: woken\nmodout: woken\naddin: woken' 60 \
		build/tools/ctlwake "$XS_ADDR_A" "$port"
}

@test "sock: one socket in two epoll sets of one thread: the set whose wait found it idle reports what the other set's look took in, and wakes for what comes next, as over kernel TCP" {
	xs_server "srv$BATS_TEST_NUMBER"
	tcp_then_xsock epshare 1 $'idle: yes\ntaken: yes\nready: yes\nread: yes\nwoken: yes' 60 \
		python3 tests/tools/epshare.py "$XS_ADDR_A" "$port"
}

@test "sock: a dispatcher thread on an EPOLLONESHOT set hands connections to a worker that re-arms each with EPOLL_CTL_MOD while the dispatcher sleeps: no wake-up lost, as over kernel TCP" {
	xs_server "srv$BATS_TEST_NUMBER"
	tcp_then_xsock oneshot 8 "rounds 1600 stalls 0" 120 \
		python3 tests/tools/oneshot_mt.py "$XS_ADDR_A" "$port" 8 200
}

@test "sock: calls on a connection that neither end has used yet answer as the kernel's: an idle client's close reads as EOF, SO_RCVTIMEO bounds a read on either side, SO_ERROR is 0 once a read reported the peer's RST; the send after the peer's close draws EPIPE on the next one; FIONREAD counts the peer's first bytes, never ours" {
	local tool=tests/tools/undecided.py c m name
	declare -A got
	for c in idleclose srvtimeo clitimeo lingerrst sendclosed fionread fionreadc; do
		for m in tcp xsock; do
			name=u$c$m
			if [[ $m == tcp ]]; then
				remote_bg "$name" python3 "$tool" serve "$XS_ADDR_A" "$port" "$c"
				server_ready "$name" tcp
				run --separate-stderr timeout 30 python3 "$tool" client "$XS_ADDR_A" "$port" "$c"
			else
				remote_bg "$name" env $(xsenv "${name}s") python3 "$tool" serve "$XS_ADDR_A" "$port" "$c"
				server_ready "$name" rdma
				run --separate-stderr timeout 30 env $(xsenv "${name}c") python3 "$tool" client "$XS_ADDR_A" "$port" "$c"
			fi
			"$XS_REMOTE" --wait "$name" --timeout 30
			got[$m]="$output / $(sed '/^listening/d' "$XS_RUN_DIR/remote/$name.log")"
			echo "$c $m: ${got[$m]} $stderr"
		done
		[[ "${got[xsock]}" == "${got[tcp]}" ]]
	done
}

@test "sock: a server that closes its listener and listens again on the same port after each connection (iperf3's way): every connection over RDMA" {
	local tool=tests/tools/relisten.py round cli
	remote_bg relisten env $(xsenv relisten) python3 "$tool" serve "$XS_ADDR_A" "$port" 4
	server_ready relisten rdma
	cli=$(xsenv relistenc) # one summary block per client, appended
	for round in 1 2 3 4; do
		sleep 0.5 # the listener of the round before closes
		run --separate-stderr timeout 30 env $cli python3 "$tool" client "$XS_ADDR_A" "$port"
		echo "round $round: $status $output $stderr"
		[[ "$output" == "echoed 1000" ]]
	done
	"$XS_REMOTE" --wait relisten --timeout 30
	grep -E "^xsock stats|^  (rdma|tcp) |fallback peer" "$XS_RUN_DIR/relistenc.stats"
	[[ $(grep -c "^  rdma  *1$" "$XS_RUN_DIR/relistenc.stats") == 4 ]]
	! grep -q "^  tcp  *[1-9]" "$XS_RUN_DIR/relistenc.stats"
}

@test "programs: iperf3 -s serves three tests in a row, making its listener again for each: every test's connections over RDMA, every byte counted" {
	command -v iperf3 >/dev/null || { echo "iperf3 not installed (tests/install-deps)"; false; }
	local round counts
	remote_bg iperf3 env $(xsenv iperf3s) iperf3 -s -B "$XS_ADDR_A" -p "$port"
	server_ready iperf3 rdma
	for round in 1 2 3; do
		run --separate-stderr timeout 60 env $(xsenv "iperf3c$round") \
			iperf3 -c "$XS_ADDR_A" -p "$port" -n 2M -J
		echo "test $round: status $status $stderr"
		((status == 0))
		# the bytes asked for went (what the server counted by its
		# end varies over kernel TCP too)
		counts=$(python3 -c 'import json, sys; e = json.load(sys.stdin)["end"]; print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"])' <<<"$output")
		echo "sent, received: $counts"
		[[ ${counts% *} == 2097152 ]]
		grep -E "^  (rdma|tcp) |fallback peer" "$XS_RUN_DIR/iperf3c$round.stats"
		[[ $(stat "iperf3c$round" tcp) == 0 && $(stat "iperf3c$round" rdma) -ge 2 ]]
	done
}
