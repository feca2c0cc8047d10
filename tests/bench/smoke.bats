#!/usr/bin/env bats
# make bench-smoke inside make check: bench/run --smoke runs every workload
# of `make bench` once, tiny, on the fabric (the Soft-RoCE guest here), and
# these tests read what it wrote. They check that the scripts, the tools and
# the report still work, and that xsock carried every workload over RDMA
# that kernel TCP ran; the figures themselves are not judged (smoke counts,
# emulation).

bats_require_minimum_version 1.5.0

setup_file()
{
	[[ "${XSOCK_SKIP_SOFTROCE:-}" != 1 ]] || skip "XSOCK_SKIP_SOFTROCE=1"
	export BENCH_OUT=$BATS_FILE_TMPDIR/report
	bench/run --smoke --out "$BENCH_OUT" >"$BATS_FILE_TMPDIR/run.out" 2>&1 || {
		tail -40 "$BATS_FILE_TMPDIR/run.out" >&3
		return 1
	}
	export BENCH_RAW
	BENCH_RAW=$(sed -n 's/.*logs in \(.*\)\/logs).*/\1/p' "$BATS_FILE_TMPDIR/run.out" | head -1)
}

# rows FAMILY CONTENDER STATUS - how many rows of results.csv match
rows()
{
	python3 - "$BENCH_RAW/results.csv" "$@" <<'EOF'
import csv, sys
f, fam, cont, st = sys.argv[1:]
print(sum(1 for r in csv.DictReader(open(f))
          if r["family"] == fam and r["contender"] == cont and r["status"] == st))
EOF
}

# xsock_matches_tcp FAMILY - every (test, metric) that kernel TCP measured,
# xsock measured too (status ok, a number), and none of xsock's failed
xsock_matches_tcp()
{
	python3 - "$BENCH_RAW/results.csv" "$1" <<'EOF'
import csv, sys
f, fam = sys.argv[1:]
rows = [r for r in csv.DictReader(open(f)) if r["family"] == fam]
tcp = {(r["test"], r["metric"]) for r in rows if r["contender"] == "tcp" and r["status"] == "ok"}
xs = {(r["test"], r["metric"]): r for r in rows if r["contender"] == "xsock"}
bad = [k for k in tcp if k not in xs or xs[k]["status"] != "ok" or float(xs[k]["value"]) <= 0]
bad += [(r["test"], r["detail"]) for r in xs.values() if r["status"] == "failed"]
if not tcp:
    print("no kernel TCP figures in", fam); sys.exit(1)
if bad:
    print("xsock missing or failed:", bad); sys.exit(1)
print(len(tcp), "figures")
EOF
}

@test "bench-smoke: bench/run --smoke writes the Markdown report, the CSV, the configuration and a chart per family" {
	local md stem fam
	md=$(ls "$BENCH_OUT"/bench-*.md)
	stem=${md%.md}
	[[ -s "$stem.csv" && -s "$stem-config.txt" ]]
	grep -q '^emulation: yes' "$stem-config.txt" || grep -q '^emulation: no' "$stem-config.txt"
	for fam in latency bulk redis setup cost idle; do
		grep -qi "^## .*$fam" "$md" || { echo "no $fam section in $md"; return 1; }
	done
	grep -q '^## Targets' "$md"
	if command -v gnuplot >/dev/null; then
		for fam in latency bulk redis setup cost; do
			[[ "$(head -c 4 "$stem-$fam.png" | od -An -tx1 | tr -d ' ')" == 89504e47 ]]
		done
	fi
}

@test "bench-smoke: latency: sockperf ping-pong under xsock over RDMA at every size, next to kernel TCP and ib_send_lat" {
	run xsock_matches_tcp latency
	echo "$output"
	((status == 0))
	# p50, p99, p99.9 and avg at each smoke size (bench/suite: 64 B)
	[[ $(rows latency verbs ok) -ge 4 ]]
	[[ $(rows latency tcp ok) -ge 4 ]]
}

@test "bench-smoke: rr: sock_rr under xsock over RDMA beside kernel TCP, and verbs_rr for the fabric" {
	run xsock_matches_tcp rr
	echo "$output"
	((status == 0))
	[[ $(rows rr verbs ok) -ge 3 ]] # rate, p50, p99 at 1 connection
}

@test "bench-smoke: bulk: iperf3 and sockperf throughput under xsock over RDMA, next to kernel TCP and ib_read_bw" {
	command -v iperf3 >/dev/null || skip "iperf3 not installed"
	run xsock_matches_tcp bulk
	echo "$output"
	((status == 0))
	[[ $(rows bulk verbs ok) -ge 1 && $(rows bulk verbs-write ok) -ge 1 ]]
}

@test "bench-smoke: redis: redis-benchmark SET/GET in every configuration under xsock over RDMA; rsocket's failure is a row with its error" {
	run xsock_matches_tcp redis
	echo "$output"
	((status == 0))
	[[ $(rows redis tcp ok) -ge 4 ]]
	# memtier_benchmark: measured, or a skipped row that says why
	[[ $(rows redis xsock skipped) -ge 1 ]] || command -v memtier_benchmark >/dev/null
}

@test "bench-smoke: setup, cost, idle and syscalls: connection rate, memory per connection, idle CPU and system calls per request under xsock" {
	run xsock_matches_tcp setup
	echo "$output"
	((status == 0))
	run xsock_matches_tcp cost
	echo "$output"
	((status == 0))
	run xsock_matches_tcp idle
	echo "$output"
	((status == 0))
	# registered memory is counted for xsock (XSOCK_STATS "registered")
	grep -q 'registered KiB per conn' "$BENCH_RAW/results.csv"
	# the server's system calls per request, counted beside kernel TCP's
	# (or a skipped row that says why perf could not count them)
	if [[ $(rows syscalls xsock skipped) -eq 0 ]]; then
		python3 - "$BENCH_RAW/results.csv" <<'EOF'
import csv, sys
ok = {r["contender"] for r in csv.DictReader(open(sys.argv[1]))
      if r["family"] == "syscalls" and r["metric"] == "all per request"
      and r["status"] == "ok" and float(r["value"]) > 0}
print("system calls per request counted for:", sorted(ok))
sys.exit(0 if {"tcp", "xsock"} <= ok else 1)
EOF
	fi
}
