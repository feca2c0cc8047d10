#!/usr/bin/env python3
"""epshare.py - one socket in two epoll sets of one thread: a set whose
earlier wait found the socket idle reports it, and wakes for it, after the
other set's look took in what came.

  epshare.py HOST PORT   connects to the echo server at HOST:PORT and
                         prints one line per step:
    idle: B's wait with nothing to come times out (0 events)
    taken: after an echo came, a look of set A (timeout 0) reports it
    ready: B's wait then reports the unread echo at once
    woken: with that echo read, B's wait wakes for the next one, which a
           thread sends 300 ms into the wait
  each as "STEP: yes" or "STEP: no (...)". Over kernel TCP every step
  says yes. Exit status: 0 when every step did, 1 otherwise.
"""
import select
import socket
import sys
import threading
import time


def wait(ep, ms):
    t0 = time.monotonic()
    ev = ep.poll(ms / 1000.0)
    return ev, (time.monotonic() - t0) * 1000.0


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    s = socket.create_connection((host, port))
    s.sendall(b"a")
    if s.recv(1) != b"a":
        print("echo: no")
        return 1
    s.setblocking(False)
    a, b = select.epoll(), select.epoll()
    a.register(s.fileno(), select.EPOLLIN)
    b.register(s.fileno(), select.EPOLLIN)
    ok = True

    def step(name, good, why):
        nonlocal ok
        print(f"{name}: yes" if good else f"{name}: no ({why})", flush=True)
        ok = ok and good

    ev, _ = wait(b, 200)
    step("idle", ev == [], ev)
    s.sendall(b"b")
    time.sleep(0.3)  # the echo lands on the CQ that B's wait armed
    ev = a.poll(0)
    step("taken", ev == [(s.fileno(), select.EPOLLIN)], ev)
    ev, ms = wait(b, 2000)
    step("ready", ev == [(s.fileno(), select.EPOLLIN)] and ms < 500,
         f"{ev} after {ms:.0f} ms")
    step("read", s.recv(16) == b"b", "the echo")
    threading.Timer(0.3, lambda: s.sendall(b"c")).start()
    ev, ms = wait(b, 3000)
    step("woken", ev == [(s.fileno(), select.EPOLLIN)] and ms < 1500,
         f"{ev} after {ms:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
