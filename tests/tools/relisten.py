#!/usr/bin/env python3
"""relisten.py - a server that closes its listener after each connection
and listens again on the same port, as iperf3 does for each test.

  relisten.py serve HOST PORT N   N rounds: listen, accept one connection,
                                  echo what it reads until EOF, close the
                                  connection and the listener
  relisten.py client HOST PORT    connect (retrying while refused, for the
                                  next round's listener), send 1000 bytes,
                                  half-close, print "echoed N"
"""
import socket
import sys
import time


def serve(host, port, rounds):
    for _ in range(rounds):
        l = socket.socket()
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind((host, port))
        l.listen(4)
        print("listening", flush=True)
        c, _ = l.accept()
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        c.close()
        l.close()


def client(host, port):
    for _ in range(100):
        try:
            s = socket.create_connection((host, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
    s.sendall(b"r" * 1000)
    s.shutdown(socket.SHUT_WR)
    got = 0
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += len(b)
    print("echoed", got)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        client(sys.argv[2], int(sys.argv[3]))
