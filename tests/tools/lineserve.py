#!/usr/bin/env python3
"""lineserve.py - a connection used by a child forked before its first use,
then by the parent that forked it.

  lineserve.py serve HOST PORT N   serve N connections, one after the
                                   other: each line is answered with two,
                                   the line in capitals, then "+", the line
                                   and 5,000 x's, in one send; prints
                                   "conn I: lines=L" at each EOF
  lineserve.py client HOST PORT    for each way a child ends (os._exit()
                                   with the socket open; close(), then
                                   os._exit(); sys.exit(); close_range()
                                   over the socket's fd, then os._exit();
                                   dup2() of /dev/null onto it, then
                                   os._exit()), one connection:
                                   a child forked before any I/O sends
                                   "one", reads only the first line of the
                                   answer and ends; the parent then reads
                                   the second line, sends "two", reads its
                                   answer, and prints one line

A reader that takes only the first line leaves the second unread: the
parent must find it, as the kernel's receive queue keeps it for whoever
reads next.
"""
import os
import socket
import sys

ENDS = ("_exit", "close", "sys.exit", "closerange", "dup2")


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        got = s.recv(n - len(buf))
        if not got:
            break
        buf += got
    return buf


def serve(host, port, n):
    lsock = socket.create_server((host, port))
    print("listening", flush=True)
    for i in range(n):
        conn, _ = lsock.accept()
        lines = 0
        for line in conn.makefile("rb"):
            word = line.rstrip(b"\n")
            conn.sendall(word.upper() + b"\n+" + word + b"x" * 5000 + b"\n")
            lines += 1
        conn.close()
        print("conn %d: lines=%d" % (i, lines), flush=True)


def child(s, end):
    s.sendall(b"one\n")
    ok = recv_exact(s, 4) == b"ONE\n"
    if end == "close":
        s.close()
    if end == "closerange":  # close_range(2), as subprocess's close_fds
        os.closerange(s.fileno(), s.fileno() + 1)
    if end == "dup2":  # another file takes the socket's fd number
        os.dup2(os.open(os.devnull, os.O_RDONLY), s.fileno())
    if end == "sys.exit":
        sys.exit(0 if ok else 1)
    os._exit(0 if ok else 1)


def client(host, port):
    for end in ENDS:
        s = socket.create_connection((host, port))
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(s, end)
        _, status = os.waitpid(pid, 0)
        rest = recv_exact(s, 5005)
        s.sendall(b"two\n")
        a, b = recv_exact(s, 4), recv_exact(s, 5005)
        s.close()
        print("%s: child %d, then %d %r, %r %d %r" %
              (end, status, len(rest), rest[:4], a, len(b), b[:4]),
              flush=True)


def main():
    cmd, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if cmd == "serve":
        serve(host, port, int(sys.argv[4]))
    else:
        client(host, port)


if __name__ == "__main__":
    main()
