#!/usr/bin/env python3
"""Echo client over non-blocking sockets driven by one selector.

    selecho.py epoll|poll|select HOST PORT CONNECTIONS ROUNDS

Each connection sends ROUNDS messages of growing sizes (1 B to 64 KiB) and
checks every echoed byte; the selector (epoll, poll or select) is the only
thing that waits. Prints one summary line; exit status 1 on any mismatch or
a wait that saw nothing for 20 s.
"""
import errno
import selectors
import socket
import sys

SIZES = [1, 100, 255, 257, 4095, 4097, 30000, 65536]


def main():
    kind, host, port, nconn, rounds = sys.argv[1:6]
    port, nconn, rounds = int(port), int(nconn), int(rounds)
    sel = {"epoll": selectors.EpollSelector, "poll": selectors.PollSelector,
           "select": selectors.SelectSelector}[kind]()
    conns = {}
    for i in range(nconn):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            sys.exit("connect: %s" % errno.errorcode.get(rc, rc))
        st = {"sock": s, "round": 0, "out": b"", "want": b"", "got": b""}
        conns[s.fileno()] = st
        sel.register(s, selectors.EVENT_WRITE, st)
    done = bad = 0
    moved = 0

    def next_round(st):
        size = SIZES[(st["round"] + st["sock"].fileno()) % len(SIZES)]
        msg = bytes((st["round"] * 7 + j) & 0xFF for j in range(size))
        st["out"], st["want"], st["got"] = msg, msg, b""

    for st in conns.values():
        next_round(st)
    while done < nconn:
        events = sel.select(timeout=20)
        if not events:
            sys.exit("%s: no event for 20 s (%d/%d done)" % (kind, done, nconn))
        for key, mask in events:
            st = key.data
            s = st["sock"]
            if mask & selectors.EVENT_WRITE and st["out"]:
                try:
                    n = s.send(st["out"])
                    st["out"] = st["out"][n:]
                except BlockingIOError:
                    pass
                if not st["out"]:
                    sel.modify(s, selectors.EVENT_READ, st)
            elif mask & selectors.EVENT_READ:
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                if not data:
                    sys.exit("%s: early EOF" % kind)
                st["got"] += data
                moved += len(data)
                if len(st["got"]) == len(st["want"]):
                    bad += st["got"] != st["want"]
                    st["round"] += 1
                    if st["round"] == rounds:
                        sel.unregister(s)
                        s.close()
                        done += 1
                    else:
                        next_round(st)
                        sel.modify(s, selectors.EVENT_WRITE, st)
    print("%s: %d connections x %d rounds, %d bytes echoed, mismatches %d"
          % (kind, nconn, rounds, moved, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
