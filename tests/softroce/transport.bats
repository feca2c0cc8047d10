#!/usr/bin/env bats
# core/conn.c on real verbs: RC connection setup with the xsock hello in the
# rdma_cm private data, the first messages over the QP, and the listener's
# answer to peers that are not xsock or send a malformed hello. Runs in both
# topologies (the server through xs-remote), after the fabric smoke tests.

load tier

bats_require_minimum_version 1.5.0

PROBE=build/rdma/conn_probe

# conn_server N - start a conn_probe server for N clients on $port.
conn_server()
{
	[[ -x $PROBE ]] || { echo "$PROBE not built (make)" >&2; return 1; }
	remote_bg "conn_srv$BATS_TEST_NUMBER" "$PROBE" server "$XS_ADDR_A" "$port" "$1"
	server_ready "conn_srv$BATS_TEST_NUMBER" rdma
}

# server_log: what the conn_probe server printed so far.
server_log() { cat "$XS_RUN_DIR/remote/conn_srv$BATS_TEST_NUMBER.log"; }

@test "conn: RC connection with the xsock hello, echo at the eager limit edges" {
	conn_server 3
	local size
	for size in 1 248 4088; do # inline, around max_inline, eager_size - header
		run --separate-stderr "$PROBE" client "$XS_ADDR_A" "$port" "$size"
		echo "$output"
		((status == 0))
		[[ "$output" == *"connected peer_credits=32 peer_eager=4096"* ]]
		[[ "$output" == *"echo bytes=$size match=yes"* ]]
		note "conn $size B: $(grep -o 'setup_ms=[0-9.]*' <<<"$output") $(grep -o 'rtt_us=[0-9]*' <<<"$output")"
	done
	"$XS_REMOTE" --wait "conn_srv$BATS_TEST_NUMBER" --timeout 30
	server_log
	[[ $(server_log | grep -c '^accepted peer_credits=32 peer_eager=4096 peer_rndv=1048576') == 3 ]]
	[[ $(server_log | grep -c '^echoed bytes=') == 3 ]]
	server_log | grep -qx 'rejected=0'
}

@test "conn: requests without a valid hello are rejected, the listener serves on" {
	conn_server 1
	local kind
	for kind in none garbage version credits eager tail; do
		run --separate-stderr "$PROBE" hostile "$XS_ADDR_A" "$port" "$kind"
		echo "$output"
		[[ "$output" == "hostile $kind: RDMA_CM_EVENT_REJECTED" ]]
	done
	run --separate-stderr "$PROBE" client "$XS_ADDR_A" "$port" 64
	echo "$output"
	[[ "$output" == *"echo bytes=64 match=yes"* ]]
	"$XS_REMOTE" --wait "conn_srv$BATS_TEST_NUMBER" --timeout 30
	server_log | grep -qx 'rejected=6'
}

@test "conn: no rdma_cm listener means ECONNREFUSED; loopback means ENODEV" {
	run --separate-stderr "$PROBE" refused "$XS_ADDR_A" "$port"
	echo "$output"
	[[ "$output" == "connect=ECONNREFUSED ms="* ]]
	note "refused after $(grep -o 'ms=[0-9]*' <<<"$output")"
	run --separate-stderr "$PROBE" refused 127.0.0.1 "$port"
	echo "$output"
	[[ "$output" == "connect=ENODEV ms="* ]]
}
