#!/usr/bin/env bats
# core/conn.c on real verbs: RC connection setup with the xsock hello in the
# rdma_cm private data, the first messages over the QP, and the listener's
# answer to peers that are not xsock or send a malformed hello. Runs in both
# topologies (the server through xs-remote), after the fabric smoke tests.

# Topology two runs all of it too: the hello and the stream across a wire.
# bats file_tags=two

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
		run --separate-stderr timeout 60 "$PROBE" client "$XS_ADDR_A" "$port" "$size"
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
		run --separate-stderr timeout 60 "$PROBE" hostile "$XS_ADDR_A" "$port" "$kind"
		echo "$output"
		[[ "$output" == "hostile $kind: RDMA_CM_EVENT_REJECTED" ]]
	done
	run --separate-stderr timeout 60 "$PROBE" client "$XS_ADDR_A" "$port" 64
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

SPROBE=build/rdma/stream_probe

# stream_server MODE - start a stream_probe server (sink or echo) on $port;
# what it writes lands in $SINK_OUT, under the run directory that both
# guests share (each guest's /tmp is its own).
stream_server()
{
	[[ -x $SPROBE ]] || { echo "$SPROBE not built (make)" >&2; return 1; }
	SINK_OUT=$XS_RUN_DIR/sink$BATS_TEST_NUMBER.out
	remote_bg "stream_srv$BATS_TEST_NUMBER" \
		bash -c "exec $SPROBE $1 $XS_ADDR_A $port >$SINK_OUT"
	server_ready "stream_srv$BATS_TEST_NUMBER" rdma
}

stream_log() { cat "$XS_RUN_DIR/remote/stream_srv$BATS_TEST_NUMBER.log"; }

# stream_case BYTES CHUNK - BYTES of random data sent in CHUNK-byte send()s
# arrive intact (SHA-256 at both ends) over the eager stream.
stream_case()
{
	local bytes=$1 chunk=$2 in=$BATS_TEST_TMPDIR/in.bin
	head -c "$bytes" /dev/urandom >"$in"
	stream_server sink
	# A bound of its own: a stalled link fails the test, not the tier.
	run --separate-stderr timeout 120 "$SPROBE" source "$XS_ADDR_A" \
		"$port" "$chunk" <"$in"
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == "OK $bytes" ]]
	"$XS_REMOTE" --wait "stream_srv$BATS_TEST_NUMBER" --timeout 60
	stream_log
	[[ $(sha256sum <"$in") == $(sha256sum <"$SINK_OUT") ]]
	stream_log | grep -q "^sink: sent=[0-9]* received=$bytes "
	note "stream $bytes B in $chunk B sends: sha256 match; $(grep -o 'inline=.*' <<<"$stderr")"
}

@test "stream: sizes around the inline and eager limits arrive intact" {
	local b
	for b in 1 247 248 249 4087 4088 4089 8176 8177; do
		stream_case "$b" 65536
	done
}

@test "stream: 4 MiB in 1-byte to 64 KiB sends, credits cycle, SHA-256 matches" {
	# Every 1-byte send is a message (a packet through qemu's link in
	# topology two): 30,000 of them still cycle the credits ~470 times;
	# check-long sends ten times as many.
	local tiny
	tiny=$(sized 30000 300000)
	stream_case 4194304 65536
	stream_case "$tiny" 1
	stream_case 1000000 4096
}

@test "stream: 64 B ping-pong, every reply checked" {
	stream_server echo
	run --separate-stderr timeout 120 env XSOCK_SPIN_US=50 "$SPROBE" \
		pingpong "$XS_ADDR_A" "$port" 64 300
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == "pingpong size=64 iters=300 ok p50_us="* ]]
	note "stream ping-pong 64 B: $(grep -o 'p50_us=.*' <<<"$output")"
}
