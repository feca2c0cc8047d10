#!/usr/bin/env bats
# Event-by-event conformance of the readiness emulation: build/tools/evconf
# drives epoll (level, edge, one-shot, RDHUP/HUP/ERR, EPOLLOUT after a full
# send path, epoll_ctl's errors, nested epoll fds), poll, select, ppoll,
# pselect, epoll_pwait/epoll_pwait2 with signal masks, and two threads on one
# socket, against a scripted peer under xsock. Its output is taken once over
# kernel TCP (XSOCK_MODE=tcp) and once over RDMA: the two must be
# byte-identical, and key lines are checked literally so that two equally
# wrong outputs cannot pass. Topology one (and two in make check-long);
# the peer runs through xs-remote.

load tier

bats_require_minimum_version 1.5.0

EVCONF=build/tools/evconf
LIB=build/libxsock.so

# evconf_run NAME ENV... - `evconf run` against the peer on $port, with
# its counters in $XS_RUN_DIR/NAME.stats; output in $output.
evconf_run()
{
	local name=$1
	shift
	run --separate-stderr timeout 60 env $(xsenv "$name") "$@" \
		"$EVCONF" run "$XS_ADDR_A" "$port"
	[[ -z "$stderr" ]] || echo "$name stderr: $stderr"
	cat "$XS_RUN_DIR/$name.stats" || true
}

@test "conform: epoll, poll and select over RDMA report event for event what kernel TCP does" {
	[[ -x $EVCONF && -f $LIB ]] || { echo "make first" >&2; return 1; }
	local peer="peer$BATS_TEST_NUMBER" kernel t0
	remote_bg "$peer" env LD_PRELOAD="$PWD/$LIB" \
		XSOCK_LOG="info:$XS_RUN_DIR/$peer.log" \
		XSOCK_STATS="$XS_RUN_DIR/$peer.stats" \
		"$EVCONF" peer "$XS_ADDR_A" "$port"
	server_ready "$peer" rdma

	# the reference: kernel TCP end to end (the peer falls back too)
	evconf_run kernel XSOCK_MODE=tcp
	((status == 0))
	kernel=$output
	[[ $(stat kernel connects) == 0 && $(stat kernel tcp) == 4 ]]
	# the run is complete and says what the kernel says
	[[ "${kernel##*$'\n'}" == done ]]
	local line
	for line in \
		"lt-in-2: epoll_wait=1 events=IN|OUT data=0x1122334455667788" \
		"lt-read: epoll_wait=1 events=OUT data=0x1122334455667788" \
		"et-1: epoll_wait=1 events=IN data=0x112233445566778a" \
		"et-again: epoll_wait=0" \
		"et-2: epoll_wait=1 events=IN data=0x112233445566778a" \
		"oneshot-more: epoll_wait=0" \
		"oneshot-again2: epoll_wait=0" \
		"oneshot-rearmed: epoll_wait=1 events=IN data=0x112233445566778c" \
		"out-full: epoll_wait=0" \
		"out-drained: epoll_wait=1 events=OUT data=0x112233445566778d" \
		"ctl-add-twice: epoll_ctl=-1 errno=EEXIST" \
		"ctl-mod-nonmember: epoll_ctl=-1 errno=ENOENT" \
		"ctl-add-loop: epoll_ctl=-1 errno=ELOOP" \
		"ctl-mod-exclusive: epoll_ctl=-1 errno=EINVAL" \
		"nest-outer: epoll_wait=1 events=IN data=0x1122334455667790" \
		"sig-ppoll: ppoll=-1 errno=EINTR handler=1" \
		"threads-out: epoll_wait=1 events=OUT data=0x1122334455667793" \
		"hup-shutwr: epoll_wait=1 events=IN|RDHUP data=0x1122334455667794" \
		"hup-both: epoll_wait=1 events=IN|RDHUP|HUP data=0x1122334455667794" \
		"reset-recv-1: recv=-1 errno=ECONNRESET"; do
		grep -qxF -- "$line" <<<"$kernel" ||
			{ echo "kernel run lacks: $line"; false; }
	done

	# the same over RDMA. The first pair and the second's control
	# connection go over RC QPs; the second pair's data connection is
	# reset by the peer before the peer's process ever does I/O on it, so
	# its transport is never negotiated (core/neg.c): kernel TCP carries
	# what is left of it (every event on it is the kernel's own), counted
	# undecided, as a connection closed before it was.
	t0=$SECONDS
	evconf_run rdma
	echo "$output"
	if [[ "$output" != "$kernel" ]]; then
		echo "differences (< kernel TCP, > RDMA):"
		diff <(echo "$kernel") <(echo "$output") || true
	fi
	((status == 0))
	[[ $(stat rdma connects) == 3 && $(stat rdma rdma) == 3 && $(stat rdma tcp) == 0 ]]
	# the sockets the program closes unconnected, in both runs, and that one
	(($(stat rdma undecided) == $(stat kernel undecided) + 1))
	[[ "$output" == "$kernel" ]]
	note "evconf over RDMA: $(wc -l <<<"$output") observations in $((SECONDS - t0)) s"
}
