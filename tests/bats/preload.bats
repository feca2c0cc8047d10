#!/usr/bin/env bats
# tests/bats/preload.bats - the library must be invisible.
#
# LD_PRELOAD is inherited by every child, so libxsock ends up in shells,
# interpreters and tools that never open a socket: they must behave exactly
# as without it. Programs that do use sockets see no extra output unless
# XSOCK_LOG or XSOCK_STATS asks for it; invalid configuration costs one
# stderr line and passthrough, never a crash or a changed exit code. The
# exported symbols are exactly the list in core/real_syms.def.

load helpers

setup_file() {
	# The interpreter itself: pyenv-style shims are shell scripts that
	# would add processes (and XSOCK_STATS summaries) of their own.
	if command -v python3 >/dev/null; then
		PY=$(python3 -c 'import sys; print(sys.executable)')
		export PY
	fi
	export PROBE="$XSOCK_TOOLS/sockprobe"
}

setup() {
	[[ -f $XSOCK_LIB ]] || skip "$XSOCK_LIB not built (make)"
	unset_xsock_env
	T=$BATS_TEST_TMPDIR
}


require_probe() {
	[[ -x $PROBE ]] || skip "$PROBE not built (make)"
}

require_py() {
	[[ -n ${PY:-} && -x $PY ]] || skip "python3 not installed"
}

# capture TAG CMD...: stdout, stderr and exit code of CMD into $T/TAG.*
capture() {
	local tag=$1 rc=0
	shift
	"$@" >"$T/$tag.out" 2>"$T/$tag.err" || rc=$?
	echo "$rc" >"$T/$tag.rc"
}

# same_with_and_without CMD...: CMD run plainly and under the library give
# the same stdout, stderr and exit code. Sets PLAIN_RC.
same_with_and_without() {
	capture plain "$@"
	capture xsock with_xsock "$@"
	diff -u --label plain --label xsock "$T/plain.out" "$T/xsock.out" ||
		{ echo "# stdout differs: $*"; return 1; }
	diff -u --label plain --label xsock "$T/plain.err" "$T/xsock.err" ||
		{ echo "# stderr differs: $*"; return 1; }
	PLAIN_RC=$(cat "$T/plain.rc")
	[[ $PLAIN_RC == "$(cat "$T/xsock.rc")" ]] ||
		{ echo "# exit code $PLAIN_RC vs $(cat "$T/xsock.rc"): $*"; return 1; }
}

# A local TCP server that needs no library: python3 -c "$ECHO_SERVER"
# PORTFILE N serves N connections (echo until EOF, one thread each), and
# writes its port to PORTFILE once it listens.
ECHO_SERVER='
import socket, sys, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 0))
l.listen(128)
l.settimeout(30)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(l.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
def serve(c):
    with c:
        while True:
            b = c.recv(65536)
            if not b:
                return
            c.sendall(b)
ts = []
for _ in range(int(sys.argv[2])):
    c, _ = l.accept()
    c.settimeout(30)
    t = threading.Thread(target=serve, args=(c,))
    t.start()
    ts.append(t)
for t in ts:
    t.join()
'

# start_server N [preload]: run $ECHO_SERVER in the background for N
# connections; sets SERVER_PID and PORT. Waits for the port file with a
# deadline, never a fixed sleep.
start_server() {
	local n=$1 how=${2:-plain} deadline=$((SECONDS + 20))
	if [[ $how == xsock ]]; then
		with_xsock "$PY" -c "$ECHO_SERVER" "$T/port" "$n" 3>&- &
	else
		"$PY" -c "$ECHO_SERVER" "$T/port" "$n" 3>&- &
	fi
	SERVER_PID=$!
	while [[ ! -s $T/port ]]; do
		((SECONDS < deadline)) || { echo "# server did not start"; return 1; }
		kill -0 "$SERVER_PID" 2>/dev/null || { echo "# server died"; return 1; }
		sleep 0.02
	done
	PORT=$(cat "$T/port")
}

# wait_server: the background server exits by itself within 30 s.
wait_server() {
	local rc=0
	wait "$SERVER_PID" || rc=$?
	[[ $rc == 0 ]] || { echo "# server exited $rc"; return 1; }
}

teardown() {
	if [[ -n ${SERVER_PID:-} ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill "$SERVER_PID" 2>/dev/null || true
	fi
}

# --- programs that never open a socket --------------------------------------

@test "invisible: ls -la of a directory tree" {
	# A fixed tree, away from $T whose mtime the captures change.
	local tree=$T/fix/tree
	mkdir -p "$tree/sub"
	printf 'abc\n' >"$tree/file"
	ln -s file "$tree/link"
	touch -d '2001-02-03 04:05:06' "$T/fix" "$tree" "$tree/sub" "$tree/file"
	same_with_and_without ls -la --time-style=full-iso "$tree" /usr/bin
	[[ $PLAIN_RC == 0 ]]
	grep -q 'link -> file' "$T/plain.out"
	same_with_and_without ls -la /nonexistent-xsock-dir
	[[ $PLAIN_RC == 2 ]]
	[[ -s $T/plain.err ]]
}

@test "invisible: sh exit code, stdout and stderr" {
	same_with_and_without sh -c 'echo hi; echo oops >&2; exit 3'
	[[ $PLAIN_RC == 3 ]]
	[[ $(cat "$T/xsock.out") == hi && $(cat "$T/xsock.err") == oops ]]
	same_with_and_without sh -c 'sh -c "kill -TERM \$\$"; echo "status $?"'
	[[ $(cat "$T/xsock.out") == "status 143" ]]
}

@test "invisible: python3 -c" {
	require_cmd python3
	same_with_and_without python3 -c 1
	[[ $PLAIN_RC == 0 ]]
	[[ ! -s $T/xsock.out && ! -s $T/xsock.err ]]
	require_py
	same_with_and_without "$PY" -c 'import sys; print("py", sys.version_info[0]); sys.exit(5)'
	[[ $PLAIN_RC == 5 && $(cat "$T/xsock.out") == "py 3" ]]
}

@test "invisible: gdb --version" {
	require_cmd gdb
	same_with_and_without gdb --version
	[[ $PLAIN_RC == 0 ]]
	grep -q 'GNU gdb' "$T/xsock.out"
}

@test "invisible: cat of a binary file, and of a missing one" {
	head -c 100000 /dev/urandom >"$T/blob"
	same_with_and_without cat "$T/blob"
	[[ $PLAIN_RC == 0 ]]
	cmp "$T/blob" "$T/xsock.out"
	same_with_and_without cat "$T/missing"
	[[ $PLAIN_RC == 1 ]]
	grep -q 'No such file' "$T/xsock.err"
}

@test "invisible: the environment seen by children (LD_PRELOAD aside)" {
	same_with_and_without sh -c 'env | grep -v "^LD_PRELOAD=" | sort'
	[[ $PLAIN_RC == 0 ]]
	grep -q '^HOME=' "$T/xsock.out"
	# And the library itself is what the child was preloaded with.
	run with_xsock sh -c 'printf %s "$LD_PRELOAD"'
	[[ $output == *"$XSOCK_LIB" ]]
}

# --- programs with sockets: silent by default ---------------------------------

@test "silent: sockprobe under the library prints nothing extra" {
	require_probe
	same_with_and_without "$PROBE"
	[[ $PLAIN_RC == 0 ]]
	[[ ! -s $T/xsock.err ]]
	[[ $(wc -l <"$T/xsock.out") == $("$PROBE" --list | wc -l) ]]
}

@test "silent: curl to a closed port fails the same way" {
	require_cmd curl
	local port
	port=$(free_port)
	capture plain curl -sS --max-time 5 "http://127.0.0.1:$port/"
	capture xsock with_xsock curl -sS --max-time 5 "http://127.0.0.1:$port/"
	[[ $(cat "$T/plain.rc") == 7 && $(cat "$T/xsock.rc") == 7 ]]
	# curl prints how long it tried ("after 0 ms"): not ours to compare.
	diff -u <(sed -E 's/after [0-9]+ ms/after N ms/' "$T/plain.err") \
		<(sed -E 's/after [0-9]+ ms/after N ms/' "$T/xsock.err")
	[[ ! -s $T/xsock.out ]]
	[[ $(wc -l <"$T/xsock.err") == 1 ]]
}

@test "silent: python3 client and server round trip, no extra output" {
	require_py
	local prog='
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
c.sendall(b"ping"); print(s.recv(4).decode())
s.sendall(b"pong"); print(c.recv(4).decode())
c.close(); print(repr(s.recv(4)))
'
	same_with_and_without "$PY" -c "$prog"
	[[ $PLAIN_RC == 0 ]]
	[[ $(cat "$T/xsock.out") == $'ping\npong\nb\x27\x27' ]]
	[[ ! -s $T/xsock.err ]]
}

# --- invalid configuration ------------------------------------------------------

BAD_CASES="nonblock_connect_ok blocking_connect_refused msg_peek many_connections"

# bad_config EXPECT VAR=VALUE...: with the assignments exported, the probe
# prints the plain-libc output and exit code, and stderr is exactly one
# line "xsock: ..." that contains EXPECT.
bad_config() {
	local expect=$1
	shift
	capture plain "$PROBE" $BAD_CASES
	(
		export "$@"
		capture bad with_xsock "$PROBE" $BAD_CASES
	)
	diff -u --label plain --label "$*" "$T/plain.out" "$T/bad.out"
	[[ $(cat "$T/bad.rc") == "$(cat "$T/plain.rc")" ]]
	[[ $(cat "$T/plain.rc") == 0 ]]
	# The sockets worked: 200 ping-pongs over loopback.
	grep -q '^many_connections: 200/200 ' "$T/bad.out"
	if [[ $(wc -l <"$T/bad.err") != 1 ]]; then
		echo "# expected one stderr line for $*, got:"
		cat "$T/bad.err"
		return 1
	fi
	local line
	line=$(cat "$T/bad.err")
	[[ $line == "xsock: "* ]] || { echo "# bad prefix: $line"; return 1; }
	[[ $line == *"$expect"* ]] || { echo "# '$expect' not in: $line"; return 1; }
}

@test "bad config: XSOCK_POOL_MB=abc" {
	require_probe
	bad_config XSOCK_POOL_MB XSOCK_POOL_MB=abc
}

@test "bad config: XSOCK_POOL_MB=99999999999999999999999 (overflow)" {
	require_probe
	bad_config XSOCK_POOL_MB XSOCK_POOL_MB=99999999999999999999999
}

@test "bad config: XSOCK_POOL_MB=0 (below the minimum)" {
	require_probe
	bad_config XSOCK_POOL_MB XSOCK_POOL_MB=0
}

@test "bad config: XSOCK_LOG=loud" {
	require_probe
	bad_config XSOCK_LOG XSOCK_LOG=loud
}

@test "bad config: XSOCK_MODE=bogus" {
	require_probe
	bad_config XSOCK_MODE XSOCK_MODE=bogus
}

@test "bad config: XSOCK_STATS=yes" {
	require_probe
	bad_config XSOCK_STATS XSOCK_STATS=yes
}

@test "bad config: XSOCK_RULES=/nonexistent names the file" {
	require_probe
	bad_config /nonexistent XSOCK_RULES=/nonexistent
}

@test "bad config: rules file with a bad line reports path:line:col" {
	require_probe
	local rules=$T/bad.rules
	printf '# comment\nrdma * client 10.0.0.0/8:*\ntcp * klient *:*\n' >"$rules"
	bad_config "$rules:3:7: " XSOCK_RULES="$rules"
	[[ $(cat "$T/bad.err") == "xsock: $rules:3:7: "* ]]
	printf 'tcp * client 127.0.0.1:70000\n' >"$rules"
	bad_config "$rules:1:" XSOCK_RULES="$rules"
	printf 'set XSOCK_POOL_MB lots\n' >"$rules"
	bad_config "$rules:1:" XSOCK_RULES="$rules"
}

@test "bad config: two bad variables still give exactly one line" {
	require_probe
	bad_config "xsock: " XSOCK_MODE=bogus XSOCK_LOG=loud
}

@test "good rules file: silent, and its tcp rule is the recorded reason" {
	require_probe
	local rules=$T/good.rules
	# both roles: a listener on loopback (and what it accepts) would
	# otherwise record loopback as its reason
	printf '# all loopback sockets on kernel TCP\ntcp * * 127.0.0.0/8:*\n' >"$rules"
	capture plain "$PROBE" $BAD_CASES
	(
		export XSOCK_RULES="$rules" XSOCK_STATS="$T/stats.txt"
		capture good with_xsock "$PROBE" $BAD_CASES
	)
	diff -u "$T/plain.out" "$T/good.out"
	[[ ! -s $T/good.err ]]
	# 200 + 1 + 1 + 1 connects to 127.0.0.1, all decided by the rule.
	local n
	n=$(awk '$1 == "fallback" && $2 == "rule" {print $3}' "$T/stats.txt")
	[[ $n -ge 203 ]] || { cat "$T/stats.txt"; return 1; }
	n=$(awk '$1 == "fallback" && $2 == "loopback" {print $3}' "$T/stats.txt")
	[[ $n == 0 ]]
}

# --- exported symbols -------------------------------------------------------------

@test "exports: nm -D names == XS_SYM names of core/real_syms.def" {
	require_cmd nm
	local def=$XSOCK_ROOT/core/real_syms.def
	sed -n 's/^XS_SYM([^,]*, *\([A-Za-z0-9_]*\),.*/\1/p' "$def" | sort >"$T/want"
	nm -D --defined-only "$XSOCK_LIB" |
		awk '$2 == "T" || $2 == "W" {sub(/@.*/, "", $3); print $3}' |
		sort >"$T/got"
	[[ $(wc -l <"$T/want") -ge 40 ]]
	diff -u --label real_syms.def --label "nm -D" "$T/want" "$T/got"
	# Nothing else is defined and global: no data, no helpers.
	nm -D --defined-only "$XSOCK_LIB" |
		awk '$2 != "T" && $2 != "W" && $2 != "A" {print}' >"$T/other"
	[[ ! -s $T/other ]] || { cat "$T/other"; return 1; }
	# Spot checks of names the style guide requires on day one.
	grep -qx accept4 "$T/got"
	grep -qx __recv_chk "$T/got"
	grep -qx epoll_pwait2 "$T/got"
}

# --- modes --------------------------------------------------------------------------

@test "XSOCK_MODE=off: sockprobe identical, library silent" {
	require_probe
	capture plain "$PROBE"
	XSOCK_MODE=off capture off with_xsock "$PROBE"
	diff -u --label libc --label off "$T/plain.out" "$T/off.out"
	[[ $(cat "$T/off.rc") == "$(cat "$T/plain.rc")" ]]
	[[ ! -s $T/off.err ]]
}

# --- XSOCK_STATS ----------------------------------------------------------------------

# Three connects from a python3 client (under the library) to a plain
# server: three tracked stream sockets, all on kernel TCP for "loopback".
STATS_CLIENT='
import socket, sys
port = int(sys.argv[1])
for i in range(3):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.sendall(b"hi%d" % i)
    assert s.recv(16) == b"hi%d" % i
    s.close()
print("done")
'

# stats_value FILE "fallback loopback": the count printed on that line.
stats_value() {
	awk -v k="$2" '{ v = $NF; $NF = ""; sub(/ +$/, ""); sub(/^ +/, "") }
		$0 == k { print v }' "$1"
}

check_stats_summary() {
	local f=$1
	[[ $(grep -c '^xsock stats pid [0-9]* (python3[.0-9]*): ' "$f") == 1 ]] ||
		{ cat "$f"; return 1; }
	grep -q '^xsock stats pid [0-9]* (python3[.0-9]*): 3 stream sockets$' "$f"
	[[ $(stats_value "$f" tcp) == 3 ]]
	[[ $(stats_value "$f" rdma) == 0 ]]
	[[ $(stats_value "$f" "fallback loopback") -ge 3 ]]
	[[ $(stats_value "$f" "fallback loopback") == 3 ]]
	[[ $(stats_value "$f" "fallback mode") == 0 ]]
}

@test "XSOCK_STATS=1: summary on stderr counts the loopback fallbacks" {
	require_py
	start_server 3
	XSOCK_STATS=1 capture client with_xsock "$PY" -c "$STATS_CLIENT" "$PORT"
	wait_server
	[[ $(cat "$T/client.rc") == 0 && $(cat "$T/client.out") == done ]]
	check_stats_summary "$T/client.err"
	# Only the summary went to stderr.
	no_match -Ev '^(xsock stats pid |  )' "$T/client.err"
}

@test "XSOCK_STATS=1 with XSOCK_MODE=tcp: the reason is the mode" {
	require_py
	start_server 3
	XSOCK_STATS=1 XSOCK_MODE=tcp capture client \
		with_xsock "$PY" -c "$STATS_CLIENT" "$PORT"
	wait_server
	[[ $(cat "$T/client.out") == done ]]
	[[ $(stats_value "$T/client.err" tcp) == 3 ]]
	[[ $(stats_value "$T/client.err" "fallback mode") == 3 ]]
	[[ $(stats_value "$T/client.err" "fallback loopback") == 0 ]]
}

@test "XSOCK_STATS=path: summary appended to the file, stderr clean" {
	require_py
	local f=$T/stats.txt
	start_server 3
	XSOCK_STATS=$f capture client with_xsock "$PY" -c "$STATS_CLIENT" "$PORT"
	wait_server
	[[ $(cat "$T/client.out") == done ]]
	[[ ! -s $T/client.err ]]
	check_stats_summary "$f"
	# A second run appends a second summary.
	rm -f "$T/port"
	start_server 3
	XSOCK_STATS=$f capture client with_xsock "$PY" -c "$STATS_CLIENT" "$PORT"
	wait_server
	[[ $(grep -c '^xsock stats pid ' "$f") == 2 ]]
}

# --- threads ----------------------------------------------------------------------------

@test "threads: 8 python3 threads x 200 echo round trips under the library" {
	require_py
	local prog='
import socket, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
ok = [0] * 8
def worker(k):
    for i in range(n):
        s = socket.socket()
        s.settimeout(20)
        s.connect(("127.0.0.1", port))
        msg = b"thread %d iteration %d " % (k, i) * 4
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        if got == msg:
            ok[k] += 1
ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("ok", sum(ok))
'
	# Both ends under the library: the server accepts on a tracked listener.
	start_server 1600 xsock
	capture client with_xsock "$PY" -c "$prog" "$PORT" 200
	wait_server
	[[ $(cat "$T/client.rc") == 0 ]] || { cat "$T/client.err"; return 1; }
	[[ $(cat "$T/client.out") == "ok 1600" ]]
	[[ ! -s $T/client.err ]]
}

# --- valgrind -----------------------------------------------------------------------------

@test "valgrind: no memory errors with the library preloaded" {
	require_cmd valgrind
	require_probe
	[[ -z ${XSOCK_PRELOAD_PREFIX:-} ]] || skip "sanitizer preload set"
	# Cases without fork/exec (valgrind's children exit with its code)
	# and without syscalls valgrind does not know (epoll_pwait2).
	local cases="nonblock_connect_refused msg_peek msg_waitall dup_family
		dup2_onto_socket close_range partial_write_nonblock eintr sendfile
		readv_writev poll_high_fd accept4_flags shutdown_wr threads_echo"
	capture plain "$PROBE" $cases
	capture vg timeout 60 env \
		LD_PRELOAD="$XSOCK_LIB" valgrind --error-exitcode=9 \
		--leak-check=no -q "$PROBE" $cases
	[[ $(cat "$T/vg.rc") == 0 ]] || { cat "$T/vg.err"; return 1; }
	diff -u --label libc --label valgrind "$T/plain.out" "$T/vg.out"
}
