/*
 * tools/xsock-check.c - does a connection really go over RDMA?
 *
 *   xsock-check [-n COUNT] [-s BYTES] [-t SECS] [--json] HOST:PORT
 *   xsock-check --server [-1] [ADDR:]PORT
 *
 * Client: connects under xsock (re-running itself with the library
 * preloaded when it is not), reads how the library carries the socket from
 * its own counters file (/dev/shm/xsock-PID, core/xs_shm.h): RDMA with the
 * device, QP number and setup time, or kernel TCP with the fallback reason.
 * Against an xsock-check server it also learns how the server's side is
 * carried and measures COUNT round trips of BYTES each (cf. SMC-R's
 * smc_chk). Server: echoes for every client and prints one line per
 * connection saying how it is carried.
 *
 * Exit: 0 over RDMA, 1 over kernel TCP (the reason is printed), 2 for a
 * usage error or a failed connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/xs_shm.h"

#define CHECK_MAGIC	"XSOCK-CHECK 1"
#define CHECK_MAX_SIZE	(1u << 20)
#define CHECK_CHILD_ENV "XSOCK_CHECK_PRELOADED"

static const char *const reason_names[] = XS_SHM_REASON_NAMES;

/* How the library carries one socket, from its slot. */
struct carried {
	bool known; /* a slot was found */
	char what[128];
	char transport[16];
	char reason[24];
	char device[16];
	uint32_t qp_num;
	uint64_t setup_us;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xsock-check [-n COUNT] [-s BYTES] [-t SECS] [--json] "
		"HOST:PORT\n"
		"       xsock-check --server [-1] [ADDR:]PORT\n"
		"\n"
		"Connects under xsock and says whether the connection goes "
		"over RDMA\n"
		"(device, QP, setup time) or kernel TCP (and why); against "
		"an\n"
		"xsock-check --server, also how the server's side is carried "
		"and the\n"
		"round trip of COUNT (1000) messages of BYTES (64, at most "
		"1 MiB).\n"
		"  -t SECS    give up connecting or waiting after SECS (10)\n"
		"Against another server it sends one line (" CHECK_MAGIC
		" BYTES COUNT)\n"
		"and waits up to SECS for the answer an xsock-check server "
		"gives.\n"
		"--server without ADDR listens on every address. Needs\n"
		"XSOCK_PUBLISH=1 (the default): it reads its own counters "
		"file.\n"
		"  --json     one JSON object instead of text\n"
		"  --server   echo for every client, one line per "
		"connection\n"
		"  -1, --once with --server: exit after one connection\n"
		"  --lib PATH the library to preload (default: $XSOCK_LIB, "
		"then\n"
		"             ../lib/libxsock.so and ../libxsock.so beside "
		"this program)\n"
		"Exit: 0 over RDMA, 1 over kernel TCP, 2 on error.\n");
}

/* Whether libxsock is mapped into this process. */
static bool lib_loaded(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* a mapped library whose file name is libxsock*.so* (not
		 * any path that merely contains the word) */
		char *name = strrchr(line, '/');

		found = name && strncmp(name, "/libxsock", 9) == 0 &&
			strstr(name, ".so");
	}
	fclose(f);
	return found;
}

/* Run this program again with the library preloaded; returns on failure
 * only (a message printed). */
static void reexec_preloaded(char **argv, const char *lib)
{
	char exe[PATH_MAX], self[PATH_MAX], cand[PATH_MAX + 32], *dir, *old,
		*pre;
	ssize_t n;
	size_t len;
	int i;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		perror("xsock-check: /proc/self/exe");
		return;
	}
	exe[n] = '\0';
	memcpy(self, exe, (size_t)n + 1);
	dir = strrchr(exe, '/');
	if (dir)
		*dir = '\0';
	if (!lib)
		lib = getenv("XSOCK_LIB");
	if (!lib) {
		for (i = 0; i < 2 && !lib; i++) {
			snprintf(cand, sizeof(cand), "%s/%s", exe,
				 i ? "../libxsock.so" : "../lib/libxsock.so");
			if (access(cand, R_OK) == 0)
				lib = cand;
		}
	}
	if (!lib || access(lib, R_OK) != 0) {
		fprintf(stderr,
			"xsock-check: libxsock.so not found (set --lib or "
			"XSOCK_LIB)\n");
		return;
	}
	old = getenv("LD_PRELOAD");
	len = strlen(lib) + (old ? strlen(old) + 1 : 0) + 1;
	pre = malloc(len);
	if (!pre)
		return;
	snprintf(pre, len, "%s%s%s", lib, old ? ":" : "", old ? old : "");
	setenv("LD_PRELOAD", pre, 1);
	setenv(CHECK_CHILD_ENV, "1", 1);
	/* by its path, not /proc/self/exe: ps and ss then name it */
	execv(self, argv);
	fprintf(stderr, "xsock-check: exec: %s\n", strerror(errno));
	free(pre);
}

/* A port: 1..65535, or a service name (getaddrinfo resolves it). */
static bool port_ok(const char *port)
{
	char *end;
	long v;

	if (!port[0])
		return false;
	if (port[strspn(port, "0123456789")] != '\0')
		return true; /* a name */
	v = strtol(port, &end, 10);
	return strlen(port) <= 5 && v >= 1 && v <= 65535;
}

/* Split "host:port", "[v6]:port" or (server) "port". */
static int parse_hostport(const char *arg, char *host, size_t hostlen,
			  char *port, size_t portlen, bool port_only_ok)
{
	const char *colon;
	size_t n;

	if (arg[0] == '[') {
		const char *end = strchr(arg, ']');

		if (!end || end[1] != ':')
			return -1;
		n = (size_t)(end - arg - 1);
		colon = end + 1;
		arg++;
	} else {
		colon = strrchr(arg, ':');
		if (!colon) {
			if (!port_only_ok)
				return -1;
			snprintf(host, hostlen, "%s", "");
			snprintf(port, portlen, "%s", arg);
			return port_ok(port) ? 0 : -1;
		}
		n = (size_t)(colon - arg);
	}
	if (n >= hostlen || !colon[1] || strlen(colon + 1) >= portlen)
		return -1;
	memcpy(host, arg, n);
	host[n] = '\0';
	snprintf(port, portlen, "%s", colon + 1);
	return port_ok(port) ? 0 : -1;
}

/* This process's slot for @fd, from its counters file. */
static void find_slot(int fd, struct carried *out)
{
	static const char *const kinds[] = { "pending", "tcp", "listen",
					     "rdma" };
	struct xs_shm_header h;
	struct xs_shm_slot slot;
	char path[64];
	uint32_t i, nr;
	int f;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/%s%d", XS_SHM_DIR, XS_SHM_PREFIX,
		 (int)getpid());
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return;
	if (pread(f, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != XS_SHM_MAGIC || h.version != XS_SHM_VERSION ||
	    h.header_size != XS_SHM_HEADER_SIZE ||
	    h.slot_size != XS_SHM_SLOT_SIZE) {
		close(f);
		return;
	}
	nr = h.nr_slots < XS_SHM_MAX_SLOTS ? h.nr_slots : XS_SHM_MAX_SLOTS;
	for (i = 0; i < nr; i++) {
		if (pread(f, &slot, sizeof(slot),
			  (off_t)XS_SHM_HEADER_SIZE +
				  (off_t)i * XS_SHM_SLOT_SIZE) !=
		    (ssize_t)sizeof(slot))
			break;
		if (slot.state != XS_SHM_USED || slot.fd != fd)
			continue;
		out->known = true;
		snprintf(out->transport, sizeof(out->transport), "%s",
			 slot.kind < 4 ? kinds[slot.kind] : "?");
		snprintf(out->reason, sizeof(out->reason), "%s",
			 slot.reason < XS_SHM_NR_REASONS
				 ? reason_names[slot.reason]
				 : "?");
		memcpy(out->device, slot.device, sizeof(out->device));
		out->device[sizeof(out->device) - 1] = '\0';
		out->qp_num = slot.qp_num;
		out->setup_us = slot.setup_us;
		break;
	}
	close(f);
	if (!out->known)
		return;
	if (strcmp(out->transport, "rdma") == 0)
		snprintf(out->what, sizeof(out->what),
			 "rdma (device %s, qp %u, setup %.1f ms)",
			 out->device[0] ? out->device : "?", out->qp_num,
			 (double)out->setup_us / 1000.0);
	else
		snprintf(out->what, sizeof(out->what), "%s (fallback: %s)",
			 out->transport, out->reason);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until @fd is readable (POLLIN) or writable, at most @ms. */
static int wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	return n;
}

/* Read exactly @len bytes, each wait at most @ms. Return: 0, or -1. */
static int read_full(int fd, void *buf, size_t len, int ms)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		if (wait_fd(fd, POLLIN, ms) <= 0)
			return -1;
		n = recv(fd, (char *)buf + got, len - got, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = send(fd, (const char *)buf + done, len - done,
			 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* Read one line (at most @len - 1 bytes, byte by byte: the echo that
 * follows must stay in the socket). Return: 0, or -1. */
static int read_line(int fd, char *line, size_t len, int ms)
{
	size_t i = 0;
	char ch;

	while (i + 1 < len) {
		if (read_full(fd, &ch, 1, ms) != 0)
			return -1;
		if (ch == '\n') {
			line[i] = '\0';
			return 0;
		}
		line[i++] = ch;
	}
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void addr_str(const struct sockaddr_storage *ss, char *out, size_t len);

/* One echo connection of the server: its "accepted" line once its first
 * line is read. */
static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct carried c;
	char line[256], *buf;
	unsigned long size = 0, count = 0, i;

	bool ok = read_line(fd, line, sizeof(line), 10000) == 0;
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	char who[80] = "?";

	/* after the first read: the transport is decided by then (the
	 * first I/O negotiates it, core/neg.c) */
	find_slot(fd, &c);
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
		addr_str(&peer, who, sizeof(who));
	printf("accepted %s over %s\n", who,
	       c.known ? c.what : "? (xsock not active)");
	fflush(stdout);
	if (!ok || sscanf(line, CHECK_MAGIC " %lu %lu", &size, &count) != 2 ||
	    size == 0 || size > CHECK_MAX_SIZE) {
		close(fd);
		return NULL;
	}
	snprintf(line, sizeof(line), CHECK_MAGIC " %s %s %s %u %llu\n",
		 c.known ? c.transport : "unknown", c.known ? c.reason : "-",
		 c.known && c.device[0] ? c.device : "-", c.qp_num,
		 (unsigned long long)c.setup_us);
	buf = malloc(size);
	if (!buf || write_full(fd, line, strlen(line)) != 0) {
		free(buf);
		close(fd);
		return NULL;
	}
	for (i = 0; i < count; i++)
		if (read_full(fd, buf, size, 10000) != 0 ||
		    write_full(fd, buf, size) != 0)
			break;
	free(buf);
	close(fd);
	return NULL;
}

/* Print a peer address as "addr:port" / "[addr]:port". */
static void addr_str(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(out, len, "%s:%u", a, ntohs(in->sin_port));
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(out, len, "[%s]:%u", a, ntohs(in6->sin6_port));
	}
}

static int run_server(const char *host, const char *port, bool once)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	struct sockaddr_storage peer;
	socklen_t plen;
	struct carried c;
	char bound[32];
	pthread_t t;
	int lfd, fd, one = 1, rc;

	rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "xsock-check: %s: %s\n", port,
			gai_strerror(rc));
		return 2;
	}
	lfd = socket(res->ai_family, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, res->ai_addr, res->ai_addrlen) || listen(lfd, 128)) {
		fprintf(stderr, "xsock-check: listen on %s: %s\n", port,
			strerror(errno));
		freeaddrinfo(res);
		return 2;
	}
	freeaddrinfo(res);
	find_slot(lfd, &c);
	snprintf(bound, sizeof(bound), "%s", port);
	plen = sizeof(peer); /* the port really bound (0: the kernel's) */
	if (getsockname(lfd, (struct sockaddr *)&peer, &plen) == 0)
		snprintf(bound, sizeof(bound), "%u",
			 ntohs(peer.ss_family == AF_INET6
				       ? ((struct sockaddr_in6 *)&peer)
						 ->sin6_port
				       : ((struct sockaddr_in *)&peer)
						 ->sin_port));
	printf("listening on %s:%s (%s)\n", host[0] ? host : "*", bound,
	       !c.known			    ? "xsock not active"
	       : strcmp(c.reason, "-") == 0 ? "kernel tcp and rdma_cm"
					    : "kernel tcp only");
	fflush(stdout);
	for (;;) {
		plen = sizeof(peer);
		fd = accept(lfd, (struct sockaddr *)&peer, &plen);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "xsock-check: accept: %s\n",
				strerror(errno));
			return 2;
		}
		if (once) {
			serve_conn((void *)(intptr_t)fd);
			return 0;
		}
		if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd))
			close(fd);
		else
			pthread_detach(t);
	}
}

/* Connect to @host:@port within @secs. Return: fd, or -1 (printed). */
static int dial(const char *host, const char *port, int secs, double *ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	uint64_t t0;
	int fd = -1, rc, err = 0;
	socklen_t len = sizeof(err);

	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "xsock-check: %s: %s\n", host,
			gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		t0 = now_ns();
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc < 0 && errno == EINPROGRESS) {
			if (wait_fd(fd, POLLOUT, secs * 1000) <= 0)
				err = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					    &len))
				err = errno;
		} else if (rc < 0) {
			err = errno;
		}
		*ms = (double)(now_ns() - t0) / 1e6;
		if (!err)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		fprintf(stderr, "xsock-check: connect to %s%s%s:%s: %s\n",
			strchr(host, ':') ? "[" : "", host,
			strchr(host, ':') ? "]" : "", port,
			strerror(err ? err : EHOSTUNREACH));
	else
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

struct rtt {
	bool measured;
	char why[96];
	char peer_transport[16], peer_reason[24], peer_device[16];
	unsigned int peer_qp;
	double min, p50, p99, avg; /* us */
};

/* Whether @s is plain printable ASCII (a peer's words reach the
 * terminal and the JSON). */
static bool printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
			return false;
	return true;
}

/* The server's answer, then @count round trips of @size bytes. */
static void measure(int fd, unsigned long size, unsigned long count, int secs,
		    struct rtt *r)
{
	char line[256];
	uint64_t *lat, t0, sum = 0;
	char *buf;
	unsigned long i;

	memset(r, 0, sizeof(*r));
	snprintf(line, sizeof(line), CHECK_MAGIC " %lu %lu\n", size, count);
	if (write_full(fd, line, strlen(line)) != 0 ||
	    read_line(fd, line, sizeof(line), secs * 1000) != 0 ||
	    sscanf(line, CHECK_MAGIC " %15s %23s %15s %u", r->peer_transport,
		   r->peer_reason, r->peer_device, &r->peer_qp) != 4 ||
	    !printable(r->peer_transport) || !printable(r->peer_reason) ||
	    !printable(r->peer_device)) {
		memset(r->peer_transport, 0, sizeof(r->peer_transport));
		snprintf(r->why, sizeof(r->why),
			 "the peer is not an xsock-check --server");
		return;
	}
	buf = malloc(size);
	lat = calloc(count ? count : 1, sizeof(*lat));
	if (!buf || !lat) {
		snprintf(r->why, sizeof(r->why), "out of memory");
		goto out;
	}
	memset(buf, 'x', size);
	for (i = 0; i < count; i++) {
		t0 = now_ns();
		if (write_full(fd, buf, size) != 0 ||
		    read_full(fd, buf, size, secs * 1000) != 0) {
			snprintf(r->why, sizeof(r->why),
				 "the echo stopped after %lu of %lu", i, count);
			goto out;
		}
		lat[i] = now_ns() - t0;
		sum += lat[i];
	}
	if (count) {
		qsort(lat, count, sizeof(*lat), cmp_u64);
		r->measured = true;
		r->min = (double)lat[0] / 1e3;
		r->p50 = (double)lat[count / 2] / 1e3;
		r->p99 = (double)lat[(count * 99) / 100] / 1e3;
		r->avg = (double)sum / (double)count / 1e3;
	}
out:
	free(buf);
	free(lat);
}

/* A string for JSON: only what this program itself wrote (names, digits,
 * punctuation) reaches it, but escape anyway. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static int run_client(const char *host, const char *port, unsigned long size,
		      unsigned long count, int secs, bool json)
{
	struct carried c;
	struct rtt r;
	double conn_ms = 0;
	bool rdma;
	int fd;

	fd = dial(host, port, secs, &conn_ms);
	if (fd < 0)
		return 2;
	find_slot(fd, &c);
	measure(fd, size, count, secs, &r);
	close(fd);
	rdma = c.known && strcmp(c.transport, "rdma") == 0;
	if (json) {
		printf("{\"target\":");
		json_str(host);
		printf(",\"port\":");
		json_str(port);
		printf(",\"xsock_active\":%s,\"transport\":",
		       c.known ? "true" : "false");
		json_str(c.known ? c.transport : "unknown");
		printf(",\"reason\":");
		json_str(c.known ? c.reason : "-");
		printf(",\"device\":");
		json_str(c.device);
		printf(",\"qp_num\":%u,\"setup_us\":%llu,\"connect_ms\":%.3f",
		       c.qp_num, (unsigned long long)c.setup_us, conn_ms);
		printf(",\"peer\":");
		if (r.peer_transport[0]) {
			printf("{\"transport\":");
			json_str(r.peer_transport);
			printf(",\"reason\":");
			json_str(r.peer_reason);
			printf(",\"device\":");
			json_str(strcmp(r.peer_device, "-") ? r.peer_device
							    : "");
			printf(",\"qp_num\":%u}", r.peer_qp);
		} else {
			printf("null");
		}
		if (r.measured)
			printf(",\"rtt\":{\"bytes\":%lu,\"count\":%lu,"
			       "\"min_us\":%.1f,\"p50_us\":%.1f,"
			       "\"p99_us\":%.1f,\"avg_us\":%.1f}",
			       size, count, r.min, r.p50, r.p99, r.avg);
		else {
			printf(",\"rtt\":null,\"rtt_missing\":");
			json_str(r.why);
		}
		printf("}\n");
		return rdma ? 0 : 1;
	}
	printf("xsock-check %s:%s\n", host, port);
	printf("  this side   %s\n",
	       c.known ? c.what
		       : "unknown: xsock is not active in this process "
			 "(XSOCK_MODE=off or XSOCK_PUBLISH=0?)");
	if (r.peer_transport[0]) {
		if (strcmp(r.peer_transport, "rdma") == 0)
			printf("  peer side   rdma (device %s, qp %u)\n",
			       r.peer_device, r.peer_qp);
		else
			printf("  peer side   %s (fallback: %s)\n",
			       r.peer_transport, r.peer_reason);
	}
	printf("  connect     %.2f ms\n", conn_ms);
	if (r.measured)
		printf("  round trip  %lu x %lu B: min %.1f us, p50 %.1f us, "
		       "p99 %.1f us, avg %.1f us\n",
		       count, size, r.min, r.p50, r.p99, r.avg);
	else
		printf("  round trip  not measured: %s\n", r.why);
	if (rdma)
		printf("verdict: RDMA\n");
	else
		printf("verdict: kernel TCP (%s)\n",
		       c.known ? c.reason : "xsock not active");
	return rdma ? 0 : 1;
}

/* A positive decimal of at most @max. Return: 0, or -1. */
static int parse_num(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v == 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", no_argument, NULL, 'S' },
		{ "once", no_argument, NULL, '1' },
		{ "json", no_argument, NULL, 'j' },
		{ "lib", required_argument, NULL, 'L' },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long count = 1000, size = 64, secs = 10;
	bool server = false, once = false, json = false;
	const char *lib = NULL;
	char host[256], port[32];
	int ch;

	while ((ch = getopt_long(argc, argv, "1n:s:t:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'S':
			server = true;
			break;
		case '1':
			once = true;
			break;
		case 'j':
			json = true;
			break;
		case 'L':
			lib = optarg;
			break;
		case 'n':
			if (parse_num(optarg, 10000000, &count))
				goto bad;
			break;
		case 's':
			if (parse_num(optarg, CHECK_MAX_SIZE, &size))
				goto bad;
			break;
		case 't':
			if (parse_num(optarg, 3600, &secs))
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || (once && !server) ||
	    parse_hostport(argv[optind], host, sizeof(host), port, sizeof(port),
			   server)) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!lib_loaded() && !getenv(CHECK_CHILD_ENV)) {
		reexec_preloaded(argv, lib);
		return 2;
	}
	unsetenv(CHECK_CHILD_ENV);
	if (server)
		return run_server(host, port, once);
	return run_client(host, port, size, count, (int)secs, json);
bad:
	fprintf(stderr, "xsock-check: invalid number: %s\n", optarg);
	return 2;
}
