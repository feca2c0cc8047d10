/*
 * tests/tools/xsnet.c - a plain TCP program for the transport tests.
 *
 * Uses only the socket API, so it runs the same with and without
 * LD_PRELOAD=libxsock.so; which transport carried the bytes is read from
 * XSOCK_STATS by the tests, never assumed.
 *
 *   xsnet serve IP PORT [N]    echo server, a thread per connection;
 *                              with N, exit after N connections ended
 *   xsnet sink IP PORT         one connection; its bytes to stdout, then
 *                              "OK <bytes>" back to the sender
 *   xsnet source IP PORT CHUNK stdin to the server in CHUNK-byte writes,
 *                              shutdown(SHUT_WR), print the server's reply
 *   xsnet blast IP PORT BYTES [exit|_exit|kill|abort]
 *                              write BYTES and end without close(), by
 *                              exit() (the default), _exit(), SIGKILL or
 *                              abort()
 *   xsnet sizes IP PORT S...   echo each size S through one connection
 *                              (a writer thread and the reader at once)
 *   xsnet soak IP PORT STOP    one connection: a writer thread streams a
 *                              known pattern in writes of 1 B to 200 KB
 *                              until the file STOP exists, then
 *                              shutdown(SHUT_WR); the reader checks every
 *                              byte echoed. Prints "streaming" once 1 MiB
 *                              came back, then "soak N bytes echo ok" (or
 *                              "soak MISMATCH at byte N"; exit 1)
 *   xsnet many IP PORT N       N connections open at once, each echoing;
 *                              their fds by kind on stderr (fd_census())
 *   xsnet semantics IP PORT    socket-call semantics against the echo
 *                              server, one line per check
 *   xsnet nbconnect IP PORT HOW a non-blocking connect to the echo server
 *                              (or to nobody), waited for by HOW: poll,
 *                              epoll, select, or sleep (3 s without a
 *                              call, then poll without waiting), or
 *                              fork-HOW (a forked child waits and uses
 *                              the socket); one line per fact; the
 *                              echo's reply is waited for the same way
 *                              (sleep: poll), and then a wait of 300 ms
 *                              with nothing to come: "idle: quiet" when
 *                              it waited without using the CPU
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "xsnet: %s: %s\n", what, strerror(errno));
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

static int listen_on(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("bind");
	if (listen(fd, 1024) < 0)
		die("listen");
	return fd;
}

static int connect_to(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	return fd;
}

/* Write everything: 0, or -1 with errno (the echo server goes on). */
static int write_some(int fd, const void *buf, size_t len)
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

static void write_all(int fd, const void *buf, size_t len)
{
	if (write_some(fd, buf, len) < 0)
		die("write");
}

static void read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		if (n == 0) {
			errno = EPIPE;
			die("read: early EOF");
		}
		p += n;
		len -= (size_t)n;
	}
}

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[1 << 16];
	ssize_t n;

	/* A connection that fails ends alone; the server serves on. */
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write_some(fd, buf, (size_t)n) < 0)
			break;
	if (n != 0)
		fprintf(stderr, "xsnet: echo: %s\n", strerror(errno));
	close(fd);
	return NULL;
}

static int do_serve(const char *ip, const char *port, int max)
{
	int lfd = listen_on(ip, port), fd, n = 0;
	pthread_t *t = calloc(max > 0 ? (size_t)max : 1, sizeof(*t)), one;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	printf("listening\n");
	for (; max <= 0 || n < max; n++) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED) {
				n--;
				continue;
			}
			die("accept");
		}
		if (pthread_create(max > 0 ? &t[n] : &one, &attr, echo_conn,
				   (void *)(intptr_t)fd))
			die("pthread_create");
		if (max <= 0)
			pthread_detach(one);
	}
	/* served MAX connections: exit once they end (XSOCK_STATS runs) */
	while (n--)
		pthread_join(t[n], NULL);
	printf("served %d\n", max);
	close(lfd);
	free(t);
	return 0;
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 131u + seed) ^ (i >> 9));
}

static int do_sink(const char *ip, const char *port)
{
	static char buf[1 << 16];
	int lfd = listen_on(ip, port), fd;
	unsigned long long total = 0;
	char reply[64];
	ssize_t n;

	printf("%s", ""); /* stdout carries only the data */
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			die("stdout");
		total += (unsigned long long)n;
	}
	if (n < 0)
		die("read");
	fflush(stdout);
	n = snprintf(reply, sizeof(reply), "OK %llu\n", total);
	write_some(fd, reply, (size_t)n); /* the sender may be gone */
	close(fd);
	close(lfd);
	return 0;
}

/* Connect, write @total pattern bytes, end by @how (exit, _exit, kill, abort)
 * close(). */
static int do_blast(const char *ip, const char *port, size_t total,
		    const char *how)
{
	static unsigned char buf[1 << 16];
	int fd = connect_to(ip, port);
	size_t n;

	fill(buf, sizeof(buf), 7);
	while (total) {
		n = total < sizeof(buf) ? total : sizeof(buf);
		write_all(fd, buf, n);
		total -= n;
	}
	/* the fd stays open: the process's end must deliver the bytes */
	if (!strcmp(how, "_exit"))
		_exit(0);
	if (!strcmp(how, "kill"))
		raise(SIGKILL);
	if (!strcmp(how, "abort"))
		abort();
	exit(0);
}

static int do_source(const char *ip, const char *port, size_t chunk)
{
	char *buf = malloc(chunk), reply[64];
	int fd = connect_to(ip, port);
	ssize_t n;

	if (!buf)
		die("malloc");
	while ((n = read(STDIN_FILENO, buf, chunk)) > 0)
		write_all(fd, buf, (size_t)n);
	if (shutdown(fd, SHUT_WR) < 0)
		die("shutdown");
	n = recv(fd, reply, sizeof(reply) - 1, MSG_WAITALL);
	if (n < 0)
		die("recv");
	reply[n] = '\0';
	fputs(reply, stdout);
	close(fd);
	free(buf);
	return 0;
}

struct writer {
	int fd;
	const unsigned char *buf;
	size_t len;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	write_all(w->fd, w->buf, w->len);
	return NULL;
}

static int do_sizes(const char *ip, const char *port, int argc, char **argv)
{
	int fd = connect_to(ip, port), i;
	unsigned char *out, *in;
	struct writer w;
	pthread_t t;
	size_t len;

	for (i = 0; i < argc; i++) {
		len = strtoull(argv[i], NULL, 0);
		out = malloc(len ? len : 1);
		in = malloc(len ? len : 1);
		if (!out || !in)
			die("malloc");
		fill(out, len, (unsigned int)i);
		w = (struct writer){ fd, out, len };
		if (pthread_create(&t, NULL, writer_main, &w))
			die("pthread_create");
		read_all(fd, in, len);
		pthread_join(t, NULL);
		printf("size %zu echo %s\n", len,
		       memcmp(in, out, len) ? "MISMATCH" : "ok");
		free(out);
		free(in);
	}
	close(fd);
	return 0;
}

/* The soak stream's byte at offset @i. */
static unsigned char soak_byte(unsigned long long i)
{
	return (unsigned char)((i * 131u + 29u) ^ (i >> 9) ^ (i >> 20));
}

struct soak {
	int fd;
	const char *stop;
	unsigned long long sent;
};

/* Write sizes on both sides of the inline, eager and rendezvous edges. */
static void *soak_writer(void *arg)
{
	static const size_t sizes[] = { 1,    100,   4088,  4089,
					4097, 65536, 65537, 200000 };
	static unsigned char buf[200000];
	struct soak *w = arg;
	size_t k = 0, n, i;

	while (access(w->stop, F_OK) != 0) {
		n = sizes[k++ % (sizeof(sizes) / sizeof(sizes[0]))];
		for (i = 0; i < n; i++)
			buf[i] = soak_byte(w->sent + i);
		write_all(w->fd, buf, n);
		w->sent += n;
	}
	if (shutdown(w->fd, SHUT_WR) < 0)
		die("shutdown");
	return NULL;
}

static int do_soak(const char *ip, const char *port, const char *stop)
{
	static unsigned char buf[1 << 16];
	struct soak w = { connect_to(ip, port), stop, 0 };
	unsigned long long got = 0;
	bool announced = false;
	pthread_t t;
	ssize_t n, i;

	if (pthread_create(&t, NULL, soak_writer, &w))
		die("pthread_create");
	while ((n = read(w.fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read");
		for (i = 0; i < n; i++)
			if (buf[i] != soak_byte(got + (unsigned long long)i)) {
				printf("soak MISMATCH at byte %llu\n",
				       got + (unsigned long long)i);
				return 1;
			}
		got += (unsigned long long)n;
		if (!announced && got >= (1u << 20)) {
			printf("streaming\n");
			announced = true;
		}
	}
	pthread_join(t, NULL);
	if (got != w.sent) {
		printf("soak MISMATCH: %llu bytes sent, %llu came back\n",
		       w.sent, got);
		return 1;
	}
	printf("soak %llu bytes echo ok\n", got);
	close(w.fd);
	return 0;
}

/* Print this process's open fds by kind on stderr: "fds N: socket S
 * eventfd E infinibandevent I rdma_cm R uverbs U other O" (an RDMA
 * connection's completion channel is an infinibandevent, its CM
 * channel an rdma_cm). */
static void fd_census(void)
{
	static const char *const kind[] = { "socket:", "anon_inode:[eventfd]",
					    "anon_inode:[infinibandevent]",
					    "/dev/infiniband/rdma_cm",
					    "/dev/infiniband/uverbs" };
	unsigned int nr[6] = { 0 }, total = 0, k;
	char path[300], link[256];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	ssize_t len;

	if (!dir)
		die("opendir /proc/self/fd");
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == dirfd(dir))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		link[len > 0 ? len : 0] = 0;
		for (k = 0; k < 5; k++)
			if (!strncmp(link, kind[k], strlen(kind[k])))
				break;
		nr[k]++;
		total++;
	}
	closedir(dir);
	fprintf(stderr,
		"fds %u: socket %u eventfd %u infinibandevent %u rdma_cm %u "
		"uverbs %u other %u\n",
		total, nr[0], nr[1], nr[2], nr[3], nr[4], nr[5]);
}

static int do_many(const char *ip, const char *port, int n)
{
	int *fds = calloc((size_t)n, sizeof(int)), i, bad = 0;
	struct rlimit rl;
	char msg[32], got[32];

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (i = 0; i < n; i++) {
		fds[i] = connect_to(ip, port);
		snprintf(msg, sizeof(msg), "connection %08d  ", i);
		write_all(fds[i], msg, sizeof(msg));
	}
	for (i = 0; i < n; i++) {
		snprintf(msg, sizeof(msg), "connection %08d  ", i);
		read_all(fds[i], got, sizeof(got));
		bad += memcmp(got, msg, sizeof(msg)) != 0;
	}
	fd_census();
	printf("connections %d open at once, echo mismatches %d\n", n, bad);
	for (i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	return bad != 0;
}

#define CHECK(name, expr) printf("%-44s %s\n", name, (expr) ? "ok" : "FAILED")

/* Wait until @n bytes are readable (MSG_PEEK|MSG_WAITALL). */
static void wait_readable(int fd, size_t n)
{
	char buf[4096];

	if (recv(fd, buf, n, MSG_PEEK | MSG_WAITALL) != (ssize_t)n)
		die("peek");
}

static int do_semantics(const char *ip, const char *port)
{
	int fd = connect_to(ip, port), v, lfd;
	char buf[256], a[3], b[5], c[7];
	struct iovec iov[5];
	struct msghdr mh;
	struct sockaddr_in sa, pa;
	socklen_t sl = sizeof(sa), pl = sizeof(pa);
	struct timeval tv;
	ssize_t n;

	signal(SIGPIPE, SIG_IGN);
	CHECK("getsockname AF_INET",
	      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
		      sa.sin_family == AF_INET && sl == sizeof(sa) &&
		      sa.sin_port != 0);
	CHECK("getpeername is the server",
	      getpeername(fd, (struct sockaddr *)&pa, &pl) == 0 &&
		      pa.sin_port == htons((uint16_t)atoi(port)) &&
		      pl == sizeof(pa));
	sl = 4;
	CHECK("getsockname truncates, returns the full length",
	      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
		      sl == sizeof(sa));
	CHECK("connect again: EISCONN",
	      connect(fd, (struct sockaddr *)&pa, sizeof(pa)) < 0 &&
		      errno == EISCONN);
	CHECK("recv MSG_DONTWAIT on an idle socket: EAGAIN",
	      recv(fd, buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	v = 1;
	CHECK("setsockopt TCP_NODELAY",
	      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) == 0);
	tv = (struct timeval){ 0, 200000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK("SO_RCVTIMEO 200 ms: EAGAIN",
	      read(fd, buf, 1) < 0 && errno == EAGAIN);
	tv = (struct timeval){ 0, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	v = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, v | O_NONBLOCK);
	CHECK("O_NONBLOCK read: EAGAIN",
	      read(fd, buf, 1) < 0 && errno == EAGAIN);
	fcntl(fd, F_SETFL, v);
	v = 1;
	ioctl(fd, FIONBIO, &v);
	CHECK("FIONBIO recv: EAGAIN",
	      recv(fd, buf, 1, 0) < 0 && errno == EAGAIN);
	v = 0;
	ioctl(fd, FIONBIO, &v);

	/* writev with zero-length entries, readv into odd pieces */
	iov[0] = (struct iovec){ "", 0 };
	iov[1] = (struct iovec){ "abc", 3 };
	iov[2] = (struct iovec){ NULL, 0 };
	iov[3] = (struct iovec){ "defgh", 5 };
	iov[4] = (struct iovec){ "ijklmno", 7 };
	CHECK("writev 5 iovecs, 2 empty", writev(fd, iov, 5) == 15);
	wait_readable(fd, 15);
	CHECK("FIONREAD counts 15", ioctl(fd, FIONREAD, &v) == 0 && v == 15);
	CHECK("MSG_PEEK does not consume",
	      recv(fd, buf, 4, MSG_PEEK) == 4 && !memcmp(buf, "abcd", 4));
	iov[0] = (struct iovec){ a, 3 };
	iov[1] = (struct iovec){ NULL, 0 };
	iov[2] = (struct iovec){ b, 5 };
	iov[3] = (struct iovec){ c, 7 };
	CHECK("readv 4 iovecs",
	      readv(fd, iov, 4) == 15 && !memcmp(a, "abc", 3) &&
		      !memcmp(b, "defgh", 5) && !memcmp(c, "ijklmno", 7));
	v = -1; /* hidden from the compiler's bounds check */
	CHECK("readv iovcnt -1: EINVAL",
	      readv(fd, iov, *(volatile int *)&v) < 0 && errno == EINVAL);
	CHECK("read of 0 bytes: 0", read(fd, buf, 0) == 0);

	/* MSG_TRUNC on a stream: counted and dropped, nothing copied */
	CHECK("send 6 bytes", send(fd, "uvwxyz", 6, 0) == 6);
	wait_readable(fd, 6);
	CHECK("MSG_PEEK|MSG_TRUNC into NULL counts 2",
	      recv(fd, NULL, 2, MSG_PEEK | MSG_TRUNC) == 2);
	CHECK("MSG_TRUNC into NULL drops 2", recv(fd, NULL, 2, MSG_TRUNC) == 2);
	CHECK("the rest follows the dropped bytes",
	      recv(fd, buf, 4, 0) == 4 && !memcmp(buf, "wxyz", 4));
	CHECK("send of 0 bytes: 0", send(fd, buf, 0, 0) == 0);

	/* sendmsg/recvmsg, recvfrom's address length */
	memset(&mh, 0, sizeof(mh));
	iov[0] = (struct iovec){ "hello ", 6 };
	iov[1] = (struct iovec){ "world", 5 };
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	CHECK("sendmsg 11 bytes", sendmsg(fd, &mh, MSG_NOSIGNAL) == 11);
	memset(&mh, 0, sizeof(mh));
	iov[0] = (struct iovec){ buf, 11 };
	mh.msg_iov = iov;
	mh.msg_iovlen = 1;
	mh.msg_name = &sa;
	mh.msg_namelen = sizeof(sa);
	n = recvmsg(fd, &mh, MSG_WAITALL);
	CHECK("recvmsg MSG_WAITALL 11 bytes, no name",
	      n == 11 && !memcmp(buf, "hello world", 11) &&
		      mh.msg_namelen == 0 && mh.msg_flags == 0);
	write_all(fd, "xyz", 3);
	sl = sizeof(sa);
	n = recvfrom(fd, buf, 3, MSG_WAITALL, (struct sockaddr *)&sa, &sl);
	CHECK("recvfrom: 3 bytes, address length 0", n == 3 && sl == 0);
	CHECK("MSG_OOB recv: EINVAL",
	      recv(fd, buf, 1, MSG_OOB | MSG_DONTWAIT) < 0 && errno == EINVAL);

	/* shutdown: the server echoes, then sees EOF and closes */
	write_all(fd, "last", 4);
	CHECK("shutdown SHUT_WR", shutdown(fd, SHUT_WR) == 0);
	CHECK("send after SHUT_WR: EPIPE",
	      send(fd, "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE);
	CHECK("echo after SHUT_WR arrives",
	      recv(fd, buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "last", 4));
	CHECK("then EOF", read(fd, buf, sizeof(buf)) == 0);
	CHECK("EOF again", read(fd, buf, sizeof(buf)) == 0);
	CHECK("shutdown how=7: EINVAL", shutdown(fd, 7) < 0 && errno == EINVAL);
	CHECK("close", close(fd) == 0);

	/* accept on a listener with nothing pending */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	sa = addr_of("0.0.0.0", "0");
	CHECK("bind port 0, listen",
	      bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		      listen(lfd, 4) == 0);
	CHECK("accept4 non-blocking, nothing pending: EAGAIN",
	      accept4(lfd, NULL, NULL, SOCK_CLOEXEC) < 0 && errno == EAGAIN);
	CHECK("accept4 bad flags: EINVAL",
	      accept4(lfd, NULL, NULL, 0x4000000) < 0 && errno == EINVAL);
	close(lfd);
	return 0;
}

static const char *errname(int e)
{
	switch (e) {
	case 0:
		return "0";
	case EINPROGRESS:
		return "EINPROGRESS";
	case EISCONN:
		return "EISCONN";
	case EALREADY:
		return "EALREADY";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case EAGAIN:
		return "EAGAIN";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	default:
		return strerror(e);
	}
}

/* CLOCK_MONOTONIC, in ms */
static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* CPU time this process used so far, in ms */
static long cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
}

/*
 * Wait for @fd to be readable by HOW (@ep: its epoll set, where it is
 * registered), @ms at most. Return: whether it was.
 */
static bool nb_wait_in(const char *how, int fd, int ep, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 42 };
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	fd_set r;

	if (!strcmp(how, "epoll")) {
		if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0)
			die("epoll_ctl MOD");
		return epoll_wait(ep, &ev, 1, ms) == 1 &&
		       (ev.events & EPOLLIN) && ev.data.u64 == 42;
	}
	if (!strcmp(how, "select")) {
		FD_ZERO(&r);
		FD_SET(fd, &r);
		return select(fd + 1, &r, NULL, NULL, &tv) == 1 &&
		       FD_ISSET(fd, &r);
	}
	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

static int do_nbconnect(const char *ip, const char *port, const char *how)
{
	struct sockaddr_in sin = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), rc, err;
	int ep = -1, n;
	long cpu0, t0;
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 42 };
	struct timeval tv = { 10, 0 };
	socklen_t len = sizeof(err);
	char buf[4];
	fd_set w;

	if (fd < 0)
		die("socket");
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	printf("connect: %s\n", errname(rc ? errno : 0));
	/* fork-HOW: a child goes on with the connect in progress, the parent
	 * closes its copy and waits for it */
	if (!strncmp(how, "fork-", 5)) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			die("fork");
		if (pid > 0) {
			close(fd);
			if (waitpid(pid, &st, 0) < 0)
				die("waitpid");
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		}
		how += 5;
	}
	if (!strcmp(how, "poll")) {
		rc = poll(&pfd, 1, 10000) == 1 && (pfd.revents & POLLOUT);
	} else if (!strcmp(how, "epoll")) {
		ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		memset(&ev, 0, sizeof(ev));
		t0 = now_ms();
		n = epoll_wait(ep, &ev, 1, 10000);
		rc = n == 1 && (ev.events & EPOLLOUT) && ev.data.u64 == 42;
		if (!rc) /* what the wait said instead, on stderr */
			fprintf(stderr,
				"epoll_wait: %d (%s) events %#x data %llu "
				"after %ld ms\n",
				n, n < 0 ? errname(errno) : "-", ev.events,
				(unsigned long long)ev.data.u64, now_ms() - t0);
	} else if (!strcmp(how, "select")) {
		FD_ZERO(&w);
		FD_SET(fd, &w);
		rc = select(fd + 1, NULL, &w, NULL, &tv) == 1 &&
		     FD_ISSET(fd, &w);
	} else {
		sleep(3);
		rc = poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT);
	}
	printf("writable: %s\n", rc ? "yes" : "no");
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		die("getsockopt");
	printf("SO_ERROR: %s\n", errname(err));
	if (err == 0) {
		rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		printf("connect again: %s\n", errname(rc ? errno : 0));
		ssize_t n = write(fd, "ping", 4);

		if (n != 4)
			printf("echo: write=%zd errno=%s\n", n, errname(errno));
		else if (!nb_wait_in(how, fd, ep, 10000))
			printf("echo: %s: no reply (%s)\n", how,
			       errname(errno));
		else if ((n = read(fd, buf, 4)) != 4 || memcmp(buf, "ping", 4))
			printf("echo: read=%zd errno=%s\n", n,
			       errname(n < 0 ? errno : 0));
		else
			printf("echo: ok\n");
		/* nothing more comes: the wait sleeps its 300 ms through */
		cpu0 = cpu_ms();
		rc = nb_wait_in(how, fd, ep, 300);
		cpu0 = cpu_ms() - cpu0;
		if (rc || cpu0 > 150)
			printf("idle: %s, %ld ms of CPU\n",
			       rc ? "readable" : "waited", cpu0);
		else
			printf("idle: quiet\n");
	}
	if (ep >= 0)
		close(ep);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "serve"))
		return do_serve(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 0);
	if (argc >= 4 && !strcmp(argv[1], "sink"))
		return do_sink(argv[2], argv[3]);
	if (argc >= 5 && !strcmp(argv[1], "source"))
		return do_source(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc >= 5 && !strcmp(argv[1], "blast"))
		return do_blast(argv[2], argv[3], strtoull(argv[4], NULL, 0),
				argc > 5 ? argv[5] : "exit");
	if (argc >= 4 && !strcmp(argv[1], "sizes"))
		return do_sizes(argv[2], argv[3], argc - 4, argv + 4);
	if (argc >= 5 && !strcmp(argv[1], "soak"))
		return do_soak(argv[2], argv[3], argv[4]);
	if (argc >= 5 && !strcmp(argv[1], "many"))
		return do_many(argv[2], argv[3], atoi(argv[4]));
	if (argc >= 5 && !strcmp(argv[1], "nbconnect"))
		return do_nbconnect(argv[2], argv[3], argv[4]);
	if (argc >= 4 && !strcmp(argv[1], "semantics"))
		return do_semantics(argv[2], argv[3]);
	fprintf(stderr,
		"usage: xsnet serve|sink|source|sizes|soak|many|semantics "
		"IP PORT ...\n");
	return 2;
}
