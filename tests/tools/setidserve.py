#!/usr/bin/env python3
"""setidserve.py - a forking server whose child changes its credentials in
the middle of a connection, as rsync's daemon sets its group after the
greeting.

  setidserve.py serve HOST PORT   accept one connection; the child writes
                                  "@GREETING\\n", reads the client's line,
                                  calls setgroups(), setgid() and setuid()
                                  to what they are (the kernel makes new
                                  credentials all the same), then echoes
                                  every byte until EOF; prints "child:
                                  echoed N" and exits
  setidserve.py client HOST PORT B  read the greeting, send a line, then B
                                  bytes while a thread reads the echo;
                                  prints "echo B of B, sha256 equal" or
                                  what differed
"""
import hashlib
import os
import socket
import sys
import threading


def serve(host, port):
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind((host, port))
    lsn.listen(4)
    print("listening", flush=True)
    c, _ = lsn.accept()
    if os.fork():
        c.close()
        os.wait()
        return
    lsn.close()
    c.sendall(b"@GREETING\n")
    line = b""
    while not line.endswith(b"\n"):
        b = c.recv(1)
        if not b:
            os._exit(1)
        line += b
    os.setgroups(os.getgroups())
    os.setgid(os.getgid())
    os.setuid(os.getuid())
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
        n += len(b)
    c.close()
    print("child: echoed %d" % n, flush=True)
    os._exit(0)


def client(host, port, total):
    s = socket.create_connection((host, port))
    s.settimeout(60)
    greet = b""
    while not greet.endswith(b"\n"):
        greet += s.recv(1)
    s.sendall(b"module\n")
    data = bytes(range(251)) * (total // 251 + 1)
    data = data[:total]
    got = bytearray()

    def reader():
        while True:
            b = s.recv(65536)
            if not b:
                break
            got.extend(b)

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    t.join()
    same = hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    print("echo %d of %d, sha256 %s" % (len(got), total,
                                        "equal" if same else "differs"))
    return 0 if same and greet == b"@GREETING\n" else 1


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
