/*
 * tests/tools/storm.c - a connect/close storm against one echo server.
 *
 * Uses only the socket API, so it runs the same with and without
 * LD_PRELOAD=libxsock.so; which transport carried each connection is read
 * from XSOCK_STATS by the tests, never assumed.
 *
 *   storm serve IP PORT          echo server, a thread per connection;
 *                                prints "listening PID"; on SIGTERM or
 *                                SIGINT it stops accepting, waits (10 s at
 *                                most) for its connections to end and
 *                                returns from main (so XSOCK_STATS and the
 *                                sanitizers' exit checks run), printing
 *                                "served N"
 *   storm run IP PORT CLIENTS N  CLIENTS threads open and close N
 *                                connections in all; each sends a 1-256
 *                                byte message naming the connection,
 *                                reads the echo and checks every byte,
 *                                then closes; prints "connections N
 *                                failed F mismatches M seconds S conn/s R"
 *
 * Clients set 30 s SO_RCVTIMEO/SO_SNDTIMEO, so nothing hangs for ever.
 * Exit status: 0 when every connection echoed correctly (run) or the
 * server stopped cleanly (serve), 1 otherwise, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define STORM_TIMEOUT_S 30 /* client SO_RCVTIMEO and SO_SNDTIMEO */
#define STORM_MSG_MAX	256
#define STORM_DRAIN_S	10 /* serve: how long SIGTERM waits for clients */

static volatile sig_atomic_t stop_signal;
static atomic_int nr_active;	/* serve: connections being echoed */
static atomic_long nr_served;	/* serve: connections that ended */
static atomic_long next_conn;	/* run: connections handed out */
static atomic_long nr_failed;	/* run: connections that errored */
static atomic_long nr_mismatch; /* run: echoes that differed */
static long total_conns;

static void die(const char *what)
{
	fprintf(stderr, "storm: %s: %s\n", what, strerror(errno));
	exit(1);
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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n, w, off;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (off = 0; off < n; off += w) {
			w = write(fd, buf + off, (size_t)(n - off));
			if (w <= 0)
				goto out;
		}
	}
	if (n < 0)
		fprintf(stderr, "storm: echo: %s\n", strerror(errno));
out:
	close(fd);
	atomic_fetch_add(&nr_served, 1);
	atomic_fetch_sub(&nr_active, 1);
	return NULL;
}

static int do_serve(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct sigaction sa = { .sa_handler = on_stop }; /* no SA_RESTART */
	int lfd, fd, one = 1, i;
	pthread_attr_t attr;
	pthread_t t;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("bind");
	if (listen(lfd, 1024) < 0)
		die("listen");
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	printf("listening %d\n", (int)getpid());
	fflush(stdout);
	while (!stop_signal) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		atomic_fetch_add(&nr_active, 1);
		if (pthread_create(&t, &attr, echo_conn, (void *)(intptr_t)fd))
			die("pthread_create");
	}
	close(lfd);
	for (i = 0; i < STORM_DRAIN_S * 100 && atomic_load(&nr_active); i++)
		usleep(10000);
	printf("served %ld active %d\n", atomic_load(&nr_served),
	       atomic_load(&nr_active));
	pthread_attr_destroy(&attr);
	return atomic_load(&nr_active) ? 1 : 0;
}

/* The message of connection @id: its length and bytes follow from @id. */
static size_t storm_msg(long id, unsigned char *buf)
{
	size_t len = 1 + (size_t)(id * 7919 % STORM_MSG_MAX), i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(id * 131 + (long)i * 17 +
					 (long)(i >> 3));
	if (len >= sizeof(id)) /* the connection's number, first */
		memcpy(buf, &id, sizeof(id));
	return len;
}

/* One connection: 0 when it echoed @id's message, else -1 (counted). */
static int storm_one(const struct sockaddr_in *sin, long id)
{
	struct timeval tv = { STORM_TIMEOUT_S, 0 };
	unsigned char msg[STORM_MSG_MAX], back[STORM_MSG_MAX];
	size_t len = storm_msg(id, msg), got = 0;
	ssize_t n;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		goto out_fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) < 0 ||
	    send(fd, msg, len, MSG_NOSIGNAL) != (ssize_t)len)
		goto out_close;
	while (got < len) {
		n = recv(fd, back + got, len - got, 0);
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			goto out_close;
		}
		got += (size_t)n;
	}
	if (memcmp(msg, back, len)) {
		atomic_fetch_add(&nr_mismatch, 1);
		fprintf(stderr, "storm: connection %ld: echo differs\n", id);
	}
	if (close(fd) < 0) {
		fd = -1;
		goto out_fail;
	}
	return 0;
out_close:
	close(fd);
out_fail:
	/* a few lines are enough to see what went wrong */
	if (atomic_fetch_add(&nr_failed, 1) < 5)
		fprintf(stderr, "storm: connection %ld: %s\n", id,
			strerror(errno));
	return -1;
}

static void *storm_client(void *arg)
{
	const struct sockaddr_in *sin = arg;
	long id;

	while ((id = atomic_fetch_add(&next_conn, 1)) < total_conns)
		storm_one(sin, id);
	return NULL;
}

static int do_run(const char *ip, const char *port, int clients, long n)
{
	struct sockaddr_in sin = addr_of(ip, port);
	pthread_t *t = calloc((size_t)clients, sizeof(*t));
	double t0, secs;
	int i;

	if (!t)
		die("calloc");
	total_conns = n;
	t0 = now_s();
	for (i = 0; i < clients; i++)
		if (pthread_create(&t[i], NULL, storm_client, &sin))
			die("pthread_create");
	for (i = 0; i < clients; i++)
		pthread_join(t[i], NULL);
	secs = now_s() - t0;
	printf("connections %ld failed %ld mismatches %ld seconds %.1f "
	       "conn/s %.1f\n",
	       n, atomic_load(&nr_failed), atomic_load(&nr_mismatch), secs,
	       (double)n / secs);
	free(t);
	return atomic_load(&nr_failed) || atomic_load(&nr_mismatch) ? 1 : 0;
}

static void usage(void)
{
	fputs("usage: storm serve IP PORT\n"
	      "       storm run IP PORT CLIENTS N\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	int clients;
	long n;

	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "serve"))
		return do_serve(argv[2], argv[3]);
	if (argc == 6 && !strcmp(argv[1], "run")) {
		clients = atoi(argv[4]);
		n = atol(argv[5]);
		if (clients < 1 || clients > 4096 || n < 1)
			usage();
		return do_run(argv[2], argv[3], clients, n);
	}
	usage();
	return 2;
}
