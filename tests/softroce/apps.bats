#!/usr/bin/env bats
# The main job on real verbs: unmodified redis-server, redis-benchmark,
# redis-cli, memcached, libmemcached-tools and sockperf under
# LD_PRELOAD=libxsock.so, in topology one (and, with server and client on
# different guests, in topology two in make check-long). Replies are checked, not counted; every test reads
# XSOCK_STATS to show the connections were RDMA (a silent fallback fails
# it), and prints its figures as TAP comments (emulation figures).

load tier

bats_require_minimum_version 1.5.0

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	export BATS_TEST_TIMEOUT=420
}

LIB=build/libxsock.so
PY=tests/tools
# seconds of each idle CPU measurement (ticks of 1/100 s: 20 s keeps the
# run-to-run noise of the emulated guests well under the 1 % bound)
IDLE_S=20

# redis_up NAME [ARGS...] - redis-server under xsock on the server side,
# its log in NAME.log, counters in NAME.stats, data in NAME.d/.
redis_up()
{
	local name=$1
	shift
	mkdir -p "$XS_RUN_DIR/$name.d"
	rm -f "$XS_RUN_DIR/$name.stats" "$XS_RUN_DIR/$name.log"
	remote_bg "$name" env LD_PRELOAD="$PWD/$LIB" XSOCK_LOG="info:$XS_RUN_DIR/$name.log" \
		XSOCK_STATS="$XS_RUN_DIR/$name.stats" redis-server --bind "$XS_ADDR_A" \
		--port "$port" --save '' --appendonly no --protected-mode no \
		--dir "$XS_RUN_DIR/$name.d" "$@"
	server_ready "$name" rdma
}

# down NAME [SIGNAL] - stop server NAME (SIGTERM, or SIGNAL for a program
# that exits through exit() only on that one), so its counters are written.
down()
{
	"$XS_REMOTE" --kill "$1" --signal "${2:-TERM}" >/dev/null || true
}

# rcli NAME ARGS... - redis-cli under xsock (counters in NAME.stats).
rcli()
{
	local name=$1
	shift
	timeout 60 env $(xsenv "$name") redis-cli -h "$XS_ADDR_A" -p "$port" "$@"
}

# bench_rows FILE - "NAME RPS" per CSV row of redis-benchmark; fails on a
# row without a rate.
bench_rows()
{
	awk -F'","' 'NR > 1 { n = substr($1, 2); r = $2 + 0
		if (r <= 0) { print "no req/s: " $0 > "/dev/stderr"; bad = 1 }
		printf "%s %d\n", n, r } END { exit bad }' "$1"
}

# bench_csv NAME CMD... - CMD, a redis-benchmark --csv, under xsock
# (counters in NAME.stats): its output printed, a failed status fails,
# its CSV kept in NAME.csv and its "NAME RPS" rows in $rows. One still
# running after 200 s has its stacks and sockets dumped (run_or_dump),
# within the test's own timeout.
bench_csv()
{
	local name=$1
	shift
	run_or_dump 200 --dump redis-benchmark --dump "redis-server $XS_ADDR_A" \
		env $(xsenv "$name") "$@"
	echo "$name: status $status"
	echo "$output"
	((status == 0))
	echo "$output" >"$XS_RUN_DIR/$name.csv"
	rows=$(bench_rows "$XS_RUN_DIR/$name.csv")
}

@test "apps: redis-benchmark SET/GET/INCR/LPUSH/LRANGE_100/MSET at -c 50, -c 1, -P 16, --threads 4, 3 B and 100 KiB values" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	redis_up redis
	local n c1
	n=$(sized 1000 2000) c1=$(sized 200 400)
	local variants=("-c 50 -n $n" "-c 1 -n $c1" "-c 50 -n $((n * 4)) -P 16"
		"-c 50 -n $n --threads 4" "-c 20 -n $n -d 3" "-c 10 -n $((n / 4)) -d 102400")
	local v nv=0 expected='SET
GET
INCR
LPUSH
LPUSH (needed to benchmark LRANGE)
LRANGE_100 (first 100 elements)
MSET (10 keys)' conns=0
	for v in "${variants[@]}"; do
		nv=$((nv + 1))
		local tests=set,get,incr,lpush,lrange_100,mset
		[[ $v != *102400* ]] || tests=set,get
		local rows
		echo "redis-benchmark $v"
		# shellcheck disable=SC2086 # $v is the variant's words
		bench_csv "bench$nv" redis-benchmark -h "$XS_ADDR_A" -p "$port" \
			-t "$tests" $v --csv
		if [[ $tests == set,get ]]; then
			[[ $(awk '{print $1}' <<<"$rows") == $'SET\nGET' ]]
		else
			[[ $(sed 's/ [0-9]*$//' <<<"$rows") == "$expected" ]]
		fi
		cat "$XS_RUN_DIR/bench$nv.stats"
		local c=${v#-c }
		c=${c%% *}
		[[ $(stat "bench$nv" tcp) == 0 && $(stat "bench$nv" connects) -ge $c ]]
		conns=$((conns + $(stat "bench$nv" connects)))
		note "redis-benchmark $v:" $(awk '{ printf "%s %s, ", $1, $NF }' <<<"$rows" |
			sed 's/LPUSH (needed to benchmark LRANGE)/(LPUSH for LRANGE)/; s/ (first 100 elements)//; s/ (10 keys)//') "req/s"
	done
	# the values are checked: 200 keys of 1 B to 100 KiB written, then
	# read back by GET, MGET and STRLEN on another connection
	run --separate-stderr timeout 300 env $(xsenv chk) python3 "$PY/app_redis_check.py" \
		--host "$XS_ADDR_A" --port "$port" --keys 200 --max-size 102400
	echo "$output $stderr"
	((status == 0))
	local sum=$output
	[[ $sum == "keys=200 bytes="*" sha256="* ]]
	run --separate-stderr timeout 300 env $(xsenv chk2) python3 "$PY/app_redis_check.py" \
		--host "$XS_ADDR_A" --port "$port" --keys 200 --max-size 102400 --verify-only
	[[ $status == 0 && $output == "$sum" ]]
	[[ $(stat chk tcp) == 0 && $(stat chk rdma) -ge 1 && $(stat chk2 tcp) == 0 ]]
	down redis
	cat "$XS_RUN_DIR/redis.stats"
	[[ $(stat redis tcp) == 0 && $(stat redis accepts) -ge $((conns + 2)) ]]
	note "redis: $(stat redis accepts) connections accepted, all RDMA; 200 values of 1 B..100 KiB read back intact ($sum)"
}

@test "apps: redis-server in protected mode denies a remote redis-cli under xsock with the words kernel TCP gives it" {
	redis_up redisprot --protected-mode yes
	local kernel round
	kernel=$(timeout 30 redis-cli -h "$XS_ADDR_A" -p "$port" ping 2>&1) || true
	echo "kernel TCP: $kernel"
	[[ "$kernel" == *"DENIED Redis is running in protected mode"* ]]
	# redis writes the line on a non-blocking socket and closes it at
	# once, whatever the write answered
	for round in 1 2 3; do
		run rcli "protcli$round" ping
		echo "xsock $round: $output"
		[[ "$output" == "$kernel" ]]
	done
	down redisprot
	cat "$XS_RUN_DIR/redisprot.stats"
	[[ $(stat redisprot rdma) == 3 && $(stat protcli3 rdma) == 1 ]]
}

@test "apps: one redis-server serves an xsock client and a kernel-TCP client at the same time" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	redis_up redismix
	local n=2000
	[[ "$XS_TOPOLOGY" != two ]] || n=800
	timeout 300 env $(xsenv mixx) redis-benchmark -h "$XS_ADDR_A" -p "$port" \
		-t set,get,lpush -n "$n" -c 10 -r 1000 --csv >"$XS_RUN_DIR/mixx.csv" 2>&1 &
	local bx=$!
	timeout 300 redis-benchmark -h "$XS_ADDR_A" -p "$port" \
		-t set,get,lpush -n "$n" -c 10 -r 1000 --csv >"$XS_RUN_DIR/mixk.csv" 2>&1 &
	local bk=$!
	# checked values written by each kind of client at the same time ...
	timeout 300 env $(xsenv mixcx) python3 "$PY/app_redis_check.py" --host "$XS_ADDR_A" \
		--port "$port" --keys 100 --prefix x --seed 3 --max-size 65536 >"$XS_RUN_DIR/mixcx.out" 2>&1 &
	local cx=$!
	timeout 300 python3 "$PY/app_redis_check.py" --host "$XS_ADDR_A" \
		--port "$port" --keys 100 --prefix k --seed 4 --max-size 65536 >"$XS_RUN_DIR/mixck.out" 2>&1 &
	local ck=$!
	local st=0
	wait "$bx" || st=1
	wait "$bk" || st=$((st + 2))
	wait "$cx" || st=$((st + 4))
	wait "$ck" || st=$((st + 8))
	cat "$XS_RUN_DIR"/mix{x,k}.csv "$XS_RUN_DIR"/mixc{x,k}.out
	((st == 0))
	bench_rows "$XS_RUN_DIR/mixx.csv" && bench_rows "$XS_RUN_DIR/mixk.csv"
	# ... and read back by the other kind
	run --separate-stderr timeout 300 python3 "$PY/app_redis_check.py" --host "$XS_ADDR_A" \
		--port "$port" --keys 100 --prefix x --seed 3 --max-size 65536 --verify-only
	[[ $status == 0 && $output == "$(<"$XS_RUN_DIR/mixcx.out")" ]]
	run --separate-stderr timeout 300 env $(xsenv mixvk) python3 "$PY/app_redis_check.py" \
		--host "$XS_ADDR_A" --port "$port" --keys 100 --prefix k --seed 4 --max-size 65536 --verify-only
	[[ $status == 0 && $output == "$(<"$XS_RUN_DIR/mixck.out")" ]]
	down redismix
	cat "$XS_RUN_DIR/redismix.stats"
	[[ $(stat mixx tcp) == 0 && $(stat mixx connects) -ge 10 ]]
	[[ $(stat mixcx tcp) == 0 && $(stat mixvk tcp) == 0 ]]
	# the plain clients' connections were served by the kernel listener
	[[ $(stat redismix peer-no-xsock) -ge 11 || $(stat redismix tcp) -ge 11 ]]
	[[ $(stat redismix accepts) -ge 12 ]]
	note "mixed clients: xsock" $(awk -F, 'NR > 1 { gsub(/"/, ""); printf "%s %s ", $1, $2 }' "$XS_RUN_DIR/mixx.csv") \
		"| kernel TCP" $(awk -F, 'NR > 1 { gsub(/"/, ""); printf "%s %s ", $1, $2 }' "$XS_RUN_DIR/mixk.csv") "req/s"
}

@test "apps: redis BGSAVE and BGREWRITEAOF fork under an RDMA load; every reply and 30 checked values intact" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	redis_up redisbg
	local i k v started=0 n
	# long enough a load for three BGSAVEs 2 s apart and a BGREWRITEAOF
	n=$(sized 3000 6000)
	[[ "$XS_TOPOLOGY" != two ]] || n=3000
	value() { head -c $(($1 * 3000)) /dev/zero | tr '\0' "$(printf "\\$(printf %o $((97 + $1 % 26)))")"; }
	# 30 checked values of 3,000 to 90,000 bytes (eager and rendezvous),
	# written over one connection
	for i in $(seq 30); do
		echo "set chk$i $(value "$i")"
	done >"$XS_RUN_DIR/bgset.cmds"
	[[ $(rcli chk <"$XS_RUN_DIR/bgset.cmds" | uniq -c | xargs) == "30 OK" ]]
	timeout 300 env $(xsenv bgbench) XSOCK_LOG="info:$XS_RUN_DIR/bgbench.log" redis-benchmark \
		-h "$XS_ADDR_A" -p "$port" -t set,get -n "$n" -c 10 -d 8192 -r 5000 --csv \
		>"$XS_RUN_DIR/bgbench.out" 2>&1 &
	local bench=$!
	# three BGSAVEs and a BGREWRITEAOF (each a fork) while the
	# benchmark's RDMA connections run
	for k in 1 2 3; do
		sleep 2
		v=$(rcli cli bgsave 2>&1) || echo "redis-cli bgsave: status $?"
		echo "bgsave: $v"
		case $v in
		"Background saving started") started=$((started + 1)) ;;
		*"already in progress"*) ;;
		*) false ;;
		esac
	done
	v=$(rcli cli bgrewriteaof 2>&1) || echo "redis-cli bgrewriteaof: status $?"
	echo "bgrewriteaof: $v"
	[[ $v == "Background append only file rewriting started" ||
		$v == "Background append only file rewriting scheduled" ]]
	local st=0
	wait "$bench" || st=$?
	cat "$XS_RUN_DIR/bgbench.out"
	if ((st != 0)); then
		tail -20 "$XS_RUN_DIR/bgbench.log" "$XS_RUN_DIR/redisbg.log"
		false
	fi
	[[ $(bench_rows "$XS_RUN_DIR/bgbench.out" | awk '{print $1}') == $'SET\nGET' ]]
	for k in $(seq 300); do
		rcli cli info persistence | grep -q 'rdb_bgsave_in_progress:0' && break
		sleep 0.2
	done
	for k in $(seq 300); do
		[[ $(rcli cli info persistence | tr -d '\r' |
			grep -cx 'aof_rewrite_in_progress:0\|aof_rewrite_scheduled:0') == 2 ]] && break
		sleep 0.2
	done
	rcli cli info persistence | tr -d '\r' |
		grep -E 'rdb_last_bgsave_status|rdb_saves|aof_last_bgrewrite_status|aof_rewrites'
	rcli cli info persistence | tr -d '\r' | grep -qx 'rdb_last_bgsave_status:ok'
	rcli cli info persistence | tr -d '\r' | grep -qx 'aof_last_bgrewrite_status:ok'
	((started >= 1))
	# read back over another connection, one reply line per value
	for i in $(seq 30); do
		echo "get chk$i"
	done | rcli chk >"$XS_RUN_DIR/bgget.out"
	[[ $(wc -l <"$XS_RUN_DIR/bgget.out") == 30 ]]
	for i in $(seq 30); do
		[[ $(sed -n "${i}p" "$XS_RUN_DIR/bgget.out") == "$(value "$i")" ]]
	done
	redis-check-rdb "$XS_RUN_DIR/redisbg.d/dump.rdb" >/dev/null
	down redisbg
	cat "$XS_RUN_DIR/redisbg.stats"
	[[ $(stat redisbg tcp) == 0 && $(stat bgbench tcp) == 0 && $(stat bgbench connects) -ge 10 ]]
	note "redis under load with $started BGSAVE forks and a BGREWRITEAOF over RDMA:" \
		$(awk -F, 'NR > 1 { gsub(/"/, ""); printf "%s %s ", $1, $2 }' "$XS_RUN_DIR/bgbench.out") \
		"req/s; 30 checked values intact; dump.rdb valid"
}

@test "apps: redis-server --daemonize yes under xsock serves RDMA; an xsock client forks and execs redis-cli mid-connection" {
	local pidfile="$XS_RUN_DIR/daemon$port.pid" pid out
	mkdir -p "$XS_RUN_DIR/daemon.d"
	rm -f "$XS_RUN_DIR/daemon.stats"
	"$XS_REMOTE" --timeout 60 env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/daemon.stats" \
		redis-server --bind "$XS_ADDR_A" --port "$port" --save '' --appendonly no \
		--protected-mode no --dir "$XS_RUN_DIR/daemon.d" --daemonize yes \
		--pidfile "$pidfile" --logfile "$XS_RUN_DIR/daemon.log"
	server_ready daemon rdma
	# redis-server writes its pidfile after it listens (createPidFile()
	# follows initServer())
	retry_for 10 test -s "$pidfile"
	pid=$(<"$pidfile")
	# a Python client holds an RDMA connection, dup()s it, forks+execs
	# redis-cli (its own RDMA connection), and goes on over the duplicate
	run --separate-stderr timeout 120 env $(xsenv forker) python3 - "$XS_ADDR_A" "$port" <<'EOF'
import os, socket, subprocess, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port))
def cmd(sock, *args):
    msg = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    sock.sendall(msg)
    return sock.recv(65536)
print(cmd(s, b"SET", b"forked", b"1"))
d = socket.socket(fileno=os.dup(s.fileno()))
s.close()
out = subprocess.run(["redis-cli", "-h", host, "-p", str(port), "INCR", "forked"],
                     capture_output=True, text=True, check=True).stdout.strip()
print("child:", out)
print(cmd(d, b"INCR", b"forked"))
os.dup2(d.fileno(), 900)
e = socket.socket(fileno=900)
print(cmd(e, b"GET", b"forked"))
EOF
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == "b'+OK\r\n'
child: 2
b':3\r\n'
b'\$1\r\n3\r\n'" ]]
	[[ $(rcli cli info server | tr -d '\r' | sed -n 's/^process_id://p') == "$pid" ]]
	rcli cli shutdown nosave || true
	"$XS_REMOTE" --timeout 30 bash -c "while kill -0 $pid 2>/dev/null; do sleep 0.1; done"
	cat "$XS_RUN_DIR/forker.stats" "$XS_RUN_DIR/daemon.stats"
	# python's connection and redis-cli's (after exec, xsock again) were
	# RDMA: two summaries in one file
	[[ $(grep -c '^xsock stats pid' "$XS_RUN_DIR/forker.stats") == 2 ]]
	[[ $(stat forker tcp | sort -u) == 0 && $(stat forker rdma | sort -u) == 1 ]]
	[[ $(stat daemon tcp) == 0 && $(stat daemon accepts) -ge 3 ]]
}

# idle_clients PORT PRELOAD - open 50 idle redis-benchmark connections to
# the redis-server on PORT (PRELOAD 1: the clients under xsock) and wait
# until it counts them; prints the benchmark's pid. (Killed, the benchmark
# writes no counters: the server's count them.)
idle_clients()
{
	local p=$1 cenv=() k clients=0
	[[ $2 == 1 ]] && cenv=(LD_PRELOAD="$PWD/build/libxsock.so")
	timeout 300 env "${cenv[@]}" redis-benchmark -h "$XS_ADDR_A" -p "$p" -c 50 -I \
		>/dev/null 2>&1 &
	echo $!
	for k in $(seq 100); do
		clients=$(redis-cli -h "$XS_ADDR_A" -p "$p" info clients | tr -d '\r' |
			sed -n 's/^connected_clients://p')
		((clients >= 51)) && break
		sleep 0.5
	done
	echo "port $p: $clients clients" >&2
	((clients >= 51))
}

# cpu_ticks PID - utime + stime of PID on the server side (1/CLK_TCK s)
cpu_ticks() { "$XS_REMOTE" awk '{ print $14 + $15 }' "/proc/$1/stat"; }

@test "apps: an idle redis-server with 50 open RDMA connections uses no more CPU than with kernel TCP" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	local kernel xsock hz kpid xpid kc xc k0 k1 x0 x1
	hz=$("$XS_REMOTE" getconf CLK_TCK)
	# Both servers idle side by side over the same seconds, so that the
	# emulated guests' drift from one minute to the next hits both alike.
	mkdir -p "$XS_RUN_DIR/plainidle.d"
	remote_bg plainidle redis-server --bind "$XS_ADDR_A" --port "$port" --save '' \
		--appendonly no --protected-mode no --dir "$XS_RUN_DIR/plainidle.d"
	server_ready plainidle tcp
	kc=$(idle_clients "$port" 0)
	kpid=$("$XS_REMOTE" pgrep -f "^redis-server $XS_ADDR_A:$port")
	port=$((port + 1))
	redis_up redisidle
	xc=$(idle_clients "$port" 1)
	xpid=$("$XS_REMOTE" pgrep -f "^redis-server $XS_ADDR_A:$port")
	sleep 2 # past the spin window of the last request
	k0=$(cpu_ticks "$kpid")
	x0=$(cpu_ticks "$xpid")
	sleep "$IDLE_S"
	k1=$(cpu_ticks "$kpid")
	x1=$(cpu_ticks "$xpid")
	kernel=$((k1 - k0))
	xsock=$((x1 - x0))
	kill "$kc" "$xc" 2>/dev/null || true
	wait "$kc" "$xc" || true
	down plainidle
	down redisidle
	cat "$XS_RUN_DIR/redisidle.stats"
	# the 50 idle clients were RDMA (the plain redis-cli that counted them not)
	[[ $(stat redisidle rdma) -ge 50 && $(stat redisidle accepts) -ge 50 ]]
	local pk px
	pk=$(awk -v t="$kernel" -v hz="$hz" -v s="$IDLE_S" 'BEGIN { printf "%.1f", t * 100 / hz / s }')
	px=$(awk -v t="$xsock" -v hz="$hz" -v s="$IDLE_S" 'BEGIN { printf "%.1f", t * 100 / hz / s }')
	note "idle redis-server, 50 connections open, CPU over the same $IDLE_S s: kernel TCP $pk %, xsock over RDMA $px %" \
		"(redis' own 10 Hz serverCron under emulation; no spinning)"
	echo "CPU ticks over $IDLE_S s (CLK_TCK $hz): kernel TCP $kernel, xsock $xsock"
	# at most 1 % of a CPU above kernel TCP's figure
	((xsock <= kernel + hz * IDLE_S / 100))
}

@test "apps: memcached under xsock passes every memccapable check that kernel TCP passes; memcslap, memcaslap (verified) and memcstat over RDMA" {
	command -v memcached >/dev/null && command -v memccapable >/dev/null ||
		skip "memcached or libmemcached-tools not installed"
	rm -f "$XS_RUN_DIR/memcached.stats"
	# -u root: a server that drops to nobody cannot write its counters
	remote_bg memcached env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/memcached.stats" \
		memcached -u root -l "$XS_ADDR_A" -p "$port" -U 0 -t 2 -m 128
	server_ready memcached rdma
	local kernel rdma
	run --separate-stderr timeout 300 memccapable -h "$XS_ADDR_A" -p "$port" -t 20
	kernel=$output
	echo "kernel TCP: status $status, stderr: $stderr"
	echo "$kernel" | tail -3
	run --separate-stderr timeout 300 env $(xsenv cap) memccapable -h "$XS_ADDR_A" -p "$port" -t 20
	rdma=$output
	echo "RDMA: status $status, stderr: $stderr"
	echo "$rdma"
	diff <(echo "$kernel") <(echo "$rdma") || true
	((status == 0))
	[[ "$rdma" == "$kernel" ]]
	(($(grep -c '\[pass\]' <<<"$rdma") >= 50))
	[[ $(stat cap tcp) == 0 && $(stat cap connects) -ge 1 ]]
	# load: memcslap sets, then gets; memcaslap mixed with verification
	local t
	for t in set get; do
		run --separate-stderr timeout 300 env $(xsenv "slap$t") memcslap \
			--servers="$XS_ADDR_A:$port" --test="$t" --concurrency=4 --execute-number=500
		echo "$output $stderr"
		((status == 0))
		! grep -i 'error\|fail' <<<"$output $stderr"
		grep -q "Time to $t *2000 keys by *4 threads" <<<"$output"
		[[ $(stat "slap$t" tcp) == 0 && $(stat "slap$t" connects) -ge 4 ]]
	done
	run --separate-stderr timeout 300 env $(xsenv aslap) memcaslap -s "$XS_ADDR_A:$port" \
		-T 2 -c 10 -x 2000 -X 512 -v 0.2
	echo "$output $stderr"
	((status == 0))
	local aslap=$output f
	grep -q '^Run time: .* Ops: 2000 ' <<<"$aslap"
	for f in get_misses verify_misses verify_failed; do
		[[ $(sed -n "s/^$f: //p" <<<"$aslap") == 0 ]]
	done
	[[ $(stat aslap tcp) == 0 && $(stat aslap connects) -ge 10 ]]
	run --separate-stderr timeout 60 env $(xsenv mstat) memcstat --servers="$XS_ADDR_A:$port"
	echo "$output"
	((status == 0))
	[[ "$output" == *"Server: $XS_ADDR_A ($port)"* && "$output" == *"curr_connections:"* ]]
	[[ $(stat mstat tcp) == 0 ]]
	down memcached
	cat "$XS_RUN_DIR/memcached.stats"
	note "memccapable over RDMA: $(grep -c '\[pass\]' <<<"$rdma") checks pass, the same as over kernel TCP;" \
		"memcaslap: $(grep -o '^Run time: .*' <<<"$aslap")"
}

@test "apps: sockperf ping-pong and throughput under xsock, no message lost, duplicated or reordered" {
	command -v sockperf >/dev/null || skip "sockperf not installed"
	rm -f "$XS_RUN_DIR/sperf.stats"
	remote_bg sperf env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/sperf.stats" \
		sockperf sr --tcp -i "$XS_ADDR_A" -p "$port"
	server_ready sperf rdma
	local size pp="" tp
	for size in 64 16384; do
		run --separate-stderr timeout 60 env $(xsenv "pp$size") sockperf pp --tcp -i "$XS_ADDR_A" \
			-p "$port" -t 3 -m "$size"
		echo "$output $stderr"
		((status == 0))
		grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' <<<"$output"
		[[ $(stat "pp$size" tcp) == 0 && $(stat "pp$size" rdma) == 1 ]]
		pp+="$size B: $(grep -o 'avg-latency=[0-9.]*' <<<"$output")"
		pp+=" p99 $(awk '/percentile 99.000/ { print $NF }' <<<"$output") us; "
	done
	run --separate-stderr timeout 60 env $(xsenv tp) sockperf tp --tcp -i "$XS_ADDR_A" \
		-p "$port" -t 3 -m 16384
	echo "$output $stderr"
	((status == 0))
	tp=$(grep -o 'BandWidth is [0-9.]* MBps' <<<"$output")
	[[ -n $tp ]]
	[[ $(stat tp tcp) == 0 && $(stat tp rdma) == 1 ]]
	down sperf INT
	cat "$XS_RUN_DIR/sperf.stats"
	[[ $(stat sperf tcp) == 0 && $(stat sperf accepts) == 3 ]]
	# every byte the clients sent reached the server's application
	[[ $(stat sperf received) == $(($(stat pp64 sent) + $(stat pp16384 sent) + $(stat tp sent))) ]]
	note "sockperf over RDMA (emulation): ping-pong $pp throughput 16 KiB: $tp"
}

@test "apps: wrk against node http under xsock: no connect errors, every connection over RDMA" {
	command -v node >/dev/null && command -v wrk >/dev/null ||
		{ echo "node or wrk not installed (tests/install-deps)"; false; }
	# wrk's event loop has room for fds below 10 + 3 x connections (ae's
	# setsize, 70 here): a socket numbered past that counts as a connect
	# error. The library's own fds (CM and completion channels, eventfds)
	# live above RLIMIT_NOFILE / 2, out of the application's way.
	local js="process.on('SIGTERM', () => process.exit(0));
		require('http').createServer((q, r) => r.end('hello\n')).listen($port, '$XS_ADDR_A');"
	rm -f "$XS_RUN_DIR/node.stats"
	remote_bg node env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/node.stats" node -e "$js"
	server_ready node rdma
	run --separate-stderr timeout 60 env $(xsenv wrk) wrk -t1 -c20 -d4s "http://$XS_ADDR_A:$port/"
	echo "$output"
	((status == 0))
	[[ "$output" == *"Requests/sec:"* ]]
	[[ "$output" != *"Socket errors"* && "$output" != *"Non-2xx"* ]]
	cat "$XS_RUN_DIR/wrk.stats"
	[[ $(stat wrk tcp) == 0 && $(stat wrk connects) -ge 20 ]]
	"$XS_REMOTE" --kill node --signal TERM || true
	"$XS_REMOTE" --timeout 30 bash -c "while pgrep -f '[n]ode -e' >/dev/null; do sleep 0.1; done"
	cat "$XS_RUN_DIR/node.stats"
	[[ $(stat node tcp) == 0 && $(stat node accepts) -ge 20 ]]
	note "wrk -t1 -c20 -d4s against node http over xsock: $(awk '/^Requests\/sec:/ { print $2 }' <<<"$output") req/s, no socket errors"
}

@test "apps: redis-benchmark -c 1000 on default knobs: every connection over RDMA, every value written read back" {
	command -v redis-benchmark >/dev/null || skip "redis-benchmark not installed"
	# 1,000 connections take about 2,000 fds on each side (the
	# application's, a completion channel), more while they connect (a
	# CM channel each, a connect worker's dup of the socket): both sides
	# raise their soft limit
	mkdir -p "$XS_RUN_DIR/redis1k.d"
	rm -f "$XS_RUN_DIR/redis1k.stats"
	remote_bg redis1k bash -c "ulimit -n 65536 && exec env LD_PRELOAD='$PWD/$LIB' \
		XSOCK_STATS='$XS_RUN_DIR/redis1k.stats' redis-server --bind '$XS_ADDR_A' \
		--port '$port' --save '' --appendonly no --protected-mode no \
		--maxclients 5000 --dir '$XS_RUN_DIR/redis1k.d'"
	server_ready redis1k rdma
	local n value
	n=$(sized 10000 50000)
	# redis-benchmark's value bytes: its generator (genBenchmarkRandomData,
	# seeded 1234), the same for every key
	value=$(python3 -c 's = 1234; v = ""
for _ in range(16):
	s = (s * 1103515245 + 12345) & 0xffffffff
	v += chr(ord("0") + ((s >> 16) & 63))
print(v)')
	# the burst of 1,000 non-blocking connects runs on the library's
	# connect workers: none may time out into kernel TCP
	local rows
	bench_csv bench1k bash -c "ulimit -n 65536 && exec redis-benchmark \
		-h '$XS_ADDR_A' -p '$port' -c 1000 -n $n -t set,get -d 16 \
		-r 100000 --csv"
	[[ $(awk '{print $1}' <<<"$rows") == $'SET\nGET' ]]
	cat "$XS_RUN_DIR/bench1k.stats"
	[[ $(stat bench1k tcp) == 0 && $(stat bench1k timeout) == 0 ]]
	[[ $(stat bench1k connects) -ge 1000 && $(stat bench1k rdma) -ge 1000 ]]
	# every key the 1,000 connections SET holds the 16 bytes written
	local keys bad
	keys=$(rcli keys1k DBSIZE)
	bad=$(rcli bad1k EVAL "local bad = 0
		for _, k in ipairs(redis.call('KEYS', 'key:*')) do
			if redis.call('GET', k) ~= ARGV[1] then bad = bad + 1 end
		end
		return bad" 0 "$value")
	echo "keys $keys, values not as written $bad"
	((keys > 1000 && bad == 0))
	down redis1k
	cat "$XS_RUN_DIR/redis1k.stats"
	[[ $(stat redis1k tcp) == 0 && $(stat redis1k accepts) -ge 1000 ]]
	note "redis-benchmark -c 1000 -n $n SET/GET, 16 B values:" \
		$(awk '{ printf "%s %s, ", $1, $NF }' <<<"$rows") "req/s;" \
		"$(stat bench1k rdma) client connections over RDMA, none on kernel TCP; $keys keys read back intact"
}
