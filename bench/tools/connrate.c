/*
 * bench/tools/connrate.c - connection setup rate and per-connection memory.
 *
 * Uses only the socket API, so it runs the same with and without
 * LD_PRELOAD=libxsock.so; the benchmark runs it both ways and compares.
 *
 *   connrate serve IP PORT          echo server: one thread, epoll,
 *                                   non-blocking sockets; prints
 *                                   "listening IP PORT" (the bound port, so
 *                                   PORT 0 works); exits 0 on SIGTERM/SIGINT
 *   connrate rate IP PORT SECONDS   socket, connect, 1-byte echo, close, in
 *                                   a loop for SECONDS; prints "conns N
 *                                   seconds S conn/s R ttfb_us p50 A p99 B
 *                                   p999 C max D"; ttfb runs from socket()
 *                                   to the echoed byte
 *   connrate hold IP PORT N         N connections open at once, each proven
 *                                   by a 1-byte echo; prints "rss_kib X"
 *                                   (own VmRSS), "fds F" (its open fds)
 *                                   and "held N", then waits for
 *                                   EOF on stdin or SIGTERM/SIGINT; a script
 *                                   that backgrounds it must feed stdin from
 *                                   a pipe or fifo (a background job's
 *                                   stdin is /dev/null: EOF at once)
 *   connrate rss PID                VmRSS of PID in KiB, a bare number
 *   connrate fds PID                open fds of PID, a bare number
 *
 * Errors: "connrate: <call>: <strerror>" on stderr and exit 1; bad usage
 * exits 2. Clients set 10 s SO_RCVTIMEO/SO_SNDTIMEO, so nothing hangs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, ppoll */
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "samples.h"

#define CONNRATE_BACKLOG      4096
#define CONNRATE_TIMEOUT_S    10 /* client SO_RCVTIMEO and SO_SNDTIMEO */
#define CONNRATE_SPARE_FDS    16 /* hold: fds besides the connections */
#define CONNRATE_BUF_LEN      (64u << 10)
#define CONNRATE_MAX_EVENTS   256
#define CONNRATE_ACCEPT_BATCH 64 /* accepts per wakeup, then echo again */

/* the signal that asked us to stop (SIGTERM or SIGINT), 0 while none */
static volatile sig_atomic_t stop_signal;

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	fputs("connrate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(err));
	exit(1);
}

static void __attribute__((noreturn)) usage(const char *why)
{
	if (why)
		fprintf(stderr, "connrate: %s\n", why);
	fputs("usage: connrate serve IP PORT\n"
	      "       connrate rate IP PORT SECONDS\n"
	      "       connrate hold IP PORT N\n"
	      "       connrate rss PID\n"
	      "       connrate fds PID\n",
	      stderr);
	exit(2);
}

/* ----------------------------------------------------------------------
 * Arguments, limits, signals, /proc
 */

static void on_stop(int sig)
{
	stop_signal = sig;
}

/*
 * Catch SIGTERM and SIGINT, and keep them blocked except inside the one
 * wait (epoll_pwait, ppoll) that gets @wait_mask: the wait unblocks them
 * atomically, so a signal arriving just after stop_signal was checked
 * still ends that wait. The handler has no SA_RESTART; waits see EINTR.
 * SIGPIPE is ignored: a peer that went away is an EPIPE, not a death.
 */
static void signals_setup(sigset_t *wait_mask)
{
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t set;

	if (sigemptyset(&sa.sa_mask) < 0 || sigemptyset(&set) < 0 ||
	    sigaddset(&set, SIGTERM) < 0 || sigaddset(&set, SIGINT) < 0)
		die("sigaddset");
	if (sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGINT, &sa, NULL) < 0)
		die("sigaction");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("signal SIGPIPE");
	if (sigprocmask(SIG_BLOCK, &set, wait_mask) < 0)
		die("sigprocmask");
	/* the parent may have left them blocked: the wait takes them anyway */
	if (sigdelset(wait_mask, SIGTERM) < 0 ||
	    sigdelset(wait_mask, SIGINT) < 0)
		die("sigdelset");
}

/* "/proc/@pid/@leaf" into @path (64 bytes). Return: 0, or -1 with errno
 * ENAMETOOLONG. */
static int proc_path(char path[64], const char *pid, const char *leaf)
{
	int n = snprintf(path, 64, "/proc/%s/%s", pid, leaf);

	if (n < 0 || n >= 64) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* Open fds of @pid ("self" or digits), or -1 with errno set. */
static long fd_count(const char *pid)
{
	char path[64];
	struct dirent *d;
	long n = 0;
	DIR *dir;

	if (proc_path(path, pid, "fd"))
		return -1;
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n - !strcmp(pid, "self"); /* the directory's own fd */
}

/* VmRSS of @pid ("self" or digits) in KiB, or -1 with errno set. */
static long rss_kib(const char *pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;
	int n;

	if (proc_path(path, pid, "status"))
		return -1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (ferror(f)) {
		n = errno;
		fclose(f);
		errno = n;
		return -1;
	}
	if (fclose(f) != 0)
		return -1;
	if (kib < 0)
		errno = ENODATA; /* a kernel thread, or a zombie */
	return kib;
}

static void stdout_flush(void)
{
	if (fflush(stdout) != 0)
		die("stdout");
}

/* ----------------------------------------------------------------------
 * serve: one thread echoes on every connection through one epoll set
 */

struct conn {
	int fd;
	char *pend;	 /* echo bytes the socket did not take yet */
	size_t pend_off; /* bytes of @pend already written */
	size_t pend_len;
	struct conn *prev, *next;
};

struct server {
	int lfd;
	int epfd;
	char *buf;		 /* the one read buffer: one thread reads */
	struct conn *conns;	 /* every open connection, for the teardown */
	unsigned long nr_errors; /* connections that ended by an error */
	int last_error;
};

static int serve_listen(const struct sockaddr_in *sin)
{
	struct sockaddr_in bound;
	socklen_t len = sizeof(bound);
	char ip[INET_ADDRSTRLEN];
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEADDR");
	if (bind(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0)
		die("bind");
	if (listen(fd, CONNRATE_BACKLOG) < 0)
		die("listen");
	if (getsockname(fd, (struct sockaddr *)&bound, &len) < 0)
		die("getsockname");
	if (!inet_ntop(AF_INET, &bound.sin_addr, ip, sizeof(ip)))
		die("inet_ntop");
	if (printf("listening %s %u\n", ip, ntohs(bound.sin_port)) < 0)
		die("stdout");
	stdout_flush();
	return fd;
}

static void conn_watch(struct server *srv, struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		die("epoll_ctl MOD");
}

/* End @c; @err is the errno that ended it, 0 for the peer's orderly close. */
static void conn_close(struct server *srv, struct conn *c, int err)
{
	if (err) {
		srv->nr_errors++;
		srv->last_error = err;
	}
	if (epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		die("epoll_ctl DEL");
	if (close(c->fd) < 0)
		die("close");
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->pend);
	free(c);
}

/*
 * Write what the socket takes of @len bytes at @p. Returns the bytes
 * written (fewer than @len when the socket is full), or -1 with errno
 * only if the socket failed.
 */
static ssize_t write_nb(int fd, const char *p, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = write(fd, p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			return -1;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/*
 * @c is readable (or failed): read once and echo. What the socket does
 * not take waits in c->pend, and the connection reads nothing more until
 * that is written (cf. TCP's receive window: the peer then blocks).
 */
static void conn_echo(struct server *srv, struct conn *c)
{
	ssize_t n, done;

	n = read(c->fd, srv->buf, CONNRATE_BUF_LEN);
	if (n == 0) {
		conn_close(srv, c, 0);
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			conn_close(srv, c, errno);
		return;
	}
	done = write_nb(c->fd, srv->buf, (size_t)n);
	if (done < 0) {
		conn_close(srv, c, errno);
		return;
	}
	if (done == n)
		return;
	c->pend_len = (size_t)(n - done);
	c->pend_off = 0;
	c->pend = malloc(c->pend_len);
	if (!c->pend)
		die("malloc");
	memcpy(c->pend, srv->buf + done, c->pend_len);
	conn_watch(srv, c, EPOLLOUT);
}

/* @c has bytes pending and is writable (or failed): write more of them. */
static void conn_flush(struct server *srv, struct conn *c)
{
	ssize_t done;

	done = write_nb(c->fd, c->pend + c->pend_off,
			c->pend_len - c->pend_off);
	if (done < 0) {
		conn_close(srv, c, errno);
		return;
	}
	c->pend_off += (size_t)done;
	if (c->pend_off < c->pend_len)
		return;
	free(c->pend);
	c->pend = NULL;
	conn_watch(srv, c, EPOLLIN);
}

/* accept(2) errors that end only the connection being accepted */
static int accept_transient(int err)
{
	switch (err) {
	case EINTR:
	case ECONNABORTED:
	case EPROTO:
	case EPERM:
	case ENETDOWN:
	case ENETUNREACH:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case EHOSTUNREACH:
	case ENONET:
	case EOPNOTSUPP:
		return 1;
	default:
		return 0;
	}
}

/*
 * Accept up to a batch of pending connections (the listener is level
 * triggered: more wake us again, after the echoes of this round). Out of
 * fds or memory is fatal: a server that cannot accept would make the
 * clients measure a hang, not a rate.
 */
static void serve_accept(struct server *srv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct conn *c;
	int i, fd, one = 1;

	for (i = 0; i < CONNRATE_ACCEPT_BATCH; i++) {
		fd = accept4(srv->lfd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (accept_transient(errno))
				continue;
			die("accept4");
		}
		c = calloc(1, sizeof(*c));
		if (!c)
			die("calloc");
		c->fd = fd;
		c->next = srv->conns;
		if (c->next)
			c->next->prev = c;
		srv->conns = c;
		ev.data.ptr = c;
		if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			die("epoll_ctl ADD");
		/* a reset before this call ends only this connection */
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			       sizeof(one)) < 0)
			conn_close(srv, c, errno);
	}
}

static int do_serve(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	struct epoll_event evs[CONNRATE_MAX_EVENTS];
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct server srv = { .lfd = -1 };
	sigset_t wait_mask;
	struct conn *c;
	int i, n;

	signals_setup(&wait_mask);
	args_nofile_raise();
	srv.buf = malloc(CONNRATE_BUF_LEN);
	if (!srv.buf)
		die("malloc");
	srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv.epfd < 0)
		die("epoll_create1");
	srv.lfd = serve_listen(&sin);
	/* data.ptr NULL is the listener, anything else a struct conn */
	if (epoll_ctl(srv.epfd, EPOLL_CTL_ADD, srv.lfd, &ev) < 0)
		die("epoll_ctl ADD listener");

	while (!stop_signal) {
		n = epoll_pwait(srv.epfd, evs, CONNRATE_MAX_EVENTS, -1,
				&wait_mask);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_pwait");
		/* each connection appears once and only its handler closes it */
		for (i = 0; i < n; i++) {
			c = evs[i].data.ptr;
			if (!c)
				serve_accept(&srv);
			else if (c->pend)
				conn_flush(&srv, c);
			else
				conn_echo(&srv, c);
		}
	}

	while (srv.conns)
		conn_close(&srv, srv.conns, 0);
	if (close(srv.lfd) < 0)
		die("close listener");
	if (close(srv.epfd) < 0)
		die("close epoll");
	free(srv.buf);
	if (srv.nr_errors)
		fprintf(stderr,
			"connrate: serve: %lu connections ended by an error, "
			"the last: %s\n",
			srv.nr_errors, strerror(srv.last_error));
	return 0;
}

/* ----------------------------------------------------------------------
 * Clients: rate and hold
 */

/*
 * One blocking connection to @sin, proven by a 1-byte echo. Returns the
 * fd, or -1 with errno set and *@call naming what failed. Timeouts
 * (CONNRATE_TIMEOUT_S) are reported as ETIMEDOUT.
 */
static int dial_echo(const struct sockaddr_in *sin, const char **call)
{
	struct timeval tv = { .tv_sec = CONNRATE_TIMEOUT_S };
	int fd, one = 1, err;
	char c = 0;
	ssize_t n;

	*call = "socket";
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	*call = "setsockopt SO_RCVTIMEO";
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		goto out_close;
	/* SO_SNDTIMEO also bounds a blocking connect() */
	*call = "setsockopt SO_SNDTIMEO";
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		goto out_close;
	*call = "connect";
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0) {
		if (errno == EINPROGRESS) /* the send timeout expired */
			errno = ETIMEDOUT;
		goto out_close;
	}
	*call = "setsockopt TCP_NODELAY";
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		goto out_close;
	*call = "write";
	do
		n = write(fd, "x", 1);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		if (n == 0)
			errno = EIO;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			errno = ETIMEDOUT;
		goto out_close;
	}
	*call = "read";
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			errno = ETIMEDOUT;
		goto out_close;
	}
	if (n == 0 || c != 'x') {
		*call = n ? "read: not the byte sent"
			  : "read: EOF before the echo";
		errno = EPROTO;
		goto out_close;
	}
	return fd;

out_close:
	err = errno;
	close(fd); /* the first error is the one to report */
	errno = err;
	return -1;
}

static int do_rate(const char *ip, const char *port, const char *secs)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	struct samples s = { 0 };
	uint64_t start, end, t0, t1;
	const char *call;
	double seconds;
	char *tail;
	int fd;

	errno = 0;
	seconds = strtod(secs, &tail);
	if (errno || tail == secs || *tail || !isfinite(seconds) ||
	    seconds <= 0 || seconds > 1e6)
		usage("SECONDS must be a number above 0");
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die("signal SIGPIPE");

	start = args_now_ns();
	end = start + (uint64_t)(seconds * 1e9);
	/* at least one connection, so the percentiles always exist */
	for (;;) {
		t0 = args_now_ns();
		if (t0 >= end && s.nr)
			break;
		fd = dial_echo(&sin, &call);
		if (fd < 0)
			die("%s", call);
		t1 = args_now_ns();
		if (close(fd) < 0)
			die("close");
		if (samples_add(&s, t1 - t0))
			die("realloc %zu samples", s.nr);
	}

	samples_sort(&s);
	seconds = (double)(t0 - start) / 1e9;
	if (printf("conns %zu seconds %.3f conn/s %.1f ttfb_us p50 %.1f "
		   "p99 %.1f p999 %.1f max %.1f\n",
		   s.nr, seconds, (double)s.nr / seconds,
		   samples_pct_us(&s, 0.50), samples_pct_us(&s, 0.99),
		   samples_pct_us(&s, 0.999), samples_pct_us(&s, 1.0)) < 0)
		die("stdout");
	stdout_flush();
	free(s.v);
	return 0;
}

/*
 * Wait for EOF on stdin or for SIGTERM/SIGINT. Without an open stdin
 * only a signal ends the wait.
 */
static void hold_wait(const sigset_t *wait_mask, int have_stdin)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char buf[512];
	ssize_t n;

	while (!stop_signal) {
		pfd.revents = 0;
		if (ppoll(&pfd, have_stdin ? 1 : 0, NULL, wait_mask) < 0) {
			if (errno == EINTR)
				continue;
			die("ppoll");
		}
		if (!pfd.revents)
			continue;
		if (pfd.revents & POLLNVAL)
			return; /* stdin was closed under us: as good as EOF */
		n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n == 0)
			return;
		if (n < 0 && errno != EINTR && errno != EAGAIN &&
		    errno != EWOULDBLOCK)
			die("read stdin");
	}
}

/* 1 if SIGTERM or SIGINT waits, blocked, to end us */
static int stop_pending(void)
{
	sigset_t set;

	if (sigpending(&set) < 0)
		die("sigpending");
	return sigismember(&set, SIGTERM) == 1 ||
	       sigismember(&set, SIGINT) == 1;
}

static int do_hold(const char *ip, const char *port, const char *count)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	long n = count_parse(count, 0, 1L << 30, "N must be a count from 0"), i;
	const char *call;
	sigset_t wait_mask;
	int *fds, have_stdin;
	rlim_t limit;
	long kib, nfd;

	/* before any socket() can take fd 0 */
	have_stdin = fcntl(STDIN_FILENO, F_GETFD) >= 0;
	signals_setup(&wait_mask);
	limit = args_nofile_raise();
	if ((rlim_t)n + CONNRATE_SPARE_FDS > limit) {
		errno = EMFILE;
		die("hold: %ld connections need %ld fds, RLIMIT_NOFILE hard "
		    "limit is %llu",
		    n, n + CONNRATE_SPARE_FDS, (unsigned long long)limit);
	}
	fds = calloc(n ? (size_t)n : 1, sizeof(*fds));
	if (!fds)
		die("calloc");

	for (i = 0; i < n; i++) {
		if (stop_pending()) {
			errno = EINTR;
			die("hold: stopped after %ld of %ld connections", i, n);
		}
		fds[i] = dial_echo(&sin, &call);
		if (fds[i] < 0)
			die("%s (connection %ld of %ld)", call, i + 1, n);
	}
	kib = rss_kib("self");
	if (kib < 0)
		die("VmRSS of /proc/self/status");
	nfd = fd_count("self");
	if (nfd < 0)
		die("/proc/self/fd");
	if (printf("rss_kib %ld\nfds %ld\nheld %ld\n", kib, nfd, n) < 0)
		die("stdout");
	stdout_flush();

	hold_wait(&wait_mask, have_stdin);
	for (i = 0; i < n; i++)
		if (close(fds[i]) < 0)
			die("close");
	free(fds);
	return 0;
}

/* connrate rss PID, connrate fds PID: VmRSS of PID in KiB (@fds false),
 * or its open fds, a bare number */
static int do_proc(const char *pid, bool fds)
{
	long v;

	if (!*pid || strspn(pid, "0123456789") != strlen(pid))
		usage("PID must be a process id");
	v = fds ? fd_count(pid) : rss_kib(pid);
	if (v < 0 && fds)
		die("/proc/%s/fd", pid);
	if (v < 0)
		die("VmRSS of /proc/%s/status", pid);
	if (printf("%ld\n", v) < 0)
		die("stdout");
	stdout_flush();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "serve"))
		return do_serve(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "rate"))
		return do_rate(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "hold"))
		return do_hold(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "rss"))
		return do_proc(argv[2], false);
	if (argc == 3 && !strcmp(argv[1], "fds"))
		return do_proc(argv[2], true);
	usage(NULL);
}
