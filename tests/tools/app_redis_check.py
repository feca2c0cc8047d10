#!/usr/bin/env python3
"""app_redis_check.py - write and read back known Redis keys over raw RESP.

A Redis client on a plain socket (no redis module): it writes --keys keys
PREFIX:0 .. PREFIX:N-1 whose values are seeded random bytes of varied sizes
(1 B .. --max-size, including the 4 KiB and 64 KiB edges), pipelined in
batches, then reads every one back with GET and, in batches, with MGET and
STRLEN, and checks each byte. --verify-only skips the writes (e.g. after a
restart from an RDB file). Prints one line
    keys=N bytes=TOTAL sha256=HEX
identical for identical --keys/--seed/--max-size, and exits 1 with the
first mismatch on stderr. Used by tests/bats/redis.bats.
"""
import argparse
import hashlib
import math
import random
import socket
import sys

EDGES = [1, 2, 3, 100, 1023, 1024, 1460, 4095, 4096, 4097, 8192, 16384,
         65535, 65536, 65537]


class Resp:
    """Minimal blocking RESP2 client."""

    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.peer = self.sock.getpeername()

    def send(self, *cmds):
        out = bytearray()
        for cmd in cmds:
            out += b"*%d\r\n" % len(cmd)
            for arg in cmd:
                if isinstance(arg, str):
                    arg = arg.encode()
                elif isinstance(arg, int):
                    arg = str(arg).encode()
                out += b"$%d\r\n" % len(arg)
                out += arg
                out += b"\r\n"
        self.sock.sendall(out)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data = bytes(self.buf[:n])
        if self.buf[n:n + 2] != b"\r\n":
            raise ValueError("bulk string not terminated by CRLF")
        del self.buf[:n + 2]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError("bad RESP type byte %r" % kind)

    def call(self, *cmd):
        self.send(cmd)
        return self.reply()


def sizes(n, seed, max_size):
    """Deterministic value sizes: the edges first, then log-uniform."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i < len(EDGES) and EDGES[i] <= max_size:
            out.append(EDGES[i])
        elif i == len(EDGES):
            out.append(max_size)
        else:
            out.append(max(1, int(2 ** rng.uniform(0, math.log2(max_size)))))
    return [min(s, max_size) for s in out]


def value(seed, i, size):
    return random.Random(seed * 1000003 + i).randbytes(size)


def fail(msg):
    print("app_redis_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--prefix", default="chk")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-size", type=int, default=100 * 1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--verify-only", action="store_true")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()

    r = Resp(a.host, a.port, a.timeout)
    if r.peer[1] != a.port:
        fail("getpeername port %d, expected %d" % (r.peer[1], a.port))
    pong = r.call("PING")
    if pong != "PONG":
        fail("PING -> %r" % (pong,))
    szs = sizes(a.keys, a.seed, a.max_size)
    keys = ["%s:%d" % (a.prefix, i) for i in range(a.keys)]
    vals = [value(a.seed, i, s) for i, s in enumerate(szs)]

    if not a.verify_only:
        for b in range(0, a.keys, a.batch):
            idx = range(b, min(b + a.batch, a.keys))
            r.send(*[("SET", keys[i], vals[i]) for i in idx])
            for i in idx:
                rep = r.reply()
                if rep != "OK":
                    fail("SET %s (%d bytes) -> %r" % (keys[i], szs[i], rep))

    # Every key alone, then the same keys again in MGET/STRLEN batches.
    for i in range(a.keys):
        got = r.call("GET", keys[i])
        if got != vals[i]:
            fail("GET %s: %s bytes, expected %d bytes (%s)" % (
                keys[i], "no" if got is None else len(got), szs[i],
                "content differs" if got is not None and
                len(got) == szs[i] else "length differs"))
    for b in range(0, a.keys, a.batch):
        idx = list(range(b, min(b + a.batch, a.keys)))
        r.send(("MGET", *[keys[i] for i in idx]),
               *[("STRLEN", keys[i]) for i in idx])
        got = r.reply()
        if not isinstance(got, list) or len(got) != len(idx):
            fail("MGET batch at %d -> %r" % (b, type(got)))
        for i, v in zip(idx, got):
            if v != vals[i]:
                fail("MGET %s: value differs" % keys[i])
        for i in idx:
            n = r.reply()
            if n != szs[i]:
                fail("STRLEN %s -> %r, expected %d" % (keys[i], n, szs[i]))

    h = hashlib.sha256()
    for v in vals:
        h.update(v)
    print("keys=%d bytes=%d sha256=%s" % (a.keys, sum(szs), h.hexdigest()))


if __name__ == "__main__":
    main()
