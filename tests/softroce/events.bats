#!/usr/bin/env bats
# Readiness over RDMA sockets: epoll, poll and select emulated over a mix of
# xsock and kernel fds, driven by unmodified programs - Python's selectors
# and redis (ae on epoll) with redis-benchmark and redis-cli. Counters from
# XSOCK_STATS show the connections were RDMA. Topology one (and two in
# make check-long).

load tier

bats_require_minimum_version 1.5.0

XSNET=build/tools/xsnet
LIB=build/libxsock.so

@test "events: python selectors (epoll, poll, select) drive RDMA sockets" {
	remote_bg "srv$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" "$XSNET" serve "$XS_ADDR_A" "$port"
	server_ready "srv$BATS_TEST_NUMBER" rdma
	local kind
	for kind in epoll poll select; do
		run --separate-stderr timeout 120 env $(xsenv "$kind") \
			python3 tests/tools/selecho.py "$kind" "$XS_ADDR_A" "$port" 10 16
		echo "$output"
		((status == 0))
		[[ "$output" == "$kind: 10 connections x 16 rounds, "*", mismatches 0" ]]
		[[ $(stat "$kind" connects) == 10 && $(stat "$kind" tcp) == 0 ]]
	done
}

@test "events: a thread in epoll_wait() on kernel fds while another adds an RDMA socket (apache's event MPM) gets that socket's event, never the library's own" {
	# The set's first xsock member brings the library's inner set into
	# the application's epoll set, under a waiter already in the
	# kernel's epoll_wait(): its event (data EP_NEST_MAGIC) reached the
	# program, which took it for a pointer of its own (apache's
	# listener thread segfaulted; Python reported fd 1800295252)
	remote_bg "er$BATS_TEST_NUMBER" env $(xsenv ers) python3 tests/tools/epollrace.py serve "$XS_ADDR_A" "$port" 5
	server_ready "er$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 120 env $(xsenv er) python3 tests/tools/epollrace.py wait "$XS_ADDR_A" "$port" 5
	echo "$output $stderr"
	((status == 0))
	[[ "$output" == "$(printf 'round %d: ok\n' 0 1 2 3 4 | head -c -1)" ]]
	[[ $(stat er rdma) == 5 && $(stat er tcp) == 0 ]]
}

@test "events: redis-server and redis-benchmark under xsock, every reply over RDMA" {
	command -v redis-server >/dev/null || skip "redis-server not installed"
	# counters of this server alone (apps.bats' servers use the name too)
	rm -f "$XS_RUN_DIR/redis.stats"
	remote_bg "redis$BATS_TEST_NUMBER" env LD_PRELOAD="$PWD/$LIB" \
		XSOCK_STATS="$XS_RUN_DIR/redis.stats" redis-server --bind "$XS_ADDR_A" \
		--port "$port" --save '' --appendonly no --protected-mode no --dir "$XS_RUN_DIR"
	server_ready "redis$BATS_TEST_NUMBER" rdma
	run --separate-stderr timeout 200 env $(xsenv bench) redis-benchmark -h "$XS_ADDR_A" \
		-p "$port" -t set,get,incr,lpush -n 4000 -c 20 -q --csv
	echo "$output"
	((status == 0))
	local bench=$output
	[[ $(grep -c '^"\(SET\|GET\|INCR\|LPUSH\)"' <<<"$output") == 4 ]]
	[[ $(stat bench tcp) == 0 && $(stat bench connects) -ge 20 ]]
	# values are checked, not just counted: 3 B to 100 KiB through redis-cli
	local size value got
	for size in 3 4096 4097 100000; do
		value=$(head -c $((size * 3 / 4 + 3)) /dev/urandom | base64 -w0 | head -c "$size")
		run --separate-stderr timeout 60 env $(xsenv cli) redis-cli -h "$XS_ADDR_A" -p "$port" set "k$size" "$value"
		[[ "$output" == OK ]]
		got=$(timeout 60 env $(xsenv cli) redis-cli -h "$XS_ADDR_A" -p "$port" get "k$size")
		[[ "$got" == "$value" ]]
		[[ $(stat cli connects) == 1 ]]
	done
	"$XS_REMOTE" --kill "redis$BATS_TEST_NUMBER" >/dev/null
	"$XS_REMOTE" --wait "redis$BATS_TEST_NUMBER" --timeout 30 || true
	cat "$XS_RUN_DIR/redis.stats"
	[[ $(stat redis accepts) -ge 28 && $(stat redis tcp) == 0 ]]
	note "redis-benchmark -c 20 over RDMA (emulation, requests/s):" \
		$(awk -F, 'NR > 1 { gsub(/"/, ""); printf "%s %s ", $1, $2 }' <<<"$bench")
}
