/*
 * tests/tools/evconf.c - event-by-event conformance of epoll, poll and
 * select: xsock against kernel TCP.
 *
 * A plain socket program: it runs the same with and without
 * LD_PRELOAD=libxsock.so. The test runs `run` once over kernel TCP and once
 * over xsock and requires the two outputs to be byte-identical; so the
 * output holds only what the kernel's semantics fix (events, return values,
 * errno names, data.u64), never a byte count that depends on buffer sizes,
 * a time, or an fd number.
 *
 *   evconf peer IP PORT   the scripted peer: listens on IP:PORT and serves
 *                         pairs of connections, one pair at a time, until
 *                         killed: a control connection (answered "ready\n"
 *                         when accepted), then a data connection. Each
 *                         command line on the control connection acts on
 *                         the data connection and is answered "ok\n" (or
 *                         "ok N\n", or "err NAME\n"):
 *                           write N   write N bytes of the pattern, fully
 *                           read N    read exactly N bytes, check them
 *                           drain     read until nothing came for 200 ms
 *                           count     "ok N": bytes read so far
 *                           shutwr, shutrd   shutdown(2)
 *                           close     close(2)
 *                           reset     SO_LINGER {1, 0}, then close (RST)
 *                           quit      end this pair, accept the next
 *   evconf run IP PORT    the checked side: a fixed list of scenarios, one
 *                         line per observation; exit 0 when it completed
 *                         (mismatches are the test's to find), 1 on a
 *                         setup failure
 *
 * Both directions of a data connection carry one pattern, byte(off) =
 * off % 251 where off counts the bytes of that direction, so every read
 * is checked wherever it starts. Waits that expect an event use generous
 * timeouts (2 s and more); waits that expect none use 100 ms.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DATA_MAGIC 0x1122334455667788ull
#define NOTHING_MS 100	/* a wait that expects no event */
#define READY_MS   2000 /* a wait that expects one */
#define HIGH_FD	   1500 /* above FD_SETSIZE */

static void die(const char *what)
{
	fprintf(stderr, "evconf: %s: %s\n", what, strerror(errno));
	exit(1);
}

static const char *errname(int e)
{
	static const struct {
		int e;
		const char *name;
	} names[] = {
		{ EAGAIN, "EAGAIN" },
		{ EBADF, "EBADF" },
		{ EBADMSG, "EBADMSG" },
		{ ECONNRESET, "ECONNRESET" },
		{ EEXIST, "EEXIST" },
		{ EFAULT, "EFAULT" },
		{ EINTR, "EINTR" },
		{ EINVAL, "EINVAL" },
		{ EIO, "EIO" },
		{ ELOOP, "ELOOP" },
		{ ENODATA, "ENODATA" },
		{ ENOENT, "ENOENT" },
		{ ENOSYS, "ENOSYS" },
		{ ENOTCONN, "ENOTCONN" },
		{ EPERM, "EPERM" },
		{ EPIPE, "EPIPE" },
		{ ETIMEDOUT, "ETIMEDOUT" },
	};
	static char buf[32];
	size_t i;

	if (!e)
		return "0";
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].e == e)
			return names[i].name;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A number that names no open fd now (a socket's, closed at once). */
static int closed_fd(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	close(fd);
	return fd;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	sin.sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
		errno = EINVAL;
		die(ip);
	}
	return sin;
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 ||
	    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
		die("fcntl");
}

/* ------------------------------------------------------------- pattern */

static void pat_fill(unsigned char *p, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)((off + i) % 251);
}

/* Whether @p holds the pattern from @off on. */
static int pat_ok(const unsigned char *p, size_t len, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (unsigned char)((off + i) % 251))
			return 0;
	return 1;
}

/* ------------------------------------------------------------ line I/O */

struct lines {
	int fd;
	char buf[256];
	size_t len;
};

/* The next line without its newline into @out; -1 at EOF or on error. */
static int line_get(struct lines *l, char *out, size_t cap)
{
	char *nl;
	ssize_t n;

	for (;;) {
		nl = memchr(l->buf, '\n', l->len);
		if (nl) {
			size_t k = (size_t)(nl - l->buf);

			if (k >= cap)
				k = cap - 1;
			memcpy(out, l->buf, k);
			out[k] = '\0';
			l->len -= (size_t)(nl - l->buf) + 1;
			memmove(l->buf, nl + 1, l->len);
			return 0;
		}
		if (l->len == sizeof(l->buf))
			l->len = 0; /* a line too long: dropped */
		n = read(l->fd, l->buf + l->len, sizeof(l->buf) - l->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		l->len += (size_t)n;
	}
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---------------------------------------------------------------- peer */

struct peer {
	int ctl, data;
	uint64_t tx_off, rx_off;
	unsigned char buf[1 << 16];
};

/* Read @want bytes (or, with @want 0, until 200 ms pass without any) and
 * check them. Return: 0, or an errno (ENODATA for an early EOF). */
static int peer_read(struct peer *p, uint64_t want, int drain)
{
	struct pollfd pfd = { p->data, POLLIN, 0 };
	ssize_t n;
	size_t chunk;
	int rc;

	while (drain || want) {
		if (drain) {
			rc = poll(&pfd, 1, 200);
			if (rc < 0 && errno == EINTR)
				continue;
			if (rc < 0)
				return errno;
			if (rc == 0)
				return 0;
		}
		chunk = sizeof(p->buf);
		if (!drain && want < chunk)
			chunk = (size_t)want;
		n = read(p->data, p->buf, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return drain ? 0 : ENODATA;
		if (!pat_ok(p->buf, (size_t)n, p->rx_off))
			return EBADMSG;
		p->rx_off += (uint64_t)n;
		if (!drain)
			want -= (uint64_t)n;
	}
	return 0;
}

static int peer_write(struct peer *p, uint64_t len)
{
	size_t chunk;

	while (len) {
		chunk = len < sizeof(p->buf) ? (size_t)len : sizeof(p->buf);
		pat_fill(p->buf, chunk, p->tx_off);
		if (write_all(p->data, p->buf, chunk) < 0)
			return errno;
		p->tx_off += chunk;
		len -= chunk;
	}
	return 0;
}

/* One command; return: 0 (ok), an errno, or -1 for quit. */
static int peer_do(struct peer *p, const char *cmd, char *extra, size_t cap)
{
	struct linger lg = { 1, 0 };
	unsigned long long n = 0;
	char verb[16] = "";

	extra[0] = '\0';
	if (sscanf(cmd, "%15s %llu", verb, &n) < 1)
		return EINVAL;
	if (!strcmp(verb, "quit"))
		return -1;
	if (!strcmp(verb, "count")) {
		snprintf(extra, cap, " %llu", (unsigned long long)p->rx_off);
		return 0;
	}
	if (p->data < 0)
		return EBADF;
	if (!strcmp(verb, "write"))
		return peer_write(p, n);
	if (!strcmp(verb, "read"))
		return peer_read(p, n, 0);
	if (!strcmp(verb, "drain"))
		return peer_read(p, 0, 1);
	if (!strcmp(verb, "shutwr") || !strcmp(verb, "shutrd"))
		return shutdown(p->data, verb[4] == 'w' ? SHUT_WR : SHUT_RD)
			       ? errno
			       : 0;
	if (!strcmp(verb, "reset") &&
	    setsockopt(p->data, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		return errno;
	if (!strcmp(verb, "close") || !strcmp(verb, "reset")) {
		int rc = close(p->data);

		p->data = -1;
		return rc ? errno : 0;
	}
	return EINVAL;
}

static void peer_session(struct peer *p)
{
	struct lines in = { .fd = p->ctl };
	char cmd[128], extra[32], reply[64];
	int rc;

	while (line_get(&in, cmd, sizeof(cmd)) == 0) {
		rc = peer_do(p, cmd, extra, sizeof(extra));
		if (rc > 0)
			snprintf(reply, sizeof(reply), "err %s\n", errname(rc));
		else
			snprintf(reply, sizeof(reply), "ok%s\n", extra);
		if (write_all(p->ctl, reply, strlen(reply)) < 0 || rc < 0)
			break;
	}
}

static int peer_accept(int lfd)
{
	int fd;

	while ((fd = accept(lfd, NULL, NULL)) < 0)
		if (errno != EINTR && errno != ECONNABORTED)
			die("accept");
	return fd;
}

static int do_peer(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	int lfd, one = 1, rcvbuf = 65536;
	static struct peer p;

	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A small kernel receive buffer (inherited by accepted sockets)
	 * fills the run side's send path in a few rounds, not dozens. */
	setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("bind");
	if (listen(lfd, 16) < 0)
		die("listen");
	printf("listening\n");
	for (;;) {
		p.ctl = peer_accept(lfd);
		if (write_all(p.ctl, "ready\n", 6) < 0) {
			close(p.ctl);
			continue;
		}
		p.data = peer_accept(lfd);
		p.tx_off = p.rx_off = 0;
		peer_session(&p);
		close(p.ctl);
		if (p.data >= 0)
			close(p.data);
	}
	return 0;
}

/* ----------------------------------------------------------------- run */

static struct lines ctl_in;
static int ctl = -1;
static uint64_t tx_off, rx_off; /* of the current data connection */

/* Send command @fmt to the peer; its reply into @reply (NULL: printed
 * under @name unless "ok"). Return: 0 for "ok...", -1 otherwise. */
static int peer_cmd(const char *name, char *reply, size_t cap, const char *fmt,
		    ...)
{
	char cmd[128], line[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
	va_end(ap);
	cmd[n] = '\n';
	if (write_all(ctl, cmd, (size_t)n + 1) < 0)
		die("control write");
	if (line_get(&ctl_in, line, sizeof(line)) < 0)
		die("control read");
	if (reply)
		snprintf(reply, cap, "%s", line);
	if (!strncmp(line, "ok", 2))
		return 0;
	if (!reply)
		printf("%s: peer %.*s: %s\n", name, n, cmd, line);
	return -1;
}

#define PEER(name, ...) peer_cmd(name, NULL, 0, __VA_ARGS__)

static int connect_to(const struct sockaddr_in *sin, int sndbuf)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	if (sndbuf &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)))
		die("setsockopt SO_SNDBUF");
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0)
		die("connect");
	return fd;
}

/* Control, then (once the peer took it) data. Return: the data fd. */
static int run_pair(const struct sockaddr_in *sin)
{
	struct timeval tv = { 30, 0 };
	char line[32];
	int data;

	ctl = connect_to(sin, 0);
	/* a peer that stops answering fails the run, not the test's clock */
	setsockopt(ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ctl_in = (struct lines){ .fd = ctl };
	if (line_get(&ctl_in, line, sizeof(line)) < 0 || strcmp(line, "ready"))
		die("control: no ready from the peer");
	/* A small send buffer: full in a few rounds over kernel TCP. */
	data = connect_to(sin, 65536);
	tx_off = rx_off = 0;
	return data;
}

static void run_unpair(int data)
{
	PEER("quit", "quit");
	close(ctl);
	if (data >= 0)
		close(data);
}

/* Event bits in a fixed order, '|'-joined; "-" for none. */
static const char *ev_str(uint32_t ev)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{ EPOLLIN, "IN" },	   { EPOLLOUT, "OUT" },
		{ EPOLLRDHUP, "RDHUP" },   { EPOLLPRI, "PRI" },
		{ EPOLLERR, "ERR" },	   { EPOLLHUP, "HUP" },
		{ POLLNVAL, "NVAL" },	   { EPOLLRDNORM, "RDNORM" },
		{ EPOLLRDBAND, "RDBAND" }, { EPOLLWRNORM, "WRNORM" },
		{ EPOLLWRBAND, "WRBAND" }, { EPOLLMSG, "MSG" },
	};
	static char buf[160];
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(ev & names[i].bit))
			continue;
		ev &= ~names[i].bit;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
					len ? "|" : "", names[i].name);
	}
	if (ev)
		snprintf(buf + len, sizeof(buf) - len, "%s0x%x", len ? "|" : "",
			 ev);
	return buf[0] ? buf : "-";
}

static int ev_cmp(const void *a, const void *b)
{
	const struct epoll_event *x = a, *y = b;

	return x->data.u64 < y->data.u64 ? -1 : x->data.u64 > y->data.u64;
}

/* Print an epoll_wait result: "NAME: epoll_wait=N events=... data=0x...",
 * events sorted by data (the order of a ready list is not semantics). */
static void ep_print(const char *name, const char *call, int n, int err,
		     struct epoll_event *ev)
{
	int i;

	if (n < 0) {
		printf("%s: %s=-1 errno=%s\n", name, call, errname(err));
		return;
	}
	qsort(ev, (size_t)n, sizeof(*ev), ev_cmp);
	printf("%s: %s=%d", name, call, n);
	for (i = 0; i < n; i++)
		printf(" events=%s data=0x%016llx", ev_str(ev[i].events),
		       (unsigned long long)ev[i].data.u64);
	printf("\n");
}

static int ep_show(const char *name, int ep, int timeout_ms)
{
	struct epoll_event ev[8];
	int n = epoll_wait(ep, ev, 8, timeout_ms);

	ep_print(name, "epoll_wait", n, errno, ev);
	return n;
}

static int ep_make(int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		die("epoll_create1");
	if (fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl ADD");
	return ep;
}

static void ctl_show(const char *name, int ep, int op, int fd, uint32_t events,
		     int null_event)
{
	struct epoll_event ev = { .events = events, .data.u64 = DATA_MAGIC };
	int rc = epoll_ctl(ep, op, fd, null_event ? NULL : &ev);

	printf("%s: epoll_ctl=%d errno=%s\n", name, rc,
	       errname(rc ? errno : 0));
}

/* poll @n entries; "NAME: poll=RC revents=A,B,..." */
static int poll_show(const char *name, struct pollfd *fds, nfds_t n,
		     int timeout_ms)
{
	int rc = poll(fds, n, timeout_ms), err = errno;
	nfds_t i;

	if (rc < 0) {
		printf("%s: poll=-1 errno=%s\n", name, errname(err));
		return rc;
	}
	printf("%s: poll=%d revents=", name, rc);
	for (i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", ev_str((uint32_t)fds[i].revents));
	printf("\n");
	return rc;
}

static int poll1_show(const char *name, int fd, short events, int timeout_ms)
{
	struct pollfd p = { fd, events, 0 };

	return poll_show(name, &p, 1, timeout_ms);
}

/* Wait (FIONREAD, not a readiness call) until @len bytes are readable,
 * so that the observation after it does not race the data's arrival. */
static void settle(const char *name, int fd, int len)
{
	uint64_t end = now_us() + 10 * 1000000u;
	int avail = 0;

	while (now_us() < end) {
		if (ioctl(fd, FIONREAD, &avail) < 0) {
			printf("%s: FIONREAD: %s\n", name, errname(errno));
			return;
		}
		if (avail >= len)
			return;
		sleep_ms(1);
	}
	printf("%s: settle: %d bytes of %d after 10 s\n", name, avail, len);
}

/* Read @len bytes (blocking fd) and check the pattern. */
static void rd(const char *name, int fd, size_t len)
{
	unsigned char buf[4096];
	size_t chunk;
	ssize_t n;

	while (len) {
		chunk = len < sizeof(buf) ? len : sizeof(buf);
		n = read(fd, buf, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			printf("%s: read=%zd errno=%s\n", name, n,
			       errname(n ? errno : 0));
			return;
		}
		if (!pat_ok(buf, (size_t)n, rx_off))
			printf("%s: data differs from the pattern\n", name);
		rx_off += (uint64_t)n;
		len -= (size_t)n;
	}
}

/* Read a non-blocking fd until EAGAIN. Return: bytes read. */
static long rd_all(const char *name, int fd)
{
	unsigned char buf[4096];
	long total = 0;
	ssize_t n;

	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN)
				printf("%s: read=-1 errno=%s\n", name,
				       errname(errno));
			if (n == 0)
				printf("%s: read=0\n", name);
			return total;
		}
		if (!pat_ok(buf, (size_t)n, rx_off))
			printf("%s: data differs from the pattern\n", name);
		rx_off += (uint64_t)n;
		total += n;
	}
}

/*
 * Write @chunk-byte writes on non-blocking @fd until the send path stays
 * full: EAGAIN again after a 100 ms pause (bytes in flight can free room
 * for a while after the first EAGAIN). Prints only that EAGAIN happened:
 * how much fits depends on the transport.
 */
static void fill(const char *name, int fd, size_t chunk)
{
	static unsigned char buf[1 << 16];
	int round, wrote;
	ssize_t n;

	set_nonblock(fd, 1);
	for (round = 0; round < 100; round++) {
		wrote = 0;
		for (;;) {
			pat_fill(buf, chunk, tx_off);
			n = write(fd, buf, chunk);
			if (n > 0) {
				tx_off += (uint64_t)n;
				wrote = 1;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		if (n == 0 || errno != EAGAIN) {
			printf("%s: write=%zd errno=%s\n", name, n,
			       errname(n ? errno : 0));
			set_nonblock(fd, 0);
			return;
		}
		if (!wrote && round > 0) {
			printf("%s: write until full: EAGAIN\n", name);
			set_nonblock(fd, 0);
			return;
		}
		sleep_ms(100);
	}
	printf("%s: write until full: never full\n", name);
	set_nonblock(fd, 0);
}

/* Make the peer read what it has not read yet, so both ends agree. */
static void sync_peer(const char *name)
{
	char reply[64];
	unsigned long long got = 0;

	if (peer_cmd(name, reply, sizeof(reply), "count") < 0 ||
	    sscanf(reply, "ok %llu", &got) != 1) {
		printf("%s: peer count: %s\n", name, reply);
		return;
	}
	if (got > tx_off)
		printf("%s: peer read more than was written\n", name);
	else if (got < tx_off)
		PEER(name, "read %llu", (unsigned long long)(tx_off - got));
}

static void elapsed_show(const char *name, const char *call, int rc, int err,
			 uint64_t t0, int min_ms)
{
	uint64_t us = now_us() - t0;

	printf("%s: %s=%d errno=%s %s\n", name, call, rc, errname(rc ? err : 0),
	       us >= (uint64_t)min_ms * 1000u ? "slept" : "too short");
}

/* 1. Level-triggered: readiness stays while it holds. */
static void sc_lt(int fd)
{
	int ep = ep_make(fd, EPOLLIN | EPOLLOUT, DATA_MAGIC);

	PEER("lt", "write 100");
	settle("lt", fd, 100);
	ep_show("lt-in-1", ep, READY_MS);
	ep_show("lt-in-2", ep, READY_MS);
	rd("lt", fd, 50);
	ep_show("lt-half", ep, NOTHING_MS);
	rd("lt", fd, 50);
	ep_show("lt-read", ep, NOTHING_MS);
	close(ep);
}

/* 2. Edge-triggered: one event per edge, none for data still there. */
static void sc_et(int fd)
{
	int ep = ep_make(fd, EPOLLIN | EPOLLET, DATA_MAGIC + 2);

	set_nonblock(fd, 1);
	ep_show("et-empty", ep, NOTHING_MS);
	PEER("et", "write 100");
	ep_show("et-1", ep, READY_MS); /* sleeps until the data comes */
	ep_show("et-again", ep, NOTHING_MS);
	PEER("et", "write 100");
	ep_show("et-2", ep, READY_MS);
	printf("et-read: %ld bytes until EAGAIN\n", rd_all("et-read", fd));
	ep_show("et-drained", ep, NOTHING_MS);
	close(ep);

	/* IN|OUT|ET: writable once, then the next edge (data) reports both */
	ep = ep_make(fd, EPOLLIN | EPOLLOUT | EPOLLET, DATA_MAGIC + 3);
	ep_show("etio-1", ep, READY_MS);
	ep_show("etio-again", ep, NOTHING_MS);
	PEER("etio", "write 100");
	settle("etio", fd, 100);
	ep_show("etio-2", ep, READY_MS);
	ep_show("etio-again2", ep, NOTHING_MS);
	printf("etio-read: %ld bytes until EAGAIN\n", rd_all("etio-read", fd));
	ep_show("etio-drained", ep, NOTHING_MS);
	set_nonblock(fd, 0);
	close(ep);
}

/* 3. One-shot: one event, then none until EPOLL_CTL_MOD re-arms. */
static void sc_oneshot(int fd)
{
	struct epoll_event ev = { EPOLLIN | EPOLLONESHOT,
				  { .u64 = DATA_MAGIC + 4 } };
	int ep = ep_make(fd, ev.events, DATA_MAGIC + 14);

	PEER("oneshot", "write 100");
	ep_show("oneshot-1", ep, READY_MS);
	ep_show("oneshot-again", ep, NOTHING_MS);
	PEER("oneshot", "write 100");
	settle("oneshot", fd, 200);
	ep_show("oneshot-more", ep, NOTHING_MS);
	printf("oneshot-mod: epoll_ctl=%d\n",
	       epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
	ep_show("oneshot-rearmed", ep, READY_MS);
	ep_show("oneshot-again2", ep, NOTHING_MS);
	rd("oneshot", fd, 200);
	ev.events = EPOLLIN;
	printf("oneshot-mod-lt: epoll_ctl=%d\n",
	       epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
	ep_show("oneshot-lt-empty", ep, NOTHING_MS);
	close(ep);
}

/* 4. Two fds of one socket (dup) in one set: each is its own member, and
 * removing one leaves the other reporting; with both gone, nothing. */
static void sc_dup(int fd)
{
	struct epoll_event ev = { EPOLLIN, { .u64 = DATA_MAGIC + 16 } };
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 15);
	int d = dup(fd);

	if (d < 0)
		die("dup");
	printf("dup-add: epoll_ctl=%d\n", epoll_ctl(ep, EPOLL_CTL_ADD, d, &ev));
	ctl_show("dup-add-again", ep, EPOLL_CTL_ADD, d, EPOLLIN, 0);
	PEER("dup", "write 100");
	settle("dup", fd, 100);
	ep_show("dup-both", ep, READY_MS);
	ctl_show("dup-del-first", ep, EPOLL_CTL_DEL, fd, 0, 1);
	ep_show("dup-second", ep, READY_MS);
	ctl_show("dup-del-first-again", ep, EPOLL_CTL_DEL, fd, 0, 1);
	ev.events = EPOLLIN | EPOLLOUT;
	printf("dup-mod-second: epoll_ctl=%d\n",
	       epoll_ctl(ep, EPOLL_CTL_MOD, d, &ev));
	ep_show("dup-second-io", ep, READY_MS);
	ctl_show("dup-del-second", ep, EPOLL_CTL_DEL, d, 0, 1);
	ep_show("dup-none", ep, NOTHING_MS);
	rd("dup", fd, 100);
	/* back in, the first fd alone: its socket's news still wakes */
	ev.events = EPOLLIN;
	ev.data.u64 = DATA_MAGIC + 15;
	printf("dup-readd-first: epoll_ctl=%d\n",
	       epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	ep_show("dup-readd-empty", ep, NOTHING_MS);
	PEER("dup", "write 100");
	ep_show("dup-readd", ep, READY_MS);
	rd("dup", fd, 100);
	close(d);
	close(ep);
}

/* 4b. A registration belongs to the open file, not to the number: a
 * member whose fd is closed while a dup (and the scenario's fd) keep the
 * socket is reported with its data, even after the dup closes too; a dup
 * that was never added is no member. */
static void sc_dup_close(int fd)
{
	int e = dup(fd), d, ep;

	if (e < 0)
		die("dup");
	ep = ep_make(e, EPOLLIN, DATA_MAGIC + 17);
	d = dup(e);
	if (d < 0)
		die("dup");
	close(e);
	ep_show("dupclose-idle", ep, NOTHING_MS);
	PEER("dupclose", "write 100");
	settle("dupclose", fd, 100);
	ep_show("dupclose-closed-member", ep, READY_MS);
	ctl_show("dupclose-del-dup", ep, EPOLL_CTL_DEL, d, 0, 1);
	close(d);
	ep_show("dupclose-dup-closed", ep, READY_MS);
	rd("dupclose", fd, 100);
	ep_show("dupclose-read", ep, NOTHING_MS);
	close(ep);
}

/* 5. EPOLLOUT comes back once the peer frees the send window. */
static void sc_out(int fd)
{
	int ep = ep_make(fd, EPOLLOUT, DATA_MAGIC + 5);

	ep_show("out-before", ep, READY_MS);
	fill("out-full", fd, 65536); /* beyond the eager limit */
	ep_show("out-full", ep, NOTHING_MS);
	poll1_show("out-full-poll", fd, POLLOUT, 0);
	PEER("out", "drain");
	ep_show("out-drained", ep, 5000);
	sync_peer("out");
	close(ep);
}

/* 6. epoll_ctl's errors, each as the kernel orders its checks. */
static void sc_ctl(int fd)
{
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 6), ep2, ep3, file;
	int pfd[2];

	ctl_show("ctl-add-twice", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 0);
	ctl_show("ctl-mod-member", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT,
		 0);
	ctl_show("ctl-mod-exclusive", ep, EPOLL_CTL_MOD, fd,
		 EPOLLIN | EPOLLEXCLUSIVE, 0);
	ctl_show("ctl-op-invalid", ep, 99, fd, EPOLLIN, 0);
	ctl_show("ctl-del-member", ep, EPOLL_CTL_DEL, fd, 0, 1);
	ctl_show("ctl-del-again", ep, EPOLL_CTL_DEL, fd, 0, 1);
	ctl_show("ctl-mod-nonmember", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 0);
	ctl_show("ctl-add-null", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1);
	ctl_show("ctl-add-excl-oneshot", ep, EPOLL_CTL_ADD, fd,
		 EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, 0);
	ctl_show("ctl-add-exclusive", ep, EPOLL_CTL_ADD, fd,
		 EPOLLIN | EPOLLEXCLUSIVE, 0);
	ctl_show("ctl-mod-of-exclusive", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 0);
	ctl_show("ctl-add-excl-rdhup", ep, EPOLL_CTL_ADD, fd,
		 EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE, 0);
	ep_show("ctl-exclusive-wait", ep, NOTHING_MS);

	ctl_show("ctl-add-closed", ep, EPOLL_CTL_ADD, closed_fd(), EPOLLIN, 0);
	ctl_show("ctl-add-self", ep, EPOLL_CTL_ADD, ep, EPOLLIN, 0);
	ep2 = ep_make(-1, 0, 0);
	ctl_show("ctl-add-epoll", ep2, EPOLL_CTL_ADD, ep, EPOLLIN, 0);
	ctl_show("ctl-add-loop", ep, EPOLL_CTL_ADD, ep2, EPOLLIN, 0);
	file = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	ctl_show("ctl-add-file", ep, EPOLL_CTL_ADD, file, EPOLLIN, 0);
	close(file);
	if (pipe(pfd) < 0)
		die("pipe");
	ctl_show("ctl-epfd-pipe", pfd[0], EPOLL_CTL_ADD, fd, EPOLLIN, 0);
	ctl_show("ctl-epfd-closed", closed_fd(), EPOLL_CTL_ADD, fd, EPOLLIN, 0);
	close(pfd[0]);
	close(pfd[1]);
	ep3 = ep_make(-1, 0, 0);
	ctl_show("ctl-fresh-mod", ep3, EPOLL_CTL_MOD, fd, EPOLLIN, 0);
	ctl_show("ctl-fresh-del", ep3, EPOLL_CTL_DEL, fd, 0, 1);
	{
		struct epoll_event ev[1];
		int n = epoll_wait(ep3, ev, 0, 0);

		ep_print("ctl-wait-max0", "epoll_wait", n, errno, ev);
	}
	close(ep3);
	close(ep2);
	close(ep);
}

/* 7. An epoll fd inside poll() and inside another epoll set. */
static void sc_nested(int fd)
{
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 7);
	int outer = ep_make(ep, EPOLLIN, DATA_MAGIC + 8);

	poll1_show("nest-poll-empty", ep, POLLIN, NOTHING_MS);
	ep_show("nest-outer-empty", outer, NOTHING_MS);
	PEER("nest", "write 100");
	poll1_show("nest-poll", ep, POLLIN, READY_MS);
	ep_show("nest-outer", outer, READY_MS);
	ep_show("nest-inner", ep, READY_MS);
	rd("nest", fd, 100);
	poll1_show("nest-poll-read", ep, POLLIN, NOTHING_MS);
	ep_show("nest-outer-read", outer, NOTHING_MS);
	close(outer);
	close(ep);
}

/* 8. poll's corners. */
static void sc_poll(int fd)
{
	struct pollfd p[3];
	int gone, hi, rc;
	uint64_t t0;

	poll1_show("poll-events0", fd, 0, NOTHING_MS);
	poll1_show("poll-out", fd, POLLOUT, READY_MS);
	poll1_show("poll-in-empty", fd, POLLIN, NOTHING_MS);
	t0 = now_us();
	rc = poll(NULL, 0, 50);
	elapsed_show("poll-nfds0", "poll", rc, errno, t0, 50);

	gone = closed_fd();
	poll1_show("poll-nval", gone, POLLIN, 0);
	p[0] = (struct pollfd){ fd, POLLIN | POLLOUT, 0 };
	p[1] = (struct pollfd){ gone, POLLIN, 0 };
	p[2] = (struct pollfd){ -1, POLLIN, 0 };
	poll_show("poll-mixed-nval", p, 3, READY_MS);

	hi = dup2(fd, HIGH_FD);
	if (hi != HIGH_FD) {
		printf("poll-high: dup2: %s\n", errname(errno));
		return;
	}
	PEER("poll-high", "write 100");
	poll1_show("poll-high", hi, POLLIN, READY_MS);
	settle("poll-high", hi, 100);
	p[0] = (struct pollfd){ hi,
				POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM |
					POLLRDHUP | POLLPRI,
				0 };
	poll_show("poll-high-all", p, 1, 0);
	rd("poll-high", hi, 100);
	close(hi);
	poll1_show("poll-high-closed", HIGH_FD, POLLIN, 0);
	poll1_show("poll-after-dupclose", fd, POLLIN | POLLOUT, READY_MS);
}

/* What select() left in @tv of @timeout_ms: "0", "some" (0 < left <=
 * timeout) or "bad" (more than it was given, or not a time). */
static const char *tv_left(const struct timeval *tv, int timeout_ms)
{
	long long us = (long long)tv->tv_sec * 1000000 + tv->tv_usec;

	if (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000 ||
	    us > (long long)timeout_ms * 1000)
		return "bad";
	return us ? "some" : "0";
}

static void sel_show(const char *name, int nfds, fd_set *r, fd_set *w, int rfd,
		     int wfd, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int rc = select(nfds, r, w, NULL, &tv);

	/* Linux writes the time left back (select(2), "Linux"): none after
	 * a timeout, some when an fd was ready first */
	if (rc < 0)
		printf("%s: select=-1 errno=%s left=%s\n", name, errname(errno),
		       tv_left(&tv, timeout_ms));
	else
		printf("%s: select=%d r=%d w=%d left=%s\n", name, rc,
		       r && rfd >= 0 && FD_ISSET(rfd, r),
		       w && wfd >= 0 && FD_ISSET(wfd, w),
		       tv_left(&tv, timeout_ms));
}

/* 9. select. */
static void sc_select(int fd)
{
	fd_set r, w;
	int pfd[2], gone, rc, nfds;
	uint64_t t0;
	char c;

	if (pipe(pfd) < 0)
		die("pipe");
	nfds = (fd > pfd[1] ? fd : pfd[1]) + 1;
	FD_ZERO(&r);
	FD_SET(fd, &r);
	sel_show("select-empty", fd + 1, &r, NULL, fd, -1, NOTHING_MS);
	PEER("select", "write 100");
	settle("select", fd, 100);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_ZERO(&w);
	FD_SET(fd, &w);
	sel_show("select-rw", fd + 1, &r, &w, fd, fd, READY_MS);
	rd("select", fd, 100);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	sel_show("select-read", fd + 1, &r, NULL, fd, -1, NOTHING_MS);

	if (write(pfd[1], "x", 1) != 1)
		die("pipe write");
	FD_ZERO(&r);
	FD_SET(pfd[0], &r);
	sel_show("select-pipe", pfd[0] + 1, &r, NULL, pfd[0], -1, READY_MS);
	FD_ZERO(&r);
	FD_SET(pfd[0], &r);
	FD_SET(fd, &r);
	rc = select(nfds, &r, NULL, NULL, &(struct timeval){ 2, 0 });
	printf("select-pipe-sock: select=%d pipe=%d sock=%d\n", rc,
	       FD_ISSET(pfd[0], &r), FD_ISSET(fd, &r));
	if (read(pfd[0], &c, 1) != 1)
		die("pipe read");

	t0 = now_us();
	rc = select(0, NULL, NULL, NULL, &(struct timeval){ 0, 50000 });
	elapsed_show("select-sleep", "select", rc, errno, t0, 50);

	/* only FDS_BYTES(nfds) of a set are the kernel's to write: the rest
	 * of the caller's memory stays as it was */
	{
		fd_set big;

		memset(&big, 0xa5, sizeof(big));
		FD_ZERO(&r);
		memcpy(&big, &r, (size_t)(fd + 64) / 64 * 8);
		FD_SET(fd, &big);
		rc = select(fd + 1, &big, NULL, NULL,
			    &(struct timeval){ 0, 0 });
		printf("select-set-tail: select=%d tail=%s\n", rc,
		       ((unsigned char *)&big)[sizeof(big) - 1] == 0xa5
			       ? "kept"
			       : "written");
	}

	gone = closed_fd();
	FD_ZERO(&r);
	FD_SET(fd, &r);
	FD_SET(gone, &r);
	sel_show("select-closed", (fd > gone ? fd : gone) + 1, &r, NULL, fd, -1,
		 0);
	close(pfd[0]);
	close(pfd[1]);
}

static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen++;
}

struct kick {
	pthread_t target;
	int delay_ms;
};

static void *kicker(void *arg)
{
	struct kick *k = arg;

	sleep_ms(k->delay_ms);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

/* 10. ppoll, pselect and epoll_pwait with a mask that lets SIGUSR1 in;
 * epoll_pwait2's timespec timeout. */
static void sc_signals(int fd)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct kick k = { pthread_self(), 200 };
	struct timespec five = { 5, 0 }, ms50 = { 0, 50000000 };
	struct epoll_event ev[4];
	sigset_t usr1, old, unblocked, blocked;
	pthread_t t;
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 10), rc, err;
	struct pollfd p = { fd, POLLIN, 0 };
	uint64_t t0;
	fd_set r;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	unblocked = old;
	sigdelset(&unblocked, SIGUSR1);
	blocked = old;
	sigaddset(&blocked, SIGUSR1);

	usr1_seen = 0;
	pthread_create(&t, NULL, kicker, &k);
	rc = ppoll(&p, 1, &five, &unblocked);
	err = errno;
	pthread_join(t, NULL);
	printf("sig-ppoll: ppoll=%d errno=%s handler=%d\n", rc,
	       errname(rc < 0 ? err : 0), (int)usr1_seen);

	usr1_seen = 0;
	pthread_create(&t, NULL, kicker, &k);
	FD_ZERO(&r);
	FD_SET(fd, &r);
	rc = pselect(fd + 1, &r, NULL, NULL, &five, &unblocked);
	err = errno;
	pthread_join(t, NULL);
	printf("sig-pselect: pselect=%d errno=%s handler=%d\n", rc,
	       errname(rc < 0 ? err : 0), (int)usr1_seen);

	usr1_seen = 0;
	pthread_create(&t, NULL, kicker, &k);
	rc = epoll_pwait(ep, ev, 4, 5000, &unblocked);
	err = errno;
	pthread_join(t, NULL);
	printf("sig-epoll_pwait: epoll_pwait=%d errno=%s handler=%d\n", rc,
	       errname(rc < 0 ? err : 0), (int)usr1_seen);

	/* blocked, and the mask keeps it blocked: the wait times out */
	usr1_seen = 0;
	pthread_create(&t, NULL, kicker, &(struct kick){ pthread_self(), 10 });
	pthread_join(t, NULL);
	rc = ppoll(&p, 1, &(struct timespec){ 0, 100000000 }, &blocked);
	printf("sig-ppoll-blocked: ppoll=%d handler=%d\n", rc, (int)usr1_seen);
	pthread_sigmask(SIG_SETMASK, &old, NULL); /* now delivered */
	printf("sig-unblocked: handler=%d\n", (int)usr1_seen);

	t0 = now_us();
	rc = epoll_pwait2(ep, ev, 4, &ms50, NULL);
	if (rc < 0 && errno == ENOSYS)
		printf("epoll_pwait2: unsupported\n");
	else
		elapsed_show("sig-epoll_pwait2", "epoll_pwait2", rc, errno, t0,
			     50);
	PEER("sig", "write 100");
	rc = epoll_pwait2(ep, ev, 4, &five, NULL);
	if (!(rc < 0 && errno == ENOSYS))
		ep_print("sig-epoll_pwait2-data", "epoll_pwait2", rc, errno,
			 ev);
	rd("sig", fd, 100);
	signal(SIGUSR1, SIG_DFL);
	close(ep);
}

struct waiter {
	int fd, ep, rc, err;
	short revents;
	struct epoll_event ev;
};

static void *wait_in(void *arg)
{
	struct waiter *w = arg;
	struct pollfd p = { w->fd, POLLIN, 0 };

	w->rc = poll(&p, 1, 10000);
	w->err = errno;
	w->revents = p.revents;
	return NULL;
}

static void *wait_out(void *arg)
{
	struct waiter *w = arg;

	w->rc = epoll_wait(w->ep, &w->ev, 1, 10000);
	w->err = errno;
	return NULL;
}

/* 11. Two threads wait on one socket: poll for IN, epoll for OUT. */
static void sc_threads(int fd)
{
	struct waiter a = { .fd = fd }, b = { .fd = fd };
	pthread_t ta, tb;

	b.ep = ep_make(fd, EPOLLOUT, DATA_MAGIC + 11);
	fill("threads-full", fd, 1000); /* eager-sized writes */
	if (pthread_create(&ta, NULL, wait_in, &a) ||
	    pthread_create(&tb, NULL, wait_out, &b))
		die("pthread_create");
	sleep_ms(200); /* let both sleep first */
	PEER("threads", "write 10");
	sleep_ms(200);
	PEER("threads", "drain");
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	printf("threads-in: poll=%d errno=%s revents=%s\n", a.rc,
	       errname(a.rc < 0 ? a.err : 0), ev_str((uint32_t)a.revents));
	ep_print("threads-out", "epoll_wait", b.rc, b.err, &b.ev);
	rd("threads", fd, 10);
	sync_peer("threads");
	close(b.ep);
}

/* recvmmsg of @vlen messages of @len bytes at most (<= 100), printed with
 * the lengths and, given @tmo_ms, what was left of the timeout: "0",
 * "less" than given, or "full" (not written back). */
static void mmsg_show(const char *name, int fd, unsigned int vlen, size_t len,
		      int flags, int tmo_ms)
{
	static unsigned char buf[4][100];
	struct timespec tmo = { tmo_ms / 1000, (tmo_ms % 1000) * 1000000L };
	struct mmsghdr v[4];
	struct iovec iov[4];
	unsigned int i;
	int rc;

	memset(v, 0, sizeof(v));
	for (i = 0; i < vlen && i < 4; i++) {
		iov[i] = (struct iovec){ buf[i], len };
		v[i].msg_hdr.msg_iov = &iov[i];
		v[i].msg_hdr.msg_iovlen = 1;
	}
	rc = recvmmsg(fd, v, vlen, flags, tmo_ms >= 0 ? &tmo : NULL);
	printf("%s: recvmmsg=%d", name, rc);
	if (rc < 0)
		printf(" errno=%s", errname(errno));
	for (i = 0; rc > 0 && i < (unsigned int)rc; i++) {
		printf("%s%u", i ? "," : " lens=", v[i].msg_len);
		if (v[i].msg_len && !pat_ok(buf[i], v[i].msg_len, rx_off))
			printf("(differs)");
		rx_off += v[i].msg_len;
	}
	if (tmo_ms >= 0)
		printf(" left=%s",
		       !tmo.tv_sec && !tmo.tv_nsec ? "0"
		       : tmo.tv_sec * 1000 + tmo.tv_nsec / 1000000 >= tmo_ms &&
				       tmo.tv_nsec % 1000000 == 0
			       ? "full"
			       : "less");
	printf("\n");
}

/* 4a. The peer's FIN, then ours, then the peer's close. */
static void sc_hup(int fd)
{
	int ep = ep_make(fd, EPOLLIN | EPOLLRDHUP, DATA_MAGIC + 12);
	char c;
	ssize_t n;

	PEER("hup", "write 10");
	rd("hup", fd, 10);
	ep_show("hup-empty", ep, NOTHING_MS);
	PEER("hup", "shutwr");
	ep_show("hup-shutwr", ep, READY_MS);
	poll1_show("hup-shutwr-poll", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	n = read(fd, &c, 1);
	printf("hup-read: read=%zd errno=%s\n", n, errname(n < 0 ? errno : 0));
	mmsg_show("hup-mmsg", fd, 2, 100, 0, -1); /* each a 0 at the end */
	printf("hup-shutdown: shutdown=%d\n", shutdown(fd, SHUT_WR));
	ep_show("hup-both", ep, NOTHING_MS);
	poll1_show("hup-both-poll", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	PEER("hup", "close");
	ep_show("hup-closed", ep, NOTHING_MS);
	poll1_show("hup-closed-poll", fd, POLLIN | POLLOUT | POLLRDHUP,
		   NOTHING_MS);
	n = write(fd, "x", 1);
	printf("hup-write: write=%zd errno=%s\n", n,
	       errname(n < 0 ? errno : 0));
	close(ep);
}

/*
 * 12. errno after success: a call that succeeds leaves errno as it was
 * (errno(3)); ENODATA stands in for what the program had there, as an
 * EAGAIN from a drained eventfd or channel must never show through.
 */
#define ERRNO_KEPT(label, call)                                                \
	do {                                                                   \
		errno = ENODATA;                                               \
		long long rc_ = (long long)(call);                             \
		printf("errno-%s: rc=%lld errno=%s\n", label, rc_,             \
		       errname(errno));                                        \
	} while (0)

static void sc_errno(int fd)
{
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 14);
	struct epoll_event ev;
	struct pollfd p = { fd, POLLIN, 0 };
	unsigned char buf[100], out[7];
	ssize_t n;
	fd_set r;
	int avail;

	PEER("errno", "write 100");
	settle("errno", fd, 100);
	ERRNO_KEPT("epoll_wait", epoll_wait(ep, &ev, 1, READY_MS));
	ERRNO_KEPT("poll", poll(&p, 1, READY_MS));
	FD_ZERO(&r);
	FD_SET(fd, &r);
	ERRNO_KEPT("select",
		   select(fd + 1, &r, NULL, NULL, &(struct timeval){ 2, 0 }));
	ERRNO_KEPT("ioctl", ioctl(fd, FIONREAD, &avail));
	ERRNO_KEPT("recv", n = recv(fd, buf, 40, 0));
	if (n > 0 && !pat_ok(buf, (size_t)n, rx_off))
		printf("errno-recv: data differs from the pattern\n");
	rx_off += n > 0 ? (uint64_t)n : 0;
	ERRNO_KEPT("read", n = read(fd, buf, 60));
	if (n > 0 && !pat_ok(buf, (size_t)n, rx_off))
		printf("errno-read: data differs from the pattern\n");
	rx_off += n > 0 ? (uint64_t)n : 0;
	pat_fill(out, sizeof(out), tx_off);
	ERRNO_KEPT("send", n = send(fd, out, 3, 0));
	tx_off += n > 0 ? (uint64_t)n : 0;
	ERRNO_KEPT("write", n = write(fd, out + 3, 4));
	tx_off += n > 0 ? (uint64_t)n : 0;
	ERRNO_KEPT("epoll_wait-empty", epoll_wait(ep, &ev, 1, 0));
	ERRNO_KEPT("recv-dontwait", recv(fd, buf, 1, MSG_DONTWAIT));
	sync_peer("errno");
	close(ep);
}

/*
 * 13. Bad pointers: the kernel answers EFAULT for a pollfd array, fd set
 * or epoll_event it cannot read or write; a wait over RDMA must too, not
 * crash. A page made read-only holds a valid pollfd and events buffer.
 */
static volatile uintptr_t bad_addr = 8; /* not a constant to the compiler */

static void sc_efault(int fd)
{
	void *bad = (void *)bad_addr;
	int ep = ep_make(fd, EPOLLIN, DATA_MAGIC + 15);
	long pg = sysconf(_SC_PAGESIZE);
	struct pollfd *ro;
	int rc;

	ro = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED)
		die("mmap");
	ro[0] = (struct pollfd){ fd, POLLIN | POLLOUT, 0 };
	if (mprotect(ro, (size_t)pg, PROT_READ))
		die("mprotect");
	rc = poll(bad, 1, 0);
	printf("efault-poll: poll=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	rc = poll(ro, 1, 0);
	printf("efault-poll-readonly: poll=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	rc = select(fd + 1, bad, NULL, NULL, &(struct timeval){ 0, 0 });
	printf("efault-select: select=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	rc = epoll_ctl(ep, EPOLL_CTL_MOD, fd, bad);
	printf("efault-epoll_ctl: epoll_ctl=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	PEER("efault", "write 10");
	settle("efault", fd, 10);
	rc = epoll_wait(ep, bad, 4, READY_MS);
	printf("efault-epoll_wait: epoll_wait=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	rc = epoll_wait(ep, (struct epoll_event *)ro, 4, READY_MS);
	printf("efault-epoll_wait-readonly: epoll_wait=%d errno=%s\n", rc,
	       errname(rc < 0 ? errno : 0));
	rd("efault", fd, 10);
	munmap(ro, (size_t)pg);
	close(ep);
}

/*
 * 14. recvmmsg on a stream: one recvmsg per message, MSG_WAITFORONE, the
 * timeout written back (net/socket.c do_recvmmsg()).
 */
static void sc_mmsg(int fd)
{
	PEER("mmsg", "write 300");
	settle("mmsg", fd, 300);
	mmsg_show("mmsg-all", fd, 3, 100, 0, -1);
	PEER("mmsg", "write 100");
	settle("mmsg", fd, 100);
	mmsg_show("mmsg-waitforone", fd, 3, 100, MSG_WAITFORONE, 2000);
	mmsg_show("mmsg-dontwait", fd, 2, 100, MSG_DONTWAIT, -1);
}

/* 4b. The peer resets the connection (SO_LINGER {1, 0}, close). */
static void sc_reset(int fd)
{
	int ep = ep_make(fd, EPOLLIN | EPOLLRDHUP, DATA_MAGIC + 13);
	char c;
	ssize_t n;

	ep_show("reset-empty", ep, NOTHING_MS);
	PEER("reset", "reset");
	ep_show("reset-1", ep, READY_MS);
	poll1_show("reset-poll", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	n = recv(fd, &c, 1, 0);
	printf("reset-recv-1: recv=%zd errno=%s\n", n,
	       errname(n < 0 ? errno : 0));
	n = recv(fd, &c, 1, 0);
	printf("reset-recv-2: recv=%zd errno=%s\n", n,
	       errname(n < 0 ? errno : 0));
	n = write(fd, "x", 1);
	printf("reset-write: write=%zd errno=%s\n", n,
	       errname(n < 0 ? errno : 0));
	ep_show("reset-after", ep, NOTHING_MS);
	close(ep);
}

static int do_run(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct rlimit rl;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	/* room for fd HIGH_FD; before the first socket call */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur <= HIGH_FD &&
	    rl.rlim_max > HIGH_FD) {
		rl.rlim_cur = HIGH_FD + 1;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	fd = run_pair(&sin);
	sc_lt(fd);
	sc_et(fd);
	sc_oneshot(fd);
	sc_dup(fd);
	sc_dup_close(fd);
	sc_out(fd);
	sc_ctl(fd);
	sc_nested(fd);
	sc_poll(fd);
	sc_select(fd);
	sc_signals(fd);
	sc_threads(fd);
	sc_errno(fd);
	sc_efault(fd);
	sc_mmsg(fd);
	sc_hup(fd);
	run_unpair(fd);

	fd = run_pair(&sin);
	sc_reset(fd);
	run_unpair(fd);
	printf("done\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "peer"))
		return do_peer(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "run"))
		return do_run(argv[2], argv[3]);
	fprintf(stderr, "usage: evconf peer|run IP PORT\n");
	return 2;
}
