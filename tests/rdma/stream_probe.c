/*
 * tests/rdma/stream_probe.c - core/stream.c on real verbs (Soft-RoCE tier).
 *
 *   stream_probe sink ADDR PORT           accept one connection, write every
 *                                         byte received to stdout until EOF,
 *                                         answer "OK <bytes>", close
 *   stream_probe source ADDR PORT CHUNK   send stdin in CHUNK-byte send()s,
 *                                         shut down, print the answer
 *   stream_probe echo ADDR PORT           accept one connection, echo until
 *                                         EOF
 *   stream_probe pingpong ADDR PORT SIZE ITERS
 *                                         SIZE bytes there and back ITERS
 *                                         times, checked; prints p50/p99 us
 * Counters go to stderr as "key=value".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../core/stream.h"
#include "../../core/xs_core.h"

static struct xs_conn_params params = {
	.credits = 64,
	.eager_size = 4096,
	.inline_max = 256,
	.max_rndv = 0,
	.timeout_ms = 20000,
	.pool_bytes = 64u << 20,
};

static void die(const char *what, long rc)
{
	fprintf(stderr, "error: %s: %s\n", what,
		strerror((int)(rc < 0 ? -rc : rc)));
	exit(1);
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
		die("bad address", EINVAL);
	sin.sin_port = htons((uint16_t)atoi(port));
	return sin;
}

static void accept_one(const char *ip, const char *port, struct xs_stream *s)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_listener *l;
	struct xs_conn *c;
	long rc;

	rc = xs_listener_create(&l, (struct sockaddr *)&sin, 4, &params);
	if (rc)
		die("listen", rc);
	rc = xs_listener_accept(l, &c, 60000);
	if (rc)
		die("accept", rc);
	xs_listener_destroy(l);
	rc = xs_stream_init(s, c);
	if (rc)
		die("stream", rc);
}

static void connect_one(const char *ip, const char *port, struct xs_stream *s)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_conn *c;
	long rc;

	rc = xs_conn_connect(&c, (struct sockaddr *)&sin, &params);
	if (rc)
		die("connect", rc);
	rc = xs_stream_init(s, c);
	if (rc)
		die("stream", rc);
}

static void counters(const char *who, const struct xs_stream *s)
{
	fprintf(stderr,
		"%s: sent=%llu received=%llu inline=%llu pool=%llu "
		"credit_msgs=%llu credit_stalls=%llu\n",
		who, (unsigned long long)s->pub->c.bytes_sent,
		(unsigned long long)s->pub->c.bytes_received,
		(unsigned long long)s->pub->c.msgs_inline,
		(unsigned long long)s->pub->c.msgs_eager,
		(unsigned long long)s->pub->c.credit_msgs,
		(unsigned long long)s->pub->c.credit_stalls);
}

/* One-buffer forms of the stream calls, blocking. */
static ssize_t stream_send1(struct xs_stream *s, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	return xs_stream_send(s, &v, 1, -1);
}

static ssize_t stream_recv1(struct xs_stream *s, void *buf, size_t len,
			    int flags)
{
	struct iovec v = { buf, len };

	return xs_stream_recv(s, &v, 1, flags, -1);
}

static void send_all(struct xs_stream *s, const void *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = stream_send1(s, (const char *)buf + off, len - off);
		if (n < 0)
			die("send", n);
		off += (size_t)n;
	}
}

static int do_sink(const char *ip, const char *port)
{
	static char buf[1 << 16];
	unsigned long long total = 0;
	struct xs_stream s;
	char reply[64];
	ssize_t n;

	accept_one(ip, port, &s);
	while ((n = stream_recv1(&s, buf, sizeof(buf), 0)) > 0) {
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			die("stdout", EIO);
		total += (unsigned long long)n;
	}
	if (n < 0)
		die("recv", n);
	fflush(stdout);
	n = snprintf(reply, sizeof(reply), "OK %llu\n", total);
	send_all(&s, reply, (size_t)n);
	counters("sink", &s);
	xs_stream_close(&s, 10000);
	return 0;
}

static int do_source(const char *ip, const char *port, size_t chunk)
{
	char *buf = malloc(chunk);
	struct xs_stream s;
	char reply[64];
	ssize_t n;

	connect_one(ip, port, &s);
	while ((n = read(STDIN_FILENO, buf, chunk)) > 0)
		send_all(&s, buf, (size_t)n);
	n = xs_stream_shutdown(&s, SHUT_WR);
	if (n)
		die("shutdown", n);
	n = stream_recv1(&s, reply, sizeof(reply) - 1, XS_RECV_WAITALL);
	if (n < 0)
		die("recv reply", n);
	reply[n] = '\0';
	fputs(reply, stdout);
	counters("source", &s);
	xs_stream_close(&s, 10000);
	free(buf);
	return 0;
}

static int do_echo(const char *ip, const char *port)
{
	static char buf[1 << 16];
	struct xs_stream s;
	ssize_t n;

	accept_one(ip, port, &s);
	while ((n = stream_recv1(&s, buf, sizeof(buf), 0)) > 0)
		send_all(&s, buf, (size_t)n);
	if (n < 0)
		die("recv", n);
	counters("echo", &s);
	xs_stream_close(&s, 10000);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int do_pingpong(const char *ip, const char *port, size_t size, int iters)
{
	char *out = malloc(size), *in = malloc(size);
	double *lat = calloc((size_t)iters, sizeof(double));
	struct xs_stream s;
	struct timespec t0, t1;
	size_t k;
	ssize_t n;
	int i;

	connect_one(ip, port, &s);
	for (i = 0; i < iters; i++) {
		for (k = 0; k < size; k++)
			out[k] = (char)(i + k);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		send_all(&s, out, size);
		n = stream_recv1(&s, in, size, XS_RECV_WAITALL);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (n != (ssize_t)size || memcmp(in, out, size) != 0)
			die("pingpong data mismatch", EBADMSG);
		lat[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
			 (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	qsort(lat, (size_t)iters, sizeof(double), cmp_double);
	printf("pingpong size=%zu iters=%d ok p50_us=%.1f p99_us=%.1f\n", size,
	       iters, lat[iters / 2], lat[(iters * 99) / 100]);
	counters("pingpong", &s);
	xs_stream_close(&s, 10000);
	return 0;
}

int main(int argc, char **argv)
{
	static struct xs_config cfg;
	char missing[XS_CFG_ERR_MAX];

	if (xs_real_resolve(missing, sizeof(missing)))
		die(missing, ENOENT);
	/* XSOCK_SPIN_US and friends apply, as they do under the library. */
	if (xs_cfg_load(&cfg, NULL, NULL, missing, sizeof(missing)))
		die(missing, EINVAL);
	xs_core_init(&cfg);
	if (getenv("XS_PROBE_DEBUG"))
		xs_log_cur = XS_LOG_DEBUG;
	if (argc == 4 && strcmp(argv[1], "sink") == 0)
		return do_sink(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "source") == 0)
		return do_source(argv[2], argv[3], (size_t)atol(argv[4]));
	if (argc == 4 && strcmp(argv[1], "echo") == 0)
		return do_echo(argv[2], argv[3]);
	if (argc == 6 && strcmp(argv[1], "pingpong") == 0)
		return do_pingpong(argv[2], argv[3], (size_t)atol(argv[4]),
				   atoi(argv[5]));
	fprintf(stderr, "usage: see the top of tests/rdma/stream_probe.c\n");
	return 2;
}
