#!/usr/bin/env bats
# tests/bats/package.bats - the Debian packages that make deb builds into
# build/deb (XSOCK_DEB_DIR): lintian finds nothing at any level, each
# package holds its files and depends on what the library loads, and the
# unpacked layout works (the launcher finds the packaged library; man
# renders the pages). tests/softroce/package.bats installs them with apt
# in the Soft-RoCE guest and runs redis over RDMA from them.

load helpers
bats_require_minimum_version 1.5.0

DEB_DIR=${XSOCK_DEB_DIR:-$XSOCK_ROOT/build/deb}

setup() {
	LIBDEB=$(compgen -G "$DEB_DIR/libxsock_*.deb" || true)
	TOOLSDEB=$(compgen -G "$DEB_DIR/xsock-tools_*.deb" || true)
	# make check builds them before the tiers; a failed build fails here
	[[ -f $LIBDEB && -f $TOOLSDEB ]] || {
		echo "no libxsock and xsock-tools .deb in $DEB_DIR: make deb failed" \
			"(see $DEB_DIR/build.log) or did not run" >&2
		return 1
	}
	T=$(readlink -f "$BATS_TEST_TMPDIR")
}

# files DEB - the paths a .deb holds, "./" stripped, links as "a -> b"
files() {
	dpkg-deb -c "$1" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +\.\//, ""); print }'
}

@test "package: the packages and the source package are lintian clean at every level, pedantic and experimental tags included" {
	command -v lintian >/dev/null || { echo "lintian is not installed (tests/install-deps)"; false; }
	local changes
	changes=$(compgen -G "$DEB_DIR/xsock_*.changes")
	run --separate-stderr lintian --info --pedantic --display-experimental \
		--fail-on error,warning,info,pedantic,experimental "$changes"
	echo "lintian: status $status"
	echo "$output"
	echo "$stderr" | grep -v 'running with root privileges' || true
	[[ $status == 0 ]]
	[[ -z $output ]]
	# what the overrides hide, each with its reason in debian/
	run lintian --show-overrides --info "$changes"
	echo "$output" | grep '^O:' | sed 's/^/# /' >&3
}

@test "package: libxsock holds the library, its link, xsock(7) and the rules conffile; xsock-tools the launcher, the tools and their pages" {
	run files "$LIBDEB"
	echo "$output"
	local f
	for f in usr/lib/xsock/libxsock.so etc/xsock/xsock.rules \
		usr/share/man/man7/xsock.7.gz usr/share/doc/libxsock/copyright \
		"usr/lib/libxsock.so -> xsock/libxsock.so"; do
		grep -qxF "$f" <<<"$output" || { echo "libxsock lacks $f"; false; }
	done
	! grep -E '^usr/(bin|share/man/man[18])/' <<<"$output"
	run dpkg-deb -f "$LIBDEB" Depends
	echo "libxsock Depends: $output"
	for f in libibverbs1 librdmacm1 ibverbs-providers libc6; do
		grep -qE "(^|, )$f( |,|$)" <<<"$output" || { echo "libxsock does not depend on $f"; false; }
	done
	dpkg-deb --ctrl-tarfile "$LIBDEB" | tar -xOf - ./conffiles >"$T/conffiles"
	[[ $(cat "$T/conffiles") == /etc/xsock/xsock.rules ]]
	cmp <(dpkg-deb --fsys-tarfile "$LIBDEB" | tar -xOf - ./etc/xsock/xsock.rules) \
		"$XSOCK_ROOT/config/xsock.rules"
	# the packaged library reads that conffile when XSOCK_RULES is unset
	dpkg-deb --fsys-tarfile "$LIBDEB" | tar -xOf - ./usr/lib/xsock/libxsock.so |
		strings | grep -qx /etc/xsock/xsock.rules

	run files "$TOOLSDEB"
	echo "$output"
	for f in usr/bin/xsock usr/bin/xsock-stat usr/bin/xsock-check \
		usr/share/man/man1/xsock.1.gz usr/share/man/man8/xsock-stat.8.gz \
		usr/share/man/man8/xsock-check.8.gz; do
		grep -qxF "$f" <<<"$output" || { echo "xsock-tools lacks $f"; false; }
	done
	! grep -E '^usr/lib/|^etc/|man7' <<<"$output"
	run dpkg-deb -f "$TOOLSDEB" Depends
	echo "xsock-tools Depends: $output"
	[[ $output == *"libxsock (= $(dpkg-deb -f "$LIBDEB" Version))"* ]]
}

@test "package: unpacked, the launcher preloads the packaged library, xsock-check finds it, and man renders every knob and fallback reason" {
	dpkg-deb -x "$LIBDEB" "$T/root"
	dpkg-deb -x "$TOOLSDEB" "$T/root"
	unset_xsock_env
	unset LD_PRELOAD XSOCK_LIB
	run --separate-stderr "$T/root/usr/bin/xsock" run -- env
	[[ $status == 0 ]]
	[[ $(sed -n 's/^LD_PRELOAD=//p' <<<"$output") == "$T/root/usr/lib/xsock/libxsock.so" ]]
	# xsock-check re-runs itself preloaded: with no server it fails to
	# connect (2), and says so, rather than "libxsock.so not found"
	run --separate-stderr "$T/root/usr/bin/xsock-check" -t 1 127.0.0.1:1
	echo "$output $stderr"
	[[ $status == 2 && $stderr != *"not found"* ]]
	run --separate-stderr env MANWIDTH=100 man -l "$T/root/usr/share/man/man7/xsock.7.gz"
	[[ $status == 0 ]]
	local name r
	for name in $(sed -n 's/^XS_OPT([^,]*, *\(XSOCK_[A-Z0-9_]*\),.*/\1/p' \
		"$XSOCK_ROOT/config/options.def"); do
		grep -q "^ *$name=" <<<"$output" || { echo "xsock(7) lacks $name"; false; }
	done
	for r in mode rule loopback no-device no-transport peer-no-xsock timeout resource unsupported; do
		grep -qE "^ +$r( {2,}|$)" <<<"$output" || { echo "xsock(7) lacks reason $r"; false; }
	done
	run --separate-stderr env MANWIDTH=100 man -l "$T/root/usr/share/man/man1/xsock.1.gz"
	[[ $status == 0 && $output == *"--connect-timeout-ms ms"* ]]
}
