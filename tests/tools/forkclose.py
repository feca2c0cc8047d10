#!/usr/bin/env python3
"""forkclose.py - a process forks while its non-blocking connect runs,
and closes its copy once that connect is done; the child goes on.

  forkclose.py HOST PORT   connect() non-blocking (EINPROGRESS), fork;
                           the parent closes its copy after 0.5 s and
                           waits; the child, after 1.5 s, waits in epoll
                           for EPOLLOUT, sends "one" to lineserve.py serve
                           and reads its two-line answer; prints
                           "writable W, answer A N" (the child), then
                           "child S" (the parent)
"""
import os
import select
import socket
import sys
import time

from lineserve import recv_exact


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, port))  # EINPROGRESS
    sys.stdout.flush()
    pid = os.fork()
    if pid:
        time.sleep(0.5)  # the connect is done: its hello went
        s.close()
        _, status = os.waitpid(pid, 0)
        print("child %d" % status, flush=True)
        return
    time.sleep(1.5)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLOUT)
    writable = bool(ep.poll(10))
    s.setblocking(True)
    s.sendall(b"one\n")
    a, b = recv_exact(s, 4), recv_exact(s, 5005)
    s.close()
    print("writable %s, answer %r %d" % (writable, a, len(b)), flush=True)
    sys.exit(0)  # exit(): the child writes its counters


if __name__ == "__main__":
    main()
