#!/usr/bin/env python3
"""killpeer.py - a server that reads until end of stream and then answers,
and a client that streams, or sends a little and idles, until it is
killed: what the survivor of a peer killed with SIGKILL sees, however it
waits.

  killpeer.py serve HOST PORT [WAIT]
        accept one connection, read until EOF, then sendall 1000 bytes;
        print one line "end=E bytes=N sendall=S", E being EOF or an
        errno name, S ok or an errno name. WAIT is how it waits for
        bytes: recv (a blocking recv, the default), poll, select, epoll,
        or nested (an epoll set inside another one that has no socket of
        its own, waited on alone: the kernel wakes it)
  killpeer.py stream HOST PORT   connect and send 4000 bytes at a time
                                 (eager under xsock) until killed; prints
                                 "streaming" once 1 MiB went
  killpeer.py idle HOST PORT     connect, send 100 bytes, print "idle" and
                                 sleep until killed

Over kernel TCP the killed client's kernel closes its socket with a FIN:
"end=EOF bytes=N sendall=ok".
"""
import select
import socket
import sys
import time

from acceptclose import listener, res

IN = select.POLLIN | select.POLLRDHUP


def wait_readable(c, how):
    """Return once @c polls readable (or ended), waiting as @how says."""
    if how == "poll":
        p = select.poll()
        p.register(c, IN)
        p.poll()
    elif how == "select":
        select.select([c], [], [])
    elif how == "epoll":
        with select.epoll() as ep:
            ep.register(c, IN)
            ep.poll()
    elif how == "nested":
        # as an embedder of an event loop does (libuv's backend fd):
        # the outer set's wake-up, then the inner set's events, if any
        with select.epoll() as inner, select.epoll() as outer:
            inner.register(c, IN)
            outer.register(inner, select.EPOLLIN)
            while True:
                outer.poll()
                if inner.poll(0):
                    break


def read_to_eof(c, total, how):
    """Read @c until EOF, counting the bytes in total[0]: "EOF"."""
    if how != "recv":
        c.setblocking(False)
    while True:
        if how != "recv":
            wait_readable(c, how)
        try:
            b = c.recv(65536)
        except BlockingIOError:
            continue
        if not b:
            return "EOF"
        total[0] += len(b)


def serve(host, port, how="recv"):
    c, _ = listener(host, port).accept()
    total = [0]
    end = res(lambda: read_to_eof(c, total, how))
    c.setblocking(True)
    sent = res(lambda: c.sendall(b"y" * 1000) or "ok")
    print(f"end={end} bytes={total[0]} sendall={sent}", flush=True)
    return 0


def idle(host, port):
    s = socket.create_connection((host, port))
    s.sendall(b"x" * 100)
    print("idle", flush=True)
    while True:
        time.sleep(3600)


def stream(host, port):
    s = socket.create_connection((host, port))
    chunk, sent, told = b"x" * 4000, 0, False
    while True:
        s.sendall(chunk)
        sent += len(chunk)
        if not told and sent >= 1 << 20:
            print("streaming", flush=True)
            told = True


WAITS = ("recv", "poll", "select", "epoll", "nested")


def main():
    a = sys.argv
    if (len(a) not in (4, 5) or a[1] not in ("serve", "stream", "idle") or
            (len(a) == 5 and (a[1] != "serve" or a[4] not in WAITS))):
        sys.exit(__doc__)
    if a[1] == "serve":
        return serve(a[2], int(a[3]), *a[4:])
    return (stream if a[1] == "stream" else idle)(a[2], int(a[3]))


if __name__ == "__main__":
    sys.exit(main())
