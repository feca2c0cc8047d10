#!/usr/bin/env python3
"""redis_soak.py - a timed redis soak over raw RESP where every reply is checked.

    redis_soak.py --port PORT [--host H] [--seconds 300] [--conns 8]
                  [--keys 48] [--max-size 262144] [--seed 1]
                  [--bgsave-every 30] [--timeout 60] [--prefix soak]

For --seconds, --conns connections (one thread each) run SET, GET, MGET,
DEL, INCR and APPEND, alone or pipelined in batches of up to 8, on keys of
their own (PREFIX:CONN:v0.. for values, PREFIX:CONN:n0.. for counters).
Values are seeded random bytes of 1 B .. --max-size, the 4 KiB, 64 KiB
and largest sizes and their neighbours among them; APPEND grows a value
up to twice --max-size. Each thread keeps the expected value of every key
it owns and checks every reply against it: a GET returns exactly the last
value written, INCR the expected integer, APPEND the new length, DEL the
number of keys that existed. Every --bgsave-every seconds a separate
connection issues BGSAVE, waits until INFO persistence says
rdb_bgsave_in_progress:0 and checks rdb_last_bgsave_status:ok. At the end
each thread reads back every key it owns.

Prints one line on stdout:
    soak: seconds=S conns=K ops=N bytes=B replies=R bgsaves=G errors=E
(bytes: value bytes written and read back). Progress goes to stderr.

Exit status: 0 if every reply was right, every BGSAVE ok and at least
seconds/--bgsave-every - 1 of them ran; 1 at once on the first wrong
reply (key, sizes and first differing offset on stderr), on a connection
error or timeout (never retried), or on a failed BGSAVE; 2 on bad usage.
"""
import argparse
import math
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from app_redis_check import Resp  # noqa: E402

BATCH_MAX = 8


def fail(msg):
    """Report the first failure and end the whole process at once."""
    sys.stderr.write("redis_soak: %s\n" % msg)
    sys.stderr.flush()
    os._exit(1)


def first_diff(a, b):
    """Offset of the first byte where a and b differ (or the shorter length)."""
    n = min(len(a), len(b))
    for i in range(0, n, 4096):
        if a[i:i + 4096] != b[i:i + 4096]:
            for j in range(i, min(i + 4096, n)):
                if a[j] != b[j]:
                    return j
    return n


def describe(v):
    if isinstance(v, (bytes, bytearray)):
        return "%d bytes" % len(v)
    return repr(v)[:200]


class Worker(threading.Thread):
    """One connection and the keys it owns, with their expected values."""

    def __init__(self, a, idx, deadline):
        super().__init__(name="soak-%d" % idx, daemon=True)
        self.a = a
        self.idx = idx
        self.deadline = deadline
        self.rng = random.Random(a.seed * 7919 + idx)
        self.vkeys = ["%s:%d:v%d" % (a.prefix, idx, i) for i in range(a.keys)]
        self.nkeys = ["%s:%d:n%d" % (a.prefix, idx, i)
                      for i in range(max(1, a.keys // 8))]
        self.model = {}   # key -> bytes; absent: the key does not exist
        self.ops = 0
        self.replies = 0
        self.bytes = 0
        self.edges = sorted({s for s in (
            1, 2, 3, 4095, 4096, 4097, 65535, 65536, 65537,
            a.max_size - 1, a.max_size) if 1 <= s <= a.max_size})
        self.r = None

    def size(self):
        if self.rng.random() < 0.3:
            return self.rng.choice(self.edges)
        return max(1, int(2 ** self.rng.uniform(0, math.log2(self.a.max_size))))

    def value(self, n):
        return self.rng.randbytes(n)

    # Each op returns (command, expected reply, what it is about); the
    # model is updated as redis will have it after the command.
    def op_set(self):
        k = self.rng.choice(self.vkeys)
        v = self.value(self.size())
        self.model[k] = v
        self.bytes += len(v)
        return ("SET", k, v), "OK", k

    def op_get(self):
        k = self.rng.choice(self.vkeys + self.nkeys)
        return ("GET", k), self.model.get(k), k

    def op_mget(self):
        ks = self.rng.sample(self.vkeys, self.rng.randint(2, 8))
        return ("MGET", *ks), [self.model.get(k) for k in ks], ks

    def op_del(self):
        ks = self.rng.sample(self.vkeys + self.nkeys, self.rng.randint(1, 3))
        n = sum(1 for k in ks if self.model.pop(k, None) is not None)
        return ("DEL", *ks), n, ks

    def op_incr(self):
        k = self.rng.choice(self.nkeys)
        n = int(self.model.get(k, b"0")) + 1
        self.model[k] = b"%d" % n
        return ("INCR", k), n, k

    def op_append(self):
        k = self.rng.choice(self.vkeys)
        old = self.model.get(k, b"")
        add = self.value(self.size())
        if len(old) + len(add) > 2 * self.a.max_size:
            return self.op_set()
        self.model[k] = old + add
        self.bytes += len(add)
        return ("APPEND", k, add), len(old) + len(add), k

    OPS = ((op_set, 25), (op_get, 30), (op_mget, 10), (op_del, 5),
           (op_incr, 15), (op_append, 15))

    def check(self, cmd, want, got, about):
        """Compare one reply with its expectation; a difference ends the run."""
        self.replies += 1
        if got == want:
            if isinstance(got, (bytes, bytearray)):
                self.bytes += len(got)
            elif isinstance(got, list):
                self.bytes += sum(len(v) for v in got if v is not None)
            return
        msg = "conn %d: %s %s: " % (self.idx, cmd[0], about)
        if isinstance(want, list) and isinstance(got, list) and \
                len(want) == len(got):
            for k, w, g in zip(about, want, got):
                if w != g:
                    msg = "conn %d: MGET of %d keys: key %s " % (
                        self.idx, len(about), k)
                    want, got = w, g
                    break
        if isinstance(want, bytes) and isinstance(got, bytes):
            msg += "got %d bytes, expected %d, first difference at offset %d" % (
                len(got), len(want), first_diff(want, got))
        else:
            msg += "got %s, expected %s" % (describe(got), describe(want))
        fail(msg)

    def call_checked(self, ops):
        """Send a batch of (command, expected, about), check each reply in order."""
        try:
            self.r.send(*[c for c, _, _ in ops])
            for cmd, want, about in ops:
                self.check(cmd, want, self.r.reply(), about)
        except (OSError, EOFError, ValueError) as e:
            fail("conn %d: %s during %s: %s" % (
                self.idx, type(e).__name__,
                " ".join(c[0] for c, _, _ in ops), e))
        self.ops += len(ops)

    def run(self):
        try:
            self.r = Resp(self.a.host, self.a.port, self.a.timeout)
        except OSError as e:
            fail("conn %d: connect: %s" % (self.idx, e))
        # start from an empty keyspace of our own (left over: any count)
        try:
            rep = self.r.call("DEL", *self.vkeys, *self.nkeys)
        except (OSError, EOFError, ValueError) as e:
            fail("conn %d: DEL of the keyspace: %s" % (self.idx, e))
        if not isinstance(rep, int):
            fail("conn %d: DEL of the keyspace -> %r" % (self.idx, rep))
        fns = [f for f, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        while time.monotonic() < self.deadline:
            n = 1 if self.rng.random() < 0.5 else self.rng.randint(2, BATCH_MAX)
            self.call_checked([f(self) for f in
                               self.rng.choices(fns, weights, k=n)])
        self.final_pass()

    def final_pass(self):
        """Read back every key this connection owns, one GET each, then MGET."""
        keys = self.vkeys + self.nkeys
        for k in keys:
            self.call_checked([(("GET", k), self.model.get(k), k)])
        for b in range(0, len(keys), 16):
            ks = keys[b:b + 16]
            self.call_checked([(("MGET", *ks), [self.model.get(k) for k in ks], ks)])


def info_persistence(r):
    rep = r.call("INFO", "persistence")
    if not isinstance(rep, bytes):
        fail("INFO persistence -> %r" % (rep,))
    out = {}
    for line in rep.decode().splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


class Saver(threading.Thread):
    """BGSAVE every --bgsave-every seconds on its own connection."""

    def __init__(self, a, t0, stop, workers):
        super().__init__(name="soak-bgsave", daemon=True)
        self.a, self.t0, self.stop, self.workers = a, t0, stop, workers
        self.ok = 0

    def run(self):
        a = self.a
        try:
            r = Resp(a.host, a.port, a.timeout)
            k = 1
            while not self.stop.wait(max(0, self.t0 + k * a.bgsave_every -
                                         time.monotonic())):
                self.bgsave(r, k)
                k += 1
        except (OSError, EOFError, ValueError) as e:
            fail("bgsave connection: %s: %s" % (type(e).__name__, e))

    def bgsave(self, r, k):
        before = info_persistence(r)
        rep = r.call("BGSAVE")
        if rep != "Background saving started":
            fail("BGSAVE %d -> %r" % (k, rep))
        t = time.monotonic()
        while True:
            st = info_persistence(r)
            if st.get("rdb_bgsave_in_progress") == "0":
                break
            if time.monotonic() - t > 5 * self.a.timeout:
                fail("BGSAVE %d still in progress after %.0f s" % (
                    k, time.monotonic() - t))
            time.sleep(0.1)
        if st.get("rdb_last_bgsave_status") != "ok":
            fail("BGSAVE %d: rdb_last_bgsave_status:%s" % (
                k, st.get("rdb_last_bgsave_status")))
        if "rdb_saves" in st and int(st["rdb_saves"]) <= int(before["rdb_saves"]):
            fail("BGSAVE %d: rdb_saves did not grow (%s -> %s)" % (
                k, before["rdb_saves"], st["rdb_saves"]))
        self.ok += 1
        ops = sum(w.ops for w in self.workers)
        sys.stderr.write("redis_soak: %.0f s: BGSAVE %d ok in %.1f s "
                         "(changes %s), %d ops so far\n" % (
                             time.monotonic() - self.t0, k,
                             time.monotonic() - t,
                             before.get("rdb_changes_since_last_save", "?"),
                             ops))
        sys.stderr.flush()


def main():
    ap = argparse.ArgumentParser(
        description="timed redis soak, every reply checked")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--keys", type=int, default=48,
                    help="value keys per connection (an eighth as many counters)")
    ap.add_argument("--max-size", type=int, default=256 * 1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bgsave-every", type=float, default=30)
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds one reply may take before the run fails")
    ap.add_argument("--prefix", default="soak")
    a = ap.parse_args()
    if a.conns < 1 or a.keys < 8 or a.max_size < 1 or a.bgsave_every <= 0:
        ap.error("need --conns >= 1, --keys >= 8, --max-size >= 1, --bgsave-every > 0")

    t0 = time.monotonic()
    stop = threading.Event()
    workers = [Worker(a, i, t0 + a.seconds) for i in range(a.conns)]
    saver = Saver(a, t0, stop, workers)
    for w in workers:
        w.start()
    saver.start()
    for w in workers:
        w.join()
    stop.set()
    saver.join()
    elapsed = time.monotonic() - t0
    need = max(0, int(a.seconds // a.bgsave_every) - 1)
    errors = 0
    if saver.ok < need:
        sys.stderr.write("redis_soak: %d BGSAVEs ran, at least %d expected\n"
                         % (saver.ok, need))
        errors += 1
    print("soak: seconds=%.0f conns=%d ops=%d bytes=%d replies=%d bgsaves=%d "
          "errors=%d" % (elapsed, a.conns, sum(w.ops for w in workers),
                         sum(w.bytes for w in workers),
                         sum(w.replies for w in workers), saver.ok, errors))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
