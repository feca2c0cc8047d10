#!/usr/bin/env python3
"""lateserve.py - a server that reads its connections one after the other,
and a client that writes each of its connections once, in order, until it
is killed: the server reads the first to its end (the client's death), and
only then looks at the others, whose client had written them or not.

  lateserve.py serve HOST PORT N   accept N connections, wait 1 s, then
                                   read each to its end, in order, and
                                   print one line per connection
  lateserve.py client HOST PORT N  open N connections, send 1000 x (i + 1)
                                   bytes on connection i, then wait to be
                                   killed

The server prints "conn I: bytes=B sha=S" (S: the first 16 hex digits of
the SHA-256 of what it read): B is 1000 x (I + 1) for a connection the
client wrote before it was killed, 0 for the others.
"""
import hashlib
import socket
import sys
import time


def pattern(n, seed):
    return (hashlib.sha256(bytes([seed])).digest() * (n // 32 + 1))[:n]


def main():
    cmd, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    if cmd == "client":
        socks = [socket.create_connection((host, port)) for _ in range(n)]
        for i, s in enumerate(socks):
            s.sendall(pattern(1000 * (i + 1), i))
        time.sleep(600)
        return 1
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(n)
    print("listening", flush=True)
    conns = [ls.accept()[0] for _ in range(n)]
    time.sleep(1)
    for i, c in enumerate(conns):
        h, got = hashlib.sha256(), 0
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                break
            if not d:
                break
            h.update(d)
            got += len(d)
        print("conn %d: bytes=%d sha=%s" % (i, got, h.hexdigest()[:16]),
              flush=True)
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
