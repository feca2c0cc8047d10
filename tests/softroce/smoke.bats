#!/usr/bin/env bats
# Smoke tests of the Soft-RoCE fabric itself: if these fail, nothing that
# runs on top of it (xsock's RDMA tests) can pass.  Run them through the
# runner, in either topology:
#
#   tests/softroce/run --topology one -- bats --tap tests/softroce/smoke.bats
#
# The "server" side of each tool runs through xs-remote: on guest A in
# topology two, in the same guest (device XS_DEV_A) in topology one.  The
# client starts once the server's listener shows up (rdma res / ss), and is
# retried within a deadline all the same; servers are stopped in teardown.
# Figures are printed as TAP comments ("# ...").

# Topology two runs all of it too: the fabric across a wire.
# bats file_tags=two

load tier

@test "fabric: both Soft-RoCE ports are ACTIVE" {
	run ibv_devinfo -d "$XS_DEV_B"
	((status == 0))
	[[ "$output" == *"PORT_ACTIVE"* ]]
	run "$XS_REMOTE" ibv_devinfo -d "$XS_DEV_A"
	((status == 0))
	[[ "$output" == *"PORT_ACTIVE"* ]]
	note "topology $XS_TOPOLOGY: server $XS_DEV_A $XS_ADDR_A, client $XS_DEV_B $XS_ADDR_B"
}

@test "rping: 10 verified RDMA pings between the two addresses" {
	local before after n
	before=$(rx_packets)
	remote_bg rping rping -s -a "$XS_ADDR_A" -p "$port" -C 10 -v -V
	server_ready rping rdma
	retry_for 30 timeout 30 rping -c -a "$XS_ADDR_A" -p "$port" -C 10 -v -V
	echo "$output"
	((status == 0))
	# -V verifies every payload; -v prints it: ten distinct, in order.
	n=$(grep -c '^ping data: rdma-ping-[0-9]*: ' <<<"$output")
	((n == 10))
	[[ "$output" == *"rdma-ping-9: JKLMNOPQRSTUVWXYZ"* ]]
	# The server saw the same ten and exited cleanly.
	run "$XS_REMOTE" --wait rping --timeout 20
	((status == 0))
	servers=()
	n=$(grep -c '^server ping data: rdma-ping-' "$XS_RUN_DIR/remote/rping.log")
	((n == 10))
	after=$(rx_packets)
	if [[ "$XS_TOPOLOGY" != host ]]; then
		# The traffic crossed the link between the two devices.
		((after > before))
	fi
	note "rping: 10/10 pings verified, $((after - before)) packets received on the client link"
}

@test "ibv_rc_pingpong: RC send/recv between the two devices (RoCE v2 GIDs)" {
	local gid_a gid_b line mbit
	gid_b=$(gid_index "$XS_DEV_B" "$XS_ADDR_B")
	gid_a=$("$XS_REMOTE" bash -c "$(declare -f gid_index); gid_index $XS_DEV_A $XS_ADDR_A")
	[[ "$gid_a" =~ ^[0-9]+$ && "$gid_b" =~ ^[0-9]+$ ]]
	remote_bg pingpong ibv_rc_pingpong -d "$XS_DEV_A" -g "$gid_a" -p "$port" -n "$iters"
	server_ready pingpong tcp
	retry_for 30 timeout 60 ibv_rc_pingpong -d "$XS_DEV_B" -g "$gid_b" \
		-p "$port" -n "$iters" "$XS_ADDR_A"
	echo "$output"
	((status == 0))
	# 4096-byte messages, $iters iterations each way.
	line=$(grep -E "^$((4096 * 2 * iters)) bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec\$" <<<"$output")
	grep -qE "^$iters iters in [0-9.]+ seconds = [0-9.]+ usec/iter\$" <<<"$output"
	mbit=$(awk '{ print $(NF - 1) }' <<<"$line")
	awk -v m="$mbit" 'BEGIN { exit !(m > 0) }'
	[[ "$output" == *"GID ::ffff:$XS_ADDR_A"* ]]
	run "$XS_REMOTE" --wait pingpong --timeout 20
	((status == 0))
	servers=()
	note "ibv_rc_pingpong: 4096 B x $iters: $mbit Mbit/s (gid $gid_b -> $gid_a)"
}

@test "ib_send_lat -R: 64 B send latency over rdma_cm" {
	local row typical tmin try
	# perftest's server takes one client: a client attempt that fails
	# after connecting leaves it busy, so each attempt gets a fresh server
	# (and a fresh port); the failed attempt's server log is shown.
	for try in 1 2 3; do
		remote_bg send_lat ib_send_lat -R -d "$XS_DEV_A" -s 64 \
			-n "$iters" -p "$port"
		server_ready send_lat rdma
		run timeout 60 ib_send_lat -R -d "$XS_DEV_B" -s 64 -n "$iters" \
			-p "$port" "$XS_ADDR_A"
		((status != 0)) || break
		echo "attempt $try: status $status: $output" >&2
		"$XS_REMOTE" --kill send_lat --signal KILL >/dev/null 2>&1 || true
		sed 's/^/server: /' "$XS_RUN_DIR/remote/send_lat.log" >&2
		port=$((port + 1))
	done
	echo "$output"
	((status == 0))
	# #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
	row=$(awk -v n="$iters" '$1 == 64 && $2 == n && NF >= 9' <<<"$output")
	[[ -n "$row" ]]
	read -r _ _ tmin _ typical _ <<<"$row"
	awk -v t="$typical" -v m="$tmin" 'BEGIN { exit !(t > 0 && m > 0 && t >= m) }'
	run "$XS_REMOTE" --wait send_lat --timeout 20
	((status == 0))
	servers=()
	note "ib_send_lat -R 64 B x $iters: typical $typical us, min $tmin us"
}
