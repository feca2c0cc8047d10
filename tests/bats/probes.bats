#!/usr/bin/env bats
# tests/bats/probes.bats - differential tests: libc semantics are the spec.
#
# build/tools/sockprobe prints one deterministic line per TCP corner case
# (errno names, never ports, fds or timings). Its output without the
# library is the reference; with LD_PRELOAD=libxsock.so, in every mode, it
# must be byte-identical, and so must the exit code. A failure shows the
# diff: each line starts with the name of the case that differed.

load helpers

setup_file() {
	export PROBE="$XSOCK_TOOLS/sockprobe"
	[[ -x $PROBE ]] || return 0
	# The reference: the probe on plain libc, computed once for the file.
	unset_xsock_env
	local rc=0
	"$PROBE" >"$BATS_FILE_TMPDIR/ref.out" 2>"$BATS_FILE_TMPDIR/ref.err" ||
		rc=$?
	echo "$rc" >"$BATS_FILE_TMPDIR/ref.rc"
}

setup() {
	[[ -x $PROBE ]] || skip "$PROBE not built (make)"
	[[ -f $XSOCK_LIB ]] || skip "$XSOCK_LIB not built (make)"
	unset_xsock_env
	REF="$BATS_FILE_TMPDIR/ref.out"
	REF_RC=$(cat "$BATS_FILE_TMPDIR/ref.rc")
}


# run_probe TAG CMD...: run CMD, keeping stdout, stderr and the exit code
# in $BATS_TEST_TMPDIR/TAG.{out,err,rc}. The probe bounds itself: a case
# that hangs trips its alarm() watchdog, which prints "CASE: TIMEOUT".
run_probe() {
	local tag=$1 rc=0
	shift
	"$@" >"$BATS_TEST_TMPDIR/$tag.out" 2>"$BATS_TEST_TMPDIR/$tag.err" ||
		rc=$?
	echo "$rc" >"$BATS_TEST_TMPDIR/$tag.rc"
}

# same_as_ref TAG: TAG's stdout and exit code equal the libc reference.
same_as_ref() {
	local tag=$1 rc
	rc=$(cat "$BATS_TEST_TMPDIR/$tag.rc")
	if ! diff -u --label libc --label "$tag" "$REF" \
		"$BATS_TEST_TMPDIR/$tag.out"; then
		echo "# sockprobe output under $tag differs from libc (lines above)"
		return 1
	fi
	if [[ $rc != "$REF_RC" ]]; then
		echo "# exit code under $tag: $rc, libc: $REF_RC"
		return 1
	fi
}

@test "sockprobe reference run: one line per listed case, nothing failed" {
	[[ $REF_RC == 0 ]]
	run "$PROBE" --list
	[[ $status == 0 ]]
	local -a cases=("${lines[@]}")
	((${#cases[@]} >= 40))
	# One line per case, in list order, each starting with its name.
	mapfile -t got <"$REF"
	[[ ${#got[@]} == "${#cases[@]}" ]]
	local i
	for i in "${!cases[@]}"; do
		[[ ${got[$i]} == "${cases[$i]}: "* ]] ||
			{ echo "line $i: ${got[$i]}"; return 1; }
	done
	# The reference itself must be sane: no failed setup, no watchdog.
	no_match -E 'setup failed|TIMEOUT|\(nothing\)' "$REF"
	[[ ! -s $BATS_FILE_TMPDIR/ref.err ]]
	# Spot checks that the probe measures what it claims.
	grep -qx 'blocking_connect_refused: connect=-1 ECONNREFUSED;.*' "$REF"
	grep -q '^nonblock_connect_refused: connect=-1 EINPROGRESS; poll=1 revents=POLLOUT|POLLERR|POLLHUP; SO_ERROR=ECONNREFUSED' "$REF"
	grep -q '^sigpipe_default: child killed by SIGPIPE$' "$REF"
	grep -q '^write_after_reset: rst seen=yes; send MSG_NOSIGNAL=-1 ECONNRESET; send MSG_NOSIGNAL=-1 EPIPE' "$REF"
}

@test "sockprobe: unknown case name is an error, single cases run alone" {
	run "$PROBE" no_such_case
	[[ $status == 2 ]]
	[[ $output == *"unknown case 'no_such_case'"* ]]
	run "$PROBE" msg_peek eisconn_does_not_exist
	[[ $status == 2 ]]
	run "$PROBE" msg_peek
	[[ $status == 0 ]]
	[[ $output == "$(grep '^msg_peek: ' "$REF")" ]]
}

@test "sockprobe under XSOCK_MODE=tcp: identical to libc" {
	XSOCK_MODE=tcp run_probe tcp with_xsock "$PROBE"
	same_as_ref tcp
	[[ ! -s $BATS_TEST_TMPDIR/tcp.err ]]
}

@test "sockprobe under the default mode (auto): identical to libc" {
	run_probe auto with_xsock "$PROBE"
	same_as_ref auto
	[[ ! -s $BATS_TEST_TMPDIR/auto.err ]]
}

@test "sockprobe: each case alone under the library matches the full libc run" {
	# Catches state that leaks from one case into the next (fd table).
	local name line rc=0
	while read -r name; do
		line=$(with_xsock "$PROBE" "$name" 2>&1) || true
		if [[ $line != "$(grep "^$name: " "$REF")" ]]; then
			echo "# $name alone under libxsock:"
			echo "#   got: $line"
			echo "#  libc: $(grep "^$name: " "$REF")"
			rc=1
		fi
	done < <("$PROBE" --list)
	return $rc
}

@test "sockprobe with XSOCK_LOG=debug:file: decisions logged, stdout unchanged" {
	local log=$BATS_TEST_TMPDIR/log
	XSOCK_LOG=debug:$log run_probe logged with_xsock "$PROBE"
	same_as_ref logged
	# Logging to a file leaves the program's stderr alone.
	[[ ! -s $BATS_TEST_TMPDIR/logged.err ]]
	[[ -s $log ]]
	# Every line has the documented shape.
	no_match -Ev '^xsock\[[0-9]+\.[0-9]+\] [EWIDT] [a-z]+: ' "$log"
	grep -q 'connects over tcp (loopback)' "$log"
	grep -q 'listens on kernel tcp only' "$log"
	# many_connections alone makes 200 loopback connects.
	: >"$log"
	XSOCK_LOG=debug:$log run_probe many with_xsock "$PROBE" many_connections
	[[ $(grep -c 'connects over tcp (loopback)' "$log") -ge 200 ]]
}

@test "a socket inside a failed close_range stays tracked (XSOCK_LOG)" {
	# close_range(fd, fd, <unknown flag>) fails with EINVAL and closes
	# nothing; the socket's later connect must still be seen by libxsock.
	local log=$BATS_TEST_TMPDIR/log
	XSOCK_LOG=debug:$log run_probe cr with_xsock "$PROBE" close_range_einval
	[[ $(cat "$BATS_TEST_TMPDIR/cr.out") == "$(grep '^close_range_einval: ' "$REF")" ]]
	local n
	n=$(grep -c 'connects over tcp (loopback)' "$log" || true)
	[[ $n == 1 ]] || {
		echo "# $n 'connects over tcp' lines, want 1 (socket untracked?):"
		cat "$log"
		return 1
	}
}

@test "sockprobe with XSOCK_LOG=debug to stderr: stdout still identical" {
	XSOCK_LOG=debug run_probe dbg with_xsock "$PROBE"
	same_as_ref dbg
	grep -q 'connects over tcp (loopback)' "$BATS_TEST_TMPDIR/dbg.err"
	# Nothing but log lines went to stderr.
	no_match -Ev '^xsock\[[0-9]+\.[0-9]+\] [EWIDT] [a-z]+: ' \
		"$BATS_TEST_TMPDIR/dbg.err"
}
