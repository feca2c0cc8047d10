# tests/softroce/tier.bash - helpers shared by the bats files of the
# Soft-RoCE tier (`load tier`): per-test ports, servers started on the
# server side through xs-remote and stopped in teardown, readiness waits
# with deadlines, figures as TAP comments, test sizes.

# sized CHECK LONG - the size a test runs at: CHECK in `make check` (sized
# to prove its claim), LONG in `make check-long` (XSOCK_TEST_LONG=1, the
# full size: more connections, longer streams).
sized()
{
	if [[ "${XSOCK_TEST_LONG:-0}" == 1 ]]; then
		echo "$2"
	else
		echo "$1"
	fi
}

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

setup()
{
	# A port per test, so a server left over by a failed test cannot
	# answer the next one.
	port=$((20000 + RANDOM % 10000))
	servers=()
	locals=() # client-side pids a test started in the background
	# Two guests share two host cores, so every packet waits for a qemu
	# I/O thread (about 0.3-3 ms a round trip): fewer iterations there.
	iters=1000
	[[ "$XS_TOPOLOGY" != two ]] || iters=200
}

# fabric_report - after a failed test, what the fabric looked like: does
# the server answer over the data link (ARP and ICMP) and the control link,
# is each rxe port ACTIVE, and the last kernel messages on each side.  A
# run whose wire broke part-way then says so in the failure itself, where a
# CI log shows it, not only in the run directory's diag-*/.
fabric_report()
{
	local ok=no
	busybox ping -c 1 -W 2 "$XS_ADDR_A" >/dev/null 2>&1 && ok=yes
	echo "fabric: $XS_ADDR_A answers ping over the data link: $ok"
	ok=no
	"$XS_REMOTE" --timeout 5 true >/dev/null 2>&1 && ok=yes
	echo "fabric: the server's agent answers over the control link: $ok"
	echo "fabric: client: $(rdma link show 2>&1 | tr '\n' ' ')"
	dmesg 2>&1 | grep -v 'speed is unknown' | tail -n 6 |
		sed 's/^/fabric: client dmesg: /'
	[[ "$XS_TOPOLOGY" == two ]] || return 0
	"$XS_REMOTE" --timeout 5 bash -c 'echo "server: $(rdma link show 2>&1 | tr "\n" " ")"
		dmesg 2>&1 | grep -v "speed is unknown" | tail -n 6 |
		sed "s/^/server dmesg: /"' 2>&1 | sed 's/^/fabric: /'
}

teardown()
{
	local name pid
	[[ -n "${BATS_TEST_COMPLETED:-}" ]] || fabric_report || true
	for pid in "${locals[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	# a file's own clean-up (faults.bats puts the links back)
	if declare -F file_teardown >/dev/null; then
		file_teardown
	fi
	for name in "${servers[@]}"; do
		"$XS_REMOTE" --kill "$name" --signal KILL >/dev/null 2>&1 || true
	done
}

# remote_bg NAME CMD... - start CMD on the server side, stopped in teardown.
remote_bg()
{
	local name=$1
	shift
	# Line-buffered, so the log is readable while the server runs.
	"$XS_REMOTE" --bg "$name" stdbuf -oL -eL "$@" >/dev/null
	servers+=("$name")
}

# retry_for SECONDS CMD... - run CMD until it succeeds or SECONDS pass; the
# last attempt's output is kept in $output and its status in $status (and
# printed if it failed).
retry_for()
{
	local secs=$1 end tries=0
	shift
	end=$((SECONDS + secs))
	while :; do
		run "$@"
		tries=$((tries + 1))
		((status == 0)) && return 0
		if ((SECONDS >= end)); then
			printf 'retry_for: %d attempts in %ds, last status %d: %s\n%s\n' \
				"$tries" "$secs" "$status" "$*" "$output" >&2
			return 1
		fi
		sleep 0.2
	done
}

# server_ready NAME rdma|tcp - wait (30 s at most) until server NAME
# listens on $port: an rdma_cm id in state LISTEN, or a TCP socket (the
# exchange channel of ibv_rc_pingpong).  A client that comes too early is
# not always refused cleanly (ib_send_lat can crash in librdmacm, or wedge
# the server), so the client starts only then.  An xsock server's rdma_cm
# listener (its helper's, comm xsock-cm) is up a moment before its kernel
# listener (listen() settles: core/sock_connect.c): for one, both.
server_ready()
{
	local probe
	case "$2" in
	rdma) probe="l=\$(rdma res show cm_id | grep -E 'state LISTEN .*:$port( |\$)') && { [[ \$l != *'comm xsock-cm'* ]] || ss -Hltn 'sport = :$port' | grep -q LISTEN; }" ;;
	tcp) probe="ss -Hltn 'sport = :$port' | grep -q LISTEN" ;;
	esac
	if ! "$XS_REMOTE" --timeout 30 bash -c "until $probe; do sleep 0.1; done"; then
		echo "server_ready: $1 does not listen on $2 port $port; its log:" >&2
		cat "$XS_RUN_DIR/remote/$1.log" >&2
		return 1
	fi
}

# xsenv NAME - the environment that runs a command under xsock
# (build/libxsock.so), with its counters in $XS_RUN_DIR/NAME.stats:
#     run timeout 9 env $(xsenv NAME) CMD...
xsenv()
{
	rm -f "$XS_RUN_DIR/$1.stats"
	echo "LD_PRELOAD=$PWD/build/libxsock.so XSOCK_STATS=$XS_RUN_DIR/$1.stats"
}

# stat NAME KEY - a counter from NAME's XSOCK_STATS summary: a kind (tcp,
# rdma, listen), a fallback reason, or connects/accepts/sent/received.
stat()
{
	case "$2" in
	connects | accepts | exposed | pulled) grep -o "$2 [0-9]*" "$XS_RUN_DIR/$1.stats" | awk '{print $2}' ;;
	sent | received) grep -o "$2 [0-9]*" "$XS_RUN_DIR/$1.stats" | tail -1 | awk '{print $2}' ;;
	*) awk -v k="$2" '$1 == "fallback" && $2 == k { print $3 } $1 == k && NF == 2 { print $2 }' \
		"$XS_RUN_DIR/$1.stats" ;;
	esac
}

# dump_stacks PATTERN - every thread's stack of each process whose command
# line matches PATTERN (pgrep -f; timeout and env wrappers skipped), the
# xsock stream each blocked call waits on, and the process's sockets as
# xsock-stat -e shows them, into the TAP stream: what a stuck test leaves
# behind.
dump_stacks()
{
	local pid t xstat
	xstat=$(command -v xsock-stat || echo "$PWD/build/bin/xsock-stat")
	for pid in $(pgrep -f "$1"); do
		case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
		timeout | env | bash) continue ;;
		esac
		{
			timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt" 2>&1 |
				grep -E '^#|^Thread'
			for t in 1 2 3; do
				timeout 10 gdb -p "$pid" -batch -ex "thread $t" \
					-ex "frame function stream_wait" -ex "print *s" 2>&1 |
					grep -E '^\$1|^  [a-z_]+ = ' | head -40
			done
			timeout 10 "$xstat" -e -p "$pid" 2>&1 | head -60
		} | head -220 | sed "s/^/# [$pid] /" >&3
	done
}

# run_or_dump SECONDS [--dump PATTERN]... CMD... - like `run` with a
# deadline: CMD's output and errors in $output and its status in $status; a CMD
# still running after SECONDS has the stacks of the processes matching
# each PATTERN (dump_stacks; default: xsnet's) dumped, is killed and gets
# status 124.
run_or_dump()
{
	local secs=$1 pid i p pats=()
	shift
	while [[ $1 == --dump ]]; do
		pats+=("$2")
		shift 2
	done
	((${#pats[@]})) || pats=("xsnet sizes" "xsnet serve")
	"$@" >"$BATS_TEST_TMPDIR/rod.out" 2>&1 &
	pid=$!
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		for p in "${pats[@]}"; do
			dump_stacks "$p"
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		status=124
	else
		wait "$pid" && status=0 || status=$?
	fi
	output=$(cat "$BATS_TEST_TMPDIR/rod.out")
}

# note TEXT - a figure for the TAP stream.
note() { echo "# $*" >&3; }

# gid_index DEV IPV4 - index of the RoCE v2 GID of IPV4 on DEV port 1.
gid_index()
{
	local dev=$1 addr=$2 want g i a b c d
	IFS=. read -r a b c d <<<"$addr"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
	for g in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		i=${g##*/}
		[[ "$(<"$g")" == "$want" ]] || continue
		[[ "$(<"/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i")" == "RoCE v2" ]] || continue
		echo "$i"
		return 0
	done
	echo "no RoCE v2 GID for $addr on $dev" >&2
	return 1
}

# rx_packets - packets received by the client's data link (0 in host mode).
rx_packets()
{
	case "$XS_TOPOLOGY" in
	one) cat /sys/class/net/veth1/statistics/rx_packets ;;
	two) cat /sys/class/net/eth0/statistics/rx_packets ;;
	*) echo 0 ;;
	esac
}
