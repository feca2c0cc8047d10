#!/usr/bin/env python3
"""sidewait.py - a reader that waits on another connection before it reads
this one, while its peer writes.

  sidewait.py serve HOST PORT N   serve N pairs of connections, one pair
                                  after the other: the first of a pair
                                  carries the data, the second a signal;
                                  read the first byte of the data, then
                                  the signal byte (waiting up to 60 s),
                                  then the rest of the data until EOF, and
                                  print "pair I: signal S data B sha256 H"
  sidewait.py client HOST PORT B W  connect the pair; write B bytes of a
                                  known pattern on the first in writes of W
                                  bytes, then one byte on the second, then
                                  shutdown(SHUT_WR) the first; prints
                                  "sent B sha256 H" or, after 30 s stuck in
                                  a write, "stuck after N bytes"

Over kernel TCP the reader's receive buffer and the writer's send buffer
hold what the reader has not read yet, so the writer gets to its signal.
A transport that keeps only a window of messages for a reader that makes
no call on the socket leaves the writer blocked: the reader then waits for
the signal for ever, and the writer for the reader.
"""
import hashlib
import socket
import sys


def pattern(n):
    block = bytes(range(251)) * 17  # a period prime to every write size
    out = bytearray()
    while len(out) < n:
        out += block
    return bytes(out[:n])


def serve(host, port, pairs):
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind((host, port))
    lsn.listen(8)
    print("listening", flush=True)
    for i in range(pairs):
        data, _ = lsn.accept()
        sig, _ = lsn.accept()
        sig.settimeout(60)
        data.settimeout(60)
        try:
            h, n = hashlib.sha256(), 0
            b = data.recv(1)  # the connection is this process's now
            h.update(b)
            n += len(b)
            s = sig.recv(1)
            while True:
                b = data.recv(1 << 20)
                if not b:
                    break
                h.update(b)
                n += len(b)
            print("pair %d: signal %s data %d sha256 %s"
                  % (i, s.decode(), n, h.hexdigest()), flush=True)
        except OSError as e:
            print("pair %d: %s" % (i, e), flush=True)
        data.close()
        sig.close()


def client(host, port, total, wsize):
    data = socket.create_connection((host, port))
    sig = socket.create_connection((host, port))
    data.settimeout(30)
    buf, sent = pattern(total), 0
    try:
        while sent < total:
            sent += data.send(buf[sent:sent + wsize])
    except OSError:
        print("stuck after %d bytes" % sent)
        return 1
    sig.sendall(b"!")
    data.shutdown(socket.SHUT_WR)
    print("sent %d sha256 %s" % (sent, hashlib.sha256(buf).hexdigest()))
    data.recv(1)  # the server's close
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                        int(sys.argv[5])))
