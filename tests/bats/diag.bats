#!/usr/bin/env bats
# tests/bats/diag.bats - the published counters file (/dev/shm/xsock-PID),
# xsock-stat and xsock-check, on kernel TCP over loopback: what a host
# without an RDMA device can show (every socket is a fallback, with its
# reason). The RDMA side is tests/softroce/diag.bats.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	BIN=$(dirname "$XSOCK_LIB")/bin
	export BIN
}

setup() {
	[[ -f $XSOCK_LIB && -x $BIN/xsock-stat && -x $BIN/xsock-check ]] ||
		skip "not built (make)"
	unset_xsock_env
	unset LD_PRELOAD
	T=$BATS_TEST_TMPDIR
}

teardown() {
	[[ -z ${holder:-} ]] || kill -KILL "$holder" 2>/dev/null || true
}

# hold [ARGS...] - a Python process under the library with a listener on
# 127.0.0.1, one connection to it and its accepted end, held open until
# its stdin closes; with "fork", a child that makes one more socket (the
# child's pid on the second line). Sets $holder (pid), waits for "ready".
hold() {
	mkfifo "$T/in"
	# not with_xsock (a function): $! must be Python's own pid
	LD_PRELOAD=$XSOCK_LIB "$XS_PY" -c "$HOLD_PY" "$@" <"$T/in" >"$T/out" 2>"$T/err" &
	holder=$!
	exec {hold_fd}>"$T/in"
	local i
	for ((i = 0; i < 200; i++)); do
		grep -qx ready "$T/out" 2>/dev/null && return 0
		sleep 0.05
	done
	cat "$T/err" >&2
	return 1
}

HOLD_PY='
import os, socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
c.sendall(b"x" * 1000); a.recv(2000)
print(l.getsockname()[1], flush=True)
if "dup" in sys.argv[1:]:
    # the accepted end lives on as fd 60 and 61 only
    os.dup2(a.fileno(), 60); os.dup2(a.fileno(), 61)
    a.close()
    print(c.getsockname()[1], flush=True)
if "fork" in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        s = socket.socket()
        os.write(w, b"x")
        sys.stdin.read()
        sys.exit(0)
    os.read(r, 1)
    print(pid, flush=True)
print("ready", flush=True)
sys.stdin.read()
'

# release - close the holder's stdin: it exits through exit().
release() {
	exec {hold_fd}>&-
	wait "$holder"
	holder=
}

# json_check JSON PYEXPR... - each Python expression over the parsed
# document `d` holds (tests/tools/json_check.py).
json_check() {
	"$XS_PY" "$XSOCK_ROOT/tests/tools/json_check.py" "$@"
}

@test "publish: /dev/shm/xsock-PID, mode 0600, lists every socket with its reason; gone at exit" {
	hold
	local port
	port=$(head -1 "$T/out")
	[[ -f /dev/shm/xsock-$holder ]]
	[[ $(stat -c %a "/dev/shm/xsock-$holder") == 600 ]]
	run -0 "$BIN/xsock-stat" --json -p "$holder"
	json_check "$output" \
		'len(d["processes"]) == 1 and d["processes"][0]["pid"] == '"$holder" \
		'sorted((s["transport"], s["reason"]) for s in d["processes"][0]["sockets"]) == [("listen", "loopback"), ("tcp", "loopback"), ("tcp", "loopback")]' \
		'[s["local"] for s in d["processes"][0]["sockets"] if s["transport"] == "listen"] == ["127.0.0.1:'"$port"'"]' \
		'sum(s["peer"] == "127.0.0.1:'"$port"'" for s in d["processes"][0]["sockets"]) == 1' \
		'd["processes"][0]["totals"]["fallback"]["loopback"] == 3' \
		'd["processes"][0]["totals"]["decided"]["tcp"] == 2'
	# the table: one row per socket, the program named as ss does
	run -0 "$BIN/xsock-stat" -p "$holder"
	[[ $(grep -c "pid=$holder," <<<"$output") == 3 ]]
	[[ "$output" == *LISTEN*"127.0.0.1:$port"* ]]
	local pid=$holder
	release
	[[ ! -e /dev/shm/xsock-$pid ]]
}

@test "publish: XSOCK_PUBLISH=0 makes no file; neither does a process without sockets" {
	XSOCK_PUBLISH=0 hold
	[[ ! -e /dev/shm/xsock-$holder ]]
	run -0 "$BIN/xsock-stat" -p "$holder"
	[[ "$output" != *"pid=$holder,"* ]]
	release
	run -0 with_xsock "$XS_PY" -c 'import os; print(os.getpid()); print(os.path.exists("/dev/shm/xsock-%d" % os.getpid()))'
	[[ "${lines[1]}" == False ]]
}

@test "publish: a file left by SIGKILL is not listed, and xsock-stat removes it" {
	hold
	local pid=$holder
	[[ -f /dev/shm/xsock-$pid ]]
	kill -KILL "$pid"
	wait "$pid" || true
	holder=
	[[ -f /dev/shm/xsock-$pid ]]
	run -0 "$BIN/xsock-stat" --json
	json_check "$output" 'all(p["pid"] != '"$pid"' for p in d["processes"])'
	[[ ! -e /dev/shm/xsock-$pid ]]
}

@test "publish: a forked child writes its own file, never its parent's" {
	hold fork
	local child
	child=$(sed -n 2p "$T/out")
	run -0 "$BIN/xsock-stat" --json -p "$holder"
	json_check "$output" 'len(d["processes"][0]["sockets"]) == 3'
	# the child holds the three inherited sockets and one of its own
	run -0 "$BIN/xsock-stat" --json -p "$child"
	json_check "$output" \
		'len(d["processes"]) == 1 and len(d["processes"][0]["sockets"]) == 4' \
		'd["processes"][0]["totals"]["sockets"] == 1'
	local parent=$holder i
	release
	[[ ! -e /dev/shm/xsock-$parent ]]
	for ((i = 0; i < 100; i++)); do
		[[ -e /dev/shm/xsock-$child ]] || break
		sleep 0.05
	done
	[[ ! -e /dev/shm/xsock-$child ]]
}

@test "publish: a dup'ed socket whose first fd closed shows an fd it still has" {
	hold dup
	local cport
	cport=$(sed -n 2p "$T/out")
	run -0 "$BIN/xsock-stat" --json -p "$holder"
	json_check "$output" \
		'[s["fd"] for s in d["processes"][0]["sockets"] if s["peer"] == "127.0.0.1:'"$cport"'"][0] in (60, 61)'
	[[ -S /proc/$holder/fd/60 ]]
	release
}

@test "xsock-stat: usage errors exit 2; -h exits 0" {
	run -2 "$BIN/xsock-stat" -p abc
	run -2 "$BIN/xsock-stat" --no-such-option
	run -0 "$BIN/xsock-stat" -h
	[[ "$output" == *usage* ]]
}

@test "xsock-check: loopback stays on kernel TCP, the reason printed, exit 1; the server echoes" {
	local port i srv
	port=$(free_port)
	"$BIN/xsock-check" --server --once "127.0.0.1:$port" >"$T/srv" 2>&1 &
	srv=$!
	# not wait_port: its probe would be the one connection served
	for ((i = 0; i < 200; i++)); do
		ss -Hltn "sport = :$port" | grep -q LISTEN && break
		sleep 0.05
	done
	run -1 "$BIN/xsock-check" -n 20 "127.0.0.1:$port"
	echo "$output"
	[[ "$output" == *"this side   tcp (fallback: loopback)"* ]]
	[[ "$output" == *"peer side   tcp (fallback: "* ]]
	[[ "$output" == *"round trip  20 x 64 B: min "* ]]
	[[ "$output" == *"verdict: kernel TCP (loopback)"* ]]
	wait "$srv"
	grep -q "^accepted 127.0.0.1:[0-9]* over tcp (fallback: " "$T/srv"
	run -2 "$BIN/xsock-check" -n 0 "127.0.0.1:$port"
	run -2 "$BIN/xsock-check" 127.0.0.1
	run -2 "$BIN/xsock-check" --once "127.0.0.1:$port"
}

@test "XSOCK_STATS: the exit summary has the data-path counters" {
	run -0 env XSOCK_STATS=1 LD_PRELOAD="$XSOCK_LIB" "$XS_PY" -c 'import socket; socket.socket().close()'
	[[ "$output" == *"xsock stats pid "* ]]
	[[ "$output" == *"messages inline 0 eager 0 arrived 0 credit returns 0"* ]]
	[[ "$output" == *"waits credit 0 pool 0 sleeps 0"* ]]
	[[ "$output" == *"completion errors rnr 0 retry 0 other 0"* ]]
}

@test "publish: a full /dev/shm costs the program nothing; sockets beyond it are counted unpublished" {
	unshare -m true 2>/dev/null || skip "unshare -m not permitted"
	# 40 KiB: the header and two chunks of 64 slots (16 KiB each)
	run -0 unshare -m sh -c 'mount -t tmpfs -o size=40k tmpfs /dev/shm &&
		XSOCK_STATS=1 LD_PRELOAD="$1" "$2" -c "
import os, socket
ss = [socket.socket() for i in range(200)]
f = \"/dev/shm/xsock-%d\" % os.getpid()
print(\"sockets\", len(ss), \"file\", os.stat(f).st_size)
"' sh "$XSOCK_LIB" "$XS_PY"
	echo "$output"
	[[ "${lines[0]}" == "sockets 200 file $((4096 + 2 * 16384))" ]]
	[[ "$output" == *"sockets not published (no slot) 72"* ]]
}

@test "publish: under RLIMIT_FSIZE the file stops growing, the program lives (no SIGXFSZ)" {
	# 10 KiB: the 4 KiB header fits, its first 16 KiB of slots do not
	run -0 bash -c 'ulimit -f 10; XSOCK_STATS=1 LD_PRELOAD="$1" "$2" -c "
import socket
ss = [socket.socket() for i in range(5)]
print(\"sockets\", len(ss))
"' sh "$XSOCK_LIB" "$XS_PY"
	[[ "${lines[0]}" == "sockets 5" ]]
	[[ "$output" == *"sockets not published (no slot) 5"* ]]
}
