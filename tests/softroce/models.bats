#!/usr/bin/env bats
# Every way a program hands a connection from process to process, over
# RDMA when both ends run xsock (core/neg.c: the transport is negotiated
# over the connection's own kernel TCP connection, by the process that
# does its I/O). Each test moves SIZE bytes each way, checked by SHA-256
# at both ends (tests/tools/models.py), and reads the XSOCK_STATS block of
# the very process that did the I/O, on each side: one RDMA connection,
# every byte counted on it, nothing on kernel TCP.

load tier

bats_require_minimum_version 1.5.0

MODELS=tests/tools/models.py
LIB=build/libxsock.so
SIZE=1048576 # eager and rendezvous both

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	export BATS_TEST_TIMEOUT=300
}

# srv NAME CMD... - CMD on the server side under xsock, its counters in
# $XS_RUN_DIR/NAME.stats (one block per process that exits).
srv()
{
	local name=$1
	shift
	rm -f "$XS_RUN_DIR/$name.stats"
	remote_bg "$name" env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$XS_RUN_DIR/$name.stats" \
		XSOCK_LOG="info:$XS_RUN_DIR/$name.log" "$@"
}

# exchange CLI [--fork] - one checked exchange from an xsock client;
# $io_pid is the server process that did the I/O.
exchange()
{
	run --separate-stderr timeout 120 env $(xsenv "$1") python3 "$MODELS" client \
		"$XS_ADDR_A" "$port" "$SIZE" ${2:-}
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == "ok pid="*" bytes=$SIZE" ]]
	io_pid=$(sed -n 's/^ok pid=\([0-9]*\) .*/\1/p' <<<"$output")
}

# stats_blocks FILE - one line per process of an XSOCK_STATS file:
# "pid=P prog=NAME rdma=N tcp=N undecided=N connects=N accepts=N sent=N
# received=N" (? where the block lacks the counter).
stats_blocks()
{
	awk 'function out(k, i) {
		if (pid == "")
			return
		split("rdma tcp undecided connects accepts sent received", k)
		printf "pid=%s prog=%s", pid, prog
		for (i = 1; i <= 7; i++)
			printf " %s=%s", k[i], (k[i] in v) ? v[k[i]] : "?"
		printf "\n"
	}
	/^xsock stats pid / { out(); delete v; pid = $4; prog = $5; gsub(/[():]/, "", prog); next }
	pid != "" && NF == 2 && $1 ~ /^(tcp|rdma|undecided)$/ { v[$1] = $2 }
	pid != "" && $1 == "rdma" && $2 == "connects" {
		v["connects"] = $3; v["accepts"] = $5; v["sent"] = $8; v["received"] = $10
	}
	END { out() }' "$1"
}

# block FILE PID - that process's counters from an XSOCK_STATS file.
block() { stats_blocks "$XS_RUN_DIR/$1" | grep "^pid=$2 "; }

# io_over_rdma STATS PID ROLE - process PID carried exactly one
# connection, over RDMA, with SIZE bytes received (server) or sent
# (client) on it, and none over kernel TCP.
io_over_rdma()
{
	local b
	b=$(block "$1" "$2")
	echo "$b"
	[[ -n "$b" ]]
	[[ "$b" == *" rdma=1 tcp=0 "* ]]
	if [[ $3 == server ]]; then
		[[ "$b" == *" accepts=1 "* && "$b" == *" received=$SIZE" ]]
	else
		[[ "$b" == *" connects=1 "* && "$b" == *" sent=$SIZE "* ]]
	fi
}

# client_over_rdma CLI - the client process (the one whose block moved
# the bytes) carried its connection over RDMA.
client_over_rdma()
{
	local pid
	cat "$XS_RUN_DIR/$1.stats"
	pid=$(stats_blocks "$XS_RUN_DIR/$1.stats" | grep " sent=$SIZE " |
		sed -n 's/^pid=\([0-9]*\) .*/\1/p' | head -1)
	io_over_rdma "$1.stats" "$pid" client
}

# stop_server NAME PATTERN - SIGTERM to server NAME (its process group),
# then wait until no process matching PATTERN (bracket a letter, so that
# the waiting shell does not match itself) is left: their counters are
# written then.
stop_server()
{
	"$XS_REMOTE" --kill "$1" --signal TERM || true # its status: 143 for socat
	"$XS_REMOTE" --timeout 30 bash -c "while pgrep -f '$2' >/dev/null; do sleep 0.1; done"
}

# wait_server NAME - the server exited by itself; its log on failure.
wait_server()
{
	"$XS_REMOTE" --wait "$1" --timeout 60 || {
		cat "$XS_RUN_DIR/remote/$1.log" "$XS_RUN_DIR/$1.log"
		false
	}
}

@test "models: fork per connection (ForkingTCPServer): the child's I/O over RDMA" {
	srv fork python3 "$MODELS" fork "$port" 2 "$SIZE"
	server_ready fork rdma
	local pids=()
	exchange cli1 && pids+=("$io_pid")
	client_over_rdma cli1
	exchange cli2 && pids+=("$io_pid")
	client_over_rdma cli2
	wait_server fork
	stats_blocks "$XS_RUN_DIR/fork.stats"
	io_over_rdma fork.stats "${pids[0]}" server
	io_over_rdma fork.stats "${pids[1]}" server
	[[ ${pids[0]} != "${pids[1]}" ]]
}

@test "models: fork and exec, the socket on fd 0 and 1 (inetd style)" {
	srv exec python3 "$MODELS" exec "$port" 2 "$SIZE"
	server_ready exec rdma
	local pids=()
	exchange cli1 && pids+=("$io_pid")
	client_over_rdma cli1
	exchange cli2 && pids+=("$io_pid")
	wait_server exec
	stats_blocks "$XS_RUN_DIR/exec.stats"
	io_over_rdma exec.stats "${pids[0]}" server
	io_over_rdma exec.stats "${pids[1]}" server
	# the exec'd handler is a new program image
	block exec.stats "${pids[0]}" | grep -q "prog=python3"
}

@test "models: a program without xsock (exec or posix_spawn with an empty environment) gets a socket no process used: every byte as over kernel TCP, none of ours, no wait" {
	# the server's side: an exec'd handler, then a spawned one; the
	# client runs xsock and hears "rdma 0" at once, never timing out
	local how
	for how in exec spawnbare; do
		port=$((port + 1))
		if [[ $how == exec ]]; then
			srv bare$how python3 "$MODELS" exec "$port" 1 "$SIZE" --bare
		else
			srv bare$how python3 "$MODELS" spawnbare "$port" 1 "$SIZE"
		fi
		server_ready "bare$how" rdma
		exchange "bcli$how"
		wait_server "bare$how"
		cat "$XS_RUN_DIR/bcli$how.stats"
		[[ $(stat "bcli$how" tcp) == 1 && $(stat "bcli$how" rdma) == 0 ]]
		[[ $(stat "bcli$how" timeout) == 0 ]]
	done
	# the client's side: it connects, then execs a program without xsock
	# that does the exchange; the server (a fork per connection) reads no
	# reply of ours, whether it looked before the exec or after
	port=$((port + 1))
	srv barecli python3 "$MODELS" fork "$port" 1 "$SIZE"
	server_ready barecli rdma
	exchange bclicli --exec-bare
	wait_server barecli
	stats_blocks "$XS_RUN_DIR/barecli.stats"
	[[ $(block barecli.stats "$io_pid") == *" rdma=0 tcp=1 "* ]]
	# both: neither program reads a byte of ours
	port=$((port + 1))
	srv bareboth python3 "$MODELS" exec "$port" 1 "$SIZE" --bare
	server_ready bareboth rdma
	exchange bcliboth --exec-bare
	wait_server bareboth
}

@test "programs: sed inetd-style (socat EXEC nofork): its stdin and stdout (glibc stdio) carry the connection over RDMA, every line as over kernel TCP" {
	command -v socat >/dev/null || { echo "socat not installed (tests/install-deps)"; false; }
	# sed reads with getdelim() and writes with fwrite(), whose system
	# calls glibc makes itself, unseen by any wrapper; its stdin and
	# stdout are made the library's streams at its start (else it read
	# the client's hello as its first 24 bytes: 7114 bytes came back)
	local client='import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
for i in range(200):
    s.sendall(b"line %d: a stream of bytes, then a\n" % i)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(len(got), got.count(b"\n"), got.splitlines()[-1].decode())' kernel
	srv sed socat "TCP-LISTEN:$port,bind=$XS_ADDR_A,fork,reuseaddr" EXEC:"sed s/a/A/g",nofork
	server_ready sed rdma
	run --separate-stderr timeout 60 python3 -c "$client" "$XS_ADDR_A" "$port"
	kernel=$output
	echo "kernel: $kernel"
	[[ "$kernel" == "7090 200 line 199: A streAm of bytes, then A" ]]
	run --separate-stderr timeout 60 env $(xsenv sedc) python3 -c "$client" "$XS_ADDR_A" "$port"
	echo "xsock: $output $stderr"
	[[ "$output" == "$kernel" ]]
	stop_server sed "[s]ocat TCP-LISTEN:$port"
	cat "$XS_RUN_DIR/sed.stats" "$XS_RUN_DIR/sedc.stats"
	# sed's connection over RDMA, every byte both ways
	blocks_of sed.stats sed | grep " rdma=1 tcp=0 " | grep -q " sent=7090 received=7090$"
	[[ $(stat sedc rdma) == 1 ]]
}

# socat_system NAME CMD WANT - socat runs `sh -c CMD` (SYSTEM, nofork) on
# each connection, CMD printing the SHA-256 of what it reads; a client
# sends 10,040 bytes and half-closes, over kernel TCP first, then under
# xsock (stats NAMEc): each prints WANT ("True 10040": the hash right,
# then any words after the hash's "-").
socat_system()
{
	local name=$1 cmd=$2 want=$3
	local client='import hashlib, socket, sys
data = bytes(range(251)) * 40
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
w = got.decode().split()
print(w[0] == hashlib.sha256(data).hexdigest(), len(data), *w[2:])'
	srv "$name" socat "TCP-LISTEN:$port,bind=$XS_ADDR_A,fork,reuseaddr" "SYSTEM:$cmd,nofork"
	server_ready "$name" rdma
	run --separate-stderr timeout 60 python3 -c "$client" "$XS_ADDR_A" "$port"
	echo "kernel: $output $stderr"
	[[ "$output" == "$want" ]]
	run --separate-stderr timeout 60 env $(xsenv "${name}c") python3 -c "$client" "$XS_ADDR_A" "$port"
	echo "xsock: $output $stderr"
	[[ "$output" == "$want" ]]
	stop_server "$name" "[s]ocat TCP-LISTEN:$port"
	cat "$XS_RUN_DIR/$name.stats" "$XS_RUN_DIR/${name}c.stats"
}

@test "programs: socat SYSTEM nofork, the socket through exec, fork and exec (sh -c CMD: dash forks CMD and holds the socket meanwhile): sha256sum over RDMA, 'sha256sum; echo END' too, the echo over kernel TCP after it; the pipeline 'cat | sha256sum' over kernel TCP; every byte" {
	command -v socat >/dev/null || { echo "socat not installed (tests/install-deps)"; false; }
	# socat's child execs /bin/sh -c CMD; dash forks each command, the
	# socket still negotiable, and holds it meanwhile. The command that
	# the shell alone runs carries it over RDMA, and lets it go to its
	# kernel TCP connection at its end, where the shell still holds it
	# (its echo goes there). The commands of a pipeline share it: the
	# first to claim it decides kernel TCP for both. (Before: sha256sum
	# read the client's hello and fallback messages as data when the
	# shell kept no record for it; the pipeline's cat did when the two
	# took the record at once.)
	socat_system sys sha256sum "True 10040"
	blocks_of sys.stats sha256sum | grep " rdma=1 tcp=0 " | grep -q " received=10040$"
	[[ $(stat sysc rdma) == 1 ]]
	socat_system sysend 'sha256sum; echo END' "True 10040 END"
	blocks_of sysend.stats sha256sum | grep " rdma=1 tcp=0 " | grep -q " received=10040$"
	socat_system pipe 'cat | sha256sum' "True 10040"
	[[ $(stat pipec tcp) == 1 && $(stat pipec rdma) == 0 ]]
	! grep -h "^  rdma  *[1-9]" "$XS_RUN_DIR/pipe.stats"
}

@test "programs: tcpserver runs a shell pipeline on the connection (sh -c 'od -c | head -3': od reads the socket while head writes it): the output byte for byte as over kernel TCP, 3 times" {
	command -v tcpserver >/dev/null || { echo "tcpserver not installed (tests/install-deps)"; false; }
	local in=$BATS_TEST_TMPDIR/in want got i
	head -c 3000 /dev/urandom >"$in"
	# tcpserver's child execs sh with the socket on fd 0 and 1; the
	# shell forks od and head, which adopted the negotiable socket at
	# the same time: one of them found no record and read the client's
	# hello as data (od printed 365 X S K), or head's lines were lost
	remote_bg pipetcp tcpserver -R -H -l0 "$XS_ADDR_A" "$port" sh -c 'od -c | head -3'
	server_ready pipetcp tcp
	want=$(timeout 30 nc -N "$XS_ADDR_A" "$port" <"$in" | od -c)
	echo "kernel: $want"
	[[ $(grep -c . <<<"$want") -ge 3 ]]
	stop_server pipetcp "[t]cpserver -R -H -l0 $XS_ADDR_A $port"
	srv pipe tcpserver -R -H -l0 "$XS_ADDR_A" "$port" sh -c 'od -c | head -3'
	server_ready pipe rdma
	for i in 1 2 3; do
		got=$(timeout 30 env $(xsenv "pipec$i") nc -N "$XS_ADDR_A" "$port" <"$in" | od -c)
		echo "xsock $i: $got"
		[[ "$got" == "$want" ]]
	done
	stop_server pipe "[t]cpserver -R -H -l0 $XS_ADDR_A $port"
}

@test "models: fork per connection, the child puts the socket on fd 0 and 1 (dup2, dup, F_DUPFD) and speaks glibc stdio, no exec: every line over RDMA, as over kernel TCP" {
	# tests/tools/stdiosrv.c: fgets() and printf() make their system
	# calls in glibc, unseen by any wrapper; the child's stdin and stdout
	# become the library's streams when the socket lands on fd 0 and 1,
	# with the "hello " its stdout held (else fgets() read the client's
	# hello as its first line, and printf() wrote under the RDMA stream)
	local client='import hashlib, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
for i in range(300):
    s.sendall(b"line %d of the stream\n" % i)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(len(got), hashlib.sha256(got).hexdigest(), got[:16])'
	local want sent received how
	want=$(python3 -c 'import hashlib
got = b"hello " + b"".join(b"%d: line %d of the stream\n" % (i + 1, i) for i in range(300)) + b"bye after 300 lines\n"
print(len(got), hashlib.sha256(got).hexdigest(), got[:16])')
	sent=${want%% *}
	received=$(python3 -c 'print(sum(len(b"line %d of the stream\n" % i) for i in range(300)))')
	for how in dup2 dup fcntl; do
		# kernel TCP at both ends: what the program does without us
		remote_bg "plain-$how" build/tools/stdiosrv "$XS_ADDR_A" "$port" 1 "$how"
		server_ready "plain-$how" tcp
		run --separate-stderr timeout 60 python3 -c "$client" "$XS_ADDR_A" "$port"
		echo "kernel TCP, $how: $output $stderr"
		[[ "$output" == "$want" ]]
		wait_server "plain-$how"
		port=$((port + 1))
		srv "stdio-$how" build/tools/stdiosrv "$XS_ADDR_A" "$port" 1 "$how"
		server_ready "stdio-$how" rdma
		run --separate-stderr timeout 60 env $(xsenv "stdioc-$how") python3 -c "$client" "$XS_ADDR_A" "$port"
		echo "xsock, $how: $output $stderr"
		[[ "$output" == "$want" ]]
		wait_server "stdio-$how"
		stats_blocks "$XS_RUN_DIR/stdio-$how.stats"
		# the child's connection over RDMA, every byte both ways
		blocks_of "stdio-$how.stats" stdiosrv | grep " rdma=1 tcp=0 " |
			grep -q " sent=$sent received=$received$"
		[[ $(stat "stdioc-$how" rdma) == 1 ]]
		port=$((port + 1))
	done
}

@test "models: a child that changes its credentials mid-connection (rsync's daemon sets its group after the greeting): the connection goes on over kernel TCP, every byte, as over kernel TCP" {
	# the kernel refuses a process whose credentials changed the verbs
	# objects it made before (EACCES): its RDMA connection reset at the
	# next post ("ibv_post_send failed"); it moves to its kernel TCP
	# connection before the change now
	local tool=tests/tools/setidserve.py mode want="echo 1048576 of 1048576, sha256 equal"
	for mode in kernel xsock; do
		if [[ $mode == xsock ]]; then
			srv "setid$mode" python3 "$tool" serve "$XS_ADDR_A" "$port"
			server_ready "setid$mode" rdma
			run --separate-stderr timeout 120 env $(xsenv setidc) python3 "$tool" client "$XS_ADDR_A" "$port" 1048576
		else
			remote_bg "setid$mode" python3 "$tool" serve "$XS_ADDR_A" "$port"
			server_ready "setid$mode" tcp
			run --separate-stderr timeout 120 python3 "$tool" client "$XS_ADDR_A" "$port" 1048576
		fi
		echo "$mode: $output $stderr"
		((status == 0))
		[[ "$output" == "$want" ]]
		wait_server "setid$mode"
		grep -qx "child: echoed 1048576" "$XS_RUN_DIR/remote/setid$mode.log"
		port=$((port + 1))
	done
	cat "$XS_RUN_DIR/setidxsock.stats" "$XS_RUN_DIR/setidc.stats"
	# it began over RDMA
	[[ $(stat setidc rdma) == 1 && $(stat setidc tcp) == 0 ]]
	! grep -q "connection reset" "$XS_RUN_DIR/setidxsock.log"
}

@test "models: pre-forked workers accept on an inherited listener" {
	srv prefork python3 "$MODELS" prefork "$port" 2 "$SIZE"
	server_ready prefork rdma
	local i pids=()
	for i in 1 2 3 4; do
		exchange "cli$i"
		pids+=("$io_pid")
		client_over_rdma "cli$i"
	done
	stop_server prefork "[m]odels.py prefork $port"
	stats_blocks "$XS_RUN_DIR/prefork.stats"
	# each worker's block sums its connections: all over RDMA
	local b pid n total=0
	for pid in $(printf '%s\n' "${pids[@]}" | sort -u); do
		b=$(block prefork.stats "$pid")
		echo "$b"
		n=$(printf '%s\n' "${pids[@]}" | grep -cx "$pid")
		[[ "$b" == *" rdma=$n tcp=0 "* && "$b" == *" accepts=$n "* ]]
		[[ "$b" == *" received=$((n * SIZE))" ]]
		total=$((total + n))
	done
	((total == 4))
}

@test "models: SO_REUSEPORT listeners in several processes" {
	srv reuse1 python3 "$MODELS" reuseport "$port" "$SIZE"
	server_ready reuse1 rdma
	srv reuse2 python3 "$MODELS" reuseport "$port" "$SIZE"
	"$XS_REMOTE" --timeout 30 bash -c \
		"until [[ \$(ss -Hltn 'sport = :$port' | grep -c LISTEN) == 2 ]]; do sleep 0.1; done"
	local i pids=()
	for i in 1 2 3 4 5 6; do
		exchange "cli$i"
		pids+=("$io_pid")
		client_over_rdma "cli$i"
	done
	"$XS_REMOTE" --kill reuse1 --signal TERM
	stop_server reuse2 "[m]odels.py reuseport $port"
	cat "$XS_RUN_DIR/reuse1.stats" "$XS_RUN_DIR/reuse2.stats" >"$XS_RUN_DIR/reuse.stats"
	stats_blocks "$XS_RUN_DIR/reuse.stats"
	local b pid n
	for pid in $(printf '%s\n' "${pids[@]}" | sort -u); do
		b=$(block reuse.stats "$pid")
		n=$(printf '%s\n' "${pids[@]}" | grep -cx "$pid")
		[[ "$b" == *" rdma=$n tcp=0 "* && "$b" == *" received=$((n * SIZE))" ]]
	done
	note "reuseport: connections per process: $(printf '%s\n' "${pids[@]}" | sort | uniq -c | awk '{print $1}' | xargs)"
}

@test "models: a connected socket passed to another process with SCM_RIGHTS" {
	srv scm python3 "$MODELS" scm "$port" 2 "$SIZE"
	server_ready scm rdma
	local pids=()
	exchange cli1 && pids+=("$io_pid")
	client_over_rdma cli1
	exchange cli2 && pids+=("$io_pid")
	wait_server scm
	stats_blocks "$XS_RUN_DIR/scm.stats"
	[[ ${pids[0]} == "${pids[1]}" ]] # the one worker, not the acceptor
	b=$(block scm.stats "${pids[0]}")
	echo "$b"
	[[ "$b" == *" rdma=2 tcp=0 "* && "$b" == *" received=$((2 * SIZE))" ]]
}

@test "models: SCM_RIGHTS to a worker forked before its user's first xsock process made the handoff table" {
	# After a boot, a user's first xsock process finds no handoff table
	# (/dev/shm/xsock-handoff-UID) at its start, and forks its worker
	# before its listener makes the table: the worker must still find
	# the record of each socket it gets, or it reads our control
	# messages as data. A user none of whose processes ran since boot.
	local uid dir pids=() b
	for uid in $(shuf -i 40000-59999 -n 20); do
		"$XS_REMOTE" test ! -e "/dev/shm/xsock-handoff-$uid" && break
	done
	"$XS_REMOTE" test ! -e "/dev/shm/xsock-handoff-$uid"
	# its counters: where that user may write
	dir=$("$XS_REMOTE" mktemp -d)
	"$XS_REMOTE" chmod 1777 "$dir"
	remote_bg scmfirst setpriv --reuid="$uid" --regid="$uid" --clear-groups \
		env LD_PRELOAD="$PWD/$LIB" XSOCK_STATS="$dir/scmfirst.stats" \
		python3 "$MODELS" scm "$port" 2 "$SIZE"
	server_ready scmfirst rdma
	exchange cli1
	pids+=("$io_pid")
	client_over_rdma cli1
	exchange cli2
	pids+=("$io_pid")
	client_over_rdma cli2
	wait_server scmfirst
	# the table that user's processes made (and nobody else's)
	"$XS_REMOTE" bash -c "[[ \$(stat -c %u /dev/shm/xsock-handoff-$uid) == $uid ]]"
	"$XS_REMOTE" rm "/dev/shm/xsock-handoff-$uid"
	"$XS_REMOTE" cat "$dir/scmfirst.stats" >"$XS_RUN_DIR/scmfirst.stats"
	"$XS_REMOTE" rm -r "$dir"
	stats_blocks "$XS_RUN_DIR/scmfirst.stats"
	[[ ${pids[0]} == "${pids[1]}" ]] # the one worker
	b=$(block scmfirst.stats "${pids[0]}")
	echo "$b"
	[[ "$b" == *" rdma=2 tcp=0 "* && "$b" == *" received=$((2 * SIZE))" ]]
}

@test "models: SCM_RIGHTS of a live RDMA connection: it goes on over kernel TCP with its unread bytes" {
	# The acceptor reads SIZE bytes over RDMA, answers, and passes the
	# socket 0.5 s later to a worker forked before the connection was
	# made (so not one that could ask for it): once with the client's
	# next 1000 bytes and its FIN unread, once with SIZE bytes and the
	# FIN after the pass.
	srv scml python3 "$MODELS" scmlive "$port" 2 "$SIZE"
	server_ready scml rdma
	live_client scmcli1 1000
	live_client scmcli2 "$SIZE" --late-shut
	wait_server scml
	cat "$XS_RUN_DIR/remote/scml.log" "$XS_RUN_DIR/scml.log"
	grep -qx "after pass: 1000 bytes, then EOF" "$XS_RUN_DIR/remote/scml.log"
	grep -qx "after pass: $SIZE bytes, then EOF" "$XS_RUN_DIR/remote/scml.log"
	grep -q "kernel TCP for the process it goes to, 1000 unread bytes handed over, then EOF$" \
		"$XS_RUN_DIR/scml.log"
	grep -q "came moved to kernel TCP, 1000 unread bytes from the process before, then EOF$" \
		"$XS_RUN_DIR/scml.log"
	# the acceptor carried both over RDMA, the worker over kernel TCP
	local b
	b=$(stats_blocks "$XS_RUN_DIR/scml.stats")
	echo "$b"
	[[ $(grep -c " rdma=2 tcp=0 " <<<"$b") == 1 && $(grep -c " rdma=0 tcp=2 " <<<"$b") == 1 ]]
	# nothing left behind for a receiver that never came
	! "$XS_REMOTE" bash -c 'ls /dev/shm | grep -q "^xsock-moved-"'
}

@test "models: daemons: double fork before listen(), and after it" {
	local when
	for when in before after; do
		port=$((port + 1))
		srv "d$when" python3 "$MODELS" daemon "$port" 1 "$SIZE" "$when" \
			"$XS_RUN_DIR/d$when.pid"
		"$XS_REMOTE" --timeout 30 bash -c "until [[ -s $XS_RUN_DIR/d$when.pid ]]; do sleep 0.1; done"
		# the daemon (not its parent, gone) answers probes
		server_ready "d$when" rdma
		exchange "cli$when"
		client_over_rdma "cli$when"
		[[ $io_pid == $(cat "$XS_RUN_DIR/d$when.pid") ]]
		"$XS_REMOTE" --timeout 30 bash -c "while kill -0 $io_pid 2>/dev/null; do sleep 0.1; done"
		stats_blocks "$XS_RUN_DIR/d$when.stats"
		io_over_rdma "d$when.stats" "$io_pid" server
	done
}

@test "models: the client forks after connect() and the child does the I/O" {
	srv fsrv python3 "$MODELS" fork "$port" 1 "$SIZE"
	server_ready fsrv rdma
	exchange cfork --fork
	client_over_rdma cfork
	wait_server fsrv
	io_over_rdma fsrv.stats "$io_pid" server
}

# live_client NAME UP ARG... - one checked exchange of models.py
# execlive-client (UP bytes after the exec's answer; ARGs after them)
# under xsock, its counters NAME: every byte whole in both directions.
live_client()
{
	local name=$1 up=$2
	shift 2
	run --separate-stderr timeout 120 env $(xsenv "$name") python3 "$MODELS" execlive-client \
		"$XS_ADDR_A" "$port" "$SIZE" --up "$up" "$@"
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == *"before exec: sha ok"* ]]
	[[ "$output" == *"after exec: up ok, down ok, pid "* ]]
	[[ $(stat "$name" rdma) == 1 ]]
}

@test "models: exec with a live RDMA connection: it goes on over kernel TCP with its unread bytes" {
	# The server reads SIZE bytes over RDMA, answers, and execs 0.5 s
	# later: the client's next 1000 bytes and its FIN have come over
	# RDMA by then, unread. The connection moves to its kernel TCP
	# connection before the exec (core/move.c); the new image gets those
	# bytes and the EOF from the old one, and answers with SIZE bytes.
	srv live python3 "$MODELS" execlive "$port" 1 "$SIZE"
	server_ready live rdma
	live_client livecli 1000
	wait_server live
	cat "$XS_RUN_DIR/remote/live.log" "$XS_RUN_DIR/live.log"
	grep -qx "after exec: 1000 bytes, then EOF" "$XS_RUN_DIR/remote/live.log"
	grep -q "kernel TCP for the exec'd program, 1000 unread bytes handed over, then EOF$" \
		"$XS_RUN_DIR/live.log"
	grep -q "came moved to kernel TCP, 1000 unread bytes from the process before, then EOF$" \
		"$XS_RUN_DIR/live.log"
	# the new image carried it over kernel TCP (the first one, gone with
	# the exec, wrote no counters)
	local b
	b=$(stats_blocks "$XS_RUN_DIR/live.stats")
	echo "$b"
	[[ $(wc -l <<<"$b") == 1 && "$b" == *" rdma=0 tcp=1 "* ]]
}

@test "models: exec in the child of a fork (CGI's way): the connection goes on over kernel TCP" {
	# The parent owns the RDMA connection and waits for its child, which
	# execs on it: the new program asks the parent for the move. Once
	# with SIZE bytes and the client's FIN after the exec, once with
	# 1000 bytes and the FIN before it.
	srv cgi python3 "$MODELS" execchild "$port" 2 "$SIZE"
	server_ready cgi rdma
	live_client cgicli1 "$SIZE" --late-shut
	live_client cgicli2 1000
	wait_server cgi
	cat "$XS_RUN_DIR/remote/cgi.log" "$XS_RUN_DIR/cgi.log"
	grep -qx "after exec: $SIZE bytes, then EOF" "$XS_RUN_DIR/remote/cgi.log"
	grep -qx "after exec: 1000 bytes, then EOF" "$XS_RUN_DIR/remote/cgi.log"
	[[ $(grep -c 'moved to kernel TCP for another process: done' "$XS_RUN_DIR/cgi.log") == 2 ]]
	# the child lends the exec'd program its channel to the parent; the
	# program asks for the move at its first read
	[[ $(grep -c "the exec'd program may take the connection of pid" "$XS_RUN_DIR/cgi.log") == 2 ]]
	grep -q "connection of pid [0-9]* moved to kernel TCP: done, 1000 unread bytes taken over, then EOF$" \
		"$XS_RUN_DIR/cgi.log"
	# the parent carried both over RDMA, each new image over kernel TCP
	local b
	b=$(stats_blocks "$XS_RUN_DIR/cgi.stats")
	echo "$b"
	[[ $(grep -c " rdma=2 tcp=0 " <<<"$b") == 1 && $(grep -c " rdma=0 tcp=1 " <<<"$b") == 2 ]]
}

# after_client NAME ARG... - one checked exchange of models.py
# forkafter-client (ARGs after SIZE) under xsock, its counters NAME.
after_client()
{
	local name=$1
	shift
	run --separate-stderr timeout 120 env $(xsenv "$name") python3 "$MODELS" forkafter-client \
		"$XS_ADDR_A" "$port" "$SIZE" "$@"
	echo "$output"
	echo "$stderr"
	((status == 0))
	[[ "$output" == "ok pid="*" bytes=$SIZE" ]]
}

@test "models: a fork after the first I/O: the child takes the live connection over (sshd's way)" {
	# The parent reads the greeting (its I/O claims the connection over
	# RDMA) and answers it; the child, forked then, does the rest: the
	# connection moves to its kernel TCP connection, with the bytes that
	# came over RDMA and the parent never read (core/move.c). The client
	# sends SIZE bytes and its FIN at once (the FIN goes on TCP: the
	# client is still sending when the move comes), then again with its
	# FIN 0.5 s after the answer, then 1000 bytes whose FIN came over
	# RDMA before the move (the child's reads end there).
	srv after python3 "$MODELS" forkafter "$port" 3 "$SIZE"
	server_ready after rdma
	after_client acli1
	after_client acli2 --late-shut
	after_client acli3 --up 1000
	wait_server after
	cat "$XS_RUN_DIR/after.log"
	# every connection began over RDMA, at both ends
	[[ $(stat acli1 rdma) == 1 && $(stat acli2 rdma) == 1 && $(stat acli3 rdma) == 1 ]]
	[[ $(grep -c 'fd [0-9]*: connection of pid [0-9]* moved to kernel TCP: done' \
		"$XS_RUN_DIR/after.log") == 3 ]]
	[[ $(grep -c 'moved to kernel TCP for another process: done' "$XS_RUN_DIR/after.log") == 3 ]]
	# the third time, the 1000 bytes the parent had not read and the FIN
	# that had come over RDMA after them
	grep -q 'done, 1000 unread bytes taken over, then EOF$' "$XS_RUN_DIR/after.log"
}

@test "models: a fork after the first I/O, the parent closes its copy or ends at once: the child goes on" {
	# As sshd's way, but the parent lets the connection go before its
	# child's first call: the connection moves to kernel TCP then, and
	# what came over RDMA unread waits for the child's ask (the parent
	# lives), or goes to it at once (the parent ends).
	srv fclose python3 "$MODELS" forkclose "$port" 2 "$SIZE" close
	server_ready fclose rdma
	after_client fccli1
	after_client fccli2 --up 1000
	wait_server fclose
	cat "$XS_RUN_DIR/fclose.log"
	[[ $(grep -c 'let go while a child may hold it: moved to kernel TCP (done)' "$XS_RUN_DIR/fclose.log") == 2 ]]
	[[ $(grep -c 'connection of pid [0-9]* moved to kernel TCP: done' "$XS_RUN_DIR/fclose.log") == 2 ]]
	grep -q 'done, 1000 unread bytes taken over, then EOF$' "$XS_RUN_DIR/fclose.log"
	srv fexit python3 "$MODELS" forkclose "$port" 1 "$SIZE" exit
	server_ready fexit rdma
	after_client fecli
	"$XS_REMOTE" --timeout 60 bash -c "while pgrep -f '[f]orkclose $port' >/dev/null; do sleep 0.1; done"
	cat "$XS_RUN_DIR/fexit.log"
	grep -q 'let go while a child may hold it: moved to kernel TCP (done)' "$XS_RUN_DIR/fexit.log"
	grep -q 'connection of pid [0-9]* moved to kernel TCP: done' "$XS_RUN_DIR/fexit.log"
	[[ $(stat fccli1 rdma) == 1 && $(stat fccli2 rdma) == 1 && $(stat fecli rdma) == 1 ]]
}

@test "models: a forked child execs a helper that never uses the live connection: the parent serves on over RDMA" {
	# The helper inherits the connection (no FD_CLOEXEC) and the channel
	# to the parent, and never uses either: the connection stays the
	# parent's, over RDMA, its unread bytes with it.
	srv helper python3 "$MODELS" forkhelper "$port" "$SIZE"
	server_ready helper rdma
	after_client hcli
	wait_server helper
	cat "$XS_RUN_DIR/helper.log"
	grep -q "the exec'd program may take the connection of pid" "$XS_RUN_DIR/helper.log"
	! grep -q 'moved to kernel TCP' "$XS_RUN_DIR/helper.log"
	[[ $(stat hcli rdma) == 1 ]]
	local b
	b=$(stats_blocks "$XS_RUN_DIR/helper.stats")
	echo "$b"
	# the parent: its one connection over RDMA, the greeting and SIZE
	# bytes received on it; the helper: nothing received
	local recv
	recv=$(grep " rdma=1 tcp=0 " <<<"$b" | sed -n 's/.* received=\([0-9]*\)$/\1/p')
	((recv > SIZE && recv < SIZE + 100))
	[[ $(grep -c " received=0$" <<<"$b") == 1 ]]
}

@test "models: posix_spawn of a program that serves the live connection: it goes on over kernel TCP" {
	# The parent's I/O claims the connection; the program it spawns
	# inherits it with a channel to the parent and asks for the move at
	# its first read, as a forked child does.
	srv spawn python3 "$MODELS" spawn "$port" 2 "$SIZE"
	server_ready spawn rdma
	after_client spcli1
	after_client spcli2 --up 1000
	wait_server spawn
	cat "$XS_RUN_DIR/spawn.log"
	[[ $(grep -c 'moved to kernel TCP for another process: done' "$XS_RUN_DIR/spawn.log") == 2 ]]
	grep -q 'connection of pid [0-9]* moved to kernel TCP: done, 1000 unread bytes taken over, then EOF$' \
		"$XS_RUN_DIR/spawn.log"
	[[ $(stat spcli1 rdma) == 1 && $(stat spcli2 rdma) == 1 ]]
}

@test "models: the child that took the connection over ends with bytes unread: the parent reads them" {
	# The child reads 200,000 of the bytes it took over and exits; they
	# are handed back, and the parent reads on from there, as from the
	# kernel's receive queue.
	srv back python3 "$MODELS" forkback "$port" "$SIZE"
	server_ready back rdma
	after_client bcli --late-shut
	wait_server back
	cat "$XS_RUN_DIR/remote/back.log" "$XS_RUN_DIR/back.log"
	grep -q '^child 200000 parent [0-9]* bytes$' "$XS_RUN_DIR/remote/back.log"
	grep -q 'bytes taken over and not read, given back: done$' "$XS_RUN_DIR/back.log"
	grep -q 'handed-over bytes given back: they lead the socket$' "$XS_RUN_DIR/back.log"
	[[ $(stat bcli rdma) == 1 ]]
}

@test "models: a child forked before the first I/O uses the connection and ends (_exit, close, exit, close_range, dup2 onto it); the parent goes on with it: every byte, as over kernel TCP" {
	# The child negotiates RDMA, reads the first line of the answer and
	# ends with the second unread. The parent still holds the socket, so
	# the child's end moves the connection to kernel TCP, that line left
	# for the parent, which reads it and goes on over kernel TCP.
	local tool=tests/tools/lineserve.py end expect=""
	for end in _exit close sys.exit closerange dup2; do
		expect+="$end: child 0, then 5005 b'+one', b'TWO\\n' 5005 b'+two'"$'\n'
	done
	expect=${expect%$'\n'}
	srv lines python3 "$tool" serve "$XS_ADDR_A" "$port" 5
	server_ready lines rdma
	run --separate-stderr timeout 120 env $(xsenv lcli) XSOCK_LOG="info:$XS_RUN_DIR/lcli.log" \
		python3 "$tool" client "$XS_ADDR_A" "$port"
	echo "$output"
	echo "$stderr"
	cat "$XS_RUN_DIR/lcli.log" "$XS_RUN_DIR/lcli.stats"
	((status == 0))
	[[ "$output" == "$expect" ]]
	wait_server lines
	[[ $(grep -c '^conn [0-4]: lines=2$' "$XS_RUN_DIR/remote/lines.log") == 5 ]]
	# each child carried its connection over RDMA and let it go
	[[ $(grep -c 'let go while the parent process holds it: kernel TCP from here on (done), 5005 unread bytes left for it' \
		"$XS_RUN_DIR/lcli.log") == 5 ]]
	[[ $(grep -c 'came moved to kernel TCP, 5005 unread bytes from the process before' "$XS_RUN_DIR/lcli.log") == 5 ]]
	# counters are written at exit(), so by the sys.exit() child alone:
	# its connection over RDMA, one line out and two in
	stats_blocks "$XS_RUN_DIR/lcli.stats" |
		grep -q " rdma=1 tcp=0 undecided=0 connects=1 accepts=0 sent=4 received=5009$"
	# the same client over kernel TCP prints the same
	srv lines2 python3 "$tool" serve "$XS_ADDR_A" "$port" 5
	server_ready lines2 rdma
	run --separate-stderr timeout 120 python3 "$tool" client "$XS_ADDR_A" "$port"
	[[ "$output" == "$expect" ]]
	wait_server lines2
}

@test "models: a process forks while its non-blocking connect runs and closes its copy once the connect is done: the child, which waited, carries the connection over RDMA, as its own" {
	# The parent's close comes after the connect's hello and before the
	# child's first look: a child forked since the connect began may hold
	# the socket, so the close leaves the negotiation to it
	local want=$'writable True, answer b\'ONE\\n\' 5005\nchild 0'
	srv fcsrv python3 tests/tools/lineserve.py serve "$XS_ADDR_A" "$port" 1
	server_ready fcsrv rdma
	rm -f "$XS_RUN_DIR/fccli.stats"
	run --separate-stderr timeout 60 env $(xsenv fccli) python3 tests/tools/forkclose.py "$XS_ADDR_A" "$port"
	echo "$output $stderr"
	[[ "$output" == "$want" ]]
	wait_server fcsrv
	grep -qx 'conn 0: lines=1' "$XS_RUN_DIR/remote/fcsrv.log"
	stats_blocks "$XS_RUN_DIR/fccli.stats"
	# the child's block: its connection over RDMA, nothing over TCP
	stats_blocks "$XS_RUN_DIR/fccli.stats" | grep -q " rdma=1 tcp=0 undecided=0 connects=1 "
	! stats_blocks "$XS_RUN_DIR/fccli.stats" | grep -q " tcp=[1-9]"
	# the same client over kernel TCP prints the same
	srv fcsrv2 python3 tests/tools/lineserve.py serve "$XS_ADDR_A" "$port" 1
	server_ready fcsrv2 rdma
	run --separate-stderr timeout 60 python3 tests/tools/forkclose.py "$XS_ADDR_A" "$port"
	[[ "$output" == "$want" ]]
	wait_server fcsrv2
}

# blocks_of STATS PROG - the blocks of that program's processes.
blocks_of() { stats_blocks "$XS_RUN_DIR/$1" | grep " prog=$2 "; }

# sum_field BLOCKS FIELD - FIELD summed over blocks.
sum_field() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" <<<"$1" | awk '{ t += $1 } END { print t + 0 }'; }

@test "programs: socat TCP-LISTEN,fork: each child carries its connection over RDMA" {
	command -v socat >/dev/null || { echo "socat not installed (tests/install-deps)"; false; }
	# -t 30: after the client's EOF, socat waits for the whole answer
	srv socat socat -t 30 "TCP-LISTEN:$port,bind=$XS_ADDR_A,fork,reuseaddr" \
		EXEC:"python3 $PWD/$MODELS stdio $SIZE"
	server_ready socat rdma
	exchange cli1
	client_over_rdma cli1
	exchange cli2
	client_over_rdma cli2
	stop_server socat "[s]ocat TCP-LISTEN:$port"
	local b
	b=$(blocks_of socat.stats socat)
	echo "$b"
	# the two children; the parent only accepted (undecided)
	[[ $(grep -c " rdma=1 tcp=0 .* accepts=1 sent=[0-9]* received=$SIZE$" <<<"$b") == 2 ]]
	[[ $(sum_field "$b" tcp) == 0 ]]
}

@test "programs: socat TCP-LISTEN,fork greets with its program's output: clients with xsock and without read it whole" {
	command -v socat >/dev/null || { echo "socat not installed (tests/install-deps)"; false; }
	# the child waits for its socket to be writable before it copies the
	# greeting: a connection still negotiating is writable, as the
	# kernel socket under it (without xsock the client sent no hello,
	# and nothing came until the negotiation gave up, after socat had)
	srv socatg socat "TCP-LISTEN:$port,bind=$XS_ADDR_A,fork,reuseaddr" SYSTEM:"echo 220-greeting"
	server_ready socatg rdma
	local rd="import socket
s = socket.create_connection(('$XS_ADDR_A', $port))
d = b''
while True:
    b = s.recv(100)
    if not b:
        break
    d += b
print(repr(d))" i
	for i in 1 2; do
		run --separate-stderr timeout 20 python3 -c "$rd"
		echo "kernel TCP client $i: $output $stderr"
		[[ $status == 0 && $output == "b'220-greeting\\n'" ]]
		run --separate-stderr timeout 20 env $(xsenv "socatg$i") python3 -c "$rd"
		echo "xsock client $i: $output $stderr"
		[[ $status == 0 && $output == "b'220-greeting\\n'" ]]
		cat "$XS_RUN_DIR/socatg$i.stats"
		[[ $(stat "socatg$i" rdma) == 1 && $(stat "socatg$i" tcp) == 0 ]]
	done
	stop_server socatg "[s]ocat TCP-LISTEN:$port"
	local b
	b=$(blocks_of socatg.stats socat)
	echo "$b"
	# the four children: two over RDMA, two over kernel TCP
	[[ $(sum_field "$b" rdma) == 2 && $(sum_field "$b" tcp) == 2 ]]
}

@test "programs: sshd as Debian ships it (re-exec, privilege separation, seccomp): scp of 20 MiB up, 1 MiB down" {
	[[ -x /usr/sbin/sshd ]] && command -v scp >/dev/null ||
		{ echo "sshd or scp not installed (tests/install-deps)"; false; }
	local d=$XS_RUN_DIR/sshd$BATS_TEST_NUMBER b
	local opts=(-q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
		-o BatchMode=yes -o IdentitiesOnly=yes -i "$d/id" -P "$port")
	mkdir -p "$d"
	ssh-keygen -q -t ed25519 -N '' -f "$d/host"
	ssh-keygen -q -t ed25519 -N '' -f "$d/id"
	cp "$d/id.pub" "$d/authorized_keys"
	cat >"$d/sshd_config" <<-CONF
		Port $port
		ListenAddress $XS_ADDR_A
		HostKey $d/host
		PidFile $d/sshd.pid
		AuthorizedKeysFile $d/authorized_keys
		PermitRootLogin yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		Subsystem sftp internal-sftp
		LogLevel VERBOSE
	CONF
	head -c 20971520 /dev/urandom >"$d/up.bin"
	head -c 1048576 /dev/urandom >"$d/down.bin"
	"$XS_REMOTE" mkdir -p -m 0755 /run/sshd
	# as shipped: the listener forks and re-executes itself per
	# connection, that process forks the sandboxed preauth child, then
	# the session's child
	srv sshd /usr/sbin/sshd -D -e -f "$d/sshd_config"
	server_ready sshd rdma
	run --separate-stderr timeout 120 env $(xsenv scpup) scp "${opts[@]}" "$d/up.bin" "root@$XS_ADDR_A:$d/up.copy"
	echo "$output $stderr"
	((status == 0))
	run --separate-stderr timeout 120 env $(xsenv scpdown) scp "${opts[@]}" "root@$XS_ADDR_A:$d/down.bin" "$d/down.copy"
	echo "$output $stderr"
	((status == 0))
	[[ $(sha256sum <"$d/up.copy") == $(sha256sum <"$d/up.bin") ]]
	[[ $(sha256sum <"$d/down.copy") == $(sha256sum <"$d/down.bin") ]]
	"$XS_REMOTE" --kill sshd --signal TERM || true
	cat "$XS_RUN_DIR/remote/sshd.log"
	! grep -q 'terminated by signal\|Connection reset' "$XS_RUN_DIR/remote/sshd.log"
	cat "$XS_RUN_DIR/sshd.log"
	# each connection: over RDMA from ssh's side, then moved to kernel
	# TCP when the preauth child took it over from the re-executed sshd
	for c in scpup scpdown; do
		b=$(blocks_of $c.stats ssh)
		echo "$b"
		[[ $(sum_field "$b" rdma) == 1 ]]
	done
	# (the sandboxed child cannot open the log: the owner's lines tell)
	[[ $(grep -c 'moved to kernel TCP for another process: done' "$XS_RUN_DIR/sshd.log") == 2 ]]
}

@test "programs: python3 http.server --cgi: curl gets a CGI script's 1 MiB, 3 times" {
	command -v curl >/dev/null || { echo "curl not installed (tests/install-deps)"; false; }
	# The server reads the request and writes the status line over RDMA,
	# then forks; the child (as nobody, being root) execs the script on
	# the connection: it moves to kernel TCP first (core/move.c). The
	# script's files are in the server's /tmp, where nobody may read.
	local d=/tmp/cgi$BATS_TEST_NUMBER req
	printf '#!/bin/sh\nprintf "Content-Type: application/octet-stream\\r\\n\\r\\n"\nexec cat %q\n' \
		"$d/body.bin" >"$XS_RUN_DIR/big.sh"
	"$XS_REMOTE" bash -c "mkdir -p -m 0755 $d $d/cgi-bin && head -c $SIZE /dev/urandom >$d/body.bin &&
		chmod 0644 $d/body.bin && install -m 0755 $XS_RUN_DIR/big.sh $d/cgi-bin/big.sh"
	"$XS_REMOTE" cp "$d/body.bin" "$XS_RUN_DIR/body.bin"
	srv httpcgi python3 -m http.server --cgi --bind "$XS_ADDR_A" --directory "$d" "$port"
	server_ready httpcgi rdma
	for req in 1 2 3; do
		run --separate-stderr timeout 60 env $(xsenv "curl$req") curl -sS -o "$XS_RUN_DIR/got$req" \
			-w '%{http_code} %{size_download}' "http://$XS_ADDR_A:$port/cgi-bin/big.sh"
		echo "$output $stderr"
		((status == 0))
		[[ "$output" == "200 $SIZE" ]]
		cmp "$XS_RUN_DIR/got$req" "$XS_RUN_DIR/body.bin"
		[[ $(stat "curl$req" rdma) == 1 ]]
	done
	"$XS_REMOTE" --kill httpcgi --signal TERM || true
	cat "$XS_RUN_DIR/remote/httpcgi.log" "$XS_RUN_DIR/httpcgi.log"
	! grep -q Traceback "$XS_RUN_DIR/remote/httpcgi.log"
	[[ $(grep -c 'moved to kernel TCP for another process: done' "$XS_RUN_DIR/httpcgi.log") == 3 ]]
}

# nginx_conf DIR WORKERS - a minimal nginx that answers "hello".
nginx_conf()
{
	mkdir -p "$1"
	cat >"$1/nginx.conf" <<-CONF
		worker_processes $2;
		user root;
		daemon off;
		master_process on;
		pid $1/nginx.pid;
		error_log $1/error.log;
		events { worker_connections 1024; }
		http {
			access_log off;
			client_body_temp_path $1/body;
			proxy_temp_path $1/proxy;
			fastcgi_temp_path $1/fastcgi;
			uwsgi_temp_path $1/uwsgi;
			scgi_temp_path $1/scgi;
			server {
				listen $XS_ADDR_A:$port;
				location / { return 200 "hello\n"; }
			}
		}
	CONF
}

# nginx_runs RUN CLIENT - nginx with 2 workers: kernel TCP end to end first
# (RUN tcp XSOCK_MODE=tcp), for the figure beside ours; then nginx under
# xsock (stats nginx), and RUN xsock with CLIENT's xsenv. nginx under
# xsock still runs after it (nginx_stop).
nginx_runs()
{
	local d=$XS_RUN_DIR/nginx$BATS_TEST_NUMBER run=$1 cli=$2
	nginx_conf "$d" 2
	remote_bg nginxtcp nginx -c "$d/nginx.conf"
	server_ready nginxtcp tcp
	"$run" tcp XSOCK_MODE=tcp
	"$XS_REMOTE" --kill nginxtcp --signal QUIT
	"$XS_REMOTE" --timeout 30 bash -c "while [[ -s $d/nginx.pid ]] && kill -0 \$(cat $d/nginx.pid) 2>/dev/null; do sleep 0.1; done"
	srv nginx nginx -c "$d/nginx.conf"
	server_ready nginx rdma
	"$run" xsock $(xsenv "$cli")
}

# nginx_stop - nginx under xsock ends, gracefully: its workers exit(3).
nginx_stop()
{
	"$XS_REMOTE" --kill nginx --signal QUIT
	"$XS_REMOTE" --timeout 30 bash -c "while pgrep -x nginx >/dev/null; do sleep 0.1; done"
}

# wrk_run NAME ENV... - wrk against $port; $output, and the figure noted.
wrk_run()
{
	local name=$1
	shift
	run --separate-stderr timeout 60 env "$@" wrk -t1 -c20 -d4s "http://$XS_ADDR_A:$port/"
	echo "$output"
	((status == 0))
	[[ "$output" != *"Socket errors"* && "$output" != *"Non-2xx"* ]]
	[[ "$output" == *"Requests/sec:"* ]]
	rps[$name]=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$output")
}

@test "programs: nginx with 2 workers and wrk: no errors, every connection over RDMA" {
	command -v nginx >/dev/null && command -v wrk >/dev/null ||
		{ echo "nginx or wrk not installed (tests/install-deps)"; false; }
	local b
	declare -A rps
	nginx_runs wrk_run wrk
	cat "$XS_RUN_DIR/wrk.stats"
	[[ $(stat wrk tcp) == 0 && $(stat wrk connects) -ge 20 ]]
	nginx_stop
	b=$(blocks_of nginx.stats nginx)
	echo "$b"
	# The workers carried every connection of the run over RDMA. wrk's
	# first connection only checks that the server is there: connect(),
	# close(), no byte; a worker that accepts it sees the client's hello,
	# then its end, before anything was decided: undecided, not TCP.
	(($(sum_field "$b" accepts) >= 20))
	[[ $(sum_field "$b" tcp) == 0 ]]
	[[ $(sum_field "$b" rdma) == $(sum_field "$b" accepts) ]]
	(($(grep -c . <<<"$b") >= 2))
	note "wrk -t1 -c20 -d4s against nginx, 2 workers: kernel TCP ${rps[tcp]} req/s, xsock ${rps[xsock]} req/s"
}

# ab_run NAME ENV... - ab against $port, 300 requests, 20 at a time, one
# connection each (no keep-alive): every one complete, none failed.
ab_run()
{
	local name=$1
	shift
	run_or_dump 90 --dump "ab -s" env "$@" ab -s 20 -n 300 -c 20 "http://$XS_ADDR_A:$port/"
	echo "$output"
	((status == 0))
	[[ "$output" == *"Complete requests:      300"* ]]
	[[ "$output" == *"Failed requests:        0"* ]]
	rps[$name]=$(awk '/^Requests per second:/ { print $4 }' <<<"$output")
}

@test "programs: ab against nginx, a connection per request (APR connects again once writable; the server closes after each answer): all 300 complete, none failed, every connection over RDMA" {
	command -v nginx >/dev/null && command -v ab >/dev/null ||
		{ echo "nginx or ab not installed (tests/install-deps)"; false; }
	declare -A rps
	# ab calls connect() again once poll says writable, and takes a
	# failure for a failed connection; nginx answers and closes at once,
	# its FIN crossing ab's request while ab's send returns
	nginx_runs ab_run ab
	cat "$XS_RUN_DIR/ab.stats"
	[[ $(stat ab tcp) == 0 && $(stat ab connects) -ge 300 ]]
	nginx_stop
	note "ab -n 300 -c 20 against nginx, 2 workers: kernel TCP ${rps[tcp]} req/s, xsock ${rps[xsock]} req/s"
}
