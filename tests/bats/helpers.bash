# tests/bats/helpers.bash - shared by every bats file (`load helpers`).
#
# XSOCK_LIB    the library under test (default: build/libxsock.so)
# XSOCK_TOOLS  the compiled probes of tests/tools (default: build/tools)
# Every helper that waits has a deadline; nothing sleeps blindly.

XSOCK_ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
XS_PY=$(command -v /usr/bin/python3 || command -v python3)
XSOCK_LIB=${XSOCK_LIB:-$XSOCK_ROOT/build/libxsock.so}
XSOCK_TOOLS=${XSOCK_TOOLS:-$XSOCK_ROOT/build/tools}
export XSOCK_ROOT XSOCK_LIB XSOCK_TOOLS XS_PY

# Default per-test timeout (bats 1.8 honours BATS_TEST_TIMEOUT).
export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

# with_xsock CMD...: run CMD with the library preloaded (ASan first if set).
with_xsock() {
	LD_PRELOAD="${XSOCK_PRELOAD_PREFIX:+$XSOCK_PRELOAD_PREFIX:}$XSOCK_LIB" "$@"
}

# free_port: print a TCP port on 127.0.0.1 that is free right now.
free_port() {
	"$XS_PY" - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# wait_port HOST PORT [SECONDS]: wait until HOST:PORT accepts a connection.
wait_port() {
	local host=$1 port=$2 deadline=$((SECONDS + ${3:-20}))
	while ((SECONDS < deadline)); do
		if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	echo "wait_port: $host:$port not accepting after ${3:-20}s" >&2
	return 1
}

# require_cmd CMD...: skip the test when a program is missing.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || skip "$c not installed"
	done
}

# require_rdma: skip unless an RDMA device (Soft-RoCE rxe counts) exists.
require_rdma() {
	ibv_devices 2>/dev/null | awk 'NR > 2 && NF' | grep -q . ||
		skip "no RDMA device"
}

# no_match GREP-ARGS...: fail, showing the lines, when grep finds any.
# (A bare "! grep" does not fail a bats test unless it is the last line.)
no_match() {
	if grep "$@"; then
		echo "# unexpected lines above (grep $*)"
		return 1
	fi
}

# Forget every XSOCK_* knob the caller may have exported; keep the paths.
unset_xsock_env() {
	local v
	for v in $(compgen -e XSOCK_); do
		case $v in
		XSOCK_LIB | XSOCK_TOOLS | XSOCK_ROOT | XSOCK_PRELOAD_PREFIX) ;;
		*) unset "$v" ;;
		esac
	done
}
