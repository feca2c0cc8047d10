#!/usr/bin/env bats
# The soak (issue 8; not in make check: `make soak` runs it in topology two):
# redis-server under xsock on the server side, a soak client that checks
# every reply (tests/tools/redis_soak.py: 8 connections of SET, GET, MGET,
# DEL, INCR and APPEND on 1 B..256 KiB values, BGSAVE every 30 s) and a
# redis-benchmark load beside it, both under xsock, for
# XSOCK_SOAK_SECONDS (default 300). The counters must show RDMA only; the
# dump left by the last BGSAVE must pass redis-check-rdb.

load tier

bats_require_minimum_version 1.5.0

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	# the soak, its final read-back, the benchmark's last round, teardown
	export BATS_TEST_TIMEOUT=$((${XSOCK_SOAK_SECONDS:-300} + 300))
}

LIB=build/libxsock.so
PY=tests/tools
CONNS=8

# bench_loop NAME STOPFILE - redis-benchmark rounds under xsock until
# STOPFILE exists; one "status N" line per round in NAME.rounds (counters
# of every round appended to NAME.stats).
bench_loop()
{
	local name=$1 stop=$2 st
	: >"$XS_RUN_DIR/$name.rounds"
	rm -f "$XS_RUN_DIR/$name.stats"
	while [[ ! -e $stop ]]; do
		st=0
		timeout 300 env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/$name.stats" \
			redis-benchmark -h "$XS_ADDR_A" -p "$port" -c 4 -n 1000 -r 10000 \
			-d 512 -t set,get,incr,lpush,mset --csv >>"$XS_RUN_DIR/$name.csv" 2>&1 || st=$?
		echo "status $st" >>"$XS_RUN_DIR/$name.rounds"
	done
}

@test "soak: redis over RDMA for XSOCK_SOAK_SECONDS, 8 checked connections, BGSAVE every 30 s, redis-benchmark beside" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	local secs=${XSOCK_SOAK_SECONDS:-300} name=soakredis st=0 pid end
	mkdir -p "$XS_RUN_DIR/$name.d"
	rm -f "$XS_RUN_DIR/$name.d/dump.rdb" "$XS_RUN_DIR/$name.stats" "$XS_RUN_DIR/$name.log" \
		"$XS_RUN_DIR/soakbench.csv" "$XS_RUN_DIR/soak.stop"
	remote_bg "$name" env LD_PRELOAD="$PWD/$LIB" XSOCK_LOG="info:$XS_RUN_DIR/$name.log" \
		XSOCK_STATS="$XS_RUN_DIR/$name.stats" redis-server --bind "$XS_ADDR_A" \
		--port "$port" --save '' --appendonly no --protected-mode no \
		--dir "$XS_RUN_DIR/$name.d"
	server_ready "$name" rdma

	bench_loop soakbench "$XS_RUN_DIR/soak.stop" &
	local bench=$!
	locals+=("$bench")
	env $(xsenv soak) XSOCK_LOG="info:$XS_RUN_DIR/soak.log" python3 "$PY/redis_soak.py" \
		--host "$XS_ADDR_A" --port "$port" --seconds "$secs" --conns "$CONNS" \
		>"$XS_RUN_DIR/soak.out" 2>"$XS_RUN_DIR/soak.err" &
	pid=$!
	locals+=("$pid")
	# a hang that the client's own 60 s reply timeout does not catch:
	# stacks into the TAP stream, then killed
	end=$((SECONDS + secs + 180))
	while ((SECONDS < end)) && kill -0 "$pid" 2>/dev/null; do
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "soak client still running after $((secs + 180)) s"
		dump_stacks "redis_soak.py"
		kill -KILL "$pid"
	fi
	wait "$pid" || st=$?
	touch "$XS_RUN_DIR/soak.stop"
	wait "$bench" || true
	echo "soak client: status $st"
	cat "$XS_RUN_DIR/soak.out" "$XS_RUN_DIR/soak.err"
	if ((st != 0)); then
		tail -20 "$XS_RUN_DIR/soak.log" "$XS_RUN_DIR/$name.log" \
			"$XS_RUN_DIR/remote/$name.log"
		false
	fi
	local sum
	sum=$(<"$XS_RUN_DIR/soak.out")
	[[ $sum == "soak: seconds="*" errors=0" ]]

	# every benchmark round ran to its end over RDMA
	sort "$XS_RUN_DIR/soakbench.rounds" | uniq -c
	local rounds
	rounds=$(grep -c . "$XS_RUN_DIR/soakbench.rounds")
	((rounds >= 1))
	[[ $(sort -u "$XS_RUN_DIR/soakbench.rounds") == "status 0" ]]
	[[ $(stat soakbench tcp | sort -u) == 0 ]]
	[[ $(stat soakbench connects | sort -un | head -1) -ge 4 ]]

	# the dump the last BGSAVE left (none in a run shorter than one period)
	local saves=${sum##*bgsaves=}
	saves=${saves%% *}
	if ((saves > 0)); then
		run redis-check-rdb "$XS_RUN_DIR/$name.d/dump.rdb"
		echo "$output" | tail -3
		((status == 0))
	fi
	# SIGTERM: redis exits through exit(), so its counters are written
	"$XS_REMOTE" --kill "$name" --signal TERM >/dev/null || true
	cat "$XS_RUN_DIR/soak.stats" "$XS_RUN_DIR/$name.stats"
	[[ $(stat soak tcp) == 0 && $(stat soak connects) -ge $((CONNS + 1)) ]]
	[[ $(stat "$name" tcp) == 0 && $(stat "$name" accepts) -ge $((CONNS + 1)) ]]
	note "redis soak over RDMA, $CONNS checked connections and $rounds redis-benchmark rounds beside: $sum; dump.rdb valid"
}
