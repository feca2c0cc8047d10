#!/usr/bin/env bats
# tests/bats/launcher.bats - the xsock launcher (tools/xsock, built as
# build/bin/xsock with the knob list of config/options.def filled in).
#
# run turns --knobs into XSOCK_* variables, puts the library first in
# LD_PRELOAD and execs the command; it finds the library in the build tree
# and in the installed layout; usage errors exit 2 with one line.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	# The interpreter itself, not a pyenv-style shim script.
	if command -v python3 >/dev/null; then
		PY=$(python3 -c 'import sys; print(sys.executable)')
		export PY
	fi
	LAUNCHER=$(dirname "$XSOCK_LIB")/bin/xsock
	LIB_REAL=$(readlink -f "$XSOCK_LIB")
	export LAUNCHER LIB_REAL
}

setup() {
	[[ -f $XSOCK_LIB ]] || skip "$XSOCK_LIB not built (make)"
	[[ -x $LAUNCHER ]] || skip "$LAUNCHER not built (make build/bin/xsock)"
	unset_xsock_env
	unset LD_PRELOAD
	T=$(readlink -f "$BATS_TEST_TMPDIR")
}

require_py() {
	[[ -n ${PY:-} && -x $PY ]] || skip "python3 not installed"
}

# env_value NAME: the value of NAME in env(1) output held in $output.
env_value() {
	sed -n "s/^$1=//p" <<<"$output"
}

# The XSOCK_* names declared in config/options.def, one per line.
options_def_names() {
	sed -n 's/^XS_OPT([^,]*, *\([A-Z0-9_]*\),.*/\1/p' \
		"$XSOCK_ROOT/config/options.def"
}

# --- run: knobs and LD_PRELOAD ------------------------------------------------

@test "run: --knob VALUE sets XSOCK_KNOB, library first in LD_PRELOAD" {
	run --separate-stderr "$LAUNCHER" run --mode tcp --eager-limit 8192 -- env
	[[ $status == 0 ]]
	[[ $(env_value XSOCK_MODE) == tcp ]]
	[[ $(env_value XSOCK_EAGER_LIMIT) == 8192 ]]
	[[ $(env_value LD_PRELOAD) == "$LIB_REAL" ]]
}

@test "run: --knob=VALUE form, and the last of a repeated knob wins" {
	run --separate-stderr "$LAUNCHER" run --spin-us=0 "--log=warn:$T/x.log" \
		--rules= --mode auto --mode=tcp env
	[[ $status == 0 ]]
	[[ $(env_value XSOCK_SPIN_US) == 0 ]]
	[[ $(env_value XSOCK_LOG) == "warn:$T/x.log" ]]
	[[ $(grep -c '^XSOCK_RULES=$' <<<"$output") == 1 ]]
	[[ $(env_value XSOCK_MODE) == tcp ]]
}

@test "run: every knob of options.def is accepted under its --name" {
	local name opt args=() i=0
	while read -r name; do
		opt=${name#XSOCK_}
		opt=${opt,,}
		args+=("--${opt//_/-}" "v$i")
		i=$((i + 1))
	done < <(options_def_names)
	((i >= 13))
	run --separate-stderr "$LAUNCHER" run "${args[@]}" -- env
	[[ $status == 0 ]]
	i=0
	while read -r name; do
		[[ $(env_value "$name") == "v$i" ]] ||
			{ echo "# $name: '$(env_value "$name")', want v$i"; return 1; }
		i=$((i + 1))
	done < <(options_def_names)
}

@test "run: an existing LD_PRELOAD is kept after the library" {
	LD_PRELOAD=/nonexistent/other.so run --separate-stderr \
		"$LAUNCHER" run -- env
	[[ $status == 0 ]]
	[[ $(env_value LD_PRELOAD) == "$LIB_REAL:/nonexistent/other.so" ]]
}

@test "run: arguments after the command are the command's, not knobs" {
	run --separate-stderr "$LAUNCHER" run --mode tcp \
		printf '<%s>' --mode off -- 'a b'
	[[ $status == 0 ]]
	[[ $output == '<--mode><off><--><a b>' ]]
}

@test "run: the command's exit status comes back" {
	run "$LAUNCHER" run -- sh -c 'exit 7'
	[[ $status == 7 ]]
	run -127 "$LAUNCHER" run no-such-command-xs
	[[ $status == 127 ]]
	[[ $output == "xsock: no-such-command-xs: command not found" ]]
}

# --- run: the program really runs under the library ---------------------------

@test "run: --stats 1 makes the program print the library's exit summary" {
	require_py
	run --separate-stderr "$LAUNCHER" run --mode tcp --stats 1 -- \
		"$PY" -c 'import socket; socket.socket(); print("ran")'
	[[ $status == 0 && $output == ran ]]
	[[ $(grep -Ec '^xsock stats pid [0-9]+ \(python3[.0-9]*\): 1 stream sockets$' \
		<<<"$stderr") == 1 ]]
	# The same program without the launcher prints no summary.
	run --separate-stderr env XSOCK_STATS=1 \
		"$PY" -c 'import socket; socket.socket(); print("ran")'
	[[ $status == 0 && $output == ran && -z $stderr ]]
}

@test "run: values go through unchecked; the library reports a bad one" {
	require_py
	run --separate-stderr "$LAUNCHER" run --mode bogus -- \
		"$PY" -c 'import socket; socket.socket(); print("ran")'
	[[ $status == 0 && $output == ran ]]
	[[ $stderr == 'xsock: XSOCK_MODE: invalid value "bogus"'* ]]
	[[ $(wc -l <<<"$stderr") == 1 ]]
}

# --- run: usage errors --------------------------------------------------------

@test "run: an unknown knob is exit 2, naming it and listing the knobs" {
	run --separate-stderr "$LAUNCHER" run --foo 1 -- env
	[[ $status == 2 && -z $output ]]
	local want
	want=$(options_def_names | sed 's/^XSOCK_//; s/_/-/g; s/^/--/' |
		tr 'A-Z\n' 'a-z ')
	[[ $stderr == "xsock: unknown knob --foo (knobs: ${want% })" ]]
	run --separate-stderr "$LAUNCHER" run --eager_limit=1 env
	[[ $status == 2 && $stderr == "xsock: unknown knob --eager_limit "* ]]
}

@test "run: a knob without a value is exit 2" {
	run --separate-stderr "$LAUNCHER" run --mode
	[[ $status == 2 && $stderr == "xsock: --mode needs a value" ]]
	# "--stats -- env" would otherwise run env with XSOCK_STATS=--.
	run --separate-stderr "$LAUNCHER" run --stats -- env
	[[ $status == 2 && $stderr == "xsock: --stats needs a value" && -z $output ]]
	run --separate-stderr "$LAUNCHER" run --lib
	[[ $status == 2 && $stderr == "xsock: --lib needs a value" ]]
}

@test "run: no command is exit 2" {
	run --separate-stderr "$LAUNCHER" run --mode tcp
	[[ $status == 2 && $stderr == "xsock: run: no command given"* ]]
	run --separate-stderr "$LAUNCHER" run --mode tcp --
	[[ $status == 2 && $stderr == "xsock: run: no command given"* ]]
}

@test "run: a missing library is exit 2 and the command does not run" {
	run --separate-stderr "$LAUNCHER" run --lib /nonexistent -- touch "$T/ran"
	[[ $status == 2 && $stderr == "xsock: library /nonexistent not found" ]]
	[[ ! -e $T/ran ]]
	XSOCK_LIB=/nonexistent/libxsock.so run --separate-stderr \
		"$LAUNCHER" run -- touch "$T/ran"
	[[ $status == 2 && $stderr == *"/nonexistent/libxsock.so not found" ]]
	[[ ! -e $T/ran ]]
}

# --- finding the library ------------------------------------------------------

@test "library: build layout, bin/xsock uses ../libxsock.so" {
	unset XSOCK_LIB
	run --separate-stderr "$LAUNCHER" run -- env
	[[ $status == 0 ]]
	[[ $(env_value LD_PRELOAD) == "$LIB_REAL" ]]
}

@test "library: install layout, PREFIX/bin/xsock uses PREFIX/lib/libxsock.so" {
	mkdir -p "$T/prefix/bin" "$T/prefix/lib" "$T/elsewhere"
	cp "$LAUNCHER" "$T/prefix/bin/xsock"
	cp "$XSOCK_LIB" "$T/prefix/lib/libxsock.so"
	local want
	want=$(readlink -f "$T/prefix/lib/libxsock.so")
	unset XSOCK_LIB
	run --separate-stderr "$T/prefix/bin/xsock" run -- env
	[[ $status == 0 ]]
	[[ $(env_value LD_PRELOAD) == "$want" ]]
	# Through a symlink on PATH, the script still finds its own prefix.
	ln -s "$T/prefix/bin/xsock" "$T/elsewhere/xsock"
	PATH=$T/elsewhere:$PATH run --separate-stderr xsock run -- env
	[[ $status == 0 ]]
	[[ $(env_value LD_PRELOAD) == "$want" ]]
	# No library in either place.
	rm "$T/prefix/lib/libxsock.so"
	run --separate-stderr "$T/prefix/bin/xsock" run -- env
	[[ $status == 2 && $stderr == "xsock: libxsock.so not found in "* ]]
}

@test "library: --lib beats XSOCK_LIB, which beats the layout" {
	cp "$XSOCK_LIB" "$T/a.so"
	cp "$XSOCK_LIB" "$T/b.so"
	XSOCK_LIB=$T/a.so run --separate-stderr "$LAUNCHER" run -- env
	[[ $(env_value LD_PRELOAD) == "$(readlink -f "$T/a.so")" ]]
	XSOCK_LIB=$T/a.so run --separate-stderr \
		"$LAUNCHER" run --lib "$T/b.so" -- env
	[[ $(env_value LD_PRELOAD) == "$(readlink -f "$T/b.so")" ]]
	# A relative path is made absolute: the command may change directory.
	cd "$T"
	run --separate-stderr "$LAUNCHER" run --lib=b.so -- env
	[[ $(env_value LD_PRELOAD) == "$(readlink -f "$T/b.so")" ]]
}

# --- knobs, help, other subcommands -------------------------------------------

@test "knobs: lists every XSOCK_ name of options.def with its --option" {
	local want
	want=$(options_def_names)
	[[ $(wc -l <<<"$want") -ge 13 ]]
	[[ $(grep -c '^XS_OPT(' "$XSOCK_ROOT/config/options.def") == \
		"$(wc -l <<<"$want")" ]]
	run --separate-stderr "$LAUNCHER" knobs
	[[ $status == 0 && -z $stderr ]]
	diff -u <(echo "$want") <(awk '{ print $2 }' <<<"$output")
	# The option is the name without XSOCK_, lowercase, _ -> -.
	[[ $(grep -Ec '^--eager-limit +XSOCK_EAGER_LIMIT$' <<<"$output") == 1 ]]
	[[ $(grep -Ec '^--connect-timeout-ms +XSOCK_CONNECT_TIMEOUT_MS$' \
		<<<"$output") == 1 ]]
	awk '{ o = substr($2, 7); gsub(/_/, "-", o)
		if ($1 != "--" tolower(o)) { print "bad line: " $0; bad = 1 } }
		END { exit bad }' <<<"$output"
}

@test "help: -h, --help and help print usage on stdout, exit 0" {
	local a
	for a in -h --help help; do
		run --separate-stderr "$LAUNCHER" "$a"
		[[ $status == 0 && -z $stderr ]]
		[[ ${lines[0]} == "usage: xsock run "* ]]
		[[ $output == *"--eager-limit"* ]]
	done
	run --separate-stderr "$LAUNCHER" run --help
	[[ $status == 0 && ${lines[0]} == "usage: xsock run "* ]]
}

@test "usage errors: no subcommand or an unknown one is exit 2" {
	run --separate-stderr "$LAUNCHER"
	[[ $status == 2 && -z $output && $stderr == "usage: xsock run "* ]]
	run --separate-stderr "$LAUNCHER" frobnicate
	[[ $status == 2 && -z $output ]]
	[[ $stderr == "xsock: unknown command frobnicate (commands: run stat check knobs help)" ]]
	run --separate-stderr "$LAUNCHER" knobs extra
	[[ $status == 2 ]]
}

@test "stat and check: exec xsock-stat and xsock-check from beside the launcher" {
	mkdir -p "$T/bin"
	cp "$LAUNCHER" "$T/bin/xsock"
	run --separate-stderr "$T/bin/xsock" stat -x
	[[ $status == 2 && $stderr == "xsock: $T/bin/xsock-stat not found"* ]]
	run --separate-stderr "$T/bin/xsock" check
	[[ $status == 2 && $stderr == "xsock: $T/bin/xsock-check not found"* ]]
	local t
	for t in stat check; do
		printf '#!/bin/sh\necho "%s:$#:$*"; exit 3\n' "$t" >"$T/bin/xsock-$t"
		chmod +x "$T/bin/xsock-$t"
	done
	run --separate-stderr "$T/bin/xsock" stat -p 42 'a b'
	[[ $status == 3 && $output == "stat:3:-p 42 a b" ]]
	run --separate-stderr "$T/bin/xsock" check
	[[ $status == 3 && $output == "check:0:" ]]
}
