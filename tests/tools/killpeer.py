#!/usr/bin/env python3
"""killpeer.py - a server that reads until end of stream and then answers,
and a client that streams until it is killed: what the survivor of a
peer killed with SIGKILL sees.

  killpeer.py serve HOST PORT    accept one connection, read until EOF,
                                 then sendall 1000 bytes; print one line
                                 "end=E bytes=N sendall=S", E being EOF
                                 or an errno name, S ok or an errno name
  killpeer.py stream HOST PORT   connect and send 4000 bytes at a time
                                 (eager under xsock) until killed; prints
                                 "streaming" once 1 MiB went

Over kernel TCP the killed client's kernel closes its socket with a FIN:
"end=EOF bytes=N sendall=ok".
"""
import socket
import sys

from acceptclose import listener, res


def read_to_eof(c, total):
    """Read @c until EOF, counting the bytes in total[0]: "EOF"."""
    while True:
        b = c.recv(65536)
        if not b:
            return "EOF"
        total[0] += len(b)


def serve(host, port):
    c, _ = listener(host, port).accept()
    total = [0]
    end = res(lambda: read_to_eof(c, total))
    sent = res(lambda: c.sendall(b"y" * 1000) or "ok")
    print(f"end={end} bytes={total[0]} sendall={sent}", flush=True)
    return 0


def stream(host, port):
    s = socket.create_connection((host, port))
    chunk, sent, told = b"x" * 4000, 0, False
    while True:
        s.sendall(chunk)
        sent += len(chunk)
        if not told and sent >= 1 << 20:
            print("streaming", flush=True)
            told = True


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("serve", "stream"):
        sys.exit(__doc__)
    fn = serve if sys.argv[1] == "serve" else stream
    return fn(sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    sys.exit(main())
