#!/usr/bin/env python3
"""undecided.py - calls on a connection that neither end has used yet, whose
answers must be the kernel's.

  undecided.py serve HOST PORT CASE   accept one connection, run CASE's
                                      server side, print its result line
  undecided.py client HOST PORT CASE  connect, run CASE's client side,
                                      print its result line

CASE:
  idleclose  the client connects, waits 0.5 s and closes without a byte;
             the server, blocked in recv() from the accept on, reads EOF
             (over TCP a FIN: "server recv b''")
  srvtimeo   the server sets SO_RCVTIMEO 0.5 s on the accepted socket and
             calls recv() while the client waits 3 s: EAGAIN after the
             timeout ("server recv EAGAIN in time")
  clitimeo   the client sets SO_RCVTIMEO 0.5 s before connect() and calls
             recv() while the server waits 3 s and closes: EAGAIN after
             the timeout
  lingerrst  the server sends "zz" and closes with SO_LINGER {1, 0} (an
             RST); the client reads "zz", then ECONNRESET, then SO_ERROR
             twice: 0 and 0, as recv() reported the reset
  sendclosed (a used connection) the server reads a byte, sends "abc" and
             closes; the client reads to EOF, then sends 1000 bytes every
             10 ms: the first is taken, its RST fails the next with EPIPE
  fionread   the client sends "hello world\n" right after connect(); the
             server, 0.5 s after accept() and with no call on the socket
             before it, asks FIONREAD, then reads the line: FIONREAD counts
             the peer's bytes that came, never bytes of ours ("server
             FIONREAD counts the peer's bytes: yes, read b'hello world\n'")
  fionreadc  the same the other way: the server sends its banner right
             after accept(); the client, 0.5 s after connect(), asks
             FIONREAD, then reads the banner
A wait that ends more than 2 s after its timeout prints "late" instead.
"""
import errno
import fcntl
import socket
import struct
import sys
import termios
import time

TIMEO = struct.pack("ll", 0, 500000)


def recv_result(s, who):
    t0 = time.monotonic()
    try:
        b = s.recv(100)
        return "%s recv %r" % (who, b)
    except OSError as e:
        late = time.monotonic() - t0 > 2.5
        name = errno.errorcode.get(e.errno, str(e.errno))
        return "%s recv %s %s" % (who, name, "late" if late else "in time")


def fionread_result(s, who, want):
    """FIONREAD with no call on the socket before it, then @want read: the
    count may be anything from 0 (nothing came yet) to len(want), never
    more (bytes that are not the application's)"""
    time.sleep(0.5)
    n = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
    got = b""
    while len(got) < len(want):
        b = s.recv(len(want) - len(got))
        if not b:
            break
        got += b
    ok = "yes" if 0 <= n <= len(got) else "no (%d)" % n
    return "%s FIONREAD counts the peer's bytes: %s, read %r" % (who, ok, got)


def serve(host, port, case):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port))
    l.listen(1)
    print("listening", flush=True)
    c, _ = l.accept()
    if case == "idleclose":
        print(recv_result(c, "server"), flush=True)
    elif case == "srvtimeo":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, TIMEO)
        print(recv_result(c, "server"), flush=True)
        time.sleep(3)
    elif case == "clitimeo":
        time.sleep(3)
    elif case == "fionread":
        print(fionread_result(c, "server", b"hello world\n"), flush=True)
    elif case == "fionreadc":
        c.sendall(b"banner 1.0\n")
        time.sleep(1)
    elif case == "sendclosed":
        c.recv(1)
        c.sendall(b"abc")
        c.close()
        print("server closed", flush=True)
        return
    elif case == "lingerrst":
        c.sendall(b"zz")
        time.sleep(0.5)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        c.close()
        print("server closed", flush=True)
        return
    c.close()


def client(host, port, case):
    s = socket.socket()
    if case == "clitimeo":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, TIMEO)
    s.connect((host, port))
    if case == "idleclose":
        time.sleep(0.5)
        s.close()
        print("client closed")
    elif case == "srvtimeo":
        time.sleep(3)
        s.close()
        print("client closed")
    elif case == "clitimeo":
        print(recv_result(s, "client"))
        s.close()
    elif case == "fionread":
        s.sendall(b"hello world\n")
        time.sleep(1)
        s.close()
        print("client closed")
    elif case == "fionreadc":
        print(fionread_result(s, "client", b"banner 1.0\n"))
        s.close()
    elif case == "sendclosed":
        s.sendall(b"x")
        got = b""
        while True:
            b = s.recv(100)
            if not b:
                break
            got += b
        sent = 0
        try:
            for _ in range(100):
                s.send(b"s" * 1000)
                sent += 1
                time.sleep(0.01)
            print("client read %r, no EPIPE after 100 sends" % got)
        except OSError as e:
            print("client read %r, %s after %d sends" %
                  (got, errno.errorcode.get(e.errno, str(e.errno)), sent))
        s.close()
    elif case == "lingerrst":
        out = [repr(s.recv(100))]
        time.sleep(1)
        try:
            out.append(repr(s.recv(100)))
        except OSError as e:
            out.append(errno.errorcode.get(e.errno, str(e.errno)))
        for _ in range(2):
            out.append(str(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)))
        print("client " + " ".join(out))
        s.close()


if __name__ == "__main__":
    mode, host, port, case = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    (serve if mode == "serve" else client)(host, port, case)
