#!/usr/bin/env python3
"""diag_peer.py - known traffic on one connection that stays open, so the
diagnostics tests can read its counters live (xsock-stat) and compare.

  diag_peer.py serve IP PORT TOTAL
        accept one connection, read exactly TOTAL bytes, answer "ok\\n",
        print "read TOTAL", then wait for the peer's EOF and exit 0
  diag_peer.py send IP PORT SPEC
        connect; SPEC is COUNTxBYTES[,COUNTxBYTES...]: COUNT send() calls
        of BYTES each; wait for "ok\\n", print "held", then keep the
        connection open until SIGTERM (exit 0, through exit(), so the
        counters file is removed and XSOCK_STATS written)

Exit status 1 on any error (message on stderr).
"""
import signal
import socket
import sys


def serve(ip, port, total):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((ip, port))
    lsock.listen(1)
    conn, _ = lsock.accept()
    got = 0
    while got < total:
        data = conn.recv(min(65536, total - got))
        if not data:
            sys.exit("diag_peer: EOF after %d of %d bytes" % (got, total))
        got += len(data)
    conn.sendall(b"ok\n")
    print("read", got, flush=True)
    while conn.recv(65536):
        pass
    conn.close()
    lsock.close()


def send(ip, port, spec):
    plan = []
    for part in spec.split(","):
        count, size = part.split("x")
        plan.append((int(count), int(size)))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.create_connection((ip, port))
    for count, size in plan:
        buf = b"x" * size
        for _ in range(count):
            view = memoryview(buf)
            while view:
                view = view[sock.send(view):]
    reply = b""
    while not reply.endswith(b"\n"):
        data = sock.recv(16)
        if not data:
            sys.exit("diag_peer: EOF before the server's answer")
        reply += data
    if reply != b"ok\n":
        sys.exit("diag_peer: unexpected answer %r" % reply)
    print("held", flush=True)
    try:
        while True:
            signal.pause()
    finally:
        sock.close()


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("serve", "send"):
        sys.exit(__doc__)
    ip, port = sys.argv[2], int(sys.argv[3])
    if sys.argv[1] == "serve":
        serve(ip, port, int(sys.argv[4]))
    else:
        send(ip, port, sys.argv[4])


if __name__ == "__main__":
    main()
