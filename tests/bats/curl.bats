#!/usr/bin/env bats
# tests/bats/curl.bats - curl against python3 -m http.server without and
# with the library, on either side or both.
#
# Checked in each combination: the bytes (sha256), the HTTP status, curl's
# exit status for 404 (-f: 22), an unsupported method and a closed port
# (7), connection reuse under HTTP/1.1, and IPv6 loopback.

load helpers
load ../tools/app_helpers

setup() {
	require_cmd curl
	app_setup
	T=$BATS_TEST_TMPDIR
	WWW=$BATS_FILE_TMPDIR/www
	HTTP_N=0
}

setup_file() {
	local www=$BATS_FILE_TMPDIR/www
	mkdir -p "$www"
	: >"$www/empty.txt"
	printf 'hello, xsock\n' >"$www/small.txt"
	head -c 65536 /dev/urandom >"$www/mid.bin"
	head -c $((8 << 20)) /dev/urandom >"$www/big.bin"
}

teardown() {
	app_teardown
}

# http_start SIDE PORT [HOST] [ARGS...]: python's http.server serving $WWW.
http_start() {
	local side=$1 port=$2 host=${3:-127.0.0.1}
	shift $(($# < 3 ? $# : 3))
	HTTP_LOG=$T/http-$port.$((++HTTP_N)).log
	app_spawn "$side" "$HTTP_LOG" "$APP_PY" -m http.server --bind "$host" \
		--directory "$WWW" "$@" "$port"
	HTTP_PID=$APP_PID
	wait_port "$host" "$port" || {
		cat "$HTTP_LOG" >&2
		return 1
	}
	app_check_side "$HTTP_PID" "$side"
}

# http_stop: SIGINT is http.server's orderly exit (status 0).
http_stop() {
	app_stop "$HTTP_PID" INT 10
	[[ $APP_RC == 0 ]] || {
		echo "http.server exited with status $APP_RC" >&2
		cat "$HTTP_LOG" >&2
		return 1
	}
}

# fetch SIDE URL OUT: curl URL into OUT; prints "rc status size".
fetch() {
	local rc=0 w
	w=$(app_run "$1" curl -sS -o "$3" -w '%{http_code} %{size_download}' \
		"$2" 2>>"$T/curl.err") || rc=$?
	echo "$rc $w"
}

@test "curl: empty, small, 64 KiB and 8 MiB files arrive byte-identical with status 200, all four combinations" {
	local combo srv cli port f out
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		http_start "$srv" "$port"
		for f in empty.txt small.txt mid.bin big.bin; do
			rm -f "$T/$f"
			out=$(fetch "$cli" "http://127.0.0.1:$port/$f" "$T/$f")
			app_expect_eq "$combo $f" "0 200 $(stat -c %s "$WWW/$f")" "$out"
			app_expect_eq "$combo $f sha256" "$(app_sha "$WWW/$f")" \
				"$(app_sha "$T/$f")"
		done
		# HEAD: the length without the body.
		out=$(app_run "$cli" curl -sS -I "http://127.0.0.1:$port/big.bin" |
			tr -d '\r' | sed -n 's/^Content-Length: //Ip')
		app_expect_eq "$combo HEAD Content-Length" "8388608" "$out"
		http_stop
		app_expect_eq "$combo requests logged" "5" \
			"$(grep -c '"\(GET\|HEAD\) /[a-z]*\.[a-z]* HTTP/1.1" 200' "$HTTP_LOG")"
	done
	app_check_stats curl 1
	app_check_stats python3 5
}

@test "curl: 404 (exit 0, with -f exit 22), 501 for POST and the directory listing, all four combinations" {
	local combo srv cli port out rc
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		http_start "$srv" "$port"
		out=$(fetch "$cli" "http://127.0.0.1:$port/missing.txt" "$T/404")
		app_expect_eq "$combo 404" "0 404 $(stat -c %s "$T/404")" "$out"
		grep -q 'File not found' "$T/404"
		rc=0
		app_run "$cli" curl -sSf -o /dev/null \
			"http://127.0.0.1:$port/missing.txt" 2>"$T/f.err" || rc=$?
		app_expect_eq "$combo curl -f on 404" "22" "$rc"
		grep -q 'error: 404' "$T/f.err"
		rc=0
		out=$(app_run "$cli" curl -sS -o /dev/null -w '%{http_code}' \
			-d 'x=1' "http://127.0.0.1:$port/small.txt") || rc=$?
		app_expect_eq "$combo POST" "0 501" "$rc $out"
		app_run "$cli" curl -sS -o "$T/index" "http://127.0.0.1:$port/"
		grep -q 'href="big.bin"' "$T/index"
		grep -q 'href="small.txt"' "$T/index"
		http_stop
	done
}

@test "curl: HTTP/1.1 keep-alive reuses one connection for three files, all four combinations" {
	local combo srv cli port out
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		http_start "$srv" "$port" 127.0.0.1 --protocol HTTP/1.1
		out=$(app_run "$cli" curl -sS -w '%{num_connects} %{http_code}\n' \
			-o "$T/1" -o "$T/2" -o "$T/3" \
			"http://127.0.0.1:$port/small.txt" \
			"http://127.0.0.1:$port/big.bin" \
			"http://127.0.0.1:$port/mid.bin")
		app_expect_eq "$combo connections, statuses" $'1 200\n0 200\n0 200' "$out"
		cmp "$T/1" "$WWW/small.txt"
		cmp "$T/2" "$WWW/big.bin"
		cmp "$T/3" "$WWW/mid.bin"
		http_stop
	done
}

@test "curl: a closed port gives exit 7 with and without the library (127.0.0.1 and ::1)" {
	local port side rc host url
	port=$(app_port)
	for url in "http://127.0.0.1:$port/" "http://[::1]:$port/"; do
		for side in plain xsock; do
			rc=0
			app_run "$side" curl -sS -o /dev/null "$url" 2>"$T/err" || rc=$?
			app_expect_eq "$side $url exit status" "7" "$rc"
			grep -q 'Failed to connect' "$T/err"
		done
	done
	app_check_stats curl 1
}

@test "curl: IPv6 loopback ::1, 8 MiB file, all four combinations" {
	"$APP_PY" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' \
		2>/dev/null || skip "no ::1 on this host"
	local combo srv cli port out
	port=$(app_port)
	for combo in "${APP_COMBOS[@]}"; do
		srv=${combo%:*} cli=${combo#*:}
		http_start "$srv" "$port" ::1
		out=$(fetch "$cli" "http://[::1]:$port/big.bin" "$T/big6")
		app_expect_eq "$combo big.bin" "0 200 8388608" "$out"
		app_expect_eq "$combo sha256" "$(app_sha "$WWW/big.bin")" \
			"$(app_sha "$T/big6")"
		http_stop
	done
}
