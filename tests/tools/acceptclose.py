#!/usr/bin/env python3
"""acceptclose.py - a server that accepts and closes without reading (a
health check's target, a server at its limit), and its client.

  acceptclose.py serve HOST PORT N   accept N connections, close each unread
  acceptclose.py serve-inheritable HOST PORT N
                                     the same, each without FD_CLOEXEC (as a
                                     C server's accept() makes it)
  acceptclose.py looked-kill HOST PORT
                                     accept one connection, make it
                                     non-blocking, look at it once (a recv
                                     that finds nothing), wait 0.3 s and
                                     die of SIGKILL
  acceptclose.py looked-close HOST PORT
                                     the same, but close the connection
                                     and go on for 3 s before the exit
  acceptclose.py client HOST PORT    connect, wait for the close, then print
                                     what recv and send answer
  acceptclose.py client-late HOST PORT
                                     connect, make no call on the socket
                                     for 1 s (the server looks and closes
                                     meanwhile), then print what send,
                                     0.3 s later recv, then send again
                                     answer
  acceptclose.py greet HOST PORT N   accept N connections, send a greeting
                                     (the connection is in use), wait until
                                     the client's data is there, close it
                                     unread
  acceptclose.py deny HOST PORT N    accept N connections, make each
                                     non-blocking, send one line and close
                                     it at once, not looking at what send
                                     answered (redis's -DENIED)
  acceptclose.py client-read HOST PORT
                                     read until EOF, then print the bytes
  acceptclose.py client-send HOST PORT
                                     read the greeting, send 1000 bytes,
                                     wait for the close, then print what
                                     recv and send answer
  acceptclose.py client-flood HOST PORT
                                     read the greeting, then send 8 MiB a
                                     call, blocking, until two calls fail,
                                     and print what each call answered

The client prints one line: "recv=R send=S", R and S a count or an errno
name; over kernel TCP, "recv=0 send=1" (a FIN, then the first send is
taken and answered with an RST), for client-late "send=1 recv=0
send=EPIPE" (the FIN reads first, then that RST, in CLOSE_WAIT, leaves
EPIPE: tcp_reset()), and for client-send "recv=ECONNRESET send=EPIPE"
(tcp_close() sends RST for data it never read); client-read
prints "got=B end=R", B the bytes read and R what the last recv answered:
over kernel TCP the whole line, then 0. client-flood prints "sends=A,..."
with "part" for a call that sent less than asked and errno names for the
failures: over kernel TCP against greet, "sends=part,ECONNRESET,EPIPE"
(the RST cuts the blocked send short and stays pending for the next call,
tcp_sendmsg(); no SIGPIPE for it).
"""
import errno
import os
import select
import signal
import socket
import sys
import time


DENIED = b"-DENIED Redis is running in protected mode\r\n"


def res(fn):
    try:
        return str(fn())
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def listener(host, port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(16)
    print("listening", flush=True)
    return ls


def main():
    cmd, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if cmd in ("serve", "serve-inheritable"):
        ls = listener(host, port)
        for _ in range(int(sys.argv[4])):
            c, _ = ls.accept()
            if cmd == "serve-inheritable":
                c.set_inheritable(True)
            c.close()
        return 0
    if cmd == "greet":
        ls = listener(host, port)
        for _ in range(int(sys.argv[4])):
            c, _ = ls.accept()
            c.sendall(b"hi\n")
            select.select([c], [], [], 10)
            time.sleep(0.2)  # all 1000 bytes in
            c.close()
        return 0
    if cmd in ("looked-kill", "looked-close"):
        ls = listener(host, port)
        c, _ = ls.accept()
        c.setblocking(False)
        try:
            c.recv(16)
        except BlockingIOError:
            pass
        time.sleep(0.3)
        if cmd == "looked-kill":
            os.kill(os.getpid(), signal.SIGKILL)
        c.close()
        time.sleep(3)
        return 0
    if cmd == "deny":
        ls = listener(host, port)
        for _ in range(int(sys.argv[4])):
            c, _ = ls.accept()
            c.setblocking(False)
            try:
                c.send(DENIED)
            except OSError:
                pass  # as redis: the close goes on, the line is lost
            c.close()
        return 0
    s = socket.create_connection((host, port))
    if cmd == "client-read":
        s.settimeout(10)
        got, end = b"", ""
        while not end:
            try:
                b = s.recv(4096)
                got += b
                end = "0" if not b else ""
            except OSError as e:
                end = errno.errorcode.get(e.errno, str(e.errno))
        print(f"got={got!r} end={end}")
        return 0
    if cmd == "client-flood":
        s.settimeout(10)
        got = b""
        while len(got) < 3:
            got += s.recv(3 - len(got))
        s.settimeout(None)  # blocking: a send returns when cut short
        big, sends, failed = b"x" * (8 << 20), [], 0
        while failed < 2 and len(sends) < 8:
            try:
                n = s.send(big)
                sends.append("part" if n < len(big) else "all")
            except OSError as e:
                sends.append(errno.errorcode.get(e.errno, str(e.errno)))
                failed += 1
        print("sends=" + ",".join(sends))
        return 0
    if cmd == "client-send":
        s.settimeout(10)
        got = b""
        while len(got) < 3:
            got += s.recv(3 - len(got))
        s.sendall(b"x" * 1000)
        time.sleep(1)
    if cmd == "client-late":
        time.sleep(1)
        w = res(lambda: s.send(b"x"))
        time.sleep(0.3)
        r = res(lambda: len(s.recv(16)))
        w2 = res(lambda: s.send(b"x"))
        print(f"send={w} recv={r} send={w2}")
        return 0
    s.settimeout(10)
    r = res(lambda: len(s.recv(16)))
    w = res(lambda: s.send(b"x"))
    print(f"recv={r} send={w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
