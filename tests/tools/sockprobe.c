/*
 * tests/tools/sockprobe.c - errno and semantics probe for TCP sockets.
 *
 * Runs TCP corner cases over 127.0.0.1 (and ::1), both ends in this process
 * (threads) or a forked child, and prints one line per case: results and
 * errno names, never ports, fd numbers, varying counts or timings.
 * tests/bats/probes.bats requires identical output with and without
 * LD_PRELOAD=libxsock.so. Usage: sockprobe [--list | CASE...]; exit 0, or 3
 * when a case hit its alarm() watchdog (the run then goes on without it).
 * SOCKPROBE_ADDR=IPv4 puts the IPv4 pairs on that address instead of
 * 127.0.0.1 (the Soft-RoCE tier: an RDMA device's, so over RDMA).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SIOCOUTQ
#define SIOCOUTQ TIOCOUTQ
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define PROBE_CASE_TIMEOUT_S 10		 /* watchdog per case */
#define PROBE_WAIT_MS	     5000	 /* deadline of every single wait */
#define PROBE_BIG	     (32u << 20) /* bytes: "large" non-blocking send */

/* glibc's fortify entry points, called directly: libxsock interposes them. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);

/* ------------------------------------------------------------------------ */
/* Output: one line per case, items separated by "; ".                      */

static char probe_out[8192];
static size_t probe_out_len;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	size_t room = sizeof(probe_out) - probe_out_len;
	va_list ap;
	int n;

	if (probe_out_len && room > 3) {
		memcpy(probe_out + probe_out_len, "; ", 2);
		probe_out_len += 2;
		room -= 2;
	}
	va_start(ap, fmt);
	n = vsnprintf(probe_out + probe_out_len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		probe_out_len += (size_t)n < room ? (size_t)n : room - 1;
}

static const char *ename(int e)
{
	static char buf[4][24];
	static unsigned int i;
	const char *name = strerrorname_np(e);
	char *b;

	if (name)
		return name;
	b = buf[i++ % 4];
	snprintf(b, sizeof(buf[0]), "errno%d", e);
	return b;
}

/*
 * rs() - format a syscall result: "N" or "-1 ENAME". Call it directly on
 * the call (rs(recv(...))) so that errno is read right after it.
 */
static const char *rs(long rc)
{
	static char bufs[16][48];
	static unsigned int i;
	int e = errno;
	char *b = bufs[i++ % 16];

	if (rc >= 0)
		snprintf(b, sizeof(bufs[0]), "%ld", rc);
	else
		snprintf(b, sizeof(bufs[0]), "%ld %s", rc, ename(e));
	return b;
}

static const char *events_str(int ev)
{
	static const struct {
		int bit;
		const char *name;
	} names[] = {
		{ POLLIN, "POLLIN" },	  { POLLPRI, "POLLPRI" },
		{ POLLOUT, "POLLOUT" },	  { POLLRDHUP, "POLLRDHUP" },
		{ POLLERR, "POLLERR" },	  { POLLHUP, "POLLHUP" },
		{ POLLNVAL, "POLLNVAL" },
	};
	static char bufs[4][128];
	static unsigned int k;
	char *b = bufs[k++ % 4];
	size_t i, off = 0;

	b[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(ev & names[i].bit))
			continue;
		off += (size_t)snprintf(b + off, sizeof(bufs[0]) - off, "%s%s",
					off ? "|" : "", names[i].name);
		ev &= ~names[i].bit;
	}
	if (ev)
		snprintf(b + off, sizeof(bufs[0]) - off, "%s0x%x",
			 off ? "|" : "", (unsigned int)ev);
	else if (!off)
		snprintf(b, sizeof(bufs[0]), "0");
	return b;
}

static const char *yesno(bool v)
{
	return v ? "yes" : "no";
}

/* Values the compiler must not see through (deliberately invalid args). */
static volatile int probe_minus_one = -1;

#define NEED(expr)                                                             \
	do {                                                                   \
		if (!(expr)) {                                                 \
			say("setup failed: %s (line %d, %s)", #expr, __LINE__, \
			    ename(errno));                                     \
			return;                                                \
		}                                                              \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Waits, all with deadlines.                                               */

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* poll() one fd until an event or @timeout_ms: revents, 0 or -1. */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	long end = now_ms() + timeout_ms, left;
	int rc;

	for (;;) {
		left = end - now_ms();
		rc = poll(&p, 1, left > 0 ? (int)left : 0);
		if (rc > 0)
			return p.revents;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* Wait until at least @n bytes are queued for reading on @fd. */
static bool wait_inq(int fd, int n)
{
	long end = now_ms() + PROBE_WAIT_MS;
	int v;

	while (now_ms() < end) {
		if (ioctl(fd, FIONREAD, &v) < 0)
			return false;
		if (v >= n)
			return true;
		if (v == 0)
			wait_fd(fd, POLLIN, 50);
		else
			sleep_ms(1);
	}
	return false;
}

/* Wait until poll() reports any of POLLERR|POLLHUP on @fd (an RST). */
static bool wait_err(int fd)
{
	long end = now_ms() + PROBE_WAIT_MS;
	int rev;

	while (now_ms() < end) {
		rev = wait_fd(fd, 0, 100);
		if (rev > 0 && (rev & (POLLERR | POLLHUP)))
			return true;
		if (rev < 0)
			return false;
	}
	return false;
}

/* Read up to @n bytes, stopping at EOF, error or the deadline. */
static ssize_t read_n(int fd, void *buf, size_t n)
{
	long end = now_ms() + PROBE_WAIT_MS;
	size_t got = 0;
	ssize_t r;

	while (got < n && now_ms() < end) {
		if (wait_fd(fd, POLLIN, 200) <= 0)
			continue;
		r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return got ? (ssize_t)got : -1;
		}
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Read until EOF: bytes read into @buf (at most @cap), -1 on error. */
static ssize_t read_eof(int fd, void *buf, size_t cap, bool *eof)
{
	long end = now_ms() + PROBE_WAIT_MS;
	size_t got = 0;
	char scratch[4096];
	ssize_t r;

	*eof = false;
	while (now_ms() < end) {
		if (wait_fd(fd, POLLIN, 200) <= 0)
			continue;
		if (got < cap)
			r = recv(fd, (char *)buf + got, cap - got,
				 MSG_DONTWAIT);
		else
			r = recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
		if (r == 0) {
			*eof = true;
			break;
		}
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		if (got < cap)
			got += (size_t)r;
	}
	return (ssize_t)got;
}

static bool send_all(int fd, const void *buf, size_t n)
{
	long end = now_ms() + PROBE_WAIT_MS;
	size_t done = 0;
	ssize_t r;

	while (done < n && now_ms() < end) {
		r = send(fd, (const char *)buf + done, n - done,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r > 0) {
			done += (size_t)r;
		} else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			wait_fd(fd, POLLOUT, 200);
		} else {
			return false;
		}
	}
	return done == n;
}

/* Whether @fd has something to read (or EOF) right now. */
static bool readable_now(int fd)
{
	return wait_fd(fd, POLLIN, 0) > 0;
}

/* ------------------------------------------------------------------------ */
/* Connections.                                                             */

/* The IPv4 address of the pairs: 127.0.0.1, or $SOCKPROBE_ADDR (an
 * address of an RDMA device, so that xsock carries them over RDMA). */
static struct in_addr probe_addr = { .s_addr = 0 };

static void loopback4(struct sockaddr_in *sin, uint16_t port)
{
	const char *a;

	if (!probe_addr.s_addr) {
		a = getenv("SOCKPROBE_ADDR");
		if (!a || inet_pton(AF_INET, a, &probe_addr) != 1)
			probe_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr = probe_addr;
	sin->sin_port = port;
}

static int close_keep_errno(int fd)
{
	int e = errno;

	if (fd >= 0)
		close(fd);
	errno = e;
	return -1;
}

/* A listener on 127.0.0.1, ephemeral port; its address in @sin. */
static int mk_listener(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	loopback4(sin, 0);
	if (bind(fd, (struct sockaddr *)sin, sizeof(*sin)) < 0 ||
	    listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)sin, &len) < 0)
		return close_keep_errno(fd);
	return fd;
}

/*
 * A port on 127.0.0.1 that refuses connections: bound but not listening,
 * and kept bound by the returned fd so that nobody else takes it.
 */
static int mk_closed_port(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	loopback4(sin, 0);
	if (bind(fd, (struct sockaddr *)sin, sizeof(*sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)sin, &len) < 0)
		return close_keep_errno(fd);
	return fd;
}

/* A connected blocking pair over 127.0.0.1: *cli connected, *srv accepted. */
static int mk_pair(int *cli, int *srv)
{
	struct sockaddr_in sin;
	int l, c, s;

	l = mk_listener(&sin);
	if (l < 0)
		return -1;
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		return close_keep_errno(l);
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close_keep_errno(l);
		return close_keep_errno(c);
	}
	s = accept(l, NULL, NULL);
	if (s < 0) {
		close_keep_errno(l);
		return close_keep_errno(c);
	}
	close(l);
	*cli = c;
	*srv = s;
	return 0;
}

static bool set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return false;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) == 0;
}

static bool is_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

static bool is_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl >= 0 && (fl & FD_CLOEXEC);
}

/* Close with an RST instead of a FIN (SO_LINGER 0). */
static void close_rst(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static bool set_rcvtimeo(int fd, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0;
}

static const char *family_str(int f)
{
	switch (f) {
	case AF_INET:
		return "AF_INET";
	case AF_INET6:
		return "AF_INET6";
	case AF_UNIX:
		return "AF_UNIX";
	case AF_UNSPEC:
		return "AF_UNSPEC";
	}
	return "AF_?";
}

/* The address of @ss without the port: "127.0.0.1", "::1". */
static const char *addr_str(const struct sockaddr_storage *ss)
{
	static char bufs[4][INET6_ADDRSTRLEN];
	static unsigned int i;
	char *b = bufs[i++ % 4];

	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr,
			  b, sizeof(bufs[0]));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((const struct sockaddr_in6 *)ss)->sin6_addr, b,
			  sizeof(bufs[0]));
	else
		snprintf(b, sizeof(bufs[0]), "?");
	return b;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_port;
	if (ss->ss_family == AF_INET6)
		return ((const struct sockaddr_in6 *)ss)->sin6_port;
	return 0;
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family || port_of(a) != port_of(b))
		return false;
	return strcmp(addr_str(a), addr_str(b)) == 0;
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i % 251);
}

static void fill_pattern(unsigned char *buf, size_t n, size_t start)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf[i] = pattern(start + i);
}

static bool check_pattern(const unsigned char *buf, size_t n, size_t start)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != pattern(start + i))
			return false;
	return true;
}

/* waitpid() with a deadline; kills the child when it does not end. */
static const char *wait_child(pid_t pid)
{
	static char buf[64];
	long end = now_ms() + PROBE_WAIT_MS;
	int st;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return "waitpid failed";
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return "child hung (killed)";
		}
		sleep_ms(2);
	}
	if (WIFEXITED(st))
		snprintf(buf, sizeof(buf), "exited %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "killed by SIG%s",
			 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st))
						    : "?");
	else
		snprintf(buf, sizeof(buf), "status 0x%x", st);
	return buf;
}

/* A thread that writes @a, waits @delay_ms, writes @b, then maybe shuts. */
struct writer {
	int fd;
	const char *a, *b;
	long delay_ms;
	int shut_how; /* -1: none */
	pthread_t tid;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	if (w->a)
		send_all(w->fd, w->a, strlen(w->a));
	if (w->delay_ms)
		sleep_ms(w->delay_ms);
	if (w->b)
		send_all(w->fd, w->b, strlen(w->b));
	if (w->shut_how >= 0)
		shutdown(w->fd, w->shut_how);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Connect, bind, listen, accept.                                           */

static void case_blocking_connect_refused(void)
{
	struct sockaddr_in sin;
	int rsv, c, err = -1;
	socklen_t el = sizeof(err);

	NEED((rsv = mk_closed_port(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR=%s", err ? ename(err) : "0");
	say("connect again=%s",
	    rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	say("getpeername=%s", rs(getpeername(c, (struct sockaddr *)&sin,
					     &(socklen_t){ sizeof(sin) })));
}

static void case_nonblock_connect_ok(void)
{
	struct sockaddr_in sin;
	int l, c, s, rev, err = -1;
	socklen_t el = sizeof(err);
	char buf[8];

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	rev = wait_fd(c, POLLOUT, PROBE_WAIT_MS);
	say("poll=%d revents=%s", rev > 0, events_str(rev > 0 ? rev : 0));
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR=%s", err ? ename(err) : "0");
	say("connect again=%s",
	    rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("send=%s", rs(send(c, "hi", 2, MSG_NOSIGNAL)));
	say("peer read=%s", rs(read_n(s, buf, 2)));
	say("still nonblocking=%s", yesno(is_nonblock(c)));
}

static void case_nonblock_connect_refused(void)
{
	struct sockaddr_in sin;
	int rsv, c, rev, err = -1;
	socklen_t el = sizeof(err);

	NEED((rsv = mk_closed_port(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	rev = wait_fd(c, POLLOUT, PROBE_WAIT_MS);
	say("poll=%d revents=%s", rev > 0, events_str(rev > 0 ? rev : 0));
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR=%s", err ? ename(err) : "0");
	err = -1;
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR again=%s", err ? ename(err) : "0");
	say("recv=%s", rs(recv(c, &err, 1, 0)));
}

static void case_connect_errors(void)
{
	struct sockaddr_in sin, other;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct sockaddr sa_unspec = { .sa_family = AF_UNSPEC };
	int l, c, s, fresh;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	say("second connect=%s",
	    rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("connect on accepted=%s",
	    rs(connect(s, (struct sockaddr *)&sin, sizeof(sin))));
	say("connect on listener=%s",
	    rs(connect(l, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((fresh = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("short addrlen=%s", rs(connect(fresh, (struct sockaddr *)&sin, 4)));
	say("NULL addr=%s", rs(connect(fresh, NULL, 0)));
	say("AF_UNIX addr=%s",
	    rs(connect(fresh, (struct sockaddr *)&sun, sizeof(sin))));
	say("AF_UNSPEC on unconnected=%s",
	    rs(connect(fresh, &sa_unspec, sizeof(sa_unspec))));
	loopback4(&other, 0);
	say("port 0=%s",
	    rs(connect(fresh, (struct sockaddr *)&other, sizeof(other))));
	say("fresh socket usable after errors=%s",
	    rs(connect(fresh, (struct sockaddr *)&sin, sizeof(sin))));
}

static void case_bind_errors(void)
{
	struct sockaddr_in sin, any, bogus;
	int l, b, c, one = 1;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((b = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("bind in use=%s",
	    rs(bind(b, (struct sockaddr *)&sin, sizeof(sin))));
	setsockopt(b, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	say("with SO_REUSEADDR=%s",
	    rs(bind(b, (struct sockaddr *)&sin, sizeof(sin))));
	loopback4(&any, 0);
	say("bind port 0=%s",
	    rs(bind(b, (struct sockaddr *)&any, sizeof(any))));
	say("bind twice=%s", rs(bind(b, (struct sockaddr *)&any, sizeof(any))));
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	memset(&bogus, 0, sizeof(bogus));
	bogus.sin_family = AF_INET;
	bogus.sin_addr.s_addr = inet_addr("192.0.2.1");
	say("non-local address=%s",
	    rs(bind(c, (struct sockaddr *)&bogus, sizeof(bogus))));
	say("short addrlen=%s", rs(bind(c, (struct sockaddr *)&any, 4)));
	NEED(connect(c, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	say("bind after connect=%s",
	    rs(bind(c, (struct sockaddr *)&any, sizeof(any))));
}

static void case_listen_autobind(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_in sin;
	socklen_t len = sizeof(ss);
	int l, c, s, c2, s2;

	NEED((l = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("listen unbound=%s", rs(listen(l, 8)));
	NEED(getsockname(l, (struct sockaddr *)&ss, &len) == 0);
	say("bound to %s port %s", addr_str(&ss),
	    port_of(&ss) ? "assigned" : "0");
	say("listen again=%s", rs(listen(l, 16)));
	loopback4(&sin, port_of(&ss));
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("accept=ok");
	say("accept on connected=%s", rs(accept(c, NULL, NULL)));
	NEED((c2 = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("accept on unbound=%s", rs(accept(c2, NULL, NULL)));
	say("listen on connected=%s", rs(listen(c, 8)));
	NEED(mk_pair(&c2, &s2) == 0);
	say("send=%s", rs(send(s, "ok", 2, MSG_NOSIGNAL)));
}

static void case_socket_errors(void)
{
	struct stat st;
	int fd, type = -1;
	socklen_t tl = sizeof(type);

	say("udp protocol on stream=%s",
	    rs(socket(AF_INET, SOCK_STREAM, IPPROTO_UDP)));
	say("tcp protocol on dgram=%s",
	    rs(socket(AF_INET, SOCK_DGRAM, IPPROTO_TCP)));
	say("bad family=%s", rs(socket(12345, SOCK_STREAM, 0)));
	say("bad type=%s", rs(socket(AF_INET, 999, 0)));
	say("bad flags=%s", rs(socket(AF_INET, SOCK_STREAM | 0x40000000, 0)));
	NEED((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			  IPPROTO_TCP)) >= 0);
	say("SOCK_NONBLOCK=%s SOCK_CLOEXEC=%s", yesno(is_nonblock(fd)),
	    yesno(is_cloexec(fd)));
	getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl);
	say("SO_TYPE=%s", type == SOCK_STREAM ? "SOCK_STREAM" : "other");
	NEED(fstat(fd, &st) == 0);
	say("fstat=%s", S_ISSOCK(st.st_mode) ? "S_IFSOCK" : "other");
	close(fd);
	NEED((fd = socket(AF_INET6, SOCK_STREAM, 0)) >= 0 ||
	     errno == EAFNOSUPPORT);
	say("AF_INET6 socket=%s", fd >= 0 ? "ok" : "EAFNOSUPPORT");
}

static void case_accept4_flags(void)
{
	struct sockaddr_in sin;
	int l, c1, c2, s1, s2;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c1 = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	NEED((c2 = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	NEED(connect(c1, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	NEED(connect(c2, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	say("accept4 bad flags=%s", rs(accept4(l, NULL, NULL, 0x1)));
	NEED((s1 = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0);
	say("accept4(NONBLOCK|CLOEXEC): O_NONBLOCK=%s FD_CLOEXEC=%s",
	    yesno(is_nonblock(s1)), yesno(is_cloexec(s1)));
	say("recv=%s", rs(recv(s1, &sin, 1, 0)));
	NEED((s2 = accept4(l, NULL, NULL, 0)) >= 0);
	say("accept4(0): O_NONBLOCK=%s FD_CLOEXEC=%s", yesno(is_nonblock(s2)),
	    yesno(is_cloexec(s2)));
}

static void case_accept_nonblock_listener(void)
{
	struct sockaddr_storage ss;
	struct sockaddr_in sin;
	socklen_t len;
	int l, c, s, rev;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED(set_nonblock(l, true));
	say("accept empty=%s", rs(accept(l, NULL, NULL)));
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	NEED(connect(c, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	rev = wait_fd(l, POLLIN, PROBE_WAIT_MS);
	say("poll listener revents=%s", events_str(rev > 0 ? rev : 0));
	len = 4;
	NEED((s = accept(l, (struct sockaddr *)&ss, &len)) >= 0);
	say("accept with addrlen 4: addrlen out=%u", (unsigned int)len);
	say("accepted O_NONBLOCK=%s FD_CLOEXEC=%s", yesno(is_nonblock(s)),
	    yesno(is_cloexec(s)));
	say("accept empty again=%s", rs(accept(l, NULL, NULL)));
	len = sizeof(ss);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	NEED(connect(c, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	NEED(wait_fd(l, POLLIN, PROBE_WAIT_MS) > 0);
	NEED((s = accept(l, (struct sockaddr *)&ss, &len)) >= 0);
	say("peer %s %s", family_str(ss.ss_family), addr_str(&ss));
}

/* ------------------------------------------------------------------------ */
/* Receive-side flags.                                                      */

static void case_recv_empty_nonblock(void)
{
	struct iovec iov;
	struct msghdr mh = { 0 };
	char buf[16];
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_nonblock(c, true));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("read=%s", rs(read(c, buf, sizeof(buf))));
	say("readv=%s", rs(readv(c, &iov, 1)));
	say("recvmsg=%s", rs(recvmsg(c, &mh, 0)));
	say("recvfrom=%s", rs(recvfrom(c, buf, sizeof(buf), 0, NULL, NULL)));
	say("recv len 0=%s", rs(recv(c, buf, 0, 0)));
}

static void case_msg_dontwait(void)
{
	char buf[16] = { 0 };
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	say("recv MSG_DONTWAIT=%s",
	    rs(recv(c, buf, sizeof(buf), MSG_DONTWAIT)));
	say("recv MSG_PEEK|MSG_DONTWAIT=%s",
	    rs(recv(c, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT)));
	say("socket O_NONBLOCK=%s", yesno(is_nonblock(c)));
	NEED(send_all(s, "hello", 5));
	NEED(wait_inq(c, 5));
	say("recv MSG_DONTWAIT after data=%s",
	    rs(recv(c, buf, sizeof(buf), MSG_DONTWAIT)));
	say("data=%.5s", buf);
}

static void case_msg_peek(void)
{
	char a[32] = { 0 }, b[32] = { 0 };
	ssize_t pn, rn;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(send_all(s, "hello world", 11));
	NEED(wait_inq(c, 11));
	pn = recv(c, a, 5, MSG_PEEK);
	say("peek=%s '%.*s'", rs(pn), pn > 0 ? (int)pn : 0, a);
	pn = recv(c, a, sizeof(a), MSG_PEEK);
	say("peek all=%s", rs(pn));
	rn = read(c, b, sizeof(b));
	say("read=%s '%.*s'", rs(rn), rn > 0 ? (int)rn : 0, b);
	say("same bytes=%s",
	    yesno(pn == rn && pn > 0 && !memcmp(a, b, (size_t)rn)));
	say("peek empty MSG_DONTWAIT=%s",
	    rs(recv(c, a, sizeof(a), MSG_PEEK | MSG_DONTWAIT)));
}

static void case_msg_waitall(void)
{
	struct writer w = { 0 };
	char buf[16] = { 0 };
	ssize_t n;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(c, PROBE_WAIT_MS));
	w = (struct writer){ .fd = s,
			     .a = "abc",
			     .b = "defgh",
			     .delay_ms = 50,
			     .shut_how = -1 };
	NEED(pthread_create(&w.tid, NULL, writer_main, &w) == 0);
	/* with MSG_PEEK too, the wait is for all 8 (tcp_recvmsg()) */
	n = recv(c, buf, 8, MSG_PEEK | MSG_WAITALL);
	pthread_join(w.tid, NULL);
	say("recv PEEK|WAITALL 8=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	n = recv(c, buf, 8, MSG_WAITALL);
	say("recv WAITALL 8=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	w = (struct writer){
		.fd = s, .a = "xyz", .delay_ms = 50, .shut_how = SHUT_WR
	};
	NEED(pthread_create(&w.tid, NULL, writer_main, &w) == 0);
	n = recv(c, buf, 8, MSG_PEEK | MSG_WAITALL);
	pthread_join(w.tid, NULL);
	say("PEEK|WAITALL cut by EOF=%s '%.*s'", rs(n), n > 0 ? (int)n : 0,
	    buf);
	n = recv(c, buf, 8, MSG_WAITALL);
	say("WAITALL cut by EOF=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	say("then=%s", rs(recv(c, buf, 8, MSG_WAITALL)));
}

static void case_msg_trunc_oob(void)
{
	char buf[16] = { 0 };
	ssize_t n;
	int c, s, rev;

	NEED(mk_pair(&c, &s) == 0);
	NEED(send_all(s, "0123456789", 10));
	NEED(wait_inq(c, 10));
	say("recv MSG_TRUNC 4=%s", rs(recv(c, buf, 4, MSG_TRUNC)));
	say("buffer untouched=%s", yesno(buf[0] == 0));
	n = recv(c, buf, sizeof(buf), 0);
	say("rest=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	say("send MSG_OOB=%s", rs(send(s, "ab", 2, MSG_OOB | MSG_NOSIGNAL)));
	rev = wait_fd(c, POLLPRI, PROBE_WAIT_MS);
	say("poll POLLIN|POLLPRI revents=%s",
	    events_str(rev > 0 ? wait_fd(c, POLLIN | POLLPRI, 0) : 0));
	memset(buf, 0, sizeof(buf));
	n = recv(c, buf, sizeof(buf), MSG_OOB);
	say("recv MSG_OOB=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	say("again=%s", rs(recv(c, buf, sizeof(buf), MSG_OOB)));
	n = recv(c, buf, sizeof(buf), 0);
	say("inline=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
}

static void case_so_rcvlowat(void)
{
	char buf[16] = { 0 };
	int c, s, lowat = 5, v = 0;
	socklen_t vl = sizeof(v);
	ssize_t n;

	NEED(mk_pair(&c, &s) == 0);
	say("set SO_RCVLOWAT 5=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat))));
	getsockopt(c, SOL_SOCKET, SO_RCVLOWAT, &v, &vl);
	say("get=%d", v);
	NEED(send_all(s, "abc", 3));
	NEED(wait_inq(c, 3));
	say("poll with 3 bytes=%d", wait_fd(c, POLLIN, 100) > 0);
	NEED(send_all(s, "de", 2));
	say("poll with 5 bytes=%d", wait_fd(c, POLLIN, PROBE_WAIT_MS) > 0);
	n = recv(c, buf, sizeof(buf), 0);
	say("recv=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
}

/* ------------------------------------------------------------------------ */
/* Send side: partial writes, timeouts.                                     */

static void case_partial_write_nonblock(void)
{
	unsigned char *big, *rd;
	size_t total = 0, i;
	ssize_t n, first = 0, got;
	int c, s, sends = 0, last_errno = 0;
	bool eof;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_nonblock(c, true));
	NEED((big = malloc(PROBE_BIG)) != NULL);
	fill_pattern(big, PROBE_BIG, 0);
	/* The peer does not read: the send buffer fills up. */
	for (i = 0; i < 10000; i++) {
		n = send(c, big + total % PROBE_BIG,
			 PROBE_BIG - total % PROBE_BIG, MSG_NOSIGNAL);
		if (n < 0) {
			last_errno = errno;
			break;
		}
		if (sends++ == 0)
			first = n;
		total += (size_t)n;
	}
	say("first send=%s", first > 0 && (size_t)first < PROBE_BIG ? "short"
			     : first == (ssize_t)PROBE_BIG	    ? "all"
							   : rs(first));
	say("then=-1 %s", last_errno ? ename(last_errno) : "none");
	shutdown(c, SHUT_WR);
	NEED((rd = malloc(total + 1)) != NULL);
	got = read_eof(s, rd, total + 1, &eof);
	say("peer read=%s eof=%s pattern=%s",
	    got == (ssize_t)total ? "all sent bytes" : "mismatch", yesno(eof),
	    got > 0 && check_pattern(rd, (size_t)got, 0) ? "ok" : "bad");
	free(rd);
	free(big);
}

struct reader {
	int fd;
	size_t want;
	ssize_t got;
	bool ok;
	pthread_t tid;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	unsigned char *buf = malloc(r->want);

	r->got = buf ? read_n(r->fd, buf, r->want) : -1;
	r->ok = r->got == (ssize_t)r->want && check_pattern(buf, r->want, 0);
	free(buf);
	return NULL;
}

static void case_blocking_send_full(void)
{
	struct reader r = { 0 };
	unsigned char *big;
	ssize_t n;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED((big = malloc(8u << 20)) != NULL);
	fill_pattern(big, 8u << 20, 0);
	r.fd = s;
	r.want = 8u << 20;
	NEED(pthread_create(&r.tid, NULL, reader_main, &r) == 0);
	n = send(c, big, 8u << 20, MSG_NOSIGNAL);
	pthread_join(r.tid, NULL);
	say("blocking send 8 MiB=%s", rs(n));
	say("peer got all, in order=%s", yesno(r.ok));
	free(big);
}

static void case_so_sndtimeo(void)
{
	struct timeval tv = { 0, 100000 }, got = { 0 };
	socklen_t gl = sizeof(got);
	unsigned char *big;
	ssize_t n;
	int c, s, i;

	NEED(mk_pair(&c, &s) == 0);
	NEED((big = calloc(1, PROBE_BIG)) != NULL);
	say("set SO_SNDTIMEO=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))));
	getsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &got, &gl);
	say("get=%ld.%06ld", (long)got.tv_sec, (long)got.tv_usec);
	n = send(c, big, PROBE_BIG, MSG_NOSIGNAL);
	say("blocking send to non-reader=%s",
	    n > 0 && (size_t)n < PROBE_BIG ? "short" : rs(n));
	for (i = 0; i < 20; i++) {
		n = send(c, big, PROBE_BIG, MSG_NOSIGNAL);
		if (n < 0)
			break;
	}
	say("until=%s", rs(n));
	free(big);
}

static void case_so_rcvtimeo(void)
{
	struct timeval got = { 0 };
	socklen_t gl = sizeof(got);
	char buf[8];
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(c, 100));
	getsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &got, &gl);
	say("get=%ld.%06ld", (long)got.tv_sec, (long)got.tv_usec);
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("read=%s", rs(read(c, buf, sizeof(buf))));
	NEED(send_all(s, "x", 1));
	say("recv with data=%s", rs(recv(c, buf, sizeof(buf), 0)));
}

/* ------------------------------------------------------------------------ */
/* Shutdown, EOF, reset, SIGPIPE.                                           */

static void case_shutdown_wr(void)
{
	char buf[64] = { 0 };
	ssize_t n;
	bool eof;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(send_all(c, "request", 7));
	say("shutdown SHUT_WR=%s", rs(shutdown(c, SHUT_WR)));
	n = read_eof(s, buf, sizeof(buf), &eof);
	say("peer read=%s '%.*s' then eof=%s", rs(n), n > 0 ? (int)n : 0, buf,
	    yesno(eof));
	say("peer recv again=%s", rs(recv(s, buf, sizeof(buf), 0)));
	say("peer revents=%s",
	    events_str(wait_fd(s, POLLIN | POLLOUT | POLLRDHUP, 0)));
	say("send after SHUT_WR=%s", rs(send(c, "x", 1, MSG_NOSIGNAL)));
	say("peer reply=%s", rs(send(s, "reply", 5, MSG_NOSIGNAL)));
	memset(buf, 0, sizeof(buf));
	n = read_n(c, buf, 5);
	say("read reply=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	say("shutdown again=%s", rs(shutdown(c, SHUT_WR)));
	say("shutdown bad how=%s", rs(shutdown(c, 7)));
	close(s);
	n = read_eof(c, buf, sizeof(buf), &eof);
	say("after peer close=%s eof=%s", rs(n), yesno(eof));
}

static void case_shutdown_rd(void)
{
	char buf[8];
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(c, PROBE_WAIT_MS));
	say("shutdown SHUT_RD=%s", rs(shutdown(c, SHUT_RD)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("revents=%s", events_str(wait_fd(c, POLLIN | POLLRDHUP, 0)));
	say("send still=%s", rs(send(c, "abc", 3, MSG_NOSIGNAL)));
	say("peer read=%s", rs(read_n(s, buf, 3)));
	say("SHUT_RDWR=%s", rs(shutdown(c, SHUT_RDWR)));
	say("send after=%s", rs(send(c, "abc", 3, MSG_NOSIGNAL)));
}

static void case_read_after_peer_close(void)
{
	char buf[16] = { 0 };
	ssize_t n;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(send_all(s, "bye", 3));
	close(s);
	NEED(wait_inq(c, 3));
	n = read(c, buf, sizeof(buf));
	say("read=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	NEED(wait_fd(c, POLLIN, PROBE_WAIT_MS) > 0);
	say("read=%s", rs(read(c, buf, sizeof(buf))));
	say("read again=%s", rs(read(c, buf, sizeof(buf))));
	say("revents=%s",
	    events_str(wait_fd(c, POLLIN | POLLOUT | POLLRDHUP, 0)));
}

static void case_write_after_peer_close(void)
{
	char buf[4];
	int c, s, i;

	NEED(mk_pair(&c, &s) == 0);
	close(s);
	NEED(wait_fd(c, POLLIN, PROBE_WAIT_MS) > 0);
	/* The closed peer answers data with an RST. */
	say("send=%s", rs(send(c, "x", 1, MSG_NOSIGNAL)));
	say("rst seen=%s", yesno(wait_err(c)));
	for (i = 0; i < 3; i++)
		say("send=%s", rs(send(c, "x", 1, MSG_NOSIGNAL)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
}

static void case_peer_reset(void)
{
	char buf[4];
	int c, s, err = -1;
	socklen_t el = sizeof(err);

	NEED(mk_pair(&c, &s) == 0);
	close_rst(s);
	say("rst seen=%s", yesno(wait_err(c)));
	say("revents=%s",
	    events_str(wait_fd(c, POLLIN | POLLOUT | POLLRDHUP, 0)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR=%s", err ? ename(err) : "0");
	say("send=%s", rs(send(c, "x", 1, MSG_NOSIGNAL)));
}

static void case_write_after_reset(void)
{
	int c, s, i, err = -1;
	socklen_t el = sizeof(err);

	NEED(mk_pair(&c, &s) == 0);
	close_rst(s);
	say("rst seen=%s", yesno(wait_err(c)));
	for (i = 0; i < 3; i++)
		say("send MSG_NOSIGNAL=%s", rs(send(c, "x", 1, MSG_NOSIGNAL)));
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("SO_ERROR=%s", err ? ename(err) : "0");
}

/* In a child: provoke EPIPE with plain write(); exit code = writes survived. */
static void sigpipe_child(void)
{
	int c, s, i;

	if (mk_pair(&c, &s) != 0)
		_exit(100);
	close_rst(s);
	if (!wait_err(c))
		_exit(101);
	for (i = 0; i < 5; i++)
		if (write(c, "x", 1) == 1)
			_exit(102);
	_exit(i);
}

static void case_sigpipe_default(void)
{
	struct sigaction sa = { .sa_handler = SIG_DFL }, old;
	pid_t pid;

	fflush(stdout);
	sigaction(SIGPIPE, &sa, &old);
	pid = fork();
	if (pid == 0)
		sigpipe_child();
	sigaction(SIGPIPE, &old, NULL);
	NEED(pid > 0);
	say("child %s", wait_child(pid));
}

static void case_sigpipe_ignored(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN }, old;
	int c, s, i;

	NEED(mk_pair(&c, &s) == 0);
	close_rst(s);
	say("rst seen=%s", yesno(wait_err(c)));
	sigaction(SIGPIPE, &sa, &old);
	for (i = 0; i < 3; i++)
		say("write=%s", rs(write(c, "x", 1)));
	say("writev=%s", rs(writev(c, &(struct iovec){ "x", 1 }, 1)));
	say("send=%s", rs(send(c, "x", 1, 0)));
	sigaction(SIGPIPE, &old, NULL);
}

/* ------------------------------------------------------------------------ */
/* Blocked calls woken from another thread.                                 */

struct blocked {
	int fd;
	int op;	 /* 0 recv, 1 accept */
	long rc; /* result */
	int err;
	char data[16];
	pthread_t tid;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;

	errno = 0;
	if (b->op == 0)
		b->rc = recv(b->fd, b->data, sizeof(b->data), 0);
	else
		b->rc = accept(b->fd, NULL, NULL);
	b->err = errno;
	return NULL;
}

static const char *blocked_res(const struct blocked *b)
{
	errno = b->err;
	return rs(b->rc);
}

static void case_eof_while_blocked(void)
{
	struct blocked b = { 0 };
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(s, PROBE_WAIT_MS));
	b.fd = s;
	NEED(pthread_create(&b.tid, NULL, blocked_main, &b) == 0);
	sleep_ms(50); /* let it block; the result is the same if it has not */
	close(c);
	pthread_join(b.tid, NULL);
	say("peer closed while blocked: recv=%s", blocked_res(&b));
	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(s, PROBE_WAIT_MS));
	b.fd = s;
	NEED(pthread_create(&b.tid, NULL, blocked_main, &b) == 0);
	sleep_ms(50);
	send_all(c, "last", 4);
	close(c);
	pthread_join(b.tid, NULL);
	say("data then close: recv=%s '%.*s'", blocked_res(&b),
	    b.rc > 0 ? (int)b.rc : 0, b.data);
	say("next recv=%s", rs(recv(s, b.data, sizeof(b.data), 0)));
}

static void case_shutdown_wakes_blocked(void)
{
	struct sockaddr_in sin;
	struct blocked b = { 0 };
	int c, s, l;

	NEED(mk_pair(&c, &s) == 0);
	NEED(set_rcvtimeo(c, PROBE_WAIT_MS));
	b.fd = c;
	NEED(pthread_create(&b.tid, NULL, blocked_main, &b) == 0);
	sleep_ms(50);
	say("shutdown SHUT_RDWR=%s", rs(shutdown(c, SHUT_RDWR)));
	pthread_join(b.tid, NULL);
	say("blocked recv=%s", blocked_res(&b));
	say("peer sees eof=%s", rs(read_n(s, b.data, 1)));
	NEED((l = mk_listener(&sin)) >= 0);
	NEED(set_rcvtimeo(l, PROBE_WAIT_MS));
	b = (struct blocked){ .fd = l, .op = 1 };
	NEED(pthread_create(&b.tid, NULL, blocked_main, &b) == 0);
	sleep_ms(50);
	say("shutdown listener=%s", rs(shutdown(l, SHUT_RDWR)));
	pthread_join(b.tid, NULL);
	say("blocked accept=%s", blocked_res(&b));
}

/* EINTR: a helper thread signals the main thread until told to stop. */
static atomic_int sig_count;
static atomic_bool sig_stop;

struct signaller {
	pthread_t target, tid;
	int limit;	/* signals to send; 0: until sig_stop */
	int then_write; /* fd to write "data" to after the signals, or -1 */
};

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&sig_count, 1);
}

static void *signaller_main(void *arg)
{
	struct signaller *sg = arg;
	long end = now_ms() + PROBE_WAIT_MS;
	int n = 0;

	while (!atomic_load(&sig_stop) && now_ms() < end &&
	       (!sg->limit || n < sg->limit)) {
		pthread_kill(sg->target, SIGUSR1);
		n++;
		sleep_ms(20);
	}
	if (sg->then_write >= 0)
		send_all(sg->then_write, "data", 4);
	return NULL;
}

static bool signaller_start(struct signaller *sg, int limit, int then_write)
{
	atomic_store(&sig_stop, false);
	sg->target = pthread_self();
	sg->limit = limit;
	sg->then_write = then_write;
	return pthread_create(&sg->tid, NULL, signaller_main, sg) == 0;
}

static void signaller_stop(struct signaller *sg)
{
	atomic_store(&sig_stop, true);
	pthread_join(sg->tid, NULL);
}

static void case_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct signaller sg;
	struct pollfd p;
	char buf[8] = { 0 };
	ssize_t n;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sigaction(SIGUSR1, &sa, &old);
	NEED(signaller_start(&sg, 0, -1));
	say("recv, no SA_RESTART=%s", rs(recv(c, buf, sizeof(buf), 0)));
	signaller_stop(&sg);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	NEED(signaller_start(&sg, 5, s));
	n = recv(c, buf, sizeof(buf), 0);
	signaller_stop(&sg);
	say("recv, SA_RESTART=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	p = (struct pollfd){ .fd = c, .events = POLLIN };
	NEED(signaller_start(&sg, 0, -1));
	say("poll, SA_RESTART=%s", rs(poll(&p, 1, PROBE_WAIT_MS)));
	signaller_stop(&sg);
	NEED(set_rcvtimeo(c, PROBE_WAIT_MS));
	NEED(signaller_start(&sg, 0, -1));
	say("recv with SO_RCVTIMEO, SA_RESTART=%s",
	    rs(recv(c, buf, sizeof(buf), 0)));
	signaller_stop(&sg);
	sigaction(SIGUSR1, &old, NULL);
	say("handler ran=%s", yesno(atomic_load(&sig_count) > 0));
}

/* ------------------------------------------------------------------------ */
/* Bad descriptors.                                                         */

static void case_ebadf(void)
{
	struct pollfd p;
	const char *r;
	char buf[4];
	int fd, ep, val;
	socklen_t vl = sizeof(val);

	say("close(-1)=%s", rs(close(-1)));
	NEED((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
	NEED((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("close=%s", rs(close(fd)));
	say("close again=%s", rs(close(fd)));
	say("read=%s", rs(read(fd, buf, sizeof(buf))));
	say("write=%s", rs(write(fd, "x", 1)));
	say("recv=%s", rs(recv(fd, buf, sizeof(buf), 0)));
	say("send=%s", rs(send(fd, "x", 1, MSG_NOSIGNAL)));
	say("getsockopt=%s",
	    rs(getsockopt(fd, SOL_SOCKET, SO_TYPE, &val, &vl)));
	say("connect=%s", rs(connect(fd, NULL, 0)));
	say("shutdown=%s", rs(shutdown(fd, SHUT_RDWR)));
	say("fcntl F_GETFL=%s", rs(fcntl(fd, F_GETFL)));
	say("dup=%s", rs(dup(fd)));
	say("ioctl FIONREAD=%s", rs(ioctl(fd, FIONREAD, &val)));
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	r = rs(poll(&p, 1, 0));
	say("poll=%s revents=%s", r, events_str(p.revents));
	say("epoll_ctl ADD=%s",
	    rs(epoll_ctl(ep, EPOLL_CTL_ADD, fd,
			 &(struct epoll_event){ .events = EPOLLIN })));
	say("close(huge)=%s", rs(close(1 << 30)));
	say("recv(huge)=%s", rs(recv(1 << 30, buf, sizeof(buf), 0)));
	say("close(INT_MIN)=%s", rs(close(INT_MIN)));
}

static void case_enotsock(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	char buf[8];
	int p[2], val;
	socklen_t vl = sizeof(val);

	NEED(pipe(p) == 0);
	loopback4(&sin, 0);
	say("recv=%s", rs(recv(p[0], buf, sizeof(buf), MSG_DONTWAIT)));
	say("send=%s", rs(send(p[1], "x", 1, MSG_NOSIGNAL)));
	say("getsockopt=%s",
	    rs(getsockopt(p[0], SOL_SOCKET, SO_TYPE, &val, &vl)));
	say("setsockopt=%s", rs(setsockopt(p[0], SOL_SOCKET, SO_KEEPALIVE,
					   &(int){ 1 }, sizeof(int))));
	say("getsockname=%s",
	    rs(getsockname(p[0], (struct sockaddr *)&sin, &len)));
	say("getpeername=%s",
	    rs(getpeername(p[0], (struct sockaddr *)&sin, &len)));
	say("shutdown=%s", rs(shutdown(p[0], SHUT_RD)));
	say("connect=%s",
	    rs(connect(p[0], (struct sockaddr *)&sin, sizeof(sin))));
	say("bind=%s", rs(bind(p[0], (struct sockaddr *)&sin, sizeof(sin))));
	say("listen=%s", rs(listen(p[0], 1)));
	say("accept=%s", rs(accept(p[0], NULL, NULL)));
	say("sendmsg=%s",
	    rs(sendmsg(p[1], &(struct msghdr){ 0 }, MSG_NOSIGNAL)));
	say("pipe write=%s", rs(write(p[1], "abc", 3)));
	say("pipe read=%s", rs(read(p[0], buf, sizeof(buf))));
}

static void case_enotconn(void)
{
	struct sockaddr_in sin;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char buf[8];
	int fd, l;

	NEED((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("recv=%s", rs(recv(fd, buf, sizeof(buf), 0)));
	say("read=%s", rs(read(fd, buf, sizeof(buf))));
	say("getpeername=%s",
	    rs(getpeername(fd, (struct sockaddr *)&ss, &len)));
	say("send MSG_NOSIGNAL=%s", rs(send(fd, "x", 1, MSG_NOSIGNAL)));
	say("shutdown=%s", rs(shutdown(fd, SHUT_RDWR)));
	say("recv after failed shutdown=%s", rs(recv(fd, buf, sizeof(buf), 0)));
	len = sizeof(ss);
	NEED(getsockname(fd, (struct sockaddr *)&ss, &len) == 0);
	say("getsockname unbound=%s %s port %u", family_str(ss.ss_family),
	    addr_str(&ss), (unsigned int)ntohs(port_of(&ss)));
	NEED((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	say("recv nonblocking=%s", rs(recv(fd, buf, sizeof(buf), 0)));
	NEED((l = mk_listener(&sin)) >= 0);
	say("recv on listener=%s", rs(recv(l, buf, sizeof(buf), 0)));
	len = sizeof(ss);
	say("getpeername on listener=%s",
	    rs(getpeername(l, (struct sockaddr *)&ss, &len)));
	say("send on listener=%s", rs(send(l, "x", 1, MSG_NOSIGNAL)));
}

/* ------------------------------------------------------------------------ */
/* Duplicates and closing.                                                  */

/* Send @tag through @fd and check that @peer receives it. */
static const char *through(int fd, int peer, const char *tag)
{
	char buf[32] = { 0 };
	size_t n = strlen(tag);

	if (!send_all(fd, tag, n))
		return "send failed";
	if (read_n(peer, buf, n) != (ssize_t)n || memcmp(buf, tag, n))
		return "not received";
	return "ok";
}

static void case_dup_family(void)
{
	char buf[4];
	int c, s, d1, d2, d3, d4, d5, t;

	NEED(mk_pair(&c, &s) == 0);
	NEED((d1 = dup(c)) >= 0);
	say("close original=%s", rs(close(c)));
	say("dup works=%s", through(d1, s, "dup"));
	say("peer no eof=%s", yesno(!readable_now(s)));
	NEED((t = open("/dev/null", O_RDONLY)) >= 0);
	d2 = dup2(d1, t);
	say("dup2 onto open fd returns it=%s", yesno(d2 == t));
	say("dup2 works=%s", through(d2, s, "dup2"));
	say("dup2 same fd=%s", d1 == dup2(d1, d1) ? "returns fd" : "other");
	say("dup3 same fd=%s", rs(dup3(d1, d1, 0)));
	NEED((t = open("/dev/null", O_RDONLY)) >= 0);
	say("dup3 bad flags=%s", rs(dup3(d1, t, 0x1234)));
	d3 = dup3(d1, t, O_CLOEXEC);
	say("dup3 O_CLOEXEC=%s FD_CLOEXEC=%s", d3 == t ? "ok" : rs(d3),
	    yesno(is_cloexec(d3)));
	d4 = fcntl(d1, F_DUPFD_CLOEXEC, 0);
	say("F_DUPFD_CLOEXEC FD_CLOEXEC=%s", yesno(is_cloexec(d4)));
	say("F_DUPFD_CLOEXEC works=%s", through(d4, s, "dupfd"));
	d5 = fcntl(d1, F_DUPFD, 0);
	say("F_DUPFD=%s", yesno(d5 >= 0));
	NEED(set_nonblock(d1, true));
	say("O_NONBLOCK shared by dups=%s", yesno(is_nonblock(d4)));
	NEED(set_nonblock(d4, false));
	say("cleared through another dup=%s", yesno(!is_nonblock(d1)));
	close(d1);
	close(d2);
	close(d3);
	say("peer no eof while a dup is open=%s", yesno(!readable_now(s)));
	say("last dups work=%s", through(d4, s, "last"));
	close(d4);
	say("peer no eof=%s", yesno(!readable_now(s)));
	say("F_DUPFD copy works=%s", through(d5, s, "dupfd2"));
	close(d5);
	say("peer eof after the last close=%s",
	    rs(read_n(s, buf, sizeof(buf))));
}

static void case_dup2_onto_socket(void)
{
	char buf[4];
	int c1, s1, c2, s2;

	NEED(mk_pair(&c1, &s1) == 0);
	NEED(mk_pair(&c2, &s2) == 0);
	say("dup2 onto connected socket=%s", yesno(dup2(c1, c2) == c2));
	say("victim's peer sees eof=%s", rs(read_n(s2, buf, sizeof(buf))));
	say("new fd reaches first peer=%s", through(c2, s1, "new"));
	close(c1);
	say("after closing source, peer no eof=%s", yesno(!readable_now(s1)));
	say("still works=%s", through(c2, s1, "still"));
	close(c2);
	say("peer eof=%s", rs(read_n(s1, buf, sizeof(buf))));
}

static void case_close_range(void)
{
	int c[3], s[3], hi[3], i, base, fd;
	char buf[4];

	/* Move the three client ends to consecutive numbers >= base. */
	NEED((base = fcntl(0, F_DUPFD, 300)) >= 0 || errno == EBADF);
	if (base >= 0)
		close(base);
	else
		base = 300;
	for (i = 0; i < 3; i++) {
		NEED(mk_pair(&c[i], &s[i]) == 0);
		NEED((hi[i] = fcntl(c[i], F_DUPFD, base)) >= 0);
		close(c[i]);
		base = hi[i] + 1;
	}
	NEED(hi[1] == hi[0] + 1 && hi[2] == hi[1] + 1);
	say("CLOSE_RANGE_CLOEXEC=%s",
	    rs(close_range((unsigned int)hi[0], (unsigned int)hi[0],
			   CLOSE_RANGE_CLOEXEC)));
	say("cloexec set=%s", yesno(is_cloexec(hi[0])));
	say("close_range=%s",
	    rs(close_range((unsigned int)hi[0], (unsigned int)hi[2], 0)));
	for (i = 0; i < 3; i++)
		say("fd %d closed=%s peer eof=%s", i,
		    yesno(fcntl(hi[i], F_GETFD) < 0 && errno == EBADF),
		    rs(read_n(s[i], buf, sizeof(buf))));
	say("bad flags=%s", rs(close_range(0, 0, 0x8000)));
	say("first > last=%s", rs(close_range(10, 5, 0)));
	/* A socket that takes a freed number is a fresh, working socket. */
	NEED(mk_pair(&c[0], &s[0]) == 0);
	NEED((fd = dup2(c[0], hi[1])) == hi[1]);
	close(c[0]);
	say("reused number works=%s", through(fd, s[0], "reuse"));
}

/*
 * close_range() that fails (unknown flag) closes nothing: the socket in the
 * range must stay a fully working socket. probes.bats also checks, through
 * XSOCK_LOG, that libxsock still tracks it.
 */
static void case_close_range_einval(void)
{
	struct sockaddr_in sin;
	int l, c, s;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("close_range bad flags over a socket=%s",
	    rs(close_range((unsigned int)c, (unsigned int)c, 0x8000)));
	say("socket still open=%s", yesno(fcntl(c, F_GETFD) >= 0));
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("data=%s", through(c, s, "range"));
}

/*
 * What daemons do at startup: close every fd above stderr, then open many.
 * Whatever libxsock had open above 2 is gone, and its numbers are the
 * application's again: nothing may be written to them behind its back.
 * Last in the list: it closes every fd >= 3 of the process.
 */
static void case_close_range_all(void)
{
	struct sockaddr_in sin;
	char buf[256];
	int p[2], l, c, s, n = 0;
	ssize_t r;

	say("close_range(3, ~0U)=%s", rs(close_range(3, ~0U, 0)));
	NEED(pipe2(p, O_NONBLOCK) == 0);
	/* Take every fd number the limit allows, up to 65536. */
	while (n < 65536 && fcntl(p[1], F_DUPFD, 0) >= 0)
		n++;
	say("filled the fd table=%s", yesno(errno == EMFILE));
	close(p[1]);
	/* Free a few numbers for the sockets. */
	close(3 + 2);
	close(3 + 3);
	close(3 + 4);
	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	say("connect=%s", rs(connect(c, (struct sockaddr *)&sin, sizeof(sin))));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("data=%s", through(c, s, "after"));
	close(c);
	close(s);
	r = read(p[0], buf, sizeof(buf));
	say("bytes found in the application's pipe=%s", rs(r));
}

static void case_fcntl_flags(void)
{
	char buf[4];
	int c, s, fl;

	NEED(mk_pair(&c, &s) == 0);
	fl = fcntl(c, F_GETFL);
	say("F_GETFL O_NONBLOCK=%s O_RDWR=%s", yesno(fl & O_NONBLOCK),
	    yesno((fl & O_ACCMODE) == O_RDWR));
	say("F_SETFL O_NONBLOCK=%s", rs(fcntl(c, F_SETFL, fl | O_NONBLOCK)));
	say("F_GETFL O_NONBLOCK=%s", yesno(is_nonblock(c)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("F_SETFL clear=%s", rs(fcntl(c, F_SETFL, fl & ~O_NONBLOCK)));
	say("F_GETFL O_NONBLOCK=%s", yesno(is_nonblock(c)));
	say("fcntl64 F_SETFL O_NONBLOCK=%s",
	    rs(fcntl64(c, F_SETFL, fl | O_NONBLOCK)));
	say("fcntl64 F_GETFL O_NONBLOCK=%s",
	    yesno(fcntl64(c, F_GETFL) & O_NONBLOCK));
	set_nonblock(c, false);
	say("F_SETFD FD_CLOEXEC=%s", rs(fcntl(c, F_SETFD, FD_CLOEXEC)));
	say("F_GETFD=%s", rs(fcntl(c, F_GETFD)));
	say("F_SETOWN=%s", rs(fcntl(c, F_SETOWN, getpid())));
	say("F_GETOWN is self=%s", yesno(fcntl(c, F_GETOWN) == getpid()));
	say("bad cmd=%s", rs(fcntl(c, 99999)));
	say("F_SETFL O_APPEND=%s", rs(fcntl(c, F_SETFL, O_APPEND)));
	say("F_GETFL O_APPEND=%s", yesno(fcntl(c, F_GETFL) & O_APPEND));
}

static void case_ioctl(void)
{
	struct sockaddr_in sin;
	const char *r;
	char buf[1000];
	int c, s, v = -1, on = 1, l;

	NEED(mk_pair(&c, &s) == 0);
	r = rs(ioctl(c, FIONREAD, &v));
	say("FIONREAD empty=%s v=%d", r, v);
	memset(buf, 'z', sizeof(buf));
	NEED(send_all(s, buf, sizeof(buf)));
	say("all arrived=%s", yesno(wait_inq(c, (int)sizeof(buf))));
	ioctl(c, FIONREAD, &v);
	say("FIONREAD=%d", v);
	say("SIOCATMARK=%s", rs(ioctl(c, SIOCATMARK, &v)));
	say("at mark=%d", v);
	say("recv 400=%s", rs(recv(c, buf, 400, 0)));
	ioctl(c, FIONREAD, &v);
	say("FIONREAD=%d", v);
	say("FIONBIO=%s", rs(ioctl(c, FIONBIO, &on)));
	say("O_NONBLOCK=%s", yesno(is_nonblock(c)));
	say("drain=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("recv=%s", rs(recv(c, buf, sizeof(buf), 0)));
	NEED((l = mk_listener(&sin)) >= 0);
	say("FIONREAD on listener=%s", rs(ioctl(l, FIONREAD, &v)));
	say("bad request=%s", rs(ioctl(c, 0x7fff1234, &v)));
	/* Unacknowledged bytes of the sender: 0 once the ACKs are in. */
	say("SIOCOUTQ=%s", rs(ioctl(s, SIOCOUTQ, &v)));
	for (on = 0; v != 0 && on < 1000; on++) {
		sleep_ms(5);
		ioctl(s, SIOCOUTQ, &v);
	}
	say("SIOCOUTQ drains to 0=%s", yesno(v == 0));
}

static void case_sockopts(void)
{
	struct sockaddr_in sin;
	struct linger lg = { 1, 5 }, lg2 = { 0 };
	struct tcp_info ti;
	const char *r;
	socklen_t len;
	int c, s, l, v, set;

	NEED(mk_pair(&c, &s) == 0);
	set = 65536;
	say("SO_SNDBUF set=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &set, sizeof(set))));
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_SNDBUF, &v, &len);
	say("get=%s", v == 2 * set ? "doubled" : v == set ? "same" : "other");
	say("SO_RCVBUF set=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &set, sizeof(set))));
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_RCVBUF, &v, &len);
	say("get=%s", v == 2 * set ? "doubled" : v == set ? "same" : "other");
	set = 1;
	say("TCP_NODELAY set=%s",
	    rs(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &set, sizeof(set))));
	len = sizeof(v);
	v = -1;
	r = rs(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &len));
	say("get=%s v=%d len=%u", r, v != 0, (unsigned int)len);
	len = sizeof(v);
	getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len);
	say("peer TCP_NODELAY=%d", v);
	say("SO_KEEPALIVE set=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &set, sizeof(set))));
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &len);
	say("get=%d", v);
	say("SO_LINGER set=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))));
	len = sizeof(lg2);
	getsockopt(c, SOL_SOCKET, SO_LINGER, &lg2, &len);
	say("get=%d,%d", lg2.l_onoff, lg2.l_linger);
	set = 0x10;
	say("IP_TOS set=%s",
	    rs(setsockopt(c, IPPROTO_IP, IP_TOS, &set, sizeof(set))));
	len = sizeof(v);
	getsockopt(c, IPPROTO_IP, IP_TOS, &v, &len);
	say("get=0x%x", (unsigned int)v);
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &len);
	say("SO_TYPE=%s", v == SOCK_STREAM ? "SOCK_STREAM" : "other");
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_DOMAIN, &v, &len);
	say("SO_DOMAIN=%s", family_str(v));
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_PROTOCOL, &v, &len);
	say("SO_PROTOCOL=%s", v == IPPROTO_TCP ? "IPPROTO_TCP" : "other");
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &len);
	say("SO_ERROR=%d", v);
	len = sizeof(v);
	getsockopt(c, SOL_SOCKET, SO_ACCEPTCONN, &v, &len);
	say("SO_ACCEPTCONN=%d", v);
	NEED((l = mk_listener(&sin)) >= 0);
	len = sizeof(v);
	getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &len);
	say("listener SO_ACCEPTCONN=%d", v);
	len = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	say("TCP_INFO=%s", rs(getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &len)));
	say("state=%s", ti.tcpi_state == 1 ? "ESTABLISHED" : "other");
	len = sizeof(v);
	say("unknown option=%s",
	    rs(getsockopt(c, SOL_SOCKET, 0x7fff, &v, &len)));
	say("unknown level=%s",
	    rs(setsockopt(c, 0x7fff, 1, &set, sizeof(set))));
	say("short optlen=%s",
	    rs(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &set, 1)));
	len = 0;
	r = rs(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &len));
	say("getsockopt len 0=%s len=%u", r, (unsigned int)len);
	say("SO_REUSEADDR=%s",
	    rs(setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &set, sizeof(set))));
	say("still works=%s", through(c, s, "opts"));
}

static void case_names(void)
{
	struct sockaddr_storage cn, cp, sn, sp, small;
	socklen_t l1 = sizeof(cn), l2 = sizeof(cp), l3 = sizeof(sn),
		  l4 = sizeof(sp), ls;
	const char *r;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(getsockname(c, (struct sockaddr *)&cn, &l1) == 0);
	NEED(getpeername(c, (struct sockaddr *)&cp, &l2) == 0);
	NEED(getsockname(s, (struct sockaddr *)&sn, &l3) == 0);
	NEED(getpeername(s, (struct sockaddr *)&sp, &l4) == 0);
	say("client name %s %s len=%u", family_str(cn.ss_family), addr_str(&cn),
	    (unsigned int)l1);
	say("client peer %s %s len=%u", family_str(cp.ss_family), addr_str(&cp),
	    (unsigned int)l2);
	say("client name vs server peer=%s",
	    same_addr(&cn, &sp) ? "match" : "differ");
	say("client peer vs server name=%s",
	    same_addr(&cp, &sn) ? "match" : "differ");
	ls = 4;
	r = rs(getsockname(c, (struct sockaddr *)&small, &ls));
	say("getsockname len 4=%s len out=%u", r, (unsigned int)ls);
	ls = 0;
	r = rs(getpeername(c, (struct sockaddr *)&small, &ls));
	say("getpeername len 0=%s len out=%u", r, (unsigned int)ls);
	say("NULL len=%s", rs(getsockname(c, (struct sockaddr *)&small, NULL)));
}

/* ------------------------------------------------------------------------ */
/* Vectored and batched I/O.                                                */

static void case_readv_writev(void)
{
	static const size_t wl[] = { 0, 1, 0, 7, 0, 0, 100, 3, 0, 4096, 0, 1 };
	static const size_t rl[] = { 5, 0, 0, 1000, 0, 3000, 0, 203 };
	static struct iovec many[IOV_MAX + 1];
	struct iovec wv[12], rv[8];
	unsigned char src[4209], dst[4209];
	size_t i, off = 0, total = 0;
	ssize_t n;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	fill_pattern(src, sizeof(src), 0);
	for (i = 0; i < 12; i++) {
		wv[i].iov_base = src + off;
		wv[i].iov_len = wl[i];
		off += wl[i];
	}
	total = off;
	say("writev 12 iovecs (6 empty)=%s", rs(writev(c, wv, 12)));
	NEED(wait_inq(s, (int)total));
	memset(dst, 0, sizeof(dst));
	for (i = 0, off = 0; i < 8; i++) {
		rv[i].iov_base = dst + off;
		rv[i].iov_len = rl[i];
		off += rl[i];
	}
	n = readv(s, rv, 8);
	say("readv 8 iovecs=%s", rs(n));
	say("data=%s", n == (ssize_t)total && !memcmp(src, dst, total)
			       ? "same"
			       : "differ");
	say("writev 0 iovecs=%s", rs(writev(c, wv, 0)));
	say("writev only empty=%s", rs(writev(c, wv, 1)));
	say("writev -1=%s", rs(writev(c, wv, probe_minus_one)));
	say("writev IOV_MAX+1=%s", rs(writev(c, many, IOV_MAX + 1)));
	say("readv 0 iovecs=%s", rs(readv(s, rv, 0)));
	set_nonblock(s, true);
	say("readv empty nonblocking=%s", rs(readv(s, rv, 8)));
}

static void case_sendmsg_recvmsg(void)
{
	struct iovec wv[5], rv[4];
	struct msghdr mh;
	struct sockaddr_storage from;
	char ctl[64], out[64] = { 0 };
	char rb0[3], rb2[40];
	struct cmsghdr *cm;
	ssize_t n;
	int c, s, pfd[2];

	NEED(mk_pair(&c, &s) == 0);
	wv[0] = (struct iovec){ "abc", 3 };
	wv[1] = (struct iovec){ NULL, 0 };
	wv[2] = (struct iovec){ "defg", 4 };
	wv[3] = (struct iovec){ "", 0 };
	wv[4] = (struct iovec){ "hij", 3 };
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = wv;
	mh.msg_iovlen = 5;
	say("sendmsg=%s", rs(sendmsg(c, &mh, MSG_NOSIGNAL)));
	NEED(wait_inq(s, 10));
	rv[0] = (struct iovec){ rb0, sizeof(rb0) };
	rv[1] = (struct iovec){ NULL, 0 };
	rv[2] = (struct iovec){ rb2, sizeof(rb2) };
	rv[3] = (struct iovec){ NULL, 0 };
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = rv;
	mh.msg_iovlen = 4;
	mh.msg_name = &from;
	mh.msg_namelen = sizeof(from);
	mh.msg_control = ctl;
	mh.msg_controllen = sizeof(ctl);
	mh.msg_flags = -1;
	n = recvmsg(s, &mh, 0);
	memcpy(out, rb0, 3);
	if (n > 3)
		memcpy(out + 3, rb2, (size_t)n - 3);
	say("recvmsg=%s '%s' namelen=%u controllen=%zu flags=0x%x", rs(n), out,
	    (unsigned int)mh.msg_namelen, (size_t)mh.msg_controllen,
	    (unsigned int)mh.msg_flags);
	/* SCM_RIGHTS over TCP: the kernel refuses it. */
	NEED(pipe(pfd) == 0);
	memset(&mh, 0, sizeof(mh));
	memset(ctl, 0, sizeof(ctl));
	mh.msg_iov = wv;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = CMSG_SPACE(sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pfd[0], sizeof(int));
	say("sendmsg SCM_RIGHTS=%s", rs(sendmsg(c, &mh, MSG_NOSIGNAL)));
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = wv;
	mh.msg_iovlen = 1;
	mh.msg_name = &from;
	mh.msg_namelen = sizeof(struct sockaddr_in);
	memset(&from, 0, sizeof(from));
	from.ss_family = AF_INET;
	say("sendmsg with msg_name=%s", rs(sendmsg(c, &mh, MSG_NOSIGNAL)));
	say("sendto with address=%s",
	    rs(sendto(c, "x", 1, MSG_NOSIGNAL, (struct sockaddr *)&from,
		      sizeof(struct sockaddr_in))));
	NEED(wait_inq(s, 4));
	mh.msg_namelen = sizeof(from);
	mh.msg_iov = rv;
	mh.msg_iovlen = 4;
	n = recvfrom(s, rb2, sizeof(rb2), 0, (struct sockaddr *)&from,
		     &mh.msg_namelen);
	say("recvfrom=%s addrlen=%u", rs(n), (unsigned int)mh.msg_namelen);
}

static void case_mmsg(void)
{
	struct mmsghdr sv[3], rv[3];
	struct iovec siov[3], riov[3];
	char rbuf[3][4] = { { 0 } }, all[13] = { 0 };
	const char *parts[3] = { "aaaa", "bbbb", "cccc" };
	struct timespec to = { 1, 0 };
	const char *r;
	int c, s, i, n;

	NEED(mk_pair(&c, &s) == 0);
	memset(sv, 0, sizeof(sv));
	memset(rv, 0, sizeof(rv));
	for (i = 0; i < 3; i++) {
		siov[i] = (struct iovec){ (void *)parts[i], 4 };
		sv[i].msg_hdr.msg_iov = &siov[i];
		sv[i].msg_hdr.msg_iovlen = 1;
		riov[i] = (struct iovec){ rbuf[i], 4 };
		rv[i].msg_hdr.msg_iov = &riov[i];
		rv[i].msg_hdr.msg_iovlen = 1;
	}
	n = sendmmsg(c, sv, 3, MSG_NOSIGNAL);
	say("sendmmsg=%s lens=%u,%u,%u", rs(n), sv[0].msg_len, sv[1].msg_len,
	    sv[2].msg_len);
	NEED(wait_inq(s, 12));
	n = recvmmsg(s, rv, 3, MSG_DONTWAIT, NULL);
	for (i = 0; i < 3 && i < n; i++)
		memcpy(all + 4 * i, rbuf[i], 4);
	say("recvmmsg=%s lens=%u,%u,%u data=%s", rs(n), rv[0].msg_len,
	    rv[1].msg_len, rv[2].msg_len, all);
	say("recvmmsg empty=%s", rs(recvmmsg(s, rv, 3, MSG_DONTWAIT, NULL)));
	NEED(send_all(c, "zz", 2));
	NEED(wait_inq(s, 2));
	memset(rv, 0, sizeof(rv));
	for (i = 0; i < 3; i++) {
		rv[i].msg_hdr.msg_iov = &riov[i];
		rv[i].msg_hdr.msg_iovlen = 1;
	}
	r = rs(recvmmsg(s, rv, 3, MSG_DONTWAIT, &to));
	say("recvmmsg partial=%s len0=%u", r, rv[0].msg_len);
	say("sendmmsg vlen 0=%s", rs(sendmmsg(c, sv, 0, MSG_NOSIGNAL)));
}

static int mk_tempfile(size_t n)
{
	char path[PATH_MAX];
	const char *dir = getenv("TMPDIR");
	unsigned char *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/sockprobe.XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	buf = malloc(n);
	if (!buf)
		return close_keep_errno(fd);
	fill_pattern(buf, n, 0);
	if (write(fd, buf, n) != (ssize_t)n) {
		free(buf);
		return close_keep_errno(fd);
	}
	free(buf);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static void case_sendfile(void)
{
	unsigned char buf[6000];
	off_t off;
	off64_t off64;
	ssize_t n;
	int c, s, f;

	NEED(mk_pair(&c, &s) == 0);
	NEED((f = mk_tempfile(10000)) >= 0);
	off = 1000;
	say("sendfile 5000 at offset 1000=%s", rs(sendfile(c, f, &off, 5000)));
	say("offset after=%ld file position=%ld", (long)off,
	    (long)lseek(f, 0, SEEK_CUR));
	n = read_n(s, buf, 5000);
	say("peer got=%s pattern=%s", rs(n),
	    yesno(n == 5000 && check_pattern(buf, 5000, 1000)));
	say("sendfile NULL offset 100=%s", rs(sendfile(c, f, NULL, 100)));
	say("file position=%ld", (long)lseek(f, 0, SEEK_CUR));
	n = read_n(s, buf, 100);
	say("peer got=%s pattern=%s", rs(n),
	    yesno(n == 100 && check_pattern(buf, 100, 0)));
	off64 = 9990;
	say("sendfile64 past end=%s", rs(sendfile64(c, f, &off64, 100)));
	say("offset=%ld", (long)off64);
	say("peer got=%s", rs(read_n(s, buf, 10)));
	off = 20000;
	say("offset beyond EOF=%s", rs(sendfile(c, f, &off, 10)));
	say("count 0=%s", rs(sendfile(c, f, NULL, 0)));
	off = -1;
	say("negative offset=%s", rs(sendfile(c, f, &off, 10)));
	say("socket as source=%s", rs(sendfile(c, s, NULL, 10)));
	set_nonblock(s, true);
	say("nothing more=%s", rs(recv(s, buf, sizeof(buf), 0)));
}

static void case_zero_length_io(void)
{
	struct iovec iov = { NULL, 0 };
	char buf[4];
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	say("send 0=%s", rs(send(c, buf, 0, MSG_NOSIGNAL)));
	say("write 0=%s", rs(write(c, buf, 0)));
	say("writev empty=%s", rs(writev(c, &iov, 1)));
	say("peer readable=%s", yesno(wait_fd(s, POLLIN, 50) > 0));
	/* Linux: a blocking recv of 0 bytes waits for data (target 1 byte). */
	NEED(set_rcvtimeo(s, 100));
	say("recv 0 blocking, no data=%s", rs(recv(s, buf, 0, 0)));
	say("read 0=%s", rs(read(s, buf, 0)));
	NEED(send_all(c, "x", 1));
	NEED(wait_inq(s, 1));
	say("recv 0 with data=%s", rs(recv(s, buf, 0, 0)));
	say("data kept=%s", rs(recv(s, buf, sizeof(buf), 0)));
	close(c);
	NEED(wait_fd(s, POLLIN, PROBE_WAIT_MS) > 0);
	say("recv 0 at EOF=%s", rs(recv(s, buf, 0, 0)));
	say("recv at EOF=%s", rs(recv(s, buf, sizeof(buf), 0)));
}

/* ------------------------------------------------------------------------ */
/* Readiness: poll, select, epoll.                                          */

static void case_poll_basics(void)
{
	struct pollfd p[4];
	struct timespec ts = { 0, 20000000 };
	struct timeval tv = { 0, 20000 };
	const char *r;
	int c, s, pp[2], dead, ep;
	long t0;

	say("poll nfds=0=%s", rs(poll(NULL, 0, 20)));
	say("ppoll nfds=0=%s", rs(ppoll(NULL, 0, &ts, NULL)));
	say("select nfds=0=%s", rs(select(0, NULL, NULL, NULL, &tv)));
	NEED((ep = epoll_create1(0)) >= 0);
	say("epoll_wait empty set=%s",
	    rs(epoll_wait(ep, (struct epoll_event[1]){ { 0 } }, 1, 20)));
	t0 = now_ms();
	poll(NULL, 0, 50);
	say("poll nfds=0 slept=%s", yesno(now_ms() - t0 >= 45));
	NEED(mk_pair(&c, &s) == 0);
	NEED(pipe(pp) == 0);
	NEED((dead = dup(pp[0])) >= 0);
	close(dead);
	p[0] = (struct pollfd){ .fd = c, .events = POLLIN | POLLOUT };
	p[1] = (struct pollfd){ .fd = pp[1], .events = POLLOUT };
	p[2] = (struct pollfd){ .fd = dead, .events = POLLIN };
	p[3] = (struct pollfd){ .fd = -1, .events = POLLIN, .revents = 7 };
	r = rs(poll(p, 4, 0));
	say("poll mixed=%s", r);
	say("socket=%s pipe=%s closed=%s negative=%s", events_str(p[0].revents),
	    events_str(p[1].revents), events_str(p[2].revents),
	    events_str(p[3].revents));
	NEED(send_all(s, "x", 1));
	NEED(wait_inq(c, 1));
	p[0].events = POLLIN;
	r = rs(ppoll(p, 1, &ts, NULL));
	say("ppoll after data=%s revents=%s", r, events_str(p[0].revents));
}

static void case_poll_high_fd(void)
{
	struct rlimit rl;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 }, out;
	struct pollfd p;
	const char *r;
	char buf[8];
	int c, s, h, ep;

	NEED(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < 2048 && rl.rlim_max >= 2048) {
		rl.rlim_cur = 2048;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	NEED(mk_pair(&c, &s) == 0);
	h = fcntl(c, F_DUPFD, 1100);
	if (h < 0) {
		say("fd above 1024 unavailable");
		return;
	}
	close(c);
	say("fd above 1024=%s", yesno(h > 1024));
	NEED(send_all(s, "high", 4));
	p = (struct pollfd){ .fd = h, .events = POLLIN };
	r = rs(poll(&p, 1, PROBE_WAIT_MS));
	say("poll=%s revents=%s", r, events_str(p.revents));
	NEED((ep = epoll_create1(0)) >= 0);
	say("epoll_ctl=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, h, &ev)));
	r = rs(epoll_wait(ep, &out, 1, PROBE_WAIT_MS));
	say("epoll_wait=%s data=%llu", r, (unsigned long long)out.data.u64);
	say("recv=%s", rs(recv(h, buf, sizeof(buf), 0)));
	say("through high fd=%s", through(h, s, "back"));
	close(h);
	say("peer eof=%s", rs(read_n(s, buf, sizeof(buf))));
}

static void case_select(void)
{
	fd_set r, w;
	struct timeval tv;
	struct timespec ts = { 0, 0 };
	int c, s, n;

	NEED(mk_pair(&c, &s) == 0);
	FD_ZERO(&r);
	FD_SET(c, &r);
	tv = (struct timeval){ 0, 0 };
	say("select read, no data=%s", rs(select(c + 1, &r, NULL, NULL, &tv)));
	FD_ZERO(&w);
	FD_SET(c, &w);
	tv = (struct timeval){ 1, 0 };
	n = select(c + 1, NULL, &w, NULL, &tv);
	say("select write=%s set=%s", rs(n), yesno(FD_ISSET(c, &w)));
	NEED(send_all(s, "x", 1));
	FD_ZERO(&r);
	FD_SET(c, &r);
	FD_ZERO(&w);
	FD_SET(c, &w);
	tv = (struct timeval){ PROBE_WAIT_MS / 1000, 0 };
	n = select(c + 1, &r, &w, NULL, &tv);
	say("select read+write after data=%s r=%s w=%s", rs(n),
	    yesno(FD_ISSET(c, &r)), yesno(FD_ISSET(c, &w)));
	FD_ZERO(&r);
	FD_SET(c, &r);
	say("pselect=%s", rs(pselect(c + 1, &r, NULL, NULL, &ts, NULL)));
	FD_ZERO(&r);
	FD_SET(c, &r);
	say("select negative nfds=%s", rs(select(-1, &r, NULL, NULL, &tv)));
}

static void case_epoll_lt(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x1234 },
			   out[2];
	const char *r;
	char buf[16];
	int c, s, ep;

	NEED(mk_pair(&c, &s) == 0);
	NEED((ep = epoll_create1(EPOLL_CLOEXEC)) >= 0);
	say("epoll FD_CLOEXEC=%s", yesno(is_cloexec(ep)));
	say("add=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev)));
	say("wait, no data=%s", rs(epoll_wait(ep, out, 2, 0)));
	NEED(send_all(s, "0123456789", 10));
	NEED(wait_inq(c, 10));
	r = rs(epoll_wait(ep, out, 2, PROBE_WAIT_MS));
	say("wait=%s events=%s data=0x%llx", r, events_str((int)out[0].events),
	    (unsigned long long)out[0].data.u64);
	say("read 4=%s", rs(recv(c, buf, 4, 0)));
	say("wait again (level)=%s", rs(epoll_wait(ep, out, 2, 0)));
	say("epoll_pwait=%s", rs(epoll_pwait(ep, out, 2, 0, NULL)));
	say("epoll_pwait2=%s",
	    rs(epoll_pwait2(ep, out, 2, &(struct timespec){ 0, 0 }, NULL)));
	say("read rest=%s", rs(recv(c, buf, sizeof(buf), 0)));
	say("wait after drain=%s", rs(epoll_wait(ep, out, 2, 0)));
	ev.events = EPOLLIN | EPOLLOUT;
	say("mod=%s", rs(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev)));
	r = rs(epoll_wait(ep, out, 2, 0));
	say("wait=%s events=%s", r, events_str((int)out[0].events));
	say("del=%s", rs(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL)));
	say("wait=%s", rs(epoll_wait(ep, out, 2, 0)));
	say("epoll_create(0)=%s", rs(epoll_create(0)));
	say("epoll_create(1) ok=%s", yesno(epoll_create(1) >= 0));
}

static void case_epoll_et_rdhup(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET | EPOLLRDHUP,
				  .data.u64 = 9 },
			   out[2];
	const char *r;
	char buf[16];
	int c, s, ep;

	NEED(mk_pair(&c, &s) == 0);
	NEED((ep = epoll_create1(0)) >= 0);
	NEED(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0);
	NEED(send_all(s, "0123456789", 10));
	NEED(wait_inq(c, 10));
	r = rs(epoll_wait(ep, out, 2, PROBE_WAIT_MS));
	say("wait=%s events=%s", r, events_str((int)out[0].events));
	say("read 4=%s", rs(recv(c, buf, 4, 0)));
	say("wait again (edge)=%s", rs(epoll_wait(ep, out, 2, 0)));
	NEED(send_all(s, "ab", 2));
	NEED(wait_inq(c, 8));
	say("new data: wait=%s", rs(epoll_wait(ep, out, 2, PROBE_WAIT_MS)));
	say("shutdown peer SHUT_WR=%s", rs(shutdown(s, SHUT_WR)));
	NEED(wait_fd(c, POLLRDHUP, PROBE_WAIT_MS) > 0);
	r = rs(epoll_wait(ep, out, 2, PROBE_WAIT_MS));
	say("wait=%s events=%s", r, events_str((int)out[0].events));
	ev.events = EPOLLIN | EPOLLONESHOT;
	say("mod ONESHOT=%s", rs(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev)));
	say("wait=%s", rs(epoll_wait(ep, out, 2, 0)));
	say("wait again (disarmed)=%s", rs(epoll_wait(ep, out, 2, 0)));
}

static void case_epoll_dup_close(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 5 }, out[2];
	const char *r;
	char buf[8];
	int c, s, ep, d;

	NEED(mk_pair(&c, &s) == 0);
	NEED((ep = epoll_create1(0)) >= 0);
	NEED(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
	NEED((d = dup(s)) >= 0);
	close(s);
	/* The registration belongs to the open file, not to the number. */
	NEED(send_all(c, "abc", 3));
	r = rs(epoll_wait(ep, out, 2, PROBE_WAIT_MS));
	say("closed fd still reported=%s data=%llu", r,
	    (unsigned long long)out[0].data.u64);
	say("del by closed number=%s",
	    rs(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL)));
	say("del by dup=%s", rs(epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL)));
	say("read via dup=%s", rs(recv(d, buf, sizeof(buf), 0)));
	NEED(epoll_ctl(ep, EPOLL_CTL_ADD, d, &ev) == 0);
	close(d);
	NEED(send_all(c, "def", 3));
	say("after last close=%s", rs(epoll_wait(ep, out, 2, 50)));
}

static void case_epoll_ctl_errors(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c, s, ep, f;

	NEED(mk_pair(&c, &s) == 0);
	NEED((ep = epoll_create1(0)) >= 0);
	NEED((f = mk_tempfile(10)) >= 0);
	say("add=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev)));
	say("add twice=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev)));
	say("mod unregistered=%s", rs(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev)));
	say("del unregistered=%s", rs(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL)));
	say("add regular file=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, f, &ev)));
	say("add epfd to itself=%s", rs(epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev)));
	say("bad op=%s", rs(epoll_ctl(ep, 99, c, &ev)));
	say("not an epoll fd=%s", rs(epoll_ctl(c, EPOLL_CTL_ADD, s, &ev)));
	say("epoll_wait on socket=%s", rs(epoll_wait(c, &ev, 1, 0)));
	say("maxevents 0=%s", rs(epoll_wait(ep, &ev, 0, 0)));
	say("epoll_create1 bad flags=%s", rs(epoll_create1(0x1234)));
}

/* ------------------------------------------------------------------------ */
/* Processes.                                                               */

static void case_fork_child_close(void)
{
	pid_t pid;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(c);
		close(s);
		_exit(0);
	}
	NEED(pid > 0);
	say("child %s", wait_child(pid));
	say("parent peer no eof=%s", yesno(!readable_now(s)));
	say("parent send=%s", through(c, s, "ping"));
	say("parent reply=%s", through(s, c, "pong"));
	say("socket O_NONBLOCK unchanged=%s", yesno(!is_nonblock(c)));
}

static void case_fork_child_writes(void)
{
	char buf[16] = { 0 };
	ssize_t n;
	pid_t pid;
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char r[8] = { 0 };

		if (!send_all(c, "from-child", 10))
			_exit(1);
		if (read_n(c, r, 4) != 4 || memcmp(r, "ack!", 4))
			_exit(2);
		_exit(0);
	}
	NEED(pid > 0);
	n = read_n(s, buf, 10);
	say("parent got=%s '%.*s'", rs(n), n > 0 ? (int)n : 0, buf);
	say("ack=%s", rs(send(s, "ack!", 4, MSG_NOSIGNAL)));
	say("child %s", wait_child(pid));
	say("parent still works=%s", through(c, s, "more"));
	close(c);
	say("eof after parent close=%s", rs(read_n(s, buf, sizeof(buf))));
}

/* Run in the exec'ed child: argv = --exec-check FD_CLOEXEC_FD PLAIN_FD. */
static int exec_check(int argc, char **argv)
{
	int a, b, rc = 0;

	if (argc < 4)
		return 64;
	a = atoi(argv[2]);
	b = atoi(argv[3]);
	if (fcntl(a, F_GETFD) < 0 && errno == EBADF)
		rc |= 1;
	if (fcntl(b, F_GETFD) >= 0)
		rc |= 2;
	if (send(b, "x", 1, MSG_NOSIGNAL) == 1)
		rc |= 4;
	return rc;
}

static void case_exec_cloexec(void)
{
	char fa[16], fb[16], buf[4] = { 0 };
	int c1, s1, c2, s2, a;
	pid_t pid;
	const char *st;

	NEED(mk_pair(&c1, &s1) == 0);
	NEED(mk_pair(&c2, &s2) == 0);
	NEED((a = fcntl(c1, F_DUPFD_CLOEXEC, 0)) >= 0);
	snprintf(fa, sizeof(fa), "%d", a);
	snprintf(fb, sizeof(fb), "%d", c2);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "sockprobe", "--exec-check", fa, fb,
		      (char *)NULL);
		_exit(127);
	}
	NEED(pid > 0);
	st = wait_child(pid);
	say("child %s (1: cloexec fd closed, 2: plain fd open, 4: sent)", st);
	st = rs(read_n(s2, buf, 1));
	say("peer got=%s '%s'", st, buf);
	say("cloexec socket still works in parent=%s", through(a, s1, "ok"));
}

/* ------------------------------------------------------------------------ */
/* Other families and types.                                                */

static void case_ipv6(void)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr_storage cn, sp;
	socklen_t len = sizeof(sin6), l1 = sizeof(cn), l2 = sizeof(sp);
	int l, c, s;

	sin6.sin6_addr = in6addr_loopback;
	l = socket(AF_INET6, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sin6, sizeof(sin6)) < 0) {
		say("ipv6 unavailable");
		return;
	}
	NEED(listen(l, 8) == 0);
	NEED(getsockname(l, (struct sockaddr *)&sin6, &len) == 0);
	NEED((c = socket(AF_INET6, SOCK_STREAM, 0)) >= 0);
	say("connect ::1=%s",
	    rs(connect(c, (struct sockaddr *)&sin6, sizeof(sin6))));
	NEED((s = accept(l, (struct sockaddr *)&sp, &l2)) >= 0);
	NEED(getsockname(c, (struct sockaddr *)&cn, &l1) == 0);
	say("accepted peer %s %s len=%u", family_str(sp.ss_family),
	    addr_str(&sp), (unsigned int)l2);
	say("client name vs peer=%s", same_addr(&cn, &sp) ? "match" : "differ");
	say("data=%s", through(c, s, "v6"));
	say("reply=%s", through(s, c, "v6back"));
	close(c);
	say("eof=%s", rs(read_n(s, &sin6, 1)));
}

static void case_ipv6_v4mapped(void)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 m = { .sin6_family = AF_INET6 };
	struct sockaddr_storage cn, sp;
	socklen_t l1 = sizeof(cn), l2 = sizeof(sp);
	int l, c, s;

	NEED((l = mk_listener(&sin)) >= 0);
	c = socket(AF_INET6, SOCK_STREAM, 0);
	if (c < 0) {
		say("ipv6 unavailable");
		return;
	}
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
	m.sin6_port = sin.sin_port;
	say("connect ::ffff:127.0.0.1=%s",
	    rs(connect(c, (struct sockaddr *)&m, sizeof(m))));
	NEED((s = accept(l, (struct sockaddr *)&sp, &l2)) >= 0);
	NEED(getsockname(c, (struct sockaddr *)&cn, &l1) == 0);
	say("client name %s %s", family_str(cn.ss_family), addr_str(&cn));
	say("server sees %s %s", family_str(sp.ss_family), addr_str(&sp));
	say("data=%s", through(c, s, "mapped"));
}

static void case_connect_any(void)
{
	struct sockaddr_in sin, any;
	struct sockaddr_storage p;
	socklen_t pl = sizeof(p);
	int l, c, s;

	NEED((l = mk_listener(&sin)) >= 0);
	NEED((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	memset(&any, 0, sizeof(any));
	any.sin_family = AF_INET;
	any.sin_port = sin.sin_port;
	say("connect 0.0.0.0=%s",
	    rs(connect(c, (struct sockaddr *)&any, sizeof(any))));
	NEED(getpeername(c, (struct sockaddr *)&p, &pl) == 0);
	say("peer %s", addr_str(&p));
	NEED((s = accept(l, NULL, NULL)) >= 0);
	say("data=%s", through(c, s, "any"));
}

static void case_udp(void)
{
	struct sockaddr_in a, b, from;
	socklen_t al = sizeof(a), fl = sizeof(from);
	char buf[16] = { 0 };
	int u1, u2;

	NEED((u1 = socket(AF_INET, SOCK_DGRAM, 0)) >= 0);
	NEED((u2 = socket(AF_INET, SOCK_DGRAM, 0)) >= 0);
	loopback4(&a, 0);
	NEED(bind(u1, (struct sockaddr *)&a, sizeof(a)) == 0);
	NEED(getsockname(u1, (struct sockaddr *)&a, &al) == 0);
	loopback4(&b, 0);
	NEED(bind(u2, (struct sockaddr *)&b, sizeof(b)) == 0);
	al = sizeof(b);
	NEED(getsockname(u2, (struct sockaddr *)&b, &al) == 0);
	say("sendto=%s",
	    rs(sendto(u2, "dgram", 5, 0, (struct sockaddr *)&a, sizeof(a))));
	NEED(wait_fd(u1, POLLIN, PROBE_WAIT_MS) > 0);
	say("recvfrom MSG_TRUNC, 3-byte buffer=%s",
	    rs(recvfrom(u1, buf, 3, MSG_TRUNC, (struct sockaddr *)&from, &fl)));
	say("from sender=%s", from.sin_port == b.sin_port ? "match" : "differ");
	say("connect udp=%s",
	    rs(connect(u2, (struct sockaddr *)&a, sizeof(a))));
	say("send=%s", rs(send(u2, "two", 3, 0)));
	NEED(wait_fd(u1, POLLIN, PROBE_WAIT_MS) > 0);
	say("recv=%s", rs(recv(u1, buf, sizeof(buf), 0)));
	say("empty=%s", rs(recv(u1, buf, sizeof(buf), MSG_DONTWAIT)));
}

static void case_socketpair(void)
{
	char buf[8] = { 0 };
	int sv[2];

	say("socketpair AF_UNIX=%s",
	    rs(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)));
	say("socketpair AF_INET=%s",
	    rs(socketpair(AF_INET, SOCK_STREAM, 0, (int[2]){ 0, 0 })));
	say("cloexec=%s", yesno(is_cloexec(sv[0])));
	say("data=%s", through(sv[0], sv[1], "unix"));
	say("shutdown=%s", rs(shutdown(sv[0], SHUT_WR)));
	say("eof=%s", rs(read_n(sv[1], buf, sizeof(buf))));
}

/* ------------------------------------------------------------------------ */
/* Volume and concurrency.                                                  */

static void case_many_connections(void)
{
	struct sockaddr_in sin;
	char buf[8];
	int l, c, s, i, ok = 0;

	NEED((l = mk_listener(&sin)) >= 0);
	for (i = 0; i < 200; i++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0)
			break;
		if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    (s = accept(l, NULL, NULL)) >= 0) {
			if (send_all(c, "ping", 4) && read_n(s, buf, 4) == 4 &&
			    send_all(s, "pong", 4) && read_n(c, buf, 4) == 4 &&
			    !memcmp(buf, "pong", 4)) {
				close(c);
				if (read_n(s, buf, 1) == 0)
					ok++;
			} else {
				close(c);
			}
			close(s);
		} else {
			close(c);
		}
	}
	say("%d/200 connect, ping-pong, close, eof", ok);
}

/* An epoll echo server thread serving @expect connections, then exiting. */
struct echo_srv {
	int l, expect, served;
	pthread_t tid;
};

static void *echo_main(void *arg)
{
	struct echo_srv *e = arg;
	struct epoll_event ev, out[32];
	long end = now_ms() + 15000;
	char buf[4096];
	int ep, n, i, fd;
	ssize_t r;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return NULL;
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = e->l };
	epoll_ctl(ep, EPOLL_CTL_ADD, e->l, &ev);
	while (e->served < e->expect && now_ms() < end) {
		n = epoll_wait(ep, out, 32, 200);
		for (i = 0; i < n; i++) {
			fd = out[i].data.fd;
			if (fd == e->l) {
				fd = accept4(e->l, NULL, NULL, SOCK_NONBLOCK);
				if (fd < 0)
					continue;
				ev = (struct epoll_event){ .events = EPOLLIN,
							   .data.fd = fd };
				epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				continue;
			}
			r = recv(fd, buf, sizeof(buf), 0);
			if (r > 0) {
				send_all(fd, buf, (size_t)r);
			} else if (r == 0 || errno != EAGAIN) {
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				e->served++;
			}
		}
	}
	close(ep);
	return NULL;
}

struct echo_cli {
	struct sockaddr_in sin;
	int id, iters, ok;
	pthread_t tid;
};

static void *echo_cli_main(void *arg)
{
	struct echo_cli *k = arg;
	char msg[64] = { 0 }, back[64];
	int i, c;

	for (i = 0; i < k->iters; i++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0)
			continue;
		snprintf(msg, sizeof(msg), "thread %d iteration %d ........",
			 k->id, i);
		if (connect(c, (struct sockaddr *)&k->sin, sizeof(k->sin)) ==
			    0 &&
		    send_all(c, msg, sizeof(msg)) &&
		    read_n(c, back, sizeof(back)) == (ssize_t)sizeof(back) &&
		    !memcmp(msg, back, sizeof(msg)))
			k->ok++;
		close(c);
	}
	return NULL;
}

static void case_threads_echo(void)
{
	struct echo_srv e = { 0 };
	struct echo_cli k[4];
	int i, ok = 0;

	NEED((e.l = mk_listener(&k[0].sin)) >= 0);
	e.expect = 4 * 50;
	NEED(pthread_create(&e.tid, NULL, echo_main, &e) == 0);
	for (i = 0; i < 4; i++) {
		k[i].sin = k[0].sin;
		k[i].id = i;
		k[i].iters = 50;
		k[i].ok = 0;
		if (pthread_create(&k[i].tid, NULL, echo_cli_main, &k[i]) != 0)
			k[i].iters = -1;
	}
	for (i = 0; i < 4; i++)
		if (k[i].iters >= 0) {
			pthread_join(k[i].tid, NULL);
			ok += k[i].ok;
		}
	pthread_join(e.tid, NULL);
	say("4 threads x 50 echoes=%d/200 served=%d", ok, e.served);
}

static void case_fortify(void)
{
	struct pollfd p;
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	const char *r;
	char buf[16] = { 0 };
	int c, s;

	NEED(mk_pair(&c, &s) == 0);
	NEED(send_all(s, "abcdefghijkl", 12));
	NEED(wait_inq(c, 12));
	p = (struct pollfd){ .fd = c, .events = POLLIN };
	r = rs(__poll_chk(&p, 1, 0, sizeof(p)));
	say("__poll_chk=%s revents=%s", r, events_str(p.revents));
	say("__recv_chk=%s", rs(__recv_chk(c, buf, 4, sizeof(buf), 0)));
	say("__read_chk=%s", rs(__read_chk(c, buf, 4, sizeof(buf))));
	r = rs(__recvfrom_chk(c, buf, 4, sizeof(buf), 0,
			      (struct sockaddr *)&from, &fl));
	say("__recvfrom_chk=%s addrlen=%u", r, (unsigned int)fl);
	say("data tail=%.4s", buf);
	set_nonblock(c, true);
	say("__recv_chk empty=%s", rs(__recv_chk(c, buf, 4, sizeof(buf), 0)));
}

/* ------------------------------------------------------------------------ */
/* Runner.                                                                  */

struct probe_case {
	const char *name;
	void (*fn)(void);
};

#define CASE(n)                                                                \
	{                                                                      \
#n, case_##n                                                   \
	}
static const struct probe_case probe_cases[] = {
	CASE(blocking_connect_refused),
	CASE(nonblock_connect_ok),
	CASE(nonblock_connect_refused),
	CASE(connect_errors),
	CASE(bind_errors),
	CASE(listen_autobind),
	CASE(socket_errors),
	CASE(accept4_flags),
	CASE(accept_nonblock_listener),
	CASE(recv_empty_nonblock),
	CASE(msg_dontwait),
	CASE(msg_peek),
	CASE(msg_waitall),
	CASE(msg_trunc_oob),
	CASE(so_rcvlowat),
	CASE(partial_write_nonblock),
	CASE(blocking_send_full),
	CASE(so_sndtimeo),
	CASE(so_rcvtimeo),
	CASE(shutdown_wr),
	CASE(shutdown_rd),
	CASE(read_after_peer_close),
	CASE(write_after_peer_close),
	CASE(peer_reset),
	CASE(write_after_reset),
	CASE(sigpipe_default),
	CASE(sigpipe_ignored),
	CASE(eof_while_blocked),
	CASE(shutdown_wakes_blocked),
	CASE(eintr),
	CASE(ebadf),
	CASE(enotsock),
	CASE(enotconn),
	CASE(dup_family),
	CASE(dup2_onto_socket),
	CASE(close_range),
	CASE(close_range_einval),
	CASE(fcntl_flags),
	CASE(ioctl),
	CASE(sockopts),
	CASE(names),
	CASE(readv_writev),
	CASE(sendmsg_recvmsg),
	CASE(mmsg),
	CASE(sendfile),
	CASE(zero_length_io),
	CASE(poll_basics),
	CASE(poll_high_fd),
	CASE(select),
	CASE(epoll_lt),
	CASE(epoll_et_rdhup),
	CASE(epoll_dup_close),
	CASE(epoll_ctl_errors),
	CASE(fork_child_close),
	CASE(fork_child_writes),
	CASE(exec_cloexec),
	CASE(ipv6),
	CASE(ipv6_v4mapped),
	CASE(connect_any),
	CASE(udp),
	CASE(socketpair),
	CASE(many_connections),
	CASE(threads_echo),
	CASE(fortify),
	CASE(close_range_all),
};
#define PROBE_NR_CASES (sizeof(probe_cases) / sizeof(probe_cases[0]))

/*
 * The run order, kept so that the watchdog can go on without a hung case:
 * it prints "CASE: TIMEOUT (watchdog)" and re-executes the probe with the
 * cases that follow (and --timed-out, which makes the final exit code 3).
 */
static const char *probe_order[PROBE_NR_CASES];
static size_t probe_nr_order, probe_cur;
static char *probe_rest_argv[PROBE_NR_CASES + 3];
static bool probe_timed_out;

static void on_alarm(int sig)
{
	static const char tail[] = ": TIMEOUT (watchdog)\n";
	const char *name = probe_order[probe_cur];
	size_t i, n = 0;

	(void)sig;
	(void)!write(STDOUT_FILENO, name, strlen(name));
	(void)!write(STDOUT_FILENO, tail, sizeof(tail) - 1);
	probe_rest_argv[n++] = (char *)"sockprobe";
	probe_rest_argv[n++] = (char *)"--timed-out";
	for (i = probe_cur + 1; i < probe_nr_order; i++)
		probe_rest_argv[n++] = (char *)probe_order[i];
	probe_rest_argv[n] = NULL;
	if (n > 2)
		execv("/proc/self/exe", probe_rest_argv);
	_exit(3);
}

/* The fds open right now, as a bitmap of the first @nr numbers. */
static void fd_snapshot(unsigned char *map, size_t nr)
{
	struct dirent *de;
	DIR *d;
	long fd;

	memset(map, 0, nr);
	d = opendir("/proc/self/fd");
	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		fd = strtol(de->d_name, NULL, 10);
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && fd >= 0 &&
		    (size_t)fd < nr && fd != dirfd(d))
			map[fd] = 1;
	}
	closedir(d);
}

#define PROBE_FD_MAP 65536

/* Close whatever a case left open, so cases do not influence each other. */
static void fd_cleanup(const unsigned char *before)
{
	static unsigned char after[PROBE_FD_MAP];
	size_t fd;

	fd_snapshot(after, PROBE_FD_MAP);
	for (fd = 0; fd < PROBE_FD_MAP; fd++)
		if (after[fd] && !before[fd])
			close((int)fd);
}

static void run_case(const struct probe_case *pc)
{
	static unsigned char before[PROBE_FD_MAP];

	fd_snapshot(before, PROBE_FD_MAP);
	probe_out_len = 0;
	probe_out[0] = '\0';
	alarm(PROBE_CASE_TIMEOUT_S);
	pc->fn();
	alarm(0);
	fd_cleanup(before);
	printf("%s: %s\n", pc->name, probe_out_len ? probe_out : "(nothing)");
	fflush(stdout);
}

static const struct probe_case *find_case(const char *name)
{
	size_t i;

	for (i = 0; i < PROBE_NR_CASES; i++)
		if (!strcmp(name, probe_cases[i].name))
			return &probe_cases[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	sigset_t alrm;
	size_t i;
	int a = 1;

	if (argc >= 2 && !strcmp(argv[1], "--exec-check"))
		return exec_check(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "--list")) {
		for (i = 0; i < PROBE_NR_CASES; i++)
			printf("%s\n", probe_cases[i].name);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "--timed-out")) {
		probe_timed_out = true;
		a++;
	}
	for (; a < argc && probe_nr_order < PROBE_NR_CASES; a++) {
		if (!find_case(argv[a])) {
			fprintf(stderr,
				"sockprobe: unknown case '%s' (see --list)\n",
				argv[a]);
			return 2;
		}
		probe_order[probe_nr_order++] = argv[a];
	}
	if (argc < 2)
		for (i = 0; i < PROBE_NR_CASES; i++)
			probe_order[probe_nr_order++] = probe_cases[i].name;
	/* The watchdog re-executes from its handler: SIGALRM may be blocked. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	sigemptyset(&sa.sa_mask);
	/* It never returns, so SA_RESTART changes nothing for the kernel;
	 * with every handler restarting, xsock can tell that the eintr
	 * case's SA_RESTART handler restarts (core/sig.c). */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_DFL);
	for (probe_cur = 0; probe_cur < probe_nr_order; probe_cur++)
		run_case(find_case(probe_order[probe_cur]));
	return probe_timed_out ? 3 : 0;
}
