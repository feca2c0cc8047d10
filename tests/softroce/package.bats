#!/usr/bin/env bats
# The Debian packages that make deb builds (build/deb), as a user gets
# them: installed by apt-get from the .deb files with no network (every
# dependency is already in the guest, whose root is the host's under a
# throw-away overlay), redis-benchmark under the packaged `xsock run`
# against a packaged redis-server over RDMA (the counters say so),
# xsock-stat and man from the packages, then a purge that leaves no file
# behind. tests/bats/package.bats checks the same packages with lintian.
#
# Time: each dpkg run reads its database (137,000 paths) over 9p, 13 to
# 35 s under emulation, so the test makes two: apt-get install, and one
# dpkg --purge (apt-get purge runs dpkg twice). apt-get reads no package
# index (an empty lists directory and sources list): it knows the
# installed packages and the two files, so a missing dependency fails.

load tier

bats_require_minimum_version 1.5.0

PKGS=(libxsock xsock-tools)
# man-db's trigger runs mandb over every manual page directory (minutes
# under emulation, over 9p) unless this file is absent; man finds pages
# without its index.
MANDB_AUTO=/var/lib/man-db/auto-update

setup_file()
{
	[[ -n "${XS_AGENT:-}" && -n "${XS_REMOTE:-}" ]] ||
		skip "run under tests/softroce/run (XS_AGENT is not set)"
	# apt-get changes the root it runs in: only a guest's is thrown away
	[[ $XS_TOPOLOGY != host ]] || skip "host mode: packages are installed in a guest only"
	export BATS_TEST_TIMEOUT=300
}

# on_server CMD... - CMD on the server's guest too, when it has its own
on_server()
{
	[[ $XS_TOPOLOGY != two ]] || "$XS_REMOTE" --timeout 120 "$@"
}

# installed PKG - whether dpkg has PKG installed
installed()
{
	[[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

file_teardown()
{
	# a failed test leaves nothing for the next one
	if installed libxsock || installed xsock-tools; then
		dpkg --purge "${PKGS[@]}" >/dev/null 2>&1 || true
	fi
	on_server dpkg --purge "${PKGS[@]}" >/dev/null 2>&1 || true
	[[ ! -e $MANDB_AUTO.off ]] || mv "$MANDB_AUTO.off" "$MANDB_AUTO"
	on_server bash -c "[[ ! -e $MANDB_AUTO.off ]] || mv $MANDB_AUTO.off $MANDB_AUTO"
}

@test "package: apt-get installs libxsock and xsock-tools offline; packaged redis-benchmark and redis-server talk over RDMA; man xsock; dpkg --purge leaves no file" {
	local debs=("$PWD"/build/deb/libxsock_*.deb "$PWD"/build/deb/xsock-tools_*.deb) f
	for f in "${debs[@]}"; do
		[[ -f $f ]] || { echo "$f: not built (make deb; see build/deb/build.log)"; false; }
	done
	! installed libxsock && ! installed xsock-tools
	[[ ! -e /usr/bin/xsock && ! -e /usr/lib/libxsock.so ]]

	# No index, no source: apt-get has the installed packages and the two
	# files. (--no-download refuses .deb files: "Pathname to install is
	# not absolute".)
	local a=$BATS_FILE_TMPDIR/apt
	mkdir -p "$a/lists/partial" "$a/sources.list.d"
	: >"$a/sources.list"
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q
		--no-install-recommends -o Dpkg::Use-Pty=0 -o "Dir::State::Lists=$a/lists"
		-o "Dir::Etc::SourceList=$a/sources.list"
		-o "Dir::Etc::SourceParts=$a/sources.list.d")
	[[ ! -e $MANDB_AUTO ]] || mv "$MANDB_AUTO" "$MANDB_AUTO.off"
	on_server bash -c "[[ ! -e $MANDB_AUTO ]] || mv $MANDB_AUTO $MANDB_AUTO.off"
	local t0=$SECONDS
	run --separate-stderr "${apt[@]}" install "${debs[@]}"
	echo "$output"
	echo "$stderr"
	((status == 0))
	installed libxsock && installed xsock-tools
	on_server bash -c "mkdir -p $a/lists/partial $a/sources.list.d && : >$a/sources.list"
	on_server "${apt[@]}" install "${debs[@]}"
	note "apt-get install of ${PKGS[*]}: $((SECONDS - t0)) s"
	dpkg -L "${PKGS[@]}" | while read -r f; do
		[[ -d $f && ! -L $f ]] || echo "$f"
	done >"$XS_RUN_DIR/pkg.files"
	grep -qx /usr/lib/xsock/libxsock.so "$XS_RUN_DIR/pkg.files"
	grep -qx /etc/xsock/xsock.rules "$XS_RUN_DIR/pkg.files"
	[[ $(dpkg-query -W -f='${Conffiles}' libxsock) == *"/etc/xsock/xsock.rules "* ]]

	# the launcher preloads the packaged library, not the build tree's
	run env -u XSOCK_LIB /usr/bin/xsock run -- sh -c 'echo "$LD_PRELOAD"'
	[[ $status == 0 && $(readlink -f "$output") == /usr/lib/xsock/libxsock.so ]]

	# the installed rules file applies with XSOCK_RULES unset: a connect
	# to port 22 stays on kernel TCP by its first rule
	rm -f "$XS_RUN_DIR"/pkg-*.stats
	run env -u XSOCK_LIB -u XSOCK_RULES /usr/bin/xsock run \
		--stats "$XS_RUN_DIR/pkg-rule.stats" -- python3 -c "import socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(('$XS_ADDR_A', 22))
except OSError:
    pass"
	cat "$XS_RUN_DIR/pkg-rule.stats"
	[[ $status == 0 && $(stat pkg-rule rule) == 1 ]]

	# redis-server under the packaged launcher, with the installed rules
	# file (it keeps ports 22 and 53 on kernel TCP, redis's goes on)
	remote_bg pkg-server env -u XSOCK_LIB -u XSOCK_RULES /usr/bin/xsock run \
		--stats "$XS_RUN_DIR/pkg-server.stats" -- \
		redis-server --bind "$XS_ADDR_A" --port "$port" --save '' \
		--appendonly no --protected-mode no
	server_ready pkg-server rdma
	# (anchored: the bash -c line names redis-server too)
	run "$XS_REMOTE" bash -c "grep -h xsock /proc/\$(pgrep -f '^[^ ]*redis-server $XS_ADDR_A:$port')/maps"
	echo "$output"
	[[ $output == *" /usr/lib/xsock/libxsock.so"* && $output != *"$PWD/build"* ]]

	run_or_dump 120 --dump redis-benchmark --dump "redis-server $XS_ADDR_A" \
		env -u XSOCK_LIB /usr/bin/xsock run \
		--stats "$XS_RUN_DIR/pkg-bench.stats" -- redis-benchmark \
		-h "$XS_ADDR_A" -p "$port" -c 4 -n 1000 -t set,get --csv
	echo "redis-benchmark: status $status"
	echo "$output"
	cat "$XS_RUN_DIR/pkg-bench.stats" || true
	((status == 0))
	[[ $(awk -F'","' 'NR > 1 && $2 + 0 > 0 { print substr($1, 2) }' <<<"$output") == $'SET\nGET' ]]
	[[ $(stat pkg-bench tcp) == 0 && $(stat pkg-bench rdma) -ge 4 && $(stat pkg-bench connects) -ge 4 ]]
	note "redis-benchmark -c 4 over the packaged xsock:" \
		$(awk -F'","' 'NR > 1 { printf "%s %d req/s, ", substr($1, 2), $2 }' <<<"$output")

	# the packaged xsock-stat sees the listener, carried by xsock
	run "$XS_REMOTE" /usr/bin/xsock stat -l
	echo "$output"
	[[ $status == 0 && $output == *listen*":$port"*redis-server* ]]
	"$XS_REMOTE" --kill pkg-server --signal TERM >/dev/null || true
	cat "$XS_RUN_DIR/pkg-server.stats"
	[[ $(stat pkg-server tcp) == 0 && $(stat pkg-server accepts) -ge 4 ]]

	# man: xsock is the launcher's page (section 1 first), xsock(7) the
	# library's, with the knobs of options.def
	[[ $(man -w xsock) == /usr/share/man/man1/xsock.1.gz ]]
	[[ $(man -w 7 xsock) == /usr/share/man/man7/xsock.7.gz ]]
	run env MANWIDTH=100 man 7 xsock
	((status == 0))
	[[ $output == *"XSOCK_EAGER_LIMIT=bytes"* && $output == *"FALLBACK REASONS"* ]]
	[[ $(man -w xsock-stat) == /usr/share/man/man8/xsock-stat.8.gz ]]

	t0=$SECONDS
	run --separate-stderr dpkg --purge "${PKGS[@]}"
	echo "$output"
	echo "$stderr"
	((status == 0))
	on_server dpkg --purge "${PKGS[@]}"
	note "dpkg --purge: $((SECONDS - t0)) s"
	! installed libxsock && ! installed xsock-tools
	[[ -z $(dpkg-query -W -f='${db:Status-Abbrev}' libxsock 2>/dev/null | grep -v '^[pu]n') ]]
	local left=0
	while read -r f; do
		if [[ -e $f || -L $f ]]; then
			echo "left after purge: $f"
			left=$((left + 1))
		fi
	done <"$XS_RUN_DIR/pkg.files"
	((left == 0))
	[[ ! -e /etc/xsock && ! -e /usr/lib/xsock && ! -e /usr/share/doc/libxsock ]]
	! man -w xsock 2>/dev/null
}
