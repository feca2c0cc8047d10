#!/usr/bin/env bats
# tests/bats/redis.bats - redis-server, redis-cli and redis-benchmark run
# unmodified without and with the library, on either side or both.
#
# Each differential test walks APP_COMBOS (server:client = plain:plain,
# xsock:xsock, xsock:plain, plain:xsock) against a fresh server and checks
# exact replies; the library must change nothing an application can see.
# Also: redis-benchmark, --daemonize yes and BGSAVE (fork) under the library.

load helpers
load ../tools/app_helpers

setup() {
	require_cmd redis-server redis-cli
	app_setup
	T=$BATS_TEST_TMPDIR
	REDIS_N=0
}

teardown() {
	app_teardown
}

# redis_start SIDE PORT [ARGS...]: start redis-server on SIDE, data in
# $T/data-PORT; REDIS_PID is its pid, REDIS_LOG its log.
redis_start() {
	local side=$1 port=$2
	shift 2
	mkdir -p "$T/data-$port"
	REDIS_LOG=$T/redis-$port.$((++REDIS_N)).log
	app_spawn "$side" "$REDIS_LOG" redis-server \
		--port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --dir "$T/data-$port" "$@"
	REDIS_PID=$APP_PID
	wait_port 127.0.0.1 "$port" || {
		cat "$REDIS_LOG" >&2
		return 1
	}
	app_check_side "$REDIS_PID" "$side"
}

# redis_stop PORT: SHUTDOWN NOSAVE through a plain client, wait for exit 0.
redis_stop() {
	env -u LD_PRELOAD redis-cli -p "$1" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	app_stop "$REDIS_PID" none 10
	[[ $APP_RC == 0 ]] || {
		echo "redis-server exited with status $APP_RC" >&2
		return 1
	}
}

# The replies redis-cli prints (not a tty) for the commands below.
BASIC_CMDS=(
	'SET greeting "hello world"'
	'GET greeting'
	'GET missing'
	'SET n 41'
	'INCR n'
	'INCRBY n 100'
	'INCR greeting'
	'LPUSH l a b c'
	'RPUSH l z'
	'LRANGE l 0 -1'
	'LRANGE l 1 2'
	'MSET k1 v1 k2 v2 k3 v3'
	'MGET k1 k2 nokey k3'
	'DEL k1 k2 nokey'
	'EXISTS k1 k2 k3'
	'DBSIZE'
)
BASIC_EXPECTED='OK
hello world

OK
42
142
ERR value is not an integer or out of range

3
4
c
b
a
z
b
a
OK
v1
v2

v3
2
1
4'

@test "redis: SET/GET/INCR/LPUSH/LRANGE/MSET/MGET/DEL give exact replies, all four preload combinations" {
	local combo srv cli port out
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		redis_start "$srv" "$port"
		out=$(printf '%s\n' "${BASIC_CMDS[@]}" |
			app_run "$cli" redis-cli -p "$port")
		app_expect_eq "$combo one session" "$BASIC_EXPECTED" "$out"
		# One connection per command, too.
		out=$(app_run "$cli" redis-cli -p "$port" GET greeting)
		app_expect_eq "$combo GET" "hello world" "$out"
		out=$(app_run "$cli" redis-cli -p "$port" INCR n)
		app_expect_eq "$combo INCR" "143" "$out"
		out=$(app_run "$cli" redis-cli -p "$port" LRANGE l -2 -1)
		app_expect_eq "$combo LRANGE" $'a\nz' "$out"
		out=$(app_run "$cli" redis-cli -p "$port" DEL greeting n l k3)
		app_expect_eq "$combo DEL" "4" "$out"
		out=$(app_run "$cli" redis-cli -p "$port" DBSIZE)
		app_expect_eq "$combo DBSIZE" "0" "$out"
		redis_stop "$port"
	done
	app_check_stats redis-server 2
	app_check_stats redis-cli 1
}

@test "redis: a 1 MiB random value round-trips byte-identical, all four combinations" {
	local combo srv cli port sha out
	port=$(app_port)
	head -c 1048576 /dev/urandom >"$T/big"
	sha=$(app_sha "$T/big")
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		redis_start "$srv" "$port"
		out=$(app_run "$cli" redis-cli -p "$port" -x SET big <"$T/big")
		app_expect_eq "$combo SET -x" "OK" "$out"
		out=$(app_run "$cli" redis-cli -p "$port" STRLEN big)
		app_expect_eq "$combo STRLEN" "1048576" "$out"
		# --raw GET prints the value and one newline.
		app_run "$cli" redis-cli -p "$port" --raw GET big >"$T/big.out"
		out=$(stat -c %s "$T/big.out")
		app_expect_eq "$combo GET size" "1048577" "$out"
		out=$(head -c 1048576 "$T/big.out" | sha256sum | cut -d' ' -f1)
		app_expect_eq "$combo GET sha256" "$sha" "$out"
		redis_stop "$port"
	done
}

@test "redis: app_redis_check writes and reads back 200 keys of 1 B..100 KiB, all four combinations" {
	local combo srv cli port out out2 first=''
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		redis_start "$srv" "$port"
		out=$(app_run "$cli" "$APP_PY" "$APP_TOOLS/app_redis_check.py" \
			--port "$port" --keys 200 --max-size 102400)
		[[ $out == "keys=200 bytes="* ]] || {
			echo "$combo: $out" >&2
			return 1
		}
		# A second client reads the same keys on a new connection.
		out2=$(app_run "$cli" "$APP_PY" "$APP_TOOLS/app_redis_check.py" \
			--port "$port" --keys 200 --max-size 102400 --verify-only)
		app_expect_eq "$combo verify-only" "$out" "$out2"
		out=$(app_run "$cli" redis-cli -p "$port" DBSIZE)
		app_expect_eq "$combo DBSIZE" "200" "$out"
		redis_stop "$port"
		first=${first:-$out2}
		app_expect_eq "$combo vs plain:plain" "$first" "$out2"
	done
	app_check_stats python3 1
}

# bench_check FILE: every redis-benchmark CSV row has a req/s figure > 0;
# prints the test names, one a line.
bench_check() {
	awk -F'","' '
		NR == 1 { if ($0 !~ /^"test","rps"/) { print "no CSV header" > "/dev/stderr"; bad = 1 }; next }
		{ name = substr($1, 2); rps = $2 + 0
		  if (rps <= 0) { print "no req/s for " name ": " $0 > "/dev/stderr"; bad = 1 }
		  print name }
		END { exit bad }' "$1"
}

@test "redis: redis-benchmark (plain, -P 16, --threads 2) reports every test with req/s > 0 under the library" {
	require_cmd redis-benchmark
	local port variant side names
	local expected_names='SET
GET
INCR
LPUSH
LPUSH (needed to benchmark LRANGE)
LRANGE_100 (first 100 elements)
MSET (10 keys)'
	port=$(app_port)
	for side in plain xsock; do
		redis_start "$side" "$port"
		for variant in "" "-P 16" "--threads 2"; do
			# shellcheck disable=SC2086 # variant is two words or none
			app_run "$side" redis-benchmark -p "$port" --csv -n 2000 -c 10 \
				-t set,get,incr,lpush,lrange_100,mset $variant \
				>"$T/bench.csv" 2>"$T/bench.err" || {
				echo "$side redis-benchmark $variant failed:" >&2
				cat "$T/bench.err" >&2
				return 1
			}
			names=$(bench_check "$T/bench.csv")
			app_expect_eq "$side redis-benchmark $variant tests" \
				"$expected_names" "$names"
		done
		redis_stop "$port"
	done
	app_check_stats redis-benchmark 10
}

@test "redis: redis-server --daemonize yes under the library (pidfile, then SHUTDOWN from redis-cli)" {
	local port pid out
	port=$(app_port)
	mkdir -p "$T/daemon"
	app_run xsock redis-server --port "$port" --bind 127.0.0.1 --save '' \
		--appendonly no --daemonize yes --dir "$T/daemon" \
		--pidfile "$T/redis.pid" --logfile "$T/daemon.log" 3>&-
	app_wait_file "$T/redis.pid" 10
	pid=$(<"$T/redis.pid")
	app_track "$pid"
	wait_port 127.0.0.1 "$port"
	app_check_side "$pid" xsock
	# Daemonized: not our child, a session of its own.
	[[ $(ps -o sid= -p "$pid" | tr -d ' ') == "$pid" ]]

	out=$(app_run xsock redis-cli -p "$port" SET d 1)
	app_expect_eq "SET" "OK" "$out"
	out=$(app_run xsock redis-cli -p "$port" INCR d)
	app_expect_eq "INCR" "2" "$out"
	out=$(app_run xsock redis-cli -p "$port" INFO server | tr -d '\r' |
		sed -n 's/^process_id://p')
	app_expect_eq "INFO process_id" "$pid" "$out"

	app_run xsock redis-cli -p "$port" SHUTDOWN NOSAVE
	app_wait_gone "$pid" 10
	app_wait_closed 127.0.0.1 "$port" 5
	[[ ! -e $T/redis.pid ]] # redis removes its pidfile on shutdown
	grep -q 'ready to exit, bye bye' "$T/daemon.log"
	# The daemon (fork + setsid under the library) exited through exit().
	app_check_stats_pid "$pid" 2
}

# info_field PORT FIELD: one field of INFO persistence.
info_field() {
	env -u LD_PRELOAD redis-cli -p "$1" INFO persistence | tr -d '\r' |
		sed -n "s/^$2://p"
}

@test "redis: BGSAVE under the library (fork) completes while clients keep working; the RDB reloads" {
	local port side out before after deadline i
	port=$(app_port)
	for side in plain xsock; do
		rm -rf "$T/data-$port"
		redis_start "$side" "$port"
		out=$(app_run "$side" "$APP_PY" "$APP_TOOLS/app_redis_check.py" \
			--port "$port" --keys 300 --prefix snap --max-size 16384)
		[[ $out == keys=300* ]]
		# 8 ms per key: the child takes ~2.4 s, long enough to work
		# against the parent while it runs, even on a busy machine.
		out=$(app_run "$side" redis-cli -p "$port" CONFIG SET rdb-key-save-delay 8000)
		app_expect_eq "$side CONFIG SET" "OK" "$out"
		out=$(app_run "$side" redis-cli -p "$port" BGSAVE)
		app_expect_eq "$side BGSAVE" "Background saving started" "$out"
		before=$(info_field "$port" rdb_bgsave_in_progress)
		app_expect_eq "$side in progress" "1" "$before"

		# Clients keep working while the forked child writes the RDB.
		out=$(app_run "$side" "$APP_PY" "$APP_TOOLS/app_redis_check.py" \
			--port "$port" --keys 40 --prefix during --seed 7 --max-size 65536)
		[[ $out == keys=40* ]]
		for i in 1 2 3; do
			out=$(app_run "$side" redis-cli -p "$port" INCR during:counter)
			app_expect_eq "$side INCR during BGSAVE" "$i" "$out"
		done
		after=$(info_field "$port" rdb_bgsave_in_progress)
		app_expect_eq "$side still in progress after the clients" "1" "$after"

		deadline=$((SECONDS + 30))
		until [[ $(info_field "$port" rdb_bgsave_in_progress) == 0 ]]; do
			((SECONDS < deadline)) || {
				echo "$side: BGSAVE still running after 30 s" >&2
				return 1
			}
			sleep 0.05
		done
		out=$(info_field "$port" rdb_last_bgsave_status)
		app_expect_eq "$side rdb_last_bgsave_status" "ok" "$out"
		out=$(app_run "$side" redis-cli -p "$port" DBSIZE)
		app_expect_eq "$side DBSIZE live" "341" "$out"
		redis_stop "$port"
		grep -q 'Background saving terminated with success' "$REDIS_LOG"
		[[ -s $T/data-$port/dump.rdb ]]

		# The snapshot holds exactly the keys from before the fork.
		redis_start plain "$port"
		out=$(env -u LD_PRELOAD redis-cli -p "$port" DBSIZE)
		app_expect_eq "$side DBSIZE after reload" "300" "$out"
		out=$(env -u LD_PRELOAD "$APP_PY" "$APP_TOOLS/app_redis_check.py" \
			--port "$port" --keys 300 --prefix snap --max-size 16384 \
			--verify-only)
		[[ $out == keys=300* ]]
		grep -q 'DB loaded from disk' "$REDIS_LOG"
		redis_stop "$port"
	done
}
