#!/usr/bin/env python3
"""oneshot_mt.py - a dispatcher thread waits on an EPOLLONESHOT set and
hands each ready connection to a worker thread, which reads it, re-arms it
with EPOLL_CTL_MOD while the dispatcher sleeps, and only then sends the
next request (the design of thread-pool servers over epoll).

  oneshot_mt.py HOST PORT CONNS ROUNDS
      CONNS connections to the echo server at HOST:PORT, each making
      ROUNDS one-byte round trips through the dispatcher and the worker.
      Prints "rounds N stalls S": the round trips done, and how many of
      the dispatcher's waits (2 s) ended with nothing while a round trip
      was due: a lost wake-up (it stops at 3). Over kernel TCP: rounds
      CONNS*ROUNDS stalls 0.
      Exit status: 0 then, 1 otherwise.
"""
import os
import queue
import select
import socket
import sys
import threading


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    nconn, rounds = int(sys.argv[3]), int(sys.argv[4])
    ep = select.epoll()
    mask = select.EPOLLIN | select.EPOLLONESHOT
    socks, left = {}, {}
    for _ in range(nconn):
        s = socket.create_connection((host, port))
        s.setblocking(False)
        socks[s.fileno()] = s
        left[s.fileno()] = rounds
        ep.register(s.fileno(), mask)
    end_r, end_w = os.pipe()  # the worker's word that all are done
    ep.register(end_r, select.EPOLLIN)
    work = queue.Queue()
    done = [0]
    stalls = [0]
    lock = threading.Lock()

    def worker():
        while True:
            fd = work.get()
            if fd is None:
                return
            s = socks[fd]
            got = b""
            while True:
                try:
                    d = s.recv(64)
                except BlockingIOError:
                    break
                if not d:
                    break
                got += d
            with lock:
                done[0] += len(got)
                left[fd] -= len(got)
                more = left[fd] > 0
                if done[0] == nconn * rounds:
                    os.write(end_w, b"e")
            if more:
                ep.modify(fd, mask)  # the dispatcher is asleep by now
                if got:  # the next request (none after a stray wake)
                    s.send(b"x")

    w = threading.Thread(target=worker)
    w.start()
    for s in socks.values():
        s.send(b"x")
    end = False
    while not end and stalls[0] < 3:
        ev = ep.poll(2.0)
        if not ev:  # a round trip was due all along: a lost wake-up
            stalls[0] += 1
        for fd, _ in ev:
            if fd == end_r:
                end = True
            else:
                work.put(fd)
    work.put(None)
    w.join()
    print("rounds", done[0], "stalls", stalls[0])
    return 0 if done[0] == nconn * rounds and not stalls[0] else 1


if __name__ == "__main__":
    sys.exit(main())
