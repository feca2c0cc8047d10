#!/usr/bin/env bats
# Faults on real verbs: a peer killed with SIGKILL in the middle of a busy
# stream, each side in turn. The survivor (under xsock, driven by epoll)
# must learn it - ECONNRESET, EPIPE or EOF - within a bound, never hang.
# The bound: 10 s from the last byte that moved. A dead process's QP and
# cm_id are destroyed by the kernel, which disconnects the connection at
# once; 10 s leaves room for emulation's scheduling.

# bats file_tags=two

load tier

bats_require_minimum_version 1.5.0

PY=tests/tools
BOUND_MS=10000

# detected_within TEXT - TEXT has the survivor's "detected" line, within
# BOUND_MS; its figure goes to the TAP stream.
detected_within()
{
	local line ms
	line=$(grep -E '^detected (ECONNRESET|EPIPE|EOF) after [0-9]+ ms' <<<"$1") || {
		echo "no detection in: $1" >&2
		return 1
	}
	ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
	note "$BATS_TEST_DESCRIPTION: $line"
	((ms <= BOUND_MS))
}

@test "faults: the server killed mid-stream: the client learns it within 10 s" {
	local cli i
	remote_bg victim env $(xsenv victim) python3 "$PY/fault_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready victim rdma
	env $(xsenv survivor) python3 "$PY/fault_peer.py" stream "$XS_ADDR_A" \
		"$port" >"$BATS_TEST_TMPDIR/cli.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	retry_for 60 grep -qx streaming "$BATS_TEST_TMPDIR/cli.out"
	"$XS_REMOTE" --kill victim --signal KILL >/dev/null || true
	for ((i = 0; i < 300; i++)); do
		kill -0 "$cli" 2>/dev/null || break
		sleep 0.1
	done
	status=0
	wait "$cli" || status=$?
	output=$(cat "$BATS_TEST_TMPDIR/cli.out")
	echo "$output"
	((status == 0))
	detected_within "$output"
	[[ "$(stat survivor rdma)" == 1 ]]
}

@test "faults: the client killed mid-stream: the server learns it within 10 s" {
	local cli
	remote_bg survivor env $(xsenv survivor) python3 "$PY/fault_peer.py" \
		serve "$XS_ADDR_A" "$port"
	server_ready survivor rdma
	env $(xsenv victim) python3 "$PY/fault_peer.py" stream "$XS_ADDR_A" \
		"$port" >"$BATS_TEST_TMPDIR/cli.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	retry_for 60 grep -qx streaming "$BATS_TEST_TMPDIR/cli.out"
	kill -KILL "$cli"
	run "$XS_REMOTE" --wait survivor --timeout 30
	((status == 0)) # 124: still waiting, it never learnt
	output=$(cat "$XS_RUN_DIR/remote/survivor.log")
	echo "$output"
	detected_within "$output"
	[[ "$(stat survivor accepts)" == 1 ]]
}

# ---- the data link: lost for a while, or down --------------------------------
# A RoCE NIC whose cable is pulled sees its packets go nowhere and retries:
# `blackhole` makes that (netem, 100 % loss on both sides' data link, both
# ways). RC retransmission is meant to bridge a few seconds (XS_ACK_TIMEOUT,
# XS_RETRY_COUNT: a budget of about 7.5 s); beyond, the side with work in
# flight fails with ETIMEDOUT, and the other finds out by its probe
# (xs_stream_probe: 2 s of silence, then the same budget). rxe often leaves
# a READ whose responses were lost neither retried nor failed; the probe's
# deadline (15 s) turns that into ETIMEDOUT too. The bound on detection:
# 30 s from the last byte moved = the outage's start, covering the probe's
# 2 s, the thread's 1 s tick, the 15 s deadline and emulation's delays.
LINK_BOUND_MS=30000

# data_links - the data link devices: the server's, then the client's.
data_links()
{
	case "$XS_TOPOLOGY" in
	two) echo eth0 eth0 ;;
	*) echo veth0 veth1 ;;
	esac
}

# file_teardown - the data links as they were, whatever a failed test left
# (called by the tier's teardown).
file_teardown()
{
	local srv cli
	read -r srv cli < <(data_links)
	"$XS_REMOTE" bash -c "tc qdisc del dev $srv root 2>/dev/null; ip link set $srv up" || true
	tc qdisc del dev "$cli" root 2>/dev/null || true
}

# link_lost on|off - every packet of the data link lost from now (on),
# or none any more (off).
link_lost()
{
	local srv cli op=add
	[[ "$1" == on ]] || op=del
	read -r srv cli < <(data_links)
	if [[ $op == add ]]; then
		"$XS_REMOTE" tc qdisc add dev "$srv" root netem loss 100%
		tc qdisc add dev "$cli" root netem loss 100%
	else
		"$XS_REMOTE" tc qdisc del dev "$srv" root
		tc qdisc del dev "$cli" root
	fi
}

# blackhole SECONDS [CMD...] - lose every packet of the data link for
# SECONDS, or until CMD succeeds (looked at every 0.2 s), whichever first.
blackhole()
{
	local i secs=$1
	shift
	link_lost on
	for ((i = 0; i < secs * 5; i++)); do
		(($# == 0)) || ! "$@" || break
		sleep 0.2
	done
	link_lost off
}

# both_failed SRVLOG - the client ($cli) has exited and the server's log
# has its "failed" line.
both_failed()
{
	! kill -0 "$cli" 2>/dev/null && grep -qE '^failed ' "$1"
}

# flow_start SECONDS - an echo server (flow_peer.py serve, with the options
# in $FLOW_SERVE_ARGS) and a checked stream of SECONDS from this side to
# it, streaming when this returns;
# the client's pid in $cli, its output in $BATS_TEST_TMPDIR/cli.out.
flow_start()
{
	remote_bg srv env $(xsenv srv) python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port" ${FLOW_SERVE_ARGS:-}
	server_ready srv rdma
	env $(xsenv cli) python3 "$PY/flow_peer.py" stream "$XS_ADDR_A" \
		"$port" "$1" >"$BATS_TEST_TMPDIR/cli.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	retry_for 60 grep -qx streaming "$BATS_TEST_TMPDIR/cli.out"
}

# flow_wait - wait for the client (its run plus the bound at most); its
# status in $status, its output in $output.
flow_wait()
{
	local i
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$cli" 2>/dev/null || break
		sleep 0.1
	done
	status=0
	wait "$cli" || status=$?
	output=$(cat "$BATS_TEST_TMPDIR/cli.out")
	echo "$output"
}

# last_at - the bytes the client had back at its last progress line.
last_at()
{
	grep -E '^at [0-9]+$' "$BATS_TEST_TMPDIR/cli.out" | tail -1 | awk '{print $2}'
}

# failed_within TEXT - TEXT has a "failed ETIMEDOUT|ECONNRESET|EOF after
# MS ms" line with MS <= LINK_BOUND_MS; the figure goes to the TAP stream.
failed_within()
{
	local line ms
	line=$(grep -E '^failed (ETIMEDOUT|ECONNRESET|EPIPE|EOF) after [0-9]+ ms' <<<"$1" | head -1) || {
		echo "no failure reported in: $1" >&2
		return 1
	}
	ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
	note "$BATS_TEST_DESCRIPTION: $2 $line"
	((ms <= LINK_BOUND_MS))
}

# flow_outcome BEFORE - the client either went on after the outage (at
# least 1 MiB more than BEFORE, every byte intact) or failed within the
# bound with every byte before intact; never both silent and alive.
flow_outcome()
{
	local after
	if ((status == 3)); then
		failed_within "$output" "client:"
		return
	fi
	((status == 0)) # 1: a byte came back wrong, or a hang
	after=$(sed -nE 's/^intact ([0-9]+) bytes.*/\1/p' <<<"$output")
	((after >= $1 + (1 << 20)))
	note "$BATS_TEST_DESCRIPTION: client resumed: $(grep ^intact <<<"$output")"
}

@test "faults: the data link lost for 2 s mid-stream: the stream resumes or fails within 30 s, every byte intact" {
	local before
	flow_start 40
	blackhole 2
	before=$(last_at)
	flow_wait
	flow_outcome "$before"
	[[ "$(stat cli rdma)" == 1 ]]
}

@test "faults: the data link lost beyond the retry budget: both sides fail within 30 s, the server serves again" {
	local srvlog
	# The server's side may be idle when the link goes (its echo all
	# delivered): like a TCP server, it then learns only by keepalive,
	# which it sets on its listener (its connections inherit it).
	FLOW_SERVE_ARGS="--keepalive 2,1,1" flow_start 90
	# the outage outlasts the bound, or ends once both sides have failed,
	# so no side is rescued by the link's return: each must have failed
	# on its own within it
	srvlog=$XS_RUN_DIR/remote/srv.log
	blackhole $(sized 32 40) both_failed "$srvlog" &
	locals+=($!)
	flow_wait
	((status == 3)) # failed, nothing corrupt
	failed_within "$output" client:
	retry_for 30 grep -qE '^failed ' "$srvlog"
	failed_within "$(cat "$srvlog")" server:
	# once the link is back, the same server serves a new connection
	wait "${locals[-1]}"
	run env $(xsenv again) python3 "$PY/flow_peer.py" stream "$XS_ADDR_A" "$port" 3
	((status == 0))
	[[ "$(stat again rdma)" == 1 ]]
}

@test "faults: SO_KEEPALIVE over RDMA finds a silently vanished peer; without it the connection waits, as TCP's" {
	local ka noka line ms
	remote_bg srv env $(xsenv srv) python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready srv rdma
	# the idle wait outlasts the outage (4 s + 22 s), which outlasts the
	# bound on keepalive's detection (20 s from its start)
	env $(xsenv ka) python3 "$PY/flow_peer.py" idle "$XS_ADDR_A" "$port" \
		$(sized 32 40) --keepalive 2,1,1 >"$BATS_TEST_TMPDIR/ka.out" 2>&1 &
	ka=$!
	locals+=("$ka")
	env $(xsenv noka) python3 "$PY/flow_peer.py" idle "$XS_ADDR_A" "$port" \
		$(sized 32 40) >"$BATS_TEST_TMPDIR/noka.out" 2>&1 &
	noka=$!
	locals+=("$noka")
	retry_for 60 grep -qx idle "$BATS_TEST_TMPDIR/ka.out"
	retry_for 60 grep -qx idle "$BATS_TEST_TMPDIR/noka.out"
	sleep 4 # keepalive probes answered meanwhile: no false alarm
	blackhole $(sized 22 25)
	status=0
	wait "$ka" || status=$?
	cat "$BATS_TEST_TMPDIR/ka.out"
	((status == 3))
	line=$(grep -E '^failed ETIMEDOUT after [0-9]+ ms' "$BATS_TEST_TMPDIR/ka.out")
	ms=$(sed -E 's/.* after ([0-9]+) ms.*/\1/' <<<"$line")
	# idle 2 s + 1 s tick + 7.5 s retry budget, from the blackhole (which
	# began 4 s and more into the wait)
	note "$BATS_TEST_DESCRIPTION: $line (the wait began 4 s before the outage)"
	((ms >= 4000 && ms <= 4000 + 20000))
	status=0
	wait "$noka" || status=$?
	cat "$BATS_TEST_TMPDIR/noka.out"
	((status == 0))
	[[ "$(stat ka rdma)" == 1 && "$(stat noka rdma)" == 1 ]]
}

# ---- a peer that ends while the link is lost ----------------------------------
# An idle client is killed during an outage. Its kernel sends one DREQ for
# its QP, lost, and never again; it retransmits the FIN of its TCP socket
# (RTO backoff from 200 ms, tcp_orphan_retries), and the first that gets
# through after the outage is how an idle TCP server learns: EOF. Under
# xsock the same FIN reaches the kernel TCP connection under the stream;
# the probe thread sees it within its 1 s tick (core/watch.c), probes the
# peer's QP, and the RC retry budget (about 7.5 s) says it is gone: EOF
# too, since the dead client had read everything (its buffers went back
# after a second of quiet). The bound, after the kernel TCP run's figure
# from the same test: 1 s tick + 1 s to the probe + 7.5 s + 5 s for
# emulation's delays.
OUTAGE_END_SLACK_MS=15000

# outage_end MODE - one run with the server and the client under xsock
# (MODE xsock) or on kernel TCP (tcp): the client killed 1 s into a 6 s
# loss of the data link; prints "MS LINE": the server's first line about
# the connection ("closed", "failed KIND ..."), MS after the link came
# back, or "none" after 60 s.
outage_end()
{
	# server_ready reads $port
	local mode=$1 port=$((port + ${2:-0})) srvlog t0 i line ready=tcp cli
	local -a se=() ce=()
	if [[ $mode == xsock ]]; then
		read -ra se <<<"$(xsenv "osrv")"
		read -ra ce <<<"$(xsenv "ocli")"
		ready=rdma
	fi
	srvlog=$XS_RUN_DIR/remote/osrv-$mode.log
	remote_bg "osrv-$mode" env "${se[@]}" python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready "osrv-$mode" "$ready" >&2 || return 1
	env "${ce[@]}" python3 "$PY/flow_peer.py" idle "$XS_ADDR_A" "$port" 120 \
		>"$BATS_TEST_TMPDIR/$mode.out" 2>&1 &
	cli=$!
	locals+=("$cli")
	retry_for 60 grep -qx idle "$BATS_TEST_TMPDIR/$mode.out" >&2 || return 1
	if [[ $mode == xsock ]]; then
		"$PWD/build/bin/xsock-stat" -r -p "$cli" | grep -qw rdma || {
			echo "outage_end: the client's connection is not RDMA" >&2
			"$PWD/build/bin/xsock-stat" -p "$cli" >&2
			return 1
		}
	fi
	sleep 2 # quiet: the client's buffers go back
	link_lost on
	sleep 1
	kill -KILL "$cli"
	sleep 5
	link_lost off
	t0=$(date +%s%N)
	line=none
	for ((i = 0; i < 600; i++)); do
		if grep -qE '^(closed|failed )' "$srvlog"; then
			line=$(grep -E '^(closed|failed )' "$srvlog" | head -1)
			break
		fi
		sleep 0.1
	done
	echo "$((($(date +%s%N) - t0) / 1000000)) $line"
}

@test "faults: a client killed while the link is lost: the idle server sees EOF once it is back, as over kernel TCP" {
	local tcp xs tms xms
	tcp=$(outage_end tcp)
	xs=$(outage_end xsock 1)
	echo "kernel TCP: $tcp; xsock: $xs"
	note "$BATS_TEST_DESCRIPTION: kernel TCP: ${tcp#* } ${tcp%% *} ms after the link came back; xsock: ${xs#* } ${xs%% *} ms"
	tms=${tcp%% *}
	xms=${xs%% *}
	[[ "${tcp#* }" == closed ]]
	[[ "${xs#* }" == closed ]]
	((xms <= tms + OUTAGE_END_SLACK_MS))
}

@test "faults: the server restarted under its clients: they see the error, reconnect over RDMA and work" {
	local c pids=() out ms
	remote_bg srv1 env $(xsenv srv1) python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready srv1 rdma
	for c in 1 2; do
		env $(xsenv "re$c") python3 "$PY/flow_peer.py" reconnect \
			"$XS_ADDR_A" "$port" $(sized 16 25) >"$BATS_TEST_TMPDIR/re$c.out" 2>&1 &
		pids+=($!)
		locals+=($!)
	done
	for c in 1 2; do
		retry_for 60 grep -qx connected "$BATS_TEST_TMPDIR/re$c.out"
	done
	sleep 1
	"$XS_REMOTE" --kill srv1 --signal KILL >/dev/null || true
	sleep 2 # down for a while: connects are refused meanwhile
	remote_bg srv2 env $(xsenv srv2) python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready srv2 rdma
	for c in 1 2; do
		status=0
		wait "${pids[c - 1]}" || status=$?
		out=$(cat "$BATS_TEST_TMPDIR/re$c.out")
		echo "$out"
		((status == 0)) # every message intact, and back at the end
		ms=$(sed -nE 's/^lost (ECONNRESET|EPIPE|EOF) after ([0-9]+) ms$/\2/p' <<<"$out")
		[[ -n "$ms" ]] && ((ms <= BOUND_MS))
		grep -qE '^back after [0-9]+ ms$' <<<"$out"
		note "$BATS_TEST_DESCRIPTION: client $c $(grep -E '^(lost|back)' <<<"$out" | paste -sd ';')"
		# the first connection and the one after the restart: RDMA
		(($(stat "re$c" connects) >= 2))
	done
}

# ---- resources ----------------------------------------------------------------

@test "faults: a 1 MiB pool on both sides under 12 streaming connections: backpressure, every byte intact" {
	local least intact
	remote_bg srv env $(xsenv srv) XSOCK_POOL_MB=1 \
		XSOCK_LOG="info:$XS_RUN_DIR/srv.log" python3 \
		"$PY/flow_peer.py" serve "$XS_ADDR_A" "$port"
	server_ready srv rdma
	run env $(xsenv cli) XSOCK_POOL_MB=1 XSOCK_LOG="info:$XS_RUN_DIR/cli.log" \
		python3 "$PY/flow_peer.py" many "$XS_ADDR_A" "$port" 12 $(sized 10 15)
	echo "$output"
	# a failure shows each side's resets and fallbacks with their reasons
	((status == 0)) || {
		tail -n 40 "$XS_RUN_DIR/cli.log" "$XS_RUN_DIR/srv.log"
		false
	}
	# every connection moved: a full pool slows, never stalls
	least=$(sed -nE 's/^intact [0-9]+ bytes on 12 connections, at least ([0-9]+) each$/\1/p' <<<"$output")
	((least >= 1 << 20))
	intact=$(grep ^intact <<<"$output")
	# the server's summary too (flow_peer.py exits on SIGTERM)
	"$XS_REMOTE" --kill srv --signal TERM >/dev/null || true # its status
	retry_for 30 grep -q 'waits credit' "$XS_RUN_DIR/srv.stats"
	cat "$XS_RUN_DIR/cli.stats" "$XS_RUN_DIR/srv.stats"
	# the pool was exhausted (on the side that READs the other's 64 KiB
	# regions, or that sends from pool buffers), and each connection RDMA
	# or, turned away for want of pool, kernel TCP with reason resource
	local waits_cli waits_srv
	waits_cli=$(grep -oE 'waits credit [0-9]+ pool [0-9]+' "$XS_RUN_DIR/cli.stats" | awk '{print $5}')
	waits_srv=$(grep -oE 'waits credit [0-9]+ pool [0-9]+' "$XS_RUN_DIR/srv.stats" | awk '{print $5}')
	((waits_cli + waits_srv > 0))
	(($(stat cli rdma) >= 1 && $(stat cli rdma) + $(stat cli tcp) == 12))
	[[ "$(stat cli tcp)" == "$(stat cli resource)" ]]
	note "$BATS_TEST_DESCRIPTION: $intact; $(stat cli rdma) over RDMA;" \
		"pool waits: client $waits_cli, server $waits_srv"
}

@test "faults: RLIMIT_MEMLOCK too low for a non-root process: kernel TCP with reason resource, bytes intact" {
	remote_bg srv env $(xsenv srv) python3 "$PY/flow_peer.py" serve \
		"$XS_ADDR_A" "$port"
	server_ready srv rdma
	# root ignores RLIMIT_MEMLOCK (CAP_IPC_LOCK): nobody does not
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		prlimit --memlock=65536 env LD_PRELOAD="$PWD/build/libxsock.so" \
		XSOCK_STATS=1 python3 "$PY/flow_peer.py" many "$XS_ADDR_A" "$port" 2 3
	echo "$output"
	((status == 0))
	grep -qE '^intact [0-9]+ bytes on 2 connections, at least [1-9][0-9]* each$' <<<"$output"
	grep -qE '^  fallback resource +2$' <<<"$output"
	# the same process without the limit: RDMA
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		env LD_PRELOAD="$PWD/build/libxsock.so" XSOCK_STATS=1 \
		python3 "$PY/flow_peer.py" many "$XS_ADDR_A" "$port" 2 3
	echo "$output"
	((status == 0))
	grep -qE '^  rdma +2$' <<<"$output"
}

# rdma_cgroup_limit NAME OBJECTS - an rdma cgroup NAME on the server side
# whose processes may hold at most OBJECTS objects (QPs, CQs, MRs, MWs, PDs)
# of the device: a device that cannot create more.
rdma_cgroup_limit()
{
	"$XS_REMOTE" bash -c "
		set -e
		mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
		grep -qw rdma /sys/fs/cgroup/cgroup.subtree_control ||
			echo +rdma >/sys/fs/cgroup/cgroup.subtree_control
		mkdir -p /sys/fs/cgroup/$1
		echo '$XS_DEV_A hca_handle=4 hca_object=$2' >/sys/fs/cgroup/$1/rdma.max"
}

@test "faults: the device creates no more QPs for the server: new connections fall back with reason resource, established ones keep every byte" {
	local first
	rdma_cgroup_limit "xs$port" 40
	remote_bg srv bash -c "echo \$\$ >/sys/fs/cgroup/xs$port/cgroup.procs &&
		exec env $(xsenv srv) python3 $PY/flow_peer.py serve $XS_ADDR_A $port"
	server_ready srv rdma
	env $(xsenv cli) python3 "$PY/flow_peer.py" many "$XS_ADDR_A" "$port" \
		2 $(sized 12 20) >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
	first=$!
	locals+=("$first")
	retry_for 60 grep -qx "connected 2" "$BATS_TEST_TMPDIR/first.out"
	run env $(xsenv cli2) timeout 60 python3 "$PY/flow_peer.py" many \
		"$XS_ADDR_A" "$port" 8 5
	echo "$output"
	((status == 0))
	cat "$XS_RUN_DIR/cli2.stats"
	# some fit under the limit, the rest were turned away
	(($(stat cli2 resource) >= 1 && $(stat cli2 rdma) + $(stat cli2 tcp) == 8))
	[[ "$(stat cli2 tcp)" == "$(stat cli2 resource)" ]]
	status=0
	wait "$first" || status=$?
	cat "$BATS_TEST_TMPDIR/first.out"
	((status == 0))
	grep -qE '^intact [0-9]+ bytes on 2 connections, at least [1-9][0-9]* each$' "$BATS_TEST_TMPDIR/first.out"
	[[ "$(stat cli rdma)" == 2 ]]
	note "$BATS_TEST_DESCRIPTION: $(stat cli2 rdma) of 8 over RDMA, $(stat cli2 resource) kernel TCP (resource)"
}

@test "faults: RLIMIT_NOFILE runs out on the server: accept fails with EMFILE, new connections fall back, established ones keep every byte" {
	local first
	# Once the first three connections are up, the server fills its fd
	# table but for 4: room for the next accept() and the start of its
	# negotiation (its eventfds, the worker's dup), none for its RDMA
	# side (the completion channel), whatever the three and the process
	# hold by then. With 1-3 free, the negotiation could not start and
	# the client waited for its timeout; with 6, it fitted whole (in
	# topology two).
	remote_bg srv bash -c "ulimit -n 256 && exec env $(xsenv srv) \
		python3 $PY/flow_peer.py serve $XS_ADDR_A $port --fill-after 3,4"
	server_ready srv rdma
	env $(xsenv cli) python3 "$PY/flow_peer.py" many "$XS_ADDR_A" "$port" \
		3 $(sized 15 25) >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
	first=$!
	locals+=("$first")
	retry_for 60 grep -qx "connected 3" "$BATS_TEST_TMPDIR/first.out"
	retry_for 30 grep -qx "filled, 4 fds free" "$XS_RUN_DIR/remote/srv.log"
	# 12 more: a few fit, the server's accept() then fails with EMFILE
	# (as the kernel's does) and the rest are turned away
	run env $(xsenv cli2) timeout 60 python3 "$PY/flow_peer.py" many \
		"$XS_ADDR_A" "$port" 12 5
	echo "$output"
	((status == 0)) # no byte wrong; some connections never accepted
	cat "$XS_RUN_DIR/cli2.stats"
	(($(stat cli2 resource) >= 1 && $(stat cli2 rdma) + $(stat cli2 tcp) == 12))
	# Accepted with no fd left for its RDMA side: resource. Never
	# accepted (EMFILE), so never claimed by the server: the client
	# waited XSOCK_CONNECT_TIMEOUT_MS for an answer, timeout.
	(($(stat cli2 tcp) == $(stat cli2 resource) + $(stat cli2 timeout)))
	grep -qx 'accept: EMFILE' "$XS_RUN_DIR/remote/srv.log"
	status=0
	wait "$first" || status=$?
	cat "$BATS_TEST_TMPDIR/first.out"
	((status == 0))
	grep -qE '^intact [0-9]+ bytes on 3 connections, at least [0-9]{7,} each$' "$BATS_TEST_TMPDIR/first.out"
	[[ "$(stat cli rdma)" == 3 ]]
	note "$BATS_TEST_DESCRIPTION: $(grep ^intact "$BATS_TEST_TMPDIR/first.out");" \
		"then $(stat cli2 rdma) of 12 over RDMA, $(stat cli2 resource) kernel TCP (resource)"
}

# Last: after rxe's link went down and up, new rdma_cm connections to that
# guest time out (kernel TCP, reason timeout) for the rest of the run.
@test "faults: the data link down for 2 s: each side resumes or fails within 30 s, nothing hangs" {
	local srv cli_dev before
	read -r srv cli_dev < <(data_links)
	flow_start 40
	"$XS_REMOTE" bash -c "ip link set $srv down; sleep 2; ip link set $srv up"
	# rxe fails a QP at once when the link's route is gone (a local QP
	# operation error), which resets that side; the other learns by its
	# probe
	before=$(last_at)
	flow_wait
	flow_outcome "$before"
}
