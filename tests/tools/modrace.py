#!/usr/bin/env python3
"""modrace.py - epoll_ctl on a socket whose non-blocking connect is deciding
its transport answers as the kernel's.

  modrace.py HOST PORT N   N times: a non-blocking connect to HOST:PORT,
                           the socket added to an epoll set for EPOLLOUT,
                           then modified (EPOLLIN|EPOLLOUT) and polled
                           without waiting until it is writable, then
                           removed; prints "rounds N errors {...}", the
                           errno names that EPOLL_CTL_MOD and (prefixed
                           "DEL") EPOLL_CTL_DEL met and how often

Against a server without xsock and XSOCK_RDMA_RETRY_MS=0, each connect
probes and falls back to kernel TCP while the loop modifies it: over kernel
TCP no call fails. Exit status: 0 when none failed, 1 otherwise.
"""
import errno
import select
import socket
import sys


def main():
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    bad = {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLOUT)
        try:
            while True:
                ep.modify(s.fileno(), select.EPOLLOUT | select.EPOLLIN)
                if ep.poll(0):
                    break
        except OSError as e:
            name = errno.errorcode.get(e.errno, str(e.errno))
            bad[name] = bad.get(name, 0) + 1
        try:
            ep.unregister(s.fileno())
        except OSError as e:
            name = "DEL " + errno.errorcode.get(e.errno, str(e.errno))
            bad[name] = bad.get(name, 0) + 1
        ep.close()
        s.close()
    print("rounds", n, "errors", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
