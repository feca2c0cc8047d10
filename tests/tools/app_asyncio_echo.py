#!/usr/bin/env python3
"""app_asyncio_echo.py - echo servers and checking clients in pure Python.

  server  --port P --impl asyncio|selectors|threads|forking [--selector
          epoll|poll|select]: echo every byte back; on a client's EOF (shutdown
          SHUT_WR) finish echoing, then close. SIGTERM/SIGINT stop it with
          status 0 and the line "served conns=N bytes=B" on stdout.
  client  --port P --impl asyncio|blocking --conns C --msgs M [--sendfile]:
          C concurrent connections, each sending M seeded random messages
          (1 B .. --max-size, edges 1/4096/65536/1 MiB included) and
          reading each echo back in full while it is still being sent; every
          byte is compared; then shutdown(SHUT_WR) and the server's EOF is
          expected. Prints "conns=C msgs=N bytes=B sha256=H" (the same for
          the same arguments) or exits 1 with the first mismatch.
  refused --port P: connect to a closed port the blocking, non-blocking and
          asyncio ways; prints the errno names seen.
Only 127.0.0.1 / ::1 are used. Used by tests/bats/python.bats.
"""
import argparse
import asyncio
import errno
import hashlib
import os
import random
import selectors
import signal
import socket
import socketserver
import sys
import tempfile
import threading

EDGES = [1, 4096, 65536, 1 << 20, 2, 1460, 4097, 262144]


def message_sizes(conn, msgs, max_size, seed):
    rng = random.Random(seed * 7919 + conn)
    out = []
    for j in range(msgs):
        k = conn * msgs + j
        if k < len(EDGES):
            out.append(min(EDGES[k], max_size))
        else:
            out.append(max(1, int(rng.random() ** 3 * max_size)))
    return out


def message(conn, j, size, seed):
    return random.Random((seed * 1000003 + conn) * 1009 + j).randbytes(size)


def fail(msg):
    print("app_asyncio_echo: " + msg, file=sys.stderr)
    sys.exit(1)


class Served:
    def __init__(self):
        self.lock = threading.Lock()
        self.conns = 0
        self.bytes = 0

    def add(self, conns=0, nbytes=0):
        with self.lock:
            self.conns += conns
            self.bytes += nbytes

    def report(self):
        print("served conns=%d bytes=%d" % (self.conns, self.bytes),
              flush=True)


# --- servers ---------------------------------------------------------------

def serve_asyncio(a, served):
    async def handle(reader, writer):
        served.add(conns=1)
        while True:
            data = await reader.read(1 << 18)
            if not data:
                break
            served.add(nbytes=len(data))
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        server = await asyncio.start_server(handle, a.host, a.port,
                                            backlog=128)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(main())


def serve_selectors(a, served):
    sel = {"epoll": getattr(selectors, "EpollSelector", None),
           "poll": getattr(selectors, "PollSelector", None),
           "select": selectors.SelectSelector}[a.selector]()
    lsock = socket.create_server((a.host, a.port), backlog=128,
                                 family=family(a.host))
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ, None)
    stop = []
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    sel.register(rfd, selectors.EVENT_READ, "stop")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(os.write(wfd, b"x")))

    class Conn:
        def __init__(self, sock):
            self.sock = sock
            self.out = bytearray()
            self.eof = False

    def update(c):
        if c.eof and not c.out:
            sel.unregister(c.sock)
            c.sock.close()
            return
        ev = 0
        if not c.eof and len(c.out) < (4 << 20):  # backpressure
            ev |= selectors.EVENT_READ
        if c.out:
            ev |= selectors.EVENT_WRITE
        sel.modify(c.sock, ev, c)

    while not stop:
        for key, mask in sel.select():
            if key.data == "stop":
                stop.append(1)
                break
            if key.data is None:
                try:
                    sock, _ = lsock.accept()
                except BlockingIOError:
                    continue
                sock.setblocking(False)
                served.add(conns=1)
                sel.register(sock, selectors.EVENT_READ, Conn(sock))
                continue
            c = key.data
            if mask & selectors.EVENT_READ:
                try:
                    data = c.sock.recv(1 << 18)
                except BlockingIOError:
                    data = None
                if data == b"":
                    c.eof = True
                elif data:
                    served.add(nbytes=len(data))
                    c.out += data
            if mask & selectors.EVENT_WRITE and c.out:
                try:
                    n = c.sock.send(c.out)
                    del c.out[:n]
                except BlockingIOError:
                    pass
            update(c)


def serve_threads(a, served, forking=False):
    """Thread per connection, or (forking) a child process per connection:
    the parent closes its copy of the accepted socket, the child echoes and
    leaves with os._exit; the byte count comes back through a pipe."""
    rfd, wfd = os.pipe() if forking else (None, None)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            n = 0
            if not forking:
                served.add(conns=1)
            while True:
                data = self.request.recv(1 << 18)
                if not data:
                    break
                n += len(data)
                self.request.sendall(data)
            if forking:
                os.write(wfd, b"%d\n" % n)
            else:
                served.add(nbytes=n)

    base = socketserver.ForkingTCPServer if forking else \
        socketserver.ThreadingTCPServer

    class Server(base):
        allow_reuse_address = True
        daemon_threads = True
        block_on_close = True
        request_queue_size = 128
        address_family = family(a.host)

    srv = Server((a.host, a.port), Handler)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    t = threading.Thread(target=srv.serve_forever, kwargs={
        "poll_interval": 0.05})
    t.start()
    stop.wait()
    srv.shutdown()
    t.join()
    srv.server_close()  # forking: waits for every child
    if forking:
        os.close(wfd)
        with os.fdopen(rfd) as f:
            counts = [int(x) for x in f.read().split()]
        served.add(conns=len(counts), nbytes=sum(counts))


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


# --- clients ---------------------------------------------------------------

async def client_conn_asyncio(a, i, digest):
    reader, writer = await asyncio.open_connection(a.host, a.port)
    sock = writer.get_extra_info("socket")
    peer = sock.getpeername()
    if peer[1] != a.port:
        fail("conn %d: getpeername %r" % (i, peer))
    total = 0
    for j, size in enumerate(message_sizes(i, a.msgs, a.max_size, a.seed)):
        msg = message(i, j, size, a.seed)

        async def send():
            writer.write(msg)
            await writer.drain()

        async def recv():
            return await reader.readexactly(size)

        _, echo = await asyncio.gather(send(), recv())
        if echo != msg:
            fail("conn %d msg %d: %d bytes echoed differ" % (i, j, size))
        digest[(i, j)] = hashlib.sha256(echo).digest()
        total += size
    writer.write_eof()
    rest = await reader.read()
    if rest != b"":
        fail("conn %d: %d bytes after the last echo" % (i, len(rest)))
    writer.close()
    await writer.wait_closed()
    return total


def client_asyncio(a, digest):
    async def main():
        return await asyncio.wait_for(asyncio.gather(
            *[client_conn_asyncio(a, i, digest) for i in range(a.conns)]),
            a.timeout)
    try:
        return sum(asyncio.run(main()))
    except asyncio.TimeoutError:
        fail("not done after %g s: %d of %d messages echoed"
             % (a.timeout, len(digest), a.conns * a.msgs))


def client_conn_blocking(a, i, digest, errors):
    try:
        sock = socket.create_connection((a.host, a.port),
                                        timeout=a.timeout)
        if sock.getpeername()[1] != a.port:
            raise AssertionError("getpeername %r" % (sock.getpeername(),))
        total = 0
        for j, size in enumerate(message_sizes(i, a.msgs, a.max_size,
                                               a.seed)):
            msg = message(i, j, size, a.seed)
            if a.sendfile:
                f = tempfile.TemporaryFile()
                f.write(msg)
                f.flush()
                f.seek(0)
                sender = threading.Thread(target=sock.sendfile, args=(f,))
            else:
                sender = threading.Thread(target=sock.sendall, args=(msg,))
            sender.start()
            got = bytearray()
            while len(got) < size:
                chunk = sock.recv(min(1 << 18, size - len(got)))
                if not chunk:
                    raise AssertionError("EOF after %d of %d bytes"
                                         % (len(got), size))
                got += chunk
            sender.join()
            if a.sendfile:
                f.close()
            if bytes(got) != msg:
                raise AssertionError("msg %d: %d bytes echoed differ"
                                     % (j, size))
            digest[(i, j)] = hashlib.sha256(got).digest()
            total += size
        sock.shutdown(socket.SHUT_WR)
        if sock.recv(1) != b"":
            raise AssertionError("data after the last echo")
        sock.close()
        errors[i] = total
    except Exception as e:  # reported by the main thread
        errors[i] = e


def client_blocking(a, digest):
    results = {}
    threads = [threading.Thread(target=client_conn_blocking,
                                args=(a, i, digest, results))
               for i in range(a.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(a.conns):
        if not isinstance(results.get(i), int):
            fail("conn %d: %r" % (i, results.get(i)))
    return sum(results.values())


def refused(a):
    out = []
    s = socket.socket(family(a.host), socket.SOCK_STREAM)
    try:
        s.connect((a.host, a.port))
        out.append("blocking connected")
    except OSError as e:
        out.append("blocking " + errno.errorcode.get(e.errno, str(e.errno)))
    s.close()

    s = socket.socket(family(a.host), socket.SOCK_STREAM)
    s.setblocking(False)
    rc = s.connect_ex((a.host, a.port))
    if rc == errno.EINPROGRESS:
        sel = selectors.DefaultSelector()
        sel.register(s, selectors.EVENT_WRITE)
        if not sel.select(10):
            fail("non-blocking connect: no event in 10 s")
        rc2 = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        out.append("nonblocking EINPROGRESS SO_ERROR="
                   + errno.errorcode.get(rc2, str(rc2)))
    else:
        out.append("nonblocking " + errno.errorcode.get(rc, str(rc)))
    s.close()

    async def aconnect():
        try:
            await asyncio.open_connection(a.host, a.port)
            return "asyncio connected"
        except OSError as e:
            return "asyncio " + errno.errorcode.get(e.errno, str(e.errno))
    out.append(asyncio.run(aconnect()))
    print("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["server", "client", "refused"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--impl", default="asyncio",
                    choices=["asyncio", "selectors", "threads", "forking",
                             "blocking"])
    ap.add_argument("--selector", default="epoll",
                    choices=["epoll", "poll", "select"])
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--msgs", type=int, default=4)
    ap.add_argument("--max-size", type=int, default=1 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sendfile", action="store_true")
    ap.add_argument("--timeout", type=float, default=60,
                    help="client: seconds for the whole run (asyncio) or "
                    "for each socket call (blocking)")
    a = ap.parse_args()
    if a.host not in ("127.0.0.1", "::1", "localhost"):
        fail("only loopback addresses are allowed")

    if a.mode == "server":
        served = Served()
        if a.impl == "forking":
            serve_threads(a, served, forking=True)
        else:
            {"asyncio": serve_asyncio, "selectors": serve_selectors,
             "threads": serve_threads}[a.impl](a, served)
        served.report()
    elif a.mode == "client":
        digest = {}
        if a.impl == "asyncio":
            total = client_asyncio(a, digest)
        elif a.impl == "blocking":
            total = client_blocking(a, digest)
        else:
            fail("client --impl is asyncio or blocking")
        h = hashlib.sha256()
        for k in sorted(digest):
            h.update(digest[k])
        print("conns=%d msgs=%d bytes=%d sha256=%s" % (
            a.conns, len(digest), total, h.hexdigest()))
    else:
        refused(a)


if __name__ == "__main__":
    main()
