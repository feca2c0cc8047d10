#!/usr/bin/env python3
"""app_memcache_check.py - memcached text protocol with exact replies.

A memcached client on a plain socket. Each mode sends a fixed script and
compares every reply byte for byte with what memcached 1.6 answers; the
first mismatch goes to stderr and the exit status is 1. On success it
prints a transcript (one line per command: command, then reply, with
values replaced by "<N bytes sha256:...>"), identical for identical runs
against a fresh server, so callers can also compare runs with each other.

  protocol  set/get/add/replace/append/prepend/incr/decr/delete/cas/gets/
            flush_all/version/stats/noreply/multi-get on one connection
  large     values 0 B .. 1 MiB (needs memcached -I 2m), one multi-get of
            all of them, and a value over the item size limit
Used by tests/bats/memcached.bats.
"""
import argparse
import hashlib
import random
import re
import socket
import sys


class Mc:
    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = bytearray()
        self.log = []

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("memcached closed the connection")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return out
            self._fill()

    def exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data = bytes(self.buf[:n])
        if self.buf[n:n + 2] != b"\r\n":
            raise ValueError("data block not terminated by CRLF")
        del self.buf[:n + 2]
        return data

    def send(self, cmd, data=None):
        out = cmd.encode() + b"\r\n"
        if data is not None:
            out += data + b"\r\n"
        self.sock.sendall(out)

    def values(self):
        """Read VALUE blocks up to END: [(key, flags, data, cas|None)]."""
        got = []
        while True:
            ln = self.line()
            if ln == b"END":
                return got
            parts = ln.split()
            if parts[0] != b"VALUE" or len(parts) not in (4, 5):
                raise ValueError("expected VALUE or END, got %r" % ln)
            data = self.exact(int(parts[3]))
            cas = int(parts[4]) if len(parts) == 5 else None
            got.append((parts[1].decode(), int(parts[2]), data, cas))

    def stats(self):
        self.send("stats")
        out = {}
        while True:
            ln = self.line()
            if ln == b"END":
                return out
            parts = ln.decode().split(" ", 2)
            if parts[0] != "STAT" or len(parts) != 3:
                raise ValueError("bad stats line %r" % ln)
            out[parts[1]] = parts[2]


def short(data):
    if len(data) <= 32 and all(32 <= c < 127 for c in data):
        return data.decode()
    return "<%d bytes sha256:%s>" % (len(data),
                                     hashlib.sha256(data).hexdigest()[:16])


class Script:
    def __init__(self, mc):
        self.mc = mc
        self.transcript = []

    def fail(self, what, expected, got):
        print("app_memcache_check: %s: expected %r, got %r"
              % (what, expected, got), file=sys.stderr)
        sys.exit(1)

    def simple(self, cmd, expected, data=None):
        """A command with a one-line reply."""
        self.mc.send(cmd, data)
        got = self.mc.line().decode()
        if isinstance(expected, re.Pattern):
            if not expected.fullmatch(got):
                self.fail(cmd, expected.pattern, got)
        elif got != expected:
            self.fail(cmd, expected, got)
        shown = cmd if data is None else "%s [%s]" % (cmd, short(data))
        self.transcript.append("%s -> %s" % (shown, got))
        return got

    def get(self, cmd, expected):
        """get/gets: expected is [(key, flags, data)]; returns the cas ids."""
        self.mc.send(cmd)
        got = self.mc.values()
        if [(k, f, d) for k, f, d, _ in got] != expected:
            self.fail(cmd, [(k, f, short(d)) for k, f, d in expected],
                      [(k, f, short(d)) for k, f, d, _ in got])
        self.transcript.append("%s -> %s" % (cmd, " ".join(
            "%s/%d/%s" % (k, f, short(d)) for k, f, d, _ in got) or "END"))
        return [c for _, _, _, c in got]

    def noreply(self, cmd, data=None):
        self.mc.send(cmd, data)
        self.transcript.append("%s -> (no reply)" % cmd)


def protocol(s, server_pid):
    mc = s.mc
    s.simple("version", re.compile(r"VERSION \d+\.\d+\.\d+.*"))
    s.simple("flush_all", "OK")
    s.get("get k1", [])
    s.simple("set k1 0 0 5", "STORED", b"hello")
    s.get("get k1", [("k1", 0, b"hello")])
    s.simple("add k1 0 0 3", "NOT_STORED", b"abc")
    s.simple("add k2 7 0 3", "STORED", b"abc")
    s.get("get k2", [("k2", 7, b"abc")])
    s.simple("replace k3 0 0 1", "NOT_STORED", b"x")
    s.simple("replace k1 0 0 6", "STORED", b"world!")
    s.simple("append k1 0 0 2", "STORED", b"++")
    s.simple("prepend k1 0 0 2", "STORED", b"--")
    s.get("get k1", [("k1", 0, b"--world!++")])
    s.simple("append nokey 0 0 2", "NOT_STORED", b"zz")
    s.simple("prepend nokey 0 0 2", "NOT_STORED", b"zz")
    # Flags are 32 bits; data may hold CRLF and a fake END line.
    tricky = b"line1\r\nEND\r\nVALUE x 0 1\r\n\x00\xff"
    s.simple("set k4 4294967295 0 %d" % len(tricky), "STORED", tricky)
    s.get("get k4", [("k4", 4294967295, tricky)])
    # 7 bytes for a 3-byte item: refused; the "ng" left over is read as
    # a command of its own.
    s.simple("set k5 0 0 3", "CLIENT_ERROR bad data chunk", b"toolong")
    got = mc.line().decode()
    if got != "ERROR":
        s.fail("the rest of a bad data chunk", "ERROR", got)
    s.simple("get k5", "END")

    s.simple("set n 0 0 2", "STORED", b"10")
    s.simple("incr n 5", "15")
    s.simple("decr n 20", "0")
    s.simple("incr n 18446744073709551615", "18446744073709551615")
    s.simple("incr n 1", "0")
    s.simple("incr k1 1",
             "CLIENT_ERROR cannot increment or decrement non-numeric value")
    s.simple("incr nokey 1", "NOT_FOUND")
    s.simple("decr nokey 1", "NOT_FOUND")
    s.simple("incr n abc", "CLIENT_ERROR invalid numeric delta argument")

    cas = s.get("gets k1", [("k1", 0, b"--world!++")])[0]
    if not isinstance(cas, int) or cas <= 0:
        s.fail("gets k1 cas unique", "a positive integer", cas)
    s.simple("cas k1 0 0 1 %d" % cas, "STORED", b"x")
    s.simple("cas k1 0 0 1 %d" % cas, "EXISTS", b"y")
    s.simple("cas nokey 0 0 1 %d" % cas, "NOT_FOUND", b"z")
    cas2 = s.get("gets k1", [("k1", 0, b"x")])[0]
    if cas2 == cas:
        s.fail("cas unique after cas", "a new value", cas2)
    # memcached rewrites a shrinking counter in place, space-padded.
    s.get("get k1 k2 nokey n", [("k1", 0, b"x"), ("k2", 7, b"abc"),
                                 ("n", 0, b"0".ljust(20))])

    s.simple("delete k2", "DELETED")
    s.simple("delete k2", "NOT_FOUND")
    s.noreply("set k6 3 0 2 noreply", b"ok")
    s.noreply("delete k1 noreply")
    s.get("get k6 k1", [("k6", 3, b"ok")])
    s.simple("bogus_command", "ERROR")

    # Counters move by exactly what this connection does.
    before = mc.stats()
    if server_pid is not None and before.get("pid") != str(server_pid):
        s.fail("stats pid", str(server_pid), before.get("pid"))
    s.get("get k6", [("k6", 3, b"ok")])
    s.get("get k6 nokey", [("k6", 3, b"ok")])
    s.simple("set k7 0 0 1", "STORED", b"7")
    s.simple("delete k7", "DELETED")
    s.simple("incr n 2", "2")
    after = mc.stats()
    for name, delta in [("cmd_get", 3), ("get_hits", 2), ("get_misses", 1),
                        ("cmd_set", 1), ("delete_hits", 1),
                        ("incr_hits", 1), ("curr_items", 0)]:
        d = int(after[name]) - int(before[name])
        if d != delta:
            s.fail("stats %s delta" % name, delta, d)
        s.transcript.append("stats %s +%d" % (name, d))
    if int(after["curr_connections"]) < 1:
        s.fail("stats curr_connections", ">= 1", after["curr_connections"])
    s.transcript.append("stats curr_items %s" % after["curr_items"])

    s.simple("flush_all", "OK")
    s.get("get k4 k6 n", [])
    mc.send("quit")
    mc.sock.settimeout(5)
    if mc.sock.recv(1) != b"":
        s.fail("quit", "EOF", "data")
    s.transcript.append("quit -> EOF")


def large(s, seed):
    rng = random.Random(seed)
    sizes = [0, 1, 1023, 1024, 4095, 4096, 4097, 65536, 100000, 500000,
             1000000, 1048576]
    vals = {}
    for i, n in enumerate(sizes):
        key = "big%d" % i
        vals[key] = rng.randbytes(n)
        s.simple("set %s %d 0 %d" % (key, i, n), "STORED", vals[key])
    for i, n in enumerate(sizes):
        key = "big%d" % i
        s.get("get %s" % key, [(key, i, vals[key])])
    keys = ["big%d" % i for i in range(len(sizes))]
    s.get("get " + " ".join(keys),
          [(k, i, vals[k]) for i, k in enumerate(keys)])
    # append grows a 1 MiB item past 1 MiB, still under -I 2m.
    s.simple("append big11 0 0 4096", "STORED", b"A" * 4096)
    s.get("get big11", [("big11", 11, vals["big11"] + b"A" * 4096)])
    # Over the 2 MiB item limit: refused, the data swallowed, the old
    # value removed, and the connection still in sync.
    huge = rng.randbytes(3 << 20)
    s.simple("set big10 0 0 %d" % len(huge),
             "SERVER_ERROR object too large for cache", huge)
    s.get("get big10", [])
    s.simple("version", re.compile(r"VERSION \d+\.\d+\.\d+.*"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["protocol", "large"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--server-pid", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    s = Script(Mc(a.host, a.port, a.timeout))
    if a.mode == "protocol":
        protocol(s, a.server_pid)
    else:
        large(s, a.seed)
    print("\n".join(s.transcript))


if __name__ == "__main__":
    main()
