#!/usr/bin/env python3
"""flow_peer.py - a checked stream through a fault: the fault tests make
the network or the server misbehave while it runs and judge what it says.

  flow_peer.py serve IP PORT [--keepalive IDLE,INTVL,CNT] [--fill-after N,K]
        echo every connection back, any number of them, driven by epoll;
        runs until killed (SIGTERM: exits as by exit()); prints "failed
        KIND after MS ms" for each connection that fails (MS since a byte
        last moved on it) and "closed" for each that ends with EOF;
        --fill-after: once N connections have each echoed a byte, open
        /dev/null until EMFILE, close K of those again and print "filled,
        K fds free": the fd table full but for K, whatever the process
        and a library under it held by then
  flow_peer.py stream IP PORT SECONDS [--keepalive IDLE,INTVL,CNT]
        connect, then for SECONDS write a known byte sequence without
        pause and read the echo back, driven by epoll, checking every byte;
        prints "streaming" once 256 KiB have come back, then "at BYTES"
        each second
  flow_peer.py idle IP PORT SECONDS [--keepalive IDLE,INTVL,CNT]
        connect, exchange one line, then wait in epoll for SECONDS without
        sending: prints "idle" once the line came back
  flow_peer.py many IP PORT N SECONDS
        stream on N connections at once for SECONDS, each checked as
        `stream` checks its one; prints "connected N" once all are, then
        "intact BYTES bytes on N connections, at least LEAST each" (LEAST:
        the fewest bytes any one connection had back) and exits 0, or
        exits 1 on the first failure or wrong byte
  flow_peer.py reconnect IP PORT SECONDS
        connect, exchange a checked message every 100 ms (prints
        "connected" after the first); when a call fails, print "lost KIND
        after MS ms" (MS since the last reply) and connect again (every
        100 ms) until a message goes through, then "back after MS ms";
        stops after SECONDS

--keepalive sets SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT
(seconds, seconds, count) on the connection before connect(), or on the
listening socket, whose accepted connections inherit them.

stream and idle print one last line and exit with:
  0 "intact BYTES bytes; longest stall MS ms": the time ran out, every
    byte came back in order
  3 "failed KIND after MS ms; echoed BYTES bytes intact; epoll events 0xEV":
    the connection failed (KIND ECONNRESET, ETIMEDOUT, EPIPE or EOF), MS
    after a byte last moved (idle: after the wait began), EV the epoll
    events of the wakeup that found it; the bytes before were intact
  1 a byte came back wrong, or nothing moved and nothing failed for 60 s
reconnect exits 0 after SECONDS if every message sent on a connection
that then answered came back intact, 1 otherwise.
"""
import errno
import os
import select
import signal
import socket
import sys
import time

CHUNK = 65536
PATTERN = bytes(range(251)) * (2 * CHUNK // 251 + 2)  # 251: prime period


def pattern_at(off, n):
    """n bytes of the stream from offset off."""
    start = off % 251
    return PATTERN[start:start + n]


def connect(ip, port, keepalive):
    sock = socket.socket()
    if keepalive:
        keepalive_on(sock, keepalive)
    sock.connect((ip, port))
    return sock


def failed(kind, since, echoed, ev):
    print("failed %s after %d ms; echoed %d bytes intact; epoll events %#x"
          % (kind, (time.monotonic() - since) * 1000, echoed, ev),
          flush=True)
    return 3


def kind_of(exc):
    if isinstance(exc, ConnectionResetError):
        return "ECONNRESET"
    if isinstance(exc, BrokenPipeError):
        return "EPIPE"
    if isinstance(exc, TimeoutError) or getattr(exc, "errno", 0) == \
            errno.ETIMEDOUT:
        return "ETIMEDOUT"
    raise exc


def kind_name(exc):
    return errno.errorcode.get(getattr(exc, "errno", 0) or 0,
                               type(exc).__name__)


def stream(sock, seconds):
    sock.setblocking(False)
    ep = select.epoll()
    base = select.EPOLLIN | select.EPOLLRDHUP
    mask = base | select.EPOLLOUT
    ep.register(sock.fileno(), mask)
    sent = echoed = 0
    announced = False
    last = time.monotonic()
    stall = 0.0
    end = last + seconds
    tick = last + 1
    while True:
        now = time.monotonic()
        if announced and now >= tick:
            print("at %d" % echoed, flush=True)
            tick = now + 1
        if now >= end:
            stall = max(stall, now - last)
            print("intact %d bytes; longest stall %d ms" %
                  (echoed, stall * 1000), flush=True)
            return 0
        if now - last > 60:
            print("flow_peer: nothing moved and nothing failed for 60 s",
                  flush=True)
            return 1
        for _, ev in ep.poll(min(1.0, end - now)):
            try:
                if ev & (select.EPOLLIN | select.EPOLLHUP |
                         select.EPOLLERR | select.EPOLLRDHUP):
                    data = sock.recv(CHUNK)
                    if not data:
                        return failed("EOF", last, echoed, ev)
                    if data != pattern_at(echoed, len(data)):
                        print("corrupt: %d bytes at offset %d differ" %
                              (len(data), echoed), flush=True)
                        return 1
                    echoed += len(data)
                    now = time.monotonic()
                    stall = max(stall, now - last)
                    last = now
                if ev & select.EPOLLOUT and sent - echoed < 4 * CHUNK:
                    n = sock.send(pattern_at(sent, CHUNK))
                    sent += n
            except BlockingIOError:
                pass
            except OSError as exc:
                return failed(kind_of(exc), last, echoed, ev)
            if not announced and echoed >= 256 << 10:
                print("streaming", flush=True)
                announced = True
        want = base | (select.EPOLLOUT if sent - echoed < 4 * CHUNK else 0)
        if want != mask:
            ep.modify(sock.fileno(), want)
            mask = want


def many(ip, port, n, seconds):
    socks = [connect(ip, port, None) for _ in range(n)]
    print("connected %d" % n, flush=True)
    ep = select.epoll()
    state = {}  # fd -> [socket, sent, echoed]
    for sock in socks:
        sock.setblocking(False)
        state[sock.fileno()] = [sock, 0, 0]
        ep.register(sock.fileno(), select.EPOLLIN | select.EPOLLOUT)
    end = time.monotonic() + seconds
    last = time.monotonic()
    while time.monotonic() < end:
        if time.monotonic() - last > 60:
            print("flow_peer: nothing moved for 60 s", flush=True)
            return 1
        for fd, ev in ep.poll(1.0):
            st = state[fd]
            sock = st[0]
            try:
                if ev & ~select.EPOLLOUT:
                    data = sock.recv(CHUNK)
                    if not data:
                        print("failed EOF on fd %d" % fd, flush=True)
                        return 1
                    if data != pattern_at(st[2], len(data)):
                        print("corrupt: fd %d offset %d" % (fd, st[2]),
                              flush=True)
                        return 1
                    st[2] += len(data)
                    last = time.monotonic()
                if ev & select.EPOLLOUT and st[1] - st[2] < 4 * CHUNK:
                    st[1] += sock.send(pattern_at(st[1], CHUNK))
            except BlockingIOError:
                pass
            except OSError as exc:
                print("failed %s on fd %d" % (kind_name(exc), fd),
                      flush=True)
                return 1
            ep.modify(fd, select.EPOLLIN | (select.EPOLLOUT if
                                            st[1] - st[2] < 4 * CHUNK
                                            else 0))
    print("intact %d bytes on %d connections, at least %d each" %
          (sum(st[2] for st in state.values()), n,
           min(st[2] for st in state.values())), flush=True)
    return 0


def idle(sock, seconds):
    sock.sendall(b"hello\n")
    if sock.recv(64) != b"hello\n":
        print("flow_peer: the line did not come back", flush=True)
        return 1
    print("idle", flush=True)
    sock.setblocking(False)
    ep = select.epoll()
    ep.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        for _, ev in ep.poll(max(0.0, end - time.monotonic())):
            try:
                data = sock.recv(64)
                if not data:
                    return failed("EOF", start, 6, ev)
                print("flow_peer: unexpected bytes %r" % data, flush=True)
                return 1
            except BlockingIOError:
                pass
            except OSError as exc:
                return failed(kind_of(exc), start, 6, ev)
    print("intact 6 bytes; longest stall %d ms" %
          ((time.monotonic() - start) * 1000), flush=True)
    return 0


def reconnect(ip, port, seconds):
    end = time.monotonic() + seconds
    sock, seq, lost_at, replied = None, 0, None, time.monotonic()
    while time.monotonic() < end:
        try:
            if sock is None:
                sock = connect(ip, port, None)
                sock.settimeout(10)
            msg = b"%08d" % seq + pattern_at(seq, 992)
            sock.sendall(msg)
            got = b""
            while len(got) < len(msg):
                data = sock.recv(len(msg) - len(got))
                if not data:
                    raise ConnectionResetError("EOF")
                got += data
            if got != msg:
                print("corrupt: message %d came back wrong" % seq,
                      flush=True)
                return 1
            if seq == 0:
                print("connected", flush=True)
            if lost_at is not None:
                print("back after %d ms" %
                      ((time.monotonic() - lost_at) * 1000), flush=True)
                lost_at = None
            replied = time.monotonic()
            seq += 1
            time.sleep(0.1)
        except OSError as exc:
            if lost_at is None:
                lost_at = time.monotonic()
                name = "EOF" if str(exc) == "EOF" else \
                    errno.errorcode.get(exc.errno or 0, type(exc).__name__)
                print("lost %s after %d ms" %
                      (name, (lost_at - replied) * 1000), flush=True)
            if sock is not None:
                sock.close()
                sock = None
            time.sleep(0.1)
    print("messages %d intact" % seq, flush=True)
    return 0 if lost_at is None else 1


def keepalive_on(sock, keepalive):
    idle, intvl, cnt = (int(x) for x in keepalive.split(","))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, intvl)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, cnt)


def fill_fds(free):
    """Open /dev/null until EMFILE, then close @free of them again."""
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as exc:
            if exc.errno != errno.EMFILE:
                raise
            break
    for fd in held[len(held) - free:]:
        os.close(fd)
    print("filled, %d fds free" % free, flush=True)


def serve(ip, port, keepalive, fill=None):
    lsock = socket.socket()
    if keepalive:  # accepted sockets inherit it
        keepalive_on(lsock, keepalive)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((ip, port))
    lsock.listen(64)
    lsock.setblocking(False)
    ep = select.epoll()
    ep.register(lsock.fileno(), select.EPOLLIN)
    conns = {}  # fd -> [socket, bytes not yet echoed]
    echoed = set()  # fds of connections that sent a byte (--fill-after)
    while True:
        for fd, ev in ep.poll():
            if fd == lsock.fileno():
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    continue
                except OSError as exc:  # EMFILE: try again shortly
                    print("accept: %s" % kind_name(exc), flush=True)
                    time.sleep(0.5)
                    continue
                conn.setblocking(False)
                conns[conn.fileno()] = [conn, b"", time.monotonic()]
                ep.register(conn.fileno(), select.EPOLLIN)
                continue
            entry = conns[fd]
            conn = entry[0]
            try:
                if ev & ~select.EPOLLOUT:
                    data = conn.recv(CHUNK)
                    if not data:
                        print("closed", flush=True)
                        raise EOFError
                    entry[1] += data
                    entry[2] = time.monotonic()
                    if fill and fd not in echoed:
                        echoed.add(fd)
                        if len(echoed) == fill[0]:
                            fill_fds(fill[1])
                if entry[1]:
                    n = conn.send(entry[1])
                    entry[1] = entry[1][n:]
            except BlockingIOError:
                pass
            except (OSError, EOFError) as exc:
                if isinstance(exc, OSError):
                    print("failed %s after %d ms" %
                          (kind_name(exc),
                           (time.monotonic() - entry[2]) * 1000),
                          flush=True)
                ep.unregister(fd)
                conn.close()
                del conns[fd]
                continue
            ep.modify(fd, select.EPOLLIN |
                      (select.EPOLLOUT if entry[1] else 0))


def main():
    args = sys.argv[1:]
    keepalive = None
    fill = None
    if "--keepalive" in args:
        i = args.index("--keepalive")
        keepalive = args[i + 1]
        del args[i:i + 2]
    if "--fill-after" in args:
        i = args.index("--fill-after")
        fill = tuple(int(v) for v in args[i + 1].split(","))
        del args[i:i + 2]
    if len(args) < 3 or args[0] not in ("serve", "stream", "idle",
                                        "reconnect", "many"):
        sys.exit(__doc__)
    ip, port = args[1], int(args[2])
    if args[0] == "serve":
        # SIGTERM ends the server as an exit does, so exit handlers run
        # (XSOCK_STATS writes its summary)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        serve(ip, port, keepalive, fill)
    if args[0] == "many":
        sys.exit(many(ip, port, int(args[3]), float(args[4])))
    seconds = float(args[3])
    if args[0] == "reconnect":
        sys.exit(reconnect(ip, port, seconds))
    sock = connect(ip, port, keepalive)
    sys.exit(stream(sock, seconds) if args[0] == "stream"
             else idle(sock, seconds))


if __name__ == "__main__":
    main()
