#!/usr/bin/env bats
# tests/bats/memcached.bats - memcached and its clients without and with the
# library, on either side or both.
#
# The text-protocol checks (tests/tools/app_memcache_check.py) compare every
# reply with memcached's exact answer and the four server:client
# combinations with each other; memcslap/memcaslap put a short load on a
# preloaded server and memcstat reads its stats back.

load helpers
load ../tools/app_helpers

setup() {
	require_cmd memcached
	app_setup
	T=$BATS_TEST_TMPDIR
}

teardown() {
	app_teardown
}

# mc_start SIDE PORT: memcached on 127.0.0.1:PORT, TCP only, 2 MiB items.
# MC_PID is its pid.
mc_start() {
	local side=$1 port=$2
	# -u: memcached refuses to run as root without it.
	app_spawn "$side" "$T/memcached-$port.log" memcached -u "$(id -un)" \
		-l 127.0.0.1 -p "$port" -U 0 -I 2m -t 2 -c 256
	MC_PID=$APP_PID
	wait_port 127.0.0.1 "$port" || {
		cat "$T/memcached-$port.log" >&2
		return 1
	}
	app_check_side "$MC_PID" "$side"
}

# mc_stop: SIGTERM is memcached's orderly shutdown; it must exit 0.
mc_stop() {
	app_stop "$MC_PID" TERM 10
	[[ $APP_RC == 0 ]] || {
		echo "memcached exited with status $APP_RC" >&2
		cat "$T/memcached-"*.log >&2
		return 1
	}
}

# mc_stat PORT NAME: one counter from "stats", read by a plain client.
mc_stat() {
	env -u LD_PRELOAD "$APP_PY" - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"stats\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("EOF before END")
    buf += chunk
for line in buf.decode().split("\r\n"):
    p = line.split(" ")
    if len(p) == 3 and p[1] == sys.argv[2]:
        print(p[2])
PY
}

@test "memcached: text protocol gives exact replies (set/get/add/replace/append/prepend/incr/decr/delete/cas/gets/flush_all/version/stats), all four combinations" {
	local combo srv cli port out first=''
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		mc_start "$srv" "$port"
		out=$(app_run "$cli" "$APP_PY" "$APP_TOOLS/app_memcache_check.py" \
			protocol --port "$port" --server-pid "$MC_PID")
		[[ $out == *$'\nquit -> EOF' ]] || {
			echo "$combo: $out" >&2
			return 1
		}
		first=${first:-$out}
		app_expect_eq "$combo transcript vs plain:plain" "$first" "$out"
		mc_stop
	done
	# Spot checks of the transcript itself.
	grep -qx 'cas k1 0 0 1 [0-9]* \[y\] -> EXISTS' <<<"$first"
	grep -qx 'incr n 18446744073709551615 -> 18446744073709551615' <<<"$first"
	grep -qx 'stats get_misses +1' <<<"$first"
	app_check_stats memcached 2
	app_check_stats python3 1
}

@test "memcached: values from 0 B to 1 MiB (-I 2m) and an over-limit one, all four combinations" {
	local combo srv cli port out first=''
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		mc_start "$srv" "$port"
		out=$(app_run "$cli" "$APP_PY" "$APP_TOOLS/app_memcache_check.py" \
			large --port "$port" --seed 3)
		first=${first:-$out}
		app_expect_eq "$combo transcript vs plain:plain" "$first" "$out"
		# The server holds exactly the 11 values that fit.
		out=$(mc_stat "$port" curr_items)
		app_expect_eq "$combo curr_items" "11" "$out"
		mc_stop
	done
	grep -q '^get big11 -> big11/11/<1052672 bytes ' <<<"$first"
	grep -q -- '-> SERVER_ERROR object too large for cache$' <<<"$first"
}

@test "memcached: memcslap load against a preloaded server, plain and preloaded memcslap" {
	local slap side port sets gets
	slap=$(command -v memcslap || command -v memslap) ||
		skip "memcslap not installed"
	port=$(app_port)
	mc_start xsock "$port"
	for side in plain xsock; do
		sets=$(mc_stat "$port" cmd_set)
		gets=$(mc_stat "$port" get_hits)
		app_run "$side" "$slap" --servers="127.0.0.1:$port" --test=set \
			--concurrency=4 --execute-number=1000 >"$T/slap-set" 2>&1 || {
			cat "$T/slap-set" >&2
			return 1
		}
		app_run "$side" "$slap" --servers="127.0.0.1:$port" --test=get \
			--concurrency=4 --execute-number=1000 >"$T/slap-get" 2>&1 || {
			cat "$T/slap-get" >&2
			return 1
		}
		# memcslap exits 0 even when every request failed: check what it
		# printed and what the server counted.
		! grep -i 'error\|fail' "$T/slap-set" "$T/slap-get" >&2
		grep -q 'Time to set *4000 keys by *4 threads' "$T/slap-set"
		grep -q 'Time to get *4000 keys by *4 threads' "$T/slap-get"
		# --test=set: 4 x 1000; --test=get loads 1000 keys, then 4 x 1000
		# hits.
		app_expect_eq "$side cmd_set" "$((sets + 5000))" "$(mc_stat "$port" cmd_set)"
		app_expect_eq "$side get_hits" "$((gets + 4000))" "$(mc_stat "$port" get_hits)"
	done
	mc_stop
	app_check_stats memcached 5
}

@test "memcached: memcaslap mixed get/set load with verification, preloaded on both sides" {
	require_cmd memcaslap
	local side port out
	port=$(app_port)
	for side in plain xsock; do
		mc_start "$side" "$port"
		# -c 10: 5000 splits evenly, so Ops is exactly 5000.
		app_run "$side" memcaslap -s "127.0.0.1:$port" -T 2 -c 10 \
			-x 5000 -X 512 -v 0.2 >"$T/aslap" 2>&1 || {
			cat "$T/aslap" >&2
			return 1
		}
		grep -q '^Run time: .* Ops: 5000 ' "$T/aslap" || {
			cat "$T/aslap" >&2
			return 1
		}
		for f in get_misses verify_misses verify_failed; do
			out=$(sed -n "s/^$f: //p" "$T/aslap")
			app_expect_eq "$side memcaslap $f" "0" "$out"
		done
		out=$(sed -n 's/^cmd_set: //p' "$T/aslap")
		((out > 0))
		app_expect_eq "$side cmd_set counted by the server" "$out" \
			"$(mc_stat "$port" cmd_set)"
		mc_stop
	done
}

@test "memcached: memcstat reads the stats of the right server, all four combinations" {
	require_cmd memcstat
	local combo srv cli port out
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		mc_start "$srv" "$port"
		out=$(app_run "$cli" memcstat --servers="127.0.0.1:$port")
		grep -qx "Server: 127.0.0.1 ($port)" <<<"$out"
		app_expect_eq "$combo pid" "$MC_PID" \
			"$(sed -n 's/^[[:space:]]*pid: //p' <<<"$out")"
		app_expect_eq "$combo version" "$(memcached -V | cut -d' ' -f2)" \
			"$(sed -n 's/^[[:space:]]*version: //p' <<<"$out")"
		app_expect_eq "$combo curr_items" "0" \
			"$(sed -n 's/^[[:space:]]*curr_items: //p' <<<"$out")"
		# memcstat prints this one on stderr.
		out=$(app_run "$cli" memcstat --servers="127.0.0.1:$port" \
			--server-version 2>&1)
		app_expect_eq "$combo --server-version" \
			"127.0.0.1:$port $(memcached -V | cut -d' ' -f2)" "$out"
		mc_stop
	done
	app_check_stats memcstat 1
}
