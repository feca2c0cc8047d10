#!/usr/bin/env python3
"""linechat.py - many short lines one way, an answer to each the other way,
and a client that reads the answers only after its last line.

  linechat.py serve HOST PORT N     serve N connections, one after the
                                    other: each line read is answered at
                                    once, in capitals, by a send of its
                                    own; prints "conn I: lines=L bytes=B"
                                    at each EOF, then closes
  linechat.py client HOST PORT L    send L lines of 35 bytes, each by a
                                    send of its own, then shutdown(SHUT_WR),
                                    and only then read until EOF; prints
                                    the lines and bytes that came back and
                                    whether they are the lines in capitals;
                                    with LINECHAT_FILL=HOST:PORT:K in the
                                    environment, it opens K more
                                    connections there after its first
                                    line, each echoing one byte (an echo
                                    server), then idle until the end
  linechat.py flood HOST PORT L     accept one connection, send L lines of
                                    35 bytes, each by a send of its own,
                                    print "sent L lines", then read: prints
                                    "recv=" and EOF, an errno name or the
                                    bytes read
  linechat.py idle HOST PORT B FILE connect and wait in select() for an
                                    exceptional condition that never
                                    comes, reading nothing, until FILE
                                    exists; then read B bytes, print
                                    "read B" and wait so again, reading
                                    nothing more, until killed

Over kernel TCP the answers wait in the client's receive buffer while it
writes: every line goes and every answer comes back. A transport that
bounds unread messages rather than unread bytes leaves the server blocked
in its send, no longer reading, and the client blocked in its own.

A client killed with the rest of a flood unread: its kernel closes a socket
with unread bytes by an RST, so the flooding side reads ECONNRESET, not the
EOF of a peer that read everything and closed.
"""
import errno
import hashlib
import os
import select
import socket
import sys


def line(i):
    return (b"line %06d " % i).ljust(34, b"a") + b"\n"


def serve(host, port, n):
    lsock = socket.create_server((host, port))
    print("listening", flush=True)
    for i in range(n):
        conn, _ = lsock.accept()
        buf = b""
        lines = nbytes = 0
        while True:
            got = conn.recv(65536)
            if not got:
                break
            nbytes += len(got)
            buf += got
            while b"\n" in buf:
                one, buf = buf.split(b"\n", 1)
                conn.sendall(one.upper() + b"\n")
                lines += 1
        print("conn %d: lines=%d bytes=%d" % (i, lines, nbytes), flush=True)
        conn.close()


def client(host, port, nlines):
    sock = socket.create_connection((host, port))
    fill = os.environ.get("LINECHAT_FILL")
    held = []
    want = hashlib.sha256()
    for i in range(nlines):
        sock.sendall(line(i))
        want.update(line(i).upper())
        if i == 0 and fill:  # the chat's transport is taken: fill the pool
            fhost, fport, k = fill.rsplit(":", 2)
            for _ in range(int(k)):
                one = socket.create_connection((fhost, int(fport)))
                one.sendall(b"x")
                if one.recv(1) != b"x":
                    sys.exit("linechat: the fill server did not echo")
                held.append(one)
    sock.shutdown(socket.SHUT_WR)
    got = hashlib.sha256()
    nbytes = lines = 0
    while True:
        data = sock.recv(65536)
        if not data:
            break
        got.update(data)
        nbytes += len(data)
        lines += data.count(b"\n")
    sock.close()
    for one in held:
        one.close()
    print("sent %d lines, got %d lines, %d bytes, %s" %
          (nlines, lines, nbytes,
           "the lines in capitals" if got.digest() == want.digest()
           else "NOT the lines in capitals"))


def flood(host, port, nlines):
    lsock = socket.create_server((host, port))
    print("listening", flush=True)
    conn, _ = lsock.accept()
    for i in range(nlines):
        conn.sendall(line(i))
    print("sent %d lines" % nlines, flush=True)
    try:
        got = conn.recv(65536)
        print("recv=%s" % ("EOF" if not got else "%d bytes" % len(got)))
    except OSError as e:
        print("recv=%s" % errno.errorcode.get(e.errno, e.errno))


def idle(host, port, nbytes, flag):
    sock = socket.create_connection((host, port))
    while not os.path.exists(flag):
        select.select([], [], [sock], 0.2)
    got = 0
    while got < nbytes:
        data = sock.recv(nbytes - got)
        if not data:
            break
        got += len(data)
    print("read %d" % got, flush=True)
    select.select([], [], [sock], 120)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "flood":
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 6 and sys.argv[1] == "idle":
        idle(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
