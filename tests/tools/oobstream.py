#!/usr/bin/env python3
"""oobstream.py - urgent data (MSG_OOB) in the middle of a stream, both
ways, read as a program reads it: SIOCATMARK before every read, the
urgent byte taken with recv(MSG_OOB) at the mark.

  oobstream.py serve HOST PORT N   for each of N connections: send 5000
                                   bytes, "X" urgent, 5000 bytes, then
                                   SHUT_WR; read the client's stream to
                                   EOF and print what it saw
  oobstream.py client HOST PORT    send 100 KiB, "!" urgent, 100 KiB, then
                                   SHUT_WR; read the server's stream to
                                   EOF and print what it saw

Each side prints one line: "SIDE marks=[OFFSETS] oob=BYTES stream=N
SHA" (OFFSETS: where SIOCATMARK was true, in stream bytes read so far;
BYTES: what recv(MSG_OOB) took there; SHA: the first 16 hex digits of the
stream's SHA-256 without the urgent byte). Over kernel TCP the server
prints "marks=[102400] oob=[b'!'] stream=204800 ..."; the client, which
reads only once the server's bytes are all in, "stream=10000 ..." with
"marks=[5000] oob=[b'X']" or, in some runs, no mark at all.
"""
import fcntl
import hashlib
import socket
import struct
import sys

SIOCATMARK = 0x8905


def pattern(n, seed):
    out = hashlib.sha256(bytes([seed])).digest() * (n // 32 + 1)
    return out[:n].replace(b"!", b"a").replace(b"X", b"b")


def atmark(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCATMARK,
                                          b"\0" * 4))[0]


def send_side(s, first, urgent, second, seed):
    s.sendall(pattern(first, seed))
    s.send(urgent, socket.MSG_OOB)
    s.sendall(pattern(second, seed + 1))
    s.shutdown(socket.SHUT_WR)


def read_side(s, who):
    h, n, marks, oob = hashlib.sha256(), 0, [], []
    while True:
        if atmark(s):
            marks.append(n)
            try:
                oob.append(s.recv(1, socket.MSG_OOB))
            except OSError as e:
                oob.append(e.errno)
        d = s.recv(7000)
        if not d:
            break
        h.update(d)
        n += len(d)
    print("%s marks=%s oob=%s stream=%d %s" %
          (who, marks, oob, n, h.hexdigest()[:16]), flush=True)


def main():
    cmd, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if cmd == "serve":
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, port))
        ls.listen(4)
        print("listening", flush=True)
        for _ in range(int(sys.argv[4])):
            c, _ = ls.accept()
            send_side(c, 5000, b"X", 5000, 3)
            read_side(c, "server")
            c.close()
        return 0
    s = socket.create_connection((host, port))
    s.settimeout(30)
    send_side(s, 100 << 10, b"!", 100 << 10, 1)
    read_side(s, "client")
    return 0


if __name__ == "__main__":
    sys.exit(main())
