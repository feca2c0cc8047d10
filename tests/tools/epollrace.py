#!/usr/bin/env python3
"""epollrace.py - a thread waits in epoll_wait() on a set of kernel fds
while another thread adds a socket to it, as apache's event MPM does (its
workers add connections while its listener thread waits).

  epollrace.py serve HOST PORT N   accept N connections, one at a time;
                                   write "hello\\n" on each 0.5 s after
                                   accepting it, then wait for its EOF
  epollrace.py wait HOST PORT N    N rounds: a thread waits in
                                   epoll_wait() (select.epoll, 5 s at a
                                   time) on a set that holds a pipe; the
                                   main thread connects, then, while the
                                   waiter waits, adds the socket for EPOLLIN;
                                   the waiter stops at the socket's event.
                                   Prints "round I: ok" or "round I: got
                                   fd F events E" for any event on an fd
                                   that is neither, and exits 1 after such
                                   a round
"""
import select
import socket
import sys
import threading
import time


def serve(host, port, n):
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind((host, port))
    lsn.listen(8)
    print("listening", flush=True)
    for _ in range(n):
        c, _ = lsn.accept()
        time.sleep(0.5)
        c.sendall(b"hello\n")
        c.settimeout(30)
        while c.recv(4096):
            pass
        c.close()


def one_round(host, port):
    ep = select.epoll()
    r, w = socket.socketpair()  # a kernel fd: the set is the kernel's
    ep.register(r.fileno(), select.EPOLLIN)
    got = []

    def waiter():
        end = time.time() + 20
        while time.time() < end:
            for fd, ev in ep.poll(5):
                got.append((fd, ev))
                if fd != r.fileno():
                    return

    t = threading.Thread(target=waiter)
    t.start()
    s = socket.create_connection((host, port))
    time.sleep(0.2)  # the waiter is in epoll_wait() by now
    ep.register(s.fileno(), select.EPOLLIN)
    t.join()
    bad = [(fd, ev) for fd, ev in got if fd != s.fileno()]
    try:
        ok = bool(got) and not bad and s.recv(6) == b"hello\n"
    except OSError:
        ok = False
    s.close()
    r.close()
    w.close()
    ep.close()
    return ok, bad


def main():
    host, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if sys.argv[1] == "serve":
        serve(host, port, n)
        return 0
    rc = 0
    for i in range(n):
        ok, bad = one_round(host, port)
        if ok:
            print("round %d: ok" % i)
        else:
            rc = 1
            for fd, ev in bad or [(-1, 0)]:
                print("round %d: got fd %d events %#x" % (i, fd, ev))
    return rc


if __name__ == "__main__":
    sys.exit(main())
