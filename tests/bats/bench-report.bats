#!/usr/bin/env bats
# tests/bats/bench-report.bats - bench/report turns one suite run into a report.
#
# Each test writes a small run (results.csv, config.txt, targets.txt) under
# $BATS_TEST_TMPDIR: a failed rsocket row whose detail holds commas, quotes,
# a newline and more than 200 characters, a skipped memtier row, verbs
# figures for one test only. The tests check the figures, ratios and notes
# of the Markdown, the ratio columns of the CSV, exit status 2 for missing
# or invalid input, and the charts: PNG files when gnuplot is installed,
# the "not drawn" line when it is not (forced by a PATH without gnuplot).
# Needs python3 only; no library, no RDMA device.

load helpers

bats_require_minimum_version 1.5.0

setup() {
	T=$BATS_TEST_TMPDIR
	REPORT=$XSOCK_ROOT/bench/report
	RAW=$T/raw
	OUT=$T/out
	STEM=bench-20261130-213015-guest-a
	MD=$OUT/$STEM.md
	write_run "$RAW"
}

# write_run DIR: a suite run of all five families into DIR.
write_run() {
	mkdir -p "$1"
	cat >"$1/config.txt" <<'EOF'
date: 2026-11-30T21:30:15Z
host: guest-a
fabric: rxe0 over veth
emulation: yes
xsock: 8c322be
knobs: XSOCK_SPIN_US=50
mode: smoke
EOF
	echo "latency: xsock p50 <= 0.5x tcp for ping-pong 64 B" >"$1/targets.txt"
	local long
	long=$(printf 'x%.0s' {1..300})
	cat >"$1/results.csv" <<EOF
family,test,contender,metric,value,unit,better,status,detail
latency,ping-pong 64 B,tcp,p50,48.0,us,lower,ok,sockperf ping-pong -m 64
latency,ping-pong 64 B,xsock,p50,20.0,us,lower,ok,sockperf ping-pong -m 64
latency,ping-pong 64 B,rsocket,p50,,us,lower,failed,"rsocket: connect failed, ""rdma_resolve_route"" timed out
stderr: $long"
latency,ping-pong 64 B,verbs,p50,6.1,us,lower,ok,ib_send_lat -s 64
latency,ping-pong 4 KiB,tcp,p50,71.5,us,lower,ok,sockperf ping-pong -m 4096
latency,ping-pong 4 KiB,xsock,p50,35.2,us,lower,ok,sockperf ping-pong -m 4096
bulk,"iperf3 -P 4, 1 MiB writes",tcp,MB/s,420,MB/s,higher,ok,iperf3 -P 4 -l 1M
bulk,"iperf3 -P 4, 1 MiB writes",xsock,MB/s,5600,MB/s,higher,ok,iperf3 -P 4 -l 1M
redis,GET -c 50 64 B,tcp,req/s,85300,req/s,higher,ok,redis-benchmark -t get
redis,GET -c 50 64 B,xsock,req/s,111700,req/s,higher,ok,redis-benchmark -t get
redis,"memtier 1:10, 4 threads",xsock,req/s,,req/s,higher,skipped,memtier_benchmark not installed
setup,connect+accept+close,tcp,conn/s,9800,conn/s,higher,ok,connbench
setup,connect+accept+close,xsock,conn/s,640,conn/s,higher,ok,connbench
cost,memory at 100 connections,tcp,RSS KiB per conn,18.5,KiB,lower,ok,VmRSS
cost,memory at 100 connections,xsock,RSS KiB per conn,420.3,KiB,lower,ok,VmRSS
EOF
}

# md_cell TEST METRIC COLUMN: the cell of the report's row for TEST and
# METRIC under the column headed COLUMN.
md_cell() {
	awk -v test="$1" -v metric="$2" -v col="$3" '
		/^\| / { n = split(substr($0, 3, length($0) - 4), f, / \| /) }
		/^\| test \| / && !c { for (i = 1; i <= n; i++) if (f[i] == col) c = i }
		/^\| / && f[1] == test && f[2] == metric { print f[c]; exit }
	' "$MD"
}

# csv_field TEST METRIC CONTENDER COLUMN: one field of the report's CSV.
csv_field() {
	"$XS_PY" - "$OUT/$STEM.csv" "$@" <<'PY'
import csv, sys
path, test, metric, contender, col = sys.argv[1:]
for row in csv.DictReader(open(path, newline="")):
    if (row["test"], row["metric"], row["contender"]) == (test, metric,
                                                          contender):
        print(row[col])
PY
}

@test "bench-report: figures, xsock/other ratios, failed and skipped cells with their notes" {
	run "$REPORT" "$RAW" "$OUT"
	[[ $status -eq 0 ]]
	[[ $output == "$OUT/$STEM.md" ]]
	[[ $(md_cell "ping-pong 64 B" p50 tcp) == 48.0 ]]
	[[ $(md_cell "ping-pong 64 B" p50 xsock) == 20.0 ]]
	[[ $(md_cell "ping-pong 64 B" p50 verbs) == 6.10 ]]
	[[ $(md_cell "iperf3 -P 4, 1 MiB writes" MB/s xsock) == 5,600 ]]
	want=$(awk 'BEGIN { printf "%.2fx", 20.0 / 48.0 }')
	[[ $(md_cell "ping-pong 64 B" p50 xsock/tcp) == "$want" ]]
	want=$(awk 'BEGIN { printf "%.2fx", 20.0 / 6.1 }')
	[[ $(md_cell "ping-pong 64 B" p50 xsock/verbs) == "$want" ]]
	# From 10 up, no decimals; no verbs figure, no ratio.
	want=$(awk 'BEGIN { printf "%.0fx", 5600 / 420 }')
	[[ $(md_cell "iperf3 -P 4, 1 MiB writes" MB/s xsock/tcp) == "$want" ]]
	[[ $(md_cell "ping-pong 4 KiB" p50 xsock/verbs) == - ]]
	[[ $(md_cell "ping-pong 64 B" p50 rsocket) == "failed [1]" ]]
	[[ $(md_cell "ping-pong 64 B" p50 xsock/rsocket) == - ]]
	[[ $(md_cell "memtier 1:10, 4 threads" req/s xsock) == "skipped [1]" ]]
	# The note: one line, cut to 200 characters, quotes as in the detail.
	note=$(grep '^1\. rsocket: connect failed' "$MD")
	[[ $note == *'"rdma_resolve_route" timed out stderr: xxx'* ]]
	((${#note} <= 203))
	grep -qx '1\. memtier_benchmark not installed' "$MD"
	grep -q '^\*\*These are emulation figures' "$MD"
	grep -qx -- '- latency: xsock p50 <= 0.5x tcp for ping-pong 64 B' "$MD"
}

@test "bench-report: every table row has as many cells as its header" {
	"$REPORT" "$RAW" "$OUT" >/dev/null
	counts=$(awk '/^\| / { print gsub(/ \| /, "&") }' "$MD" | sort -u)
	[[ $counts == 9 ]] # tcp xsock rsocket verbs and three ratio columns
}

@test "bench-report: the CSV keeps every row and adds ratio_tcp, ratio_verbs, ratio_rsocket" {
	"$REPORT" "$RAW" "$OUT" >/dev/null
	head -1 "$OUT/$STEM.csv" | grep -qx \
		'family,test,contender,metric,value,unit,better,status,detail,ratio_tcp,ratio_verbs,ratio_rsocket'
	want=$(awk 'BEGIN { printf "%.4g", 20.0 / 48.0 }')
	[[ $(csv_field "ping-pong 64 B" p50 xsock ratio_tcp) == "$want" ]]
	[[ $(csv_field "ping-pong 64 B" p50 xsock ratio_rsocket) == "" ]]
	[[ $(csv_field "ping-pong 64 B" p50 tcp ratio_tcp) == "" ]]
	[[ $(csv_field "ping-pong 64 B" p50 rsocket status) == failed ]]
	rows=$("$XS_PY" -c 'import csv, sys; print(len(list(csv.reader(open(sys.argv[1])))))' "$OUT/$STEM.csv")
	[[ $rows -eq 16 ]]
	cmp "$RAW/config.txt" "$OUT/$STEM-config.txt"
}

@test "bench-report: --stem names the files" {
	run "$REPORT" --stem nightly "$RAW" "$OUT"
	[[ $status -eq 0 && $output == "$OUT/nightly.md" ]]
	[[ -f $OUT/nightly.csv && -f $OUT/nightly-config.txt ]]
	[[ ! -e $MD ]]
}

@test "bench-report: a missing or invalid input exits 2 with one line on stderr" {
	rm "$RAW/results.csv"
	run --separate-stderr "$REPORT" "$RAW" "$OUT"
	[[ $status -eq 2 && $stderr == *results.csv* ]]
	[[ $(wc -l <<<"$stderr") -eq 1 && -z $output ]]
	run --separate-stderr "$REPORT" "$T/nothing" "$OUT"
	[[ $status -eq 2 && $stderr == *"$T/nothing"* ]]
	write_run "$RAW"
	echo 'latency,x,tcp,p50,fast,us,lower,ok,' >>"$RAW/results.csv"
	run --separate-stderr "$REPORT" "$RAW" "$OUT"
	[[ $status -eq 2 && $stderr == *"not a number"* ]]
	write_run "$RAW"
	sed -i '/^date:/d' "$RAW/config.txt"
	run --separate-stderr "$REPORT" "$RAW" "$OUT"
	[[ $status -eq 2 && $stderr == *date* ]]
}

@test "bench-report: one PNG chart per family, linked from the report, no temporary files left" {
	require_cmd gnuplot
	"$REPORT" "$RAW" "$OUT" >/dev/null
	for f in latency bulk redis setup cost; do
		png=$OUT/$STEM-$f.png
		[[ $(od -An -tx1 -N8 "$png" | tr -d ' ') == 89504e470d0a1a0a ]]
		grep -qxF "![$f]($STEM-$f.png)" "$MD"
	done
	[[ $(ls "$OUT" | wc -l) -eq 8 ]] # md, csv, config and five charts
}

@test "bench-report: without gnuplot the report says the charts were not drawn" {
	mkdir "$T/empty"
	run env PATH="$T/empty" "$XS_PY" "$REPORT" "$RAW" "$OUT"
	[[ $status -eq 0 ]]
	grep -qx 'charts not drawn: gnuplot not installed' "$MD"
	no_match -F '.png' "$MD"
	[[ -z $(find "$OUT" -name '*.png') ]]
}
