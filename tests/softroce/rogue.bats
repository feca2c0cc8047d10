#!/usr/bin/env bats
# Hostile input on real verbs. build/tools/rogue_peer speaks xsock's wire
# format on raw verbs (no libxsock) and attacks an xsock echo server
# (xsnet serve under LD_PRELOAD), one attack per connection: malformed
# messages, lying credits and lengths, rendezvous regions it cannot serve,
# and RDMA READ/WRITE around, past and after the region the server exposes
# to it. Meanwhile an honest xsock client streams a known pattern through
# the same server on one connection and checks every byte echoed.
#
# Each attack must be refused (an access to the server's memory fails at
# the HCA, a malformed message fails validation) and the rogue's connection
# ended by the server within BOUND_MS (10 s, as faults.bats: room for
# emulation's scheduling; measured figures go to the TAP stream). The
# honest stream must keep every byte, and the server must still accept
# new RDMA connections afterwards.

load tier

bats_require_minimum_version 1.5.0

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	export BATS_TEST_TIMEOUT=400
}

XSNET=build/tools/xsnet
ROGUE=build/tools/rogue_peer
LIB=build/libxsock.so
BOUND_MS=10000

# victim NAME - the xsnet echo server under xsock, its resets logged.
victim()
{
	[[ -x $XSNET && -x $ROGUE && -f $LIB ]] || { echo "make first" >&2; return 1; }
	remote_bg "$1" env LD_PRELOAD="$PWD/$LIB" XSOCK_LOG="info:$XS_RUN_DIR/$1.log" \
		XSOCK_STATS="$XS_RUN_DIR/$1.stats" "$XSNET" serve "$XS_ADDR_A" "$port"
	server_ready "$1" rdma
}

# honest_start - one xsock connection streaming a checked pattern through
# the server until honest_finish.
honest_start()
{
	stop=$BATS_TEST_TMPDIR/stop
	rm -f "$stop"
	env $(xsenv honest) "$XSNET" soak "$XS_ADDR_A" "$port" "$stop" \
		>"$BATS_TEST_TMPDIR/honest.out" 2>&1 &
	honest=$!
	locals+=("$honest")
	retry_for 60 grep -qx streaming "$BATS_TEST_TMPDIR/honest.out"
}

# honest_finish - stop the stream: every byte came back as sent, over RDMA.
honest_finish()
{
	local i
	touch "$stop"
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$honest" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$honest" 2>/dev/null; then
		dump_stacks "xsnet soak"
		dump_stacks "xsnet serve"
	fi
	status=0
	wait "$honest" || status=$?
	cat "$BATS_TEST_TMPDIR/honest.out"
	((status == 0))
	grep -qE '^soak [0-9]+ bytes echo ok$' "$BATS_TEST_TMPDIR/honest.out"
	note "$BATS_TEST_DESCRIPTION: honest stream: $(tail -n 1 "$BATS_TEST_TMPDIR/honest.out")"
	cat "$XS_RUN_DIR/honest.stats"
	[[ $(stat honest connects) == 1 && $(stat honest rdma) == 1 && $(stat honest tcp) == 0 ]]
}

# attacks ATTACK... - run each attack on a fresh connection; every one must
# be refused and reset in time (read-in must READ its region intact). All
# run, the figures are noted, then the failures fail the test.
attacks()
{
	local a line failed=()
	for a in "$@"; do
		run --separate-stderr timeout 60 "$ROGUE" "$XS_ADDR_A" "$port" "$a" "$BOUND_MS"
		echo "$a: status $status: $output"
		[[ -z "$stderr" ]] || echo "$stderr" | sed 's/^/    /'
		line=$output
		note "${line:-attack $a: no output (status $status)}"
		if [[ $a == read-in ]]; then
			[[ $status == 0 && $line == "attack read-in: success, 65536 bytes as sent" ]] ||
				failed+=("$a")
		elif [[ $a == read-past-partial && $status == 0 &&
			$line =~ ^attack\ $a:\ served\ past\ the\ window,\ inside\ its\ region:\ (zeros|earlier\ bytes\ of\ this\ stream)\ only$ ]]; then
			# a device that checks the MR under a window, not the
			# window (rxe): the region holds nothing but this
			# stream's own earlier bytes (core/stream.c)
			:
		elif ((status != 0)) || [[ $line == *ACCEPTED* ]] ||
			! [[ $line =~ ^attack\ $a:\ (refused\ [A-Za-z_\ ]+\;\ )?reset\ after\ [0-9]+\ ms ]]; then
			failed+=("$a")
		fi
	done
	if ((${#failed[@]})); then
		echo "failed attacks: ${failed[*]}"
		return 1
	fi
}

# still_serving NAME - the victim is alive and takes a new RDMA connection.
still_serving()
{
	run --separate-stderr timeout 60 env $(xsenv after) "$XSNET" sizes "$XS_ADDR_A" "$port" 4097 65536
	echo "$output"
	[[ "$output" == $'size 4097 echo ok\nsize 65536 echo ok' ]]
	[[ $(stat after connects) == 1 && $(stat after rdma) == 1 ]]
	note "$BATS_TEST_DESCRIPTION: the server logged" \
		"$(grep -c 'connection reset' "$XS_RUN_DIR/$1.log" || true) resets"
}

@test "rogue: malformed messages and lying credits reset the rogue alone; an honest stream keeps every byte" {
	victim "srv$BATS_TEST_NUMBER"
	honest_start
	local rc=0
	attacks bad-type bad-flags bad-len data-long data-empty rndv-zero \
		rndv-huge rndv-wrap done-bogus credits-wrap credits-plus1 grow-past \
		data-after-fin data-after-move move-twice credit-overrun \
		rndv-badkey rndv-badaddr || rc=$?
	honest_finish
	still_serving "srv$BATS_TEST_NUMBER"
	((rc == 0))
	# a MOVE is accepted, what breaks the protocol after it is not
	grep -q 'connection reset: data after MOVE' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
	grep -q 'connection reset: MOVE after MOVE' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
	grep -q 'connection reset: peer grew its window past its hello' "$XS_RUN_DIR/srv$BATS_TEST_NUMBER.log"
}

@test "rogue: a region the server exposes is READ in bounds only, never written, dead after RNDV_DONE" {
	victim "srv$BATS_TEST_NUMBER"
	honest_start
	local rc=0
	attacks read-in read-below read-above read-long read-after-done \
		done-twice read-past-partial rkey-plus1 rkey-minus1 rkey-index \
		write-in read-other-qp || rc=$?
	honest_finish
	still_serving "srv$BATS_TEST_NUMBER"
	((rc == 0))
}
