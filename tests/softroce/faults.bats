#!/usr/bin/env bats
# Faults on real verbs: a peer killed with SIGKILL in the middle of a busy
# stream, each side in turn. The survivor (under xsock, driven by epoll)
# must learn it - ECONNRESET, EPIPE or EOF - within a bound, never hang.
# The bound: 10 s from the last byte that moved. A dead process's QP and
# cm_id are destroyed by the kernel, which disconnects the connection at
# once; 10 s leaves room for emulation's scheduling.

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
