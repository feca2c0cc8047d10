/*
 * bench/tools/sock_rr.c - request/response over stream sockets: the figure
 * of bench/tools/verbs_rr taken through the socket calls, so that the
 * same program runs over kernel TCP, under xsock and under rsocket.
 *
 *   sock_rr server ADDR PORT
 *   sock_rr client ADDR PORT CONNS SECONDS [SIZE [IDLE]]
 *
 * The server answers every byte it reads with the same bytes (a response
 * of the request's size), on any number of connections, from one epoll
 * loop, until SIGTERM or SIGINT. The client keeps one SIZE-byte request
 * (default 64) in flight on each of CONNS connections, from one epoll
 * loop, for SECONDS after a 0.2 s warm-up, and prints
 *   sock_rr conns=N size=B seconds=S transactions=T rate=R p50_us=A p99_us=B
 * as verbs_rr does (R: transactions/s over all connections; A, B: one-way
 * latency, round trip / 2). With IDLE (default 0), IDLE more connections
 * are opened first, each echoes one byte once, and then they stay idle in
 * both epoll sets: what a busy connection costs in a server's set of
 * IDLE + CONNS members; the line then says idle=IDLE after conns, and
 * ctl_ns=C at its end: what one epoll_ctl(EPOLL_CTL_MOD) of a busy
 * connection costs in that set (the mean of RR_CTL_CALLS, taken before
 * the first request; EPOLLRDHUP on and off, so nothing turns ready). Both
 * sides raise their soft RLIMIT_NOFILE to the hard limit. TCP_NODELAY on
 * every connection. Errors: a line on stderr and exit 1; bad usage exits
 * 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "samples.h"

#define RR_MAX_SIZE  65536
#define RR_WARMUP_NS 200000000ull
#define RR_EVENTS    64

struct rr_conn {
	int fd;
	uint32_t got;	  /* response bytes read so far */
	uint64_t sent_ns; /* when its request went */
};

static volatile sig_atomic_t stop_signal;

static void __attribute__((noreturn)) usage(const char *why)
{
	if (why)
		fprintf(stderr, "sock_rr: %s\n", why);
	fputs("usage: sock_rr server ADDR PORT\n"
	      "       sock_rr client ADDR PORT CONNS SECONDS [SIZE [IDLE]]\n"
	      "server: echoes every request, on any number of connections,\n"
	      "  until SIGTERM or SIGINT\n"
	      "client: CONNS connections, one SIZE-byte request (default 64)\n"
	      "  in flight on each, for SECONDS after a 0.2 s warm-up; prints\n"
	      "  \"sock_rr conns=N size=B seconds=S transactions=T rate=R\n"
	      "  p50_us=A p99_us=B\" (A, B: one-way, round trip / 2)\n"
	      "  IDLE: more connections, opened first and left idle after\n"
	      "  one echo (the line then says idle=IDLE)\n",
	      stderr);
	exit(2);
}

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die_err(errno, "setsockopt(TCP_NODELAY)");
}

/* Write all @n bytes of @buf to @fd (blocking socket). */
static void write_all(int fd, const char *buf, size_t n)
{
	ssize_t k;

	while (n) {
		k = write(fd, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die_err(k < 0 ? errno : 0, "write");
		buf += k;
		n -= (size_t)k;
	}
}

static int do_server(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	struct epoll_event ev, evs[RR_EVENTS];
	static char buf[RR_MAX_SIZE];
	int lfd, ep, one = 1, n, i, fd;
	struct sigaction sa = { .sa_handler = on_stop };
	ssize_t k;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	args_nofile_raise();
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die_err(errno, "socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die_err(errno, "bind %s:%s", ip, port);
	if (listen(lfd, 1024) < 0)
		die_err(errno, "listen");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die_err(errno, "epoll_create1");
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		die_err(errno, "epoll_ctl");
	printf("sock_rr listening %s %s\n", ip, port);
	fflush(stdout);
	while (!stop_signal) {
		n = epoll_wait(ep, evs, RR_EVENTS, 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_err(errno, "epoll_wait");
		for (i = 0; i < n; i++) {
			fd = evs[i].data.fd;
			if (fd == lfd) {
				fd = accept(lfd, NULL, NULL);
				if (fd < 0)
					continue; /* the client gave up */
				nodelay(fd);
				ev = (struct epoll_event){ .events = EPOLLIN,
							   .data.fd = fd };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
					die_err(errno, "epoll_ctl");
				continue;
			}
			k = read(fd, buf, sizeof(buf));
			if (k > 0) {
				write_all(fd, buf, (size_t)k);
				continue;
			}
			if (k < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL); /* EOF, reset */
			close(fd);
		}
	}
	return 0;
}

/* Read exactly @n bytes from @fd (blocking socket). */
static void read_all(int fd, char *buf, size_t n)
{
	ssize_t k;

	while (n) {
		k = read(fd, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die_err(k < 0 ? errno : 0, "read");
		buf += k;
		n -= (size_t)k;
	}
}

/* A connection to @sin, TCP_NODELAY, in @ep with @data. */
static int rr_connect(const struct sockaddr_in *sin, const char *ip,
		      const char *port, int ep, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die_err(errno, "socket");
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0)
		die_err(errno, "connect %s:%s", ip, port);
	nodelay(fd);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die_err(errno, "epoll_ctl");
	return fd;
}

/* epoll_ctl() calls timed for ctl_ns */
#define RR_CTL_CALLS 10000

/* The mean cost of one epoll_ctl(EPOLL_CTL_MOD) of @fd in @ep, in ns. */
static double rr_ctl_ns(int ep, int fd, uint64_t data)
{
	struct epoll_event ev = { .data.u64 = data };
	uint64_t t0 = args_now_ns();
	long j;

	for (j = 0; j <= RR_CTL_CALLS; j++) {
		ev.events = EPOLLIN | (j & 1 ? EPOLLRDHUP : 0);
		if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0)
			die_err(errno, "epoll_ctl MOD");
	}
	return (double)(args_now_ns() - t0) / (RR_CTL_CALLS + 1);
}

static int do_client(const char *ip, const char *port, long conns, long seconds,
		     long size, long idle)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	struct epoll_event evs[RR_EVENTS];
	static char req[RR_MAX_SIZE], buf[RR_MAX_SIZE];
	struct samples rtt = { 0 };
	uint64_t start, measure_from, end, t, done = 0;
	double ctl_ns = 0;
	struct rr_conn *c = calloc((size_t)conns, sizeof(*c));
	int *idle_fd = calloc((size_t)idle + 1, sizeof(*idle_fd));
	int ep, n, i;
	long j;
	ssize_t k;

	if (!c || !idle_fd)
		die_err(ENOMEM, "calloc");
	signal(SIGPIPE, SIG_IGN);
	args_nofile_raise();
	memset(req, 'r', sizeof(req));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die_err(errno, "epoll_create1");
	/* the idle ones: in the set, never ready (one echo settles each
	 * connection's transport before the clock starts) */
	for (j = 0; j < idle; j++) {
		idle_fd[j] = rr_connect(&sin, ip, port, ep, UINT64_MAX);
		write_all(idle_fd[j], req, 1);
		read_all(idle_fd[j], buf, 1);
	}
	for (j = 0; j < conns; j++)
		c[j].fd = rr_connect(&sin, ip, port, ep, (uint64_t)j);
	if (idle)
		ctl_ns = rr_ctl_ns(ep, c[0].fd, 0);
	start = args_now_ns();
	measure_from = start + RR_WARMUP_NS;
	end = measure_from + (uint64_t)seconds * 1000000000u;
	for (j = 0; j < conns; j++) {
		c[j].sent_ns = args_now_ns();
		write_all(c[j].fd, req, (size_t)size);
	}
	for (t = start; t < end;) {
		n = epoll_wait(ep, evs, RR_EVENTS, 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die_err(errno, "epoll_wait");
		t = args_now_ns();
		for (i = 0; i < n; i++) {
			struct rr_conn *cc;

			if (evs[i].data.u64 == UINT64_MAX)
				die_err(0, "an idle connection became ready "
					   "(the server closed it?)");
			cc = &c[evs[i].data.u64];

			k = read(cc->fd, buf, (size_t)size - cc->got);
			if (k < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (k < 0)
				die_err(errno, "read");
			if (k == 0)
				die_err(0, "read: the server closed the "
					   "connection");
			cc->got += (uint32_t)k;
			if (cc->got < (uint32_t)size)
				continue;
			if (cc->sent_ns >= measure_from && t < end) {
				if (samples_add(&rtt, t - cc->sent_ns))
					die_err(ENOMEM, "samples");
				done++;
			}
			cc->got = 0;
			cc->sent_ns = args_now_ns();
			write_all(cc->fd, req, (size_t)size);
		}
	}
	samples_sort(&rtt);
	printf("sock_rr conns=%ld", conns);
	if (idle)
		printf(" idle=%ld", idle);
	printf(" size=%ld seconds=%ld transactions=%llu "
	       "rate=%.1f p50_us=%.2f p99_us=%.2f",
	       size, seconds, (unsigned long long)done,
	       (double)done / (double)seconds, samples_pct_us(&rtt, 0.50) / 2,
	       samples_pct_us(&rtt, 0.99) / 2);
	if (idle)
		printf(" ctl_ns=%.0f", ctl_ns);
	printf("\n");
	for (j = 0; j < conns; j++)
		close(c[j].fd);
	for (j = 0; j < idle; j++)
		close(idle_fd[j]);
	free(idle_fd);
	free(c);
	free(rtt.v);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return do_server(argv[2], argv[3]);
	if (argc >= 6 && argc <= 8 && !strcmp(argv[1], "client"))
		return do_client(
			argv[2], argv[3],
			count_parse(argv[4], 1, 100000,
				    "CONNS must be 1 to 100000"),
			count_parse(argv[5], 1, 86400,
				    "SECONDS must be 1 to 86400"),
			argc >= 7 ? count_parse(argv[6], 1, RR_MAX_SIZE,
						"SIZE must be 1 to 65536")
				  : 64,
			argc == 8 ? count_parse(argv[7], 0, 100000,
						"IDLE must be 0 to 100000")
				  : 0);
	usage(argc > 1 ? "unknown command or wrong arguments" : NULL);
}
