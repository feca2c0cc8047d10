#!/usr/bin/env python3
"""fault_peer.py - one side of a busy connection whose other side gets
killed: the fault tests check that it learns so, and how fast.

  fault_peer.py serve IP PORT
        accept one connection and echo it, driven by epoll
  fault_peer.py stream IP PORT
        connect, write without pause and read the echo back, driven by
        epoll; prints "streaming" once 1 MiB has come back

Either side, when the connection dies, prints one line
  "detected KIND after MS ms; epoll events 0xEV"
KIND being ECONNRESET, EPIPE or EOF, MS the time since a byte last moved
in either direction (an upper bound of the time to detect, free of any
clock shared with the killer), EV the epoll events of the wakeup that
found it; then exits 0. Any other outcome exits 1.
"""
import select
import socket
import sys
import time

CHUNK = 65536


def run(conn, streaming):
    conn.setblocking(False)
    ep = select.epoll()
    ep.register(conn.fileno(), select.EPOLLIN | select.EPOLLOUT |
                select.EPOLLRDHUP)
    out = b"x" * CHUNK if streaming else b""
    pending = b""
    echoed = 0
    announced = False
    last = time.monotonic()
    while True:
        for _, ev in ep.poll(30):
            try:
                if ev & (select.EPOLLIN | select.EPOLLHUP |
                         select.EPOLLERR | select.EPOLLRDHUP):
                    data = conn.recv(CHUNK)
                    if not data:
                        return report("EOF", last, ev)
                    last = time.monotonic()
                    if streaming:
                        echoed += len(data)
                    else:
                        pending += data
                if ev & select.EPOLLOUT:
                    buf = out if streaming else pending
                    if buf:
                        n = conn.send(buf)
                        last = time.monotonic()
                        if not streaming:
                            pending = pending[n:]
            except BlockingIOError:
                pass
            except ConnectionResetError:
                return report("ECONNRESET", last, ev)
            except BrokenPipeError:
                return report("EPIPE", last, ev)
            if streaming and not announced and echoed >= 1 << 20:
                print("streaming", flush=True)
                announced = True
        if time.monotonic() - last > 60:
            sys.exit("fault_peer: nothing moved and nothing detected "
                     "for 60 s")


def report(kind, last, ev):
    ms = (time.monotonic() - last) * 1000
    print("detected %s after %d ms; epoll events %#x" % (kind, ms, ev),
          flush=True)
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("serve", "stream"):
        sys.exit(__doc__)
    ip, port = sys.argv[2], int(sys.argv[3])
    if sys.argv[1] == "serve":
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((ip, port))
        lsock.listen(1)
        conn, _ = lsock.accept()
        lsock.close()
        sys.exit(run(conn, False))
    conn = socket.create_connection((ip, port))
    sys.exit(run(conn, True))


if __name__ == "__main__":
    main()
