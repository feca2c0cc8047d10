#!/usr/bin/env python3
"""tests/tools/models.py - the ways servers and clients hand a connection
from process to process, for tests/softroce/models.bats.

Every connection carries the same exchange, checked by SHA-256 both ways:
the client sends SIZE bytes of one pattern and shuts down its side; the
server reads to EOF, then answers with the SHA-256 of what it read, the
pid of the process that did the I/O and SIZE bytes of another pattern.

  models.py client HOST PORT SIZE [--fork|--exec-bare]
                                             one exchange (--fork: the
                                             child of a fork after
                                             connect() does it;
                                             --exec-bare: an exec'd image
                                             with an empty environment,
                                             clientfd); prints
                                             "ok pid=N up=SHA down=SHA"
  models.py fork PORT N SIZE                 socketserver.ForkingTCPServer
  models.py exec PORT N SIZE [--bare]        accept, fork, exec a handler
                                             with the socket on fd 0 and 1
                                             (--bare: in an empty
                                             environment: without xsock)
  models.py spawnbare PORT N SIZE            accept, posix_spawn(3) the
                                             inetd handler in an empty
                                             environment, the socket put
                                             on fd 0 and 1 by file actions
  models.py inetd SIZE                       that handler (fd 0 and 1)
  models.py stdio SIZE                       the handler over stdin/stdout
                                             (for socat's EXEC)
  models.py prefork PORT W SIZE              W workers accept on one
                                             inherited listener (SIGTERM)
  models.py reuseport PORT SIZE              one SO_REUSEPORT listener
                                             (run several; SIGTERM)
  models.py scm PORT N SIZE                  accept, pass the socket to a
                                             worker process with SCM_RIGHTS
  models.py daemon PORT N SIZE before|after PIDFILE
                                             double fork before or after
                                             listen(), then serve N
  models.py execlive PORT 1 SIZE             read SIZE bytes, answer, wait
                                             0.5 s, then exec with the
                                             connection live; the new
                                             image reads to EOF and
                                             answers
  models.py scmlive PORT N SIZE              as execlive, for N connections,
                                             each passed with SCM_RIGHTS
                                             to a worker forked before
  models.py execchild PORT N SIZE            the same for N connections,
                                             each exec in the child of a
                                             fork, the parent waiting for
                                             it (CGI's way)
  models.py execlive-client HOST PORT SIZE [--up N] [--late-shut]
                                             its client: SIZE bytes, then
                                             N (SIZE) more and SHUT_WR
                                             once the answer came
                                             (--late-shut: 1.5 s later,
                                             after the exec)
  models.py forkafter PORT N SIZE            sshd's way: read the client's
                                             greeting byte by byte, answer
                                             it, then fork; the child does
                                             the rest while the parent
                                             keeps its copy open
  models.py forkclose PORT N SIZE close|exit as forkafter, the parent
                                             closing its copy (or ending)
                                             right after the fork
  models.py forkhelper PORT SIZE             as forkafter, once: the child
                                             execs a program that never
                                             uses the connection; the
                                             parent serves it
  models.py spawn PORT N SIZE                as forkafter, the child made
                                             by posix_spawn(3) (servefd)
  models.py servefd FD SIZE                  the server's half on fd FD
  models.py forkback PORT SIZE              as forkafter, once: the child
                                             reads 200,000 bytes and ends;
                                             the parent reads the rest
  models.py forkafter-client HOST PORT SIZE [--late-shut] [--up N]
                                             its client: greeting and SIZE
                                             bytes (--up: N) at once, then
                                             SHUT_WR (--late-shut: once
                                             the answer came and 0.5 s
                                             later)
Servers serve N connections, then exit with exit(3) (so the library's
counters are written); those that run until SIGTERM exit the same way.
"""
import ctypes
import hashlib
import os
import signal
import socket
import socketserver
import sys
import time

LIBC = ctypes.CDLL(None)


def pattern(seed, size):
    """SIZE bytes that differ with SEED and with the offset."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(b"%s:%d" % (seed, block)).digest()
        block += 1
    return bytes(out[:size])


def libc_exit(code=0):
    """exit(3): atexit handlers run (the library writes its counters),
    unlike os._exit(), which ForkingTCPServer's children call."""
    sys.stdout.flush()
    sys.stderr.flush()
    LIBC.exit(code)


def serve_stream(read, write, size):
    """The server's half of the exchange over READ/WRITE callables."""
    h = hashlib.sha256()
    got = 0
    while True:
        b = read(65536)
        if not b:
            break
        h.update(b)
        got += len(b)
    reply = b"%s\n%d\n" % (h.hexdigest().encode(), os.getpid())
    write(reply + pattern(b"down", size))
    return got


def read_line(sock):
    """One line, a byte at a time (nothing after it is consumed)."""
    line = b""
    while not line.endswith(b"\n"):
        b = sock.recv(1)
        if not b:
            break
        line += b
    return line


def read_to_eof(sock, buf):
    """BUF and everything SOCK reads until EOF."""
    while True:
        b = sock.recv(65536)
        if not b:
            return buf
        buf += b


def answer_first(sock, size):
    """Read SIZE bytes and answer their SHA-256 on a line."""
    got = bytearray()
    while len(got) < size:
        b = sock.recv(size - len(got))
        if not b:
            break
        got += b
    sock.sendall(hashlib.sha256(got).hexdigest().encode() + b"\n")


def answer_rest(sock, size):
    """Read to EOF, answer the SHA-256 of it, this pid and SIZE bytes of
    the "down" pattern. Return: the bytes read."""
    got = read_to_eof(sock, b"")
    sock.sendall(b"%s\n%d\n" % (hashlib.sha256(got).hexdigest().encode(),
                                os.getpid()) + pattern(b"down", size))
    return len(got)


def serve_sock(sock, size):
    got = serve_stream(sock.recv, sock.sendall, size)
    sock.close()
    return got


def client(host, port, size, fork=False, bare=False, s=None):
    # blocking, as a client that forks after connect() is: a
    # non-blocking connect's process negotiates at once (an event loop's)
    if s is None:
        s = socket.create_connection((host, port))
    if bare:
        # an image without xsock does the exchange, the socket unclaimed
        os.set_inheritable(s.fileno(), True)
        os.execve(sys.executable, [sys.executable, __file__, "clientfd",
                                   str(s.fileno()), str(size)], {})
    if fork:
        pid = os.fork()
        if pid:
            s.close()
            _, st = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(st))
    up = pattern(b"up", size)
    s.sendall(up)
    s.shutdown(socket.SHUT_WR)
    buf = read_to_eof(s, bytearray())
    s.close()
    sha, pid, down = bytes(buf).split(b"\n", 2)
    ok = (sha.decode() == hashlib.sha256(up).hexdigest() and
          hashlib.sha256(down).digest() ==
          hashlib.sha256(pattern(b"down", size)).digest())
    print("%s pid=%s up=%s down=%s bytes=%d" %
          ("ok" if ok else "MISMATCH", pid.decode(), sha.decode()[:16],
           hashlib.sha256(down).hexdigest()[:16], len(down)))
    if fork:
        libc_exit(0 if ok else 1)
    sys.exit(0 if ok else 1)


def listener(port, reuseport=False):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuseport:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(64)
    return ls


def on_term_exit():
    signal.signal(signal.SIGTERM, lambda *a: libc_exit(0))


def main():
    cmd = sys.argv[1]
    a = sys.argv[2:]
    if cmd == "client":
        client(a[0], int(a[1]), int(a[2]), "--fork" in a, "--exec-bare" in a)
    elif cmd == "clientfd":
        client(None, None, int(a[1]), s=socket.socket(fileno=int(a[0])))
    elif cmd == "fork":
        port, n, size = int(a[0]), int(a[1]), int(a[2])

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                serve_sock(self.request, size)
                libc_exit(0)

        socketserver.ForkingTCPServer.allow_reuse_address = True
        with socketserver.ForkingTCPServer(("0.0.0.0", port), Handler) as srv:
            for _ in range(n):
                srv.handle_request()
            srv.block_on_close = True
        libc_exit(0)
    elif cmd == "exec":
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            if os.fork() == 0:
                ls.close()
                os.dup2(c.fileno(), 0)
                os.dup2(c.fileno(), 1)
                c.close()
                os.execve(sys.executable,
                          [sys.executable, __file__, "inetd", str(size)],
                          {} if "--bare" in a else os.environ)
            c.close()
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        libc_exit(0)
    elif cmd == "inetd":
        s = socket.socket(fileno=0)
        serve_stream(s.recv, lambda b: write_all(1, b), int(a[0]))
        s.close()
        os.close(1)
        libc_exit(0)
    elif cmd == "stdio":
        serve_stream(lambda n: os.read(0, n), lambda b: write_all(1, b),
                     int(a[0]))
        libc_exit(0)
    elif cmd == "prefork":
        port, w, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        kids = []
        for _ in range(w):
            pid = os.fork()
            if pid == 0:
                on_term_exit()
                while True:
                    c, _ = ls.accept()
                    serve_sock(c, size)
            kids.append(pid)
        ls.close()

        def stop(*_):
            for k in kids:
                try:
                    os.kill(k, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            for k in kids:
                try:
                    os.waitpid(k, 0)
                except ChildProcessError:
                    pass
            libc_exit(0)
        signal.signal(signal.SIGTERM, stop)
        while True:
            signal.pause()
    elif cmd == "reuseport":
        ls = listener(int(a[0]), reuseport=True)
        on_term_exit()
        while True:
            c, _ = ls.accept()
            serve_sock(c, int(a[1]))
    elif cmd == "scm":
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            here.close()
            for _ in range(n):
                _, fds, _, _ = socket.recv_fds(there, 16, 1)
                serve_sock(socket.socket(fileno=fds[0]), size)
            libc_exit(0)
        there.close()
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            socket.send_fds(here, [b"x"], [c.fileno()])
            c.close()
        os.waitpid(pid, 0)
        libc_exit(0)
    elif cmd == "scmlive":
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            here.close()
            for _ in range(n):
                _, fds, _, _ = socket.recv_fds(there, 16, 1)
                s = socket.socket(fileno=fds[0])
                got = answer_rest(s, size)
                s.close()
                print("after pass: %d bytes, then EOF" % got)
                sys.stdout.flush()
            libc_exit(0)
        there.close()
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            answer_first(c, size)
            time.sleep(0.5)  # the client's next bytes come meanwhile
            socket.send_fds(here, [b"x"], [c.fileno()])
            c.close()
        os.waitpid(pid, 0)
        libc_exit(0)
    elif cmd == "daemon":
        port, n, size, when, pidfile = (int(a[0]), int(a[1]), int(a[2]),
                                        a[3], a[4])
        ls = listener(port) if when == "after" else None
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
        if ls is None:
            ls = listener(port)
        with open(pidfile + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(pidfile + ".tmp", pidfile)

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                serve_sock(self.request, size)

        srv = socketserver.TCPServer(("0.0.0.0", port), Handler,
                                     bind_and_activate=False)
        srv.socket.close()
        srv.socket = ls
        for _ in range(n):
            srv.handle_request()
        libc_exit(0)
    elif cmd == "forkafter":
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            c.sendall(b"WELCOME " + read_line(c))
            pid = os.fork()
            if pid == 0:
                ls.close()
                serve_sock(c, size)
                libc_exit(0)
            os.waitpid(pid, 0)
            c.close()
        libc_exit(0)
    elif cmd == "forkclose":
        # the parent lets go right after the fork, before its child's
        # first call: it closes its copy (close), or ends (exit)
        port, n, size, how = int(a[0]), int(a[1]), int(a[2]), a[3]
        ls = listener(port)
        kids = []
        for _ in range(n):
            c, _ = ls.accept()
            c.sendall(b"WELCOME " + read_line(c))
            pid = os.fork()
            if pid == 0:
                ls.close()
                time.sleep(0.5)  # the parent has let go by then
                serve_sock(c, size)
                libc_exit(0)
            kids.append(pid)
            if how == "exit":
                libc_exit(0)
            c.close()
        for pid in kids:
            os.waitpid(pid, 0)
        libc_exit(0)
    elif cmd == "forkhelper":
        # a helper forked and exec'd with the live connection inherited,
        # which never touches it; the parent serves on
        port, size = int(a[0]), int(a[1])
        ls = listener(port)
        c, _ = ls.accept()
        c.sendall(b"WELCOME " + read_line(c))
        time.sleep(0.5)  # the client's bytes come over RDMA meanwhile
        os.set_inheritable(c.fileno(), True)
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, "-c", "pass"])
        os.waitpid(pid, 0)
        serve_sock(c, size)
        libc_exit(0)
    elif cmd == "spawn":
        # a fork and an exec in one: posix_spawn(3) a program that
        # serves the live connection the parent's I/O claimed
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            c.sendall(b"WELCOME " + read_line(c))
            os.set_inheritable(c.fileno(), True)
            pid = os.posix_spawn(sys.executable, [
                sys.executable, __file__, "servefd", str(c.fileno()),
                str(size)], os.environ)
            os.waitpid(pid, 0)
            c.close()
        libc_exit(0)
    elif cmd == "spawnbare":
        # posix_spawn(3) of a program without xsock (an empty
        # environment) that serves a socket no process claimed, put on
        # its fd 0 and 1 by file actions (the socket is close-on-exec)
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            pid = os.posix_spawn(
                sys.executable, [sys.executable, __file__, "inetd",
                                 str(size)], {},
                file_actions=[(os.POSIX_SPAWN_DUP2, c.fileno(), 0),
                              (os.POSIX_SPAWN_DUP2, c.fileno(), 1)])
            os.waitpid(pid, 0)
            c.close()
        libc_exit(0)
    elif cmd == "servefd":
        serve_sock(socket.socket(fileno=int(a[0])), int(a[1]))
        libc_exit(0)
    elif cmd == "forkback":
        port, size = int(a[0]), int(a[1])
        ls = listener(port)
        c, _ = ls.accept()
        c.sendall(b"WELCOME " + read_line(c))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            got = bytearray()
            while len(got) < 200000:
                b = c.recv(200000 - len(got))
                if not b:
                    break
                got += b
            write_all(w, bytes(got))
            os.close(w)
            libc_exit(0)
        os.close(w)
        part = bytearray()
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            part += b
        os.waitpid(pid, 0)
        h = hashlib.sha256(part)
        rest = read_to_eof(c, bytearray())
        h.update(rest)
        c.sendall(b"%s\n%d\n" % (h.hexdigest().encode(), os.getpid()) +
                  pattern(b"down", size))
        c.close()
        print("child %d parent %d bytes" % (len(part), len(rest)))
        libc_exit(0)
    elif cmd == "forkafter-client":
        host, port, size = a[0], int(a[1]), int(a[2])
        late = "--late-shut" in a
        s = socket.create_connection((host, port))
        up = pattern(b"up", int(a[a.index("--up") + 1]) if "--up" in a
                     else size)
        s.sendall(b"HELLO %d\n" % os.getpid() + up)
        if not late:
            s.shutdown(socket.SHUT_WR)
        buf = bytearray()
        while b"\n" not in buf:
            b = s.recv(65536)
            if not b:
                break
            buf += b
        if late:
            time.sleep(0.5)
            s.shutdown(socket.SHUT_WR)
        buf = read_to_eof(s, buf)
        s.close()
        welcome, sha, pid, down = bytes(buf).split(b"\n", 3)
        ok = (welcome == b"WELCOME HELLO %d" % os.getpid() and
              sha.decode() == hashlib.sha256(up).hexdigest() and
              hashlib.sha256(down).digest() ==
              hashlib.sha256(pattern(b"down", size)).digest())
        print("%s pid=%s up=%s down=%s bytes=%d" %
              ("ok" if ok else "MISMATCH", pid.decode(), sha.decode()[:16],
               hashlib.sha256(down).hexdigest()[:16], len(down)))
        libc_exit(0 if ok else 1)
    elif cmd in ("execlive", "execchild"):
        # execchild: the CGI way: the child of a fork execs, the parent
        # (the connection's owner) waits for it, then closes its copy
        port, n, size = int(a[0]), int(a[1]), int(a[2])
        ls = listener(port)
        for _ in range(n):
            c, _ = ls.accept()
            answer_first(c, size)
            # the client's next bytes (and its FIN, with --shut) come
            # while this image still runs: unread when it execs
            time.sleep(0.5)
            pid = os.fork() if cmd == "execchild" else 0
            if pid:
                os.waitpid(pid, 0)
                c.close()
                continue
            ls.close()
            fd = c.detach()
            os.set_inheritable(fd, True)
            os.execv(sys.executable, [sys.executable, __file__,
                                      "execlive-cont", str(fd), str(size)])
        ls.close()
        libc_exit(0)
    elif cmd == "execlive-cont":
        s = socket.socket(fileno=int(a[0]))
        size = int(a[1])
        try:
            got = answer_rest(s, size)
            print("after exec: %d bytes, then EOF" % got)
        except OSError as e:
            print("after exec: %s" % (os.strerror(e.errno)))
        sys.stdout.flush()
        libc_exit(0)
    elif cmd == "execlive-client":
        host, port, size = a[0], int(a[1]), int(a[2])
        up = int(a[a.index("--up") + 1]) if "--up" in a else size
        s = socket.create_connection((host, port), timeout=60)
        first = pattern(b"first", size)
        s.sendall(first)
        line = read_line(s)
        print("before exec: %s" % ("sha ok" if line.strip().decode() ==
                                    hashlib.sha256(first).hexdigest()
                                    else "MISMATCH"))
        second = pattern(b"second", up)
        try:
            s.sendall(second)
            if "--late-shut" in a:
                time.sleep(1.5)  # the server has exec'd by then
            s.shutdown(socket.SHUT_WR)
            sha = read_line(s).strip().decode()
            pid = read_line(s).strip().decode()
            down = read_to_eof(s, b"")
            print("after exec: up %s, down %s, pid %s" %
                  ("ok" if sha == hashlib.sha256(second).hexdigest()
                   else "MISMATCH",
                   "ok" if down == pattern(b"down", size) else
                   "MISMATCH (%d bytes)" % len(down), pid))
        except OSError as e:
            print("after exec: %s" % (os.strerror(e.errno)))
        sys.stdout.flush()
        libc_exit(0)


def write_all(fd, b):
    while b:
        n = os.write(fd, b)
        b = b[n:]


if __name__ == "__main__":
    main()
