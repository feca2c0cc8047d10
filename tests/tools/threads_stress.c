/*
 * tests/tools/threads_stress.c - threads sharing the socket API.
 *
 * Uses only the socket API, against an echo server (storm serve or xsnet
 * serve), so it runs the same with and without LD_PRELOAD=libxsock.so.
 *
 *   threads_stress reuse IP PORT THREADS N
 *       THREADS threads each run N rounds of socket, connect, send 1 B to
 *       16 KiB, read the echo, close: fd numbers are reused by one thread
 *       right after another closed them, while the other threads'
 *       connections are in flight. Every byte names its thread and round.
 *       Prints "rounds R mismatches M failed F fds-reused-across-threads U".
 *   threads_stress records IP PORT THREADS N
 *       THREADS writers each send N records of 32 bytes (magic, thread,
 *       sequence, checksum), each with one send() under no lock, on ONE
 *       socket; a reader checks the echo: no record torn, none lost, each
 *       thread's in order. Prints "records T x N torn X lost L
 *       reordered O".
 *       The kernel does not promise this for TCP: tcp_sendmsg() copies
 *       under the socket lock, but drops it to wait for send-buffer space
 *       (sk_stream_wait_memory), so a blocking send that meets a full
 *       buffer part-way can have another thread's bytes land inside its
 *       record. Over RDMA xsock does promise it for a send no larger than
 *       one eager message (XSOCK_EAGER_LIMIT less its 16-byte header): it
 *       is posted as one message under the stream lock, whole or not at
 *       all (core/stream.c, xs_stream_send()). Tests assert it only for
 *       connections the counters show went over RDMA.
 *   threads_stress waiters IP PORT recv|poll|epoll rd|rdwr
 *       Two threads wait on one socket (blocking recv, poll, or one shared
 *       epoll set); one byte echoed back is read by exactly one of them
 *       and the other keeps waiting; then a third thread calls
 *       shutdown(SHUT_RD or SHUT_RDWR) and close(), and both must wake
 *       (EOF, or EBADF once closed) within 10 s; with epoll the close
 *       waits for them to wake (see closer_main()). Linux's close() alone wakes nobody: a blocked
 *       call holds its own reference to the socket (see close(2), "Dealing
 *       with error returns", and select(2) on closing a watched fd), so
 *       applications shut the socket down first, as this does. Prints
 *       one line per fact; the same output over kernel TCP and xsock.
 *
 * Every wait has a deadline: a hang prints "hang: ..." and exits 1.
 * Exit status: 0 when every check held, 1 otherwise, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define TS_TIMEOUT_S 30 /* SO_RCVTIMEO and SO_SNDTIMEO of reuse/records */
#define TS_MAX_FDS   65536
#define TS_REUSE_MAX 16384 /* bytes one reuse round echoes at most */
#define TS_REC_LEN   32
#define TS_REC_MAGIC 0x52454331u /* "REC1" */
#define TS_WAKE_S    10		 /* waiters: how long a wake-up may take */

static struct sockaddr_in ts_addr;

static void die(const char *what)
{
	fprintf(stderr, "threads_stress: %s: %s\n", what, strerror(errno));
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

/* A connected socket with 30 s timeouts, or -1 with errno. */
static int ts_connect(void)
{
	struct timeval tv = { TS_TIMEOUT_S, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), err;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ts_addr, sizeof(ts_addr)) < 0) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read exactly @len bytes: 0, or -1 (errno EPIPE on early EOF). */
static int recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- reuse ------------------------------------------------------------ */

static atomic_int fd_owner[TS_MAX_FDS]; /* thread + 1 that last had fd */
static atomic_long nr_rounds, nr_mismatch, nr_failed, nr_cross;
static long reuse_rounds;

static void reuse_fill(unsigned char *p, size_t len, int tid, long round)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(tid * 37 + round * 11 + (long)i +
				       (long)(i >> 8));
	if (len >= 8) { /* who and when, first */
		memcpy(p, &tid, 4);
		memcpy(p + 4, &round, 4);
	}
}

static void *reuse_main(void *arg)
{
	int tid = (int)(intptr_t)arg, fd, prev;
	unsigned char *out = malloc(TS_REUSE_MAX), *in = malloc(TS_REUSE_MAX);
	unsigned int seed = (unsigned int)tid * 2654435761u;
	size_t len;
	long r;

	if (!out || !in)
		die("malloc");
	for (r = 0; r < reuse_rounds; r++) {
		/* mostly small, sometimes past the eager and ring edges */
		len = 1 +
		      (size_t)rand_r(&seed) % (r % 8 == 7 ? TS_REUSE_MAX : 512);
		reuse_fill(out, len, tid, r);
		fd = ts_connect();
		if (fd < 0)
			goto fail;
		if (fd < TS_MAX_FDS) {
			prev = atomic_exchange(&fd_owner[fd], tid + 1);
			if (prev && prev != tid + 1)
				atomic_fetch_add(&nr_cross, 1);
		}
		if (send_all(fd, out, len) || recv_all(fd, in, len)) {
			close(fd);
			goto fail;
		}
		if (memcmp(out, in, len)) {
			atomic_fetch_add(&nr_mismatch, 1);
			fprintf(stderr,
				"threads_stress: thread %d round %ld: "
				"echo differs\n",
				tid, r);
		}
		if (close(fd) < 0)
			goto fail;
		atomic_fetch_add(&nr_rounds, 1);
		continue;
	fail:
		if (atomic_fetch_add(&nr_failed, 1) < 5)
			fprintf(stderr,
				"threads_stress: thread %d round %ld: %s\n",
				tid, r, strerror(errno));
	}
	free(out);
	free(in);
	return NULL;
}

static int do_reuse(int threads, long n)
{
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	int i;

	if (!t)
		die("calloc");
	reuse_rounds = n;
	for (i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, reuse_main,
				   (void *)(intptr_t)i))
			die("pthread_create");
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	free(t);
	printf("rounds %ld mismatches %ld failed %ld "
	       "fds-reused-across-threads %ld\n",
	       atomic_load(&nr_rounds), atomic_load(&nr_mismatch),
	       atomic_load(&nr_failed), atomic_load(&nr_cross));
	return atomic_load(&nr_rounds) == threads * n &&
			       !atomic_load(&nr_mismatch) &&
			       atomic_load(&nr_cross) > 0
		       ? 0
		       : 1;
}

/* ---- records ---------------------------------------------------------- */

struct ts_rec {
	uint32_t magic;
	uint32_t tid;
	uint64_t seq;
	uint64_t filler; /* from tid and seq */
	uint32_t sum;	 /* of the fields above */
	uint32_t pad;
};
_Static_assert(sizeof(struct ts_rec) == TS_REC_LEN, "record size");

static int rec_fd;
static long rec_count;

static uint32_t rec_sum(const struct ts_rec *r)
{
	uint64_t h = 1469598103934665603ull;

	h = (h ^ r->magic) * 1099511628211ull;
	h = (h ^ r->tid) * 1099511628211ull;
	h = (h ^ r->seq) * 1099511628211ull;
	h = (h ^ r->filler) * 1099511628211ull;
	return (uint32_t)(h ^ (h >> 32));
}

static void *rec_writer(void *arg)
{
	struct ts_rec r = { .magic = TS_REC_MAGIC };
	ssize_t n;

	r.tid = (uint32_t)(intptr_t)arg;
	for (r.seq = 0; r.seq < (uint64_t)rec_count; r.seq++) {
		r.filler = ~(r.seq * 0x9e3779b97f4a7c15ull) ^ r.tid;
		r.sum = rec_sum(&r);
		/* one send() per record, no lock: a short count would be a
		 * torn record already */
		n = send(rec_fd, &r, sizeof(r), MSG_NOSIGNAL);
		if (n != (ssize_t)sizeof(r)) {
			fprintf(stderr,
				"threads_stress: writer %u: send %zd: "
				"%s\n",
				r.tid, n, n < 0 ? strerror(errno) : "short");
			exit(1);
		}
	}
	return NULL;
}

static int do_records(int threads, long n)
{
	uint64_t *next = calloc((size_t)threads, sizeof(*next));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	long torn = 0, lost = 0, reordered = 0, got = 0;
	struct ts_rec r;
	int i;

	if (!next || !t)
		die("calloc");
	rec_count = n;
	rec_fd = ts_connect();
	if (rec_fd < 0)
		die("connect");
	for (i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, rec_writer,
				   (void *)(intptr_t)i))
			die("pthread_create");
	/* the reader: this thread, while the writers write */
	for (got = 0; got < threads * n; got++) {
		if (recv_all(rec_fd, &r, sizeof(r)))
			die("recv");
		if (r.magic != TS_REC_MAGIC || r.tid >= (uint32_t)threads ||
		    r.sum != rec_sum(&r)) {
			/* the framing is lost from here: count and stop */
			torn++;
			break;
		}
		if (r.seq < next[r.tid]) {
			reordered++;
		} else {
			lost += (long)(r.seq - next[r.tid]);
			next[r.tid] = r.seq + 1;
		}
	}
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (i = 0; !torn && i < threads; i++)
		lost += n - (long)next[i];
	printf("records %d x %ld torn %ld lost %ld reordered %ld\n", threads, n,
	       torn, lost, reordered);
	close(rec_fd);
	free(next);
	free(t);
	return torn || lost || reordered ? 1 : 0;
}

/* ---- waiters ---------------------------------------------------------- */

enum waiter_how { WAIT_RECV, WAIT_POLL, WAIT_EPOLL };

struct waiter {
	pthread_t t;
	atomic_int tid;	  /* kernel thread id, once running */
	atomic_long got;  /* bytes read */
	atomic_int eof;	  /* 1: saw EOF (or the fd closed), done */
	atomic_int error; /* errno of an unexpected failure */
};

static enum waiter_how wait_how;
static int wait_fd, wait_epfd;

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct epoll_event ev;
	struct pollfd pfd;
	char buf[16];
	ssize_t n;
	int rc;

	atomic_store(&w->tid, (int)syscall(SYS_gettid));
	for (;;) {
		if (wait_how == WAIT_POLL) {
			pfd = (struct pollfd){ .fd = wait_fd,
					       .events = POLLIN };
			rc = poll(&pfd, 1, -1);
		} else if (wait_how == WAIT_EPOLL) {
			rc = epoll_wait(wait_epfd, &ev, 1, -1);
		} else {
			rc = 1;
		}
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0) {
			atomic_store(&w->error, errno);
			return NULL;
		}
		n = recv(wait_fd, buf, sizeof(buf),
			 wait_how == WAIT_RECV ? 0 : MSG_DONTWAIT);
		if (n > 0) {
			atomic_fetch_add(&w->got, n);
		} else if (n == 0 || errno == EBADF) {
			atomic_store(&w->eof, 1); /* shut down, or closed */
			return NULL;
		} else if (errno != EAGAIN && errno != EINTR) {
			atomic_store(&w->error, errno);
			return NULL;
		}
	}
}

/* Whether kernel thread @tid of this process sleeps (state S). */
static int thread_sleeps(int tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

/* Wait up to @secs for both waiters to sleep; 0 if they do. */
static int waiters_asleep(struct waiter *w, int secs)
{
	int i, tries;

	/* asleep twice in a row 20 ms apart: not just passing a lock */
	for (i = 0, tries = 0; tries < secs * 100; tries++) {
		if (atomic_load(&w[0].tid) && atomic_load(&w[1].tid) &&
		    thread_sleeps(w[0].tid) && thread_sleeps(w[1].tid)) {
			if (++i == 2)
				return 0;
		} else {
			i = 0;
		}
		usleep(10000);
	}
	return -1;
}

static int closer_how;

/*
 * The third thread: shutdown, then close. With epoll it closes only once
 * both waiters have woken (or after TS_WAKE_S): closing the last fd of a
 * file removes it from every epoll set, so an event not yet collected
 * would be dropped and the waiter left asleep, by design of epoll(7).
 */
static void *closer_main(void *arg)
{
	struct waiter *w = arg;
	int i;

	if (shutdown(wait_fd, closer_how) < 0)
		perror("threads_stress: shutdown");
	for (i = 0; wait_how == WAIT_EPOLL && i < TS_WAKE_S * 100; i++) {
		if (atomic_load(&w[0].eof) && atomic_load(&w[1].eof))
			break;
		usleep(10000);
	}
	if (close(wait_fd) < 0)
		perror("threads_stress: close");
	return NULL;
}

static int do_waiters(const char *how, const char *shut)
{
	static const char *const names[] = { "recv", "poll", "epoll" };
	struct epoll_event ev = { .events = EPOLLIN };
	struct waiter w[2];
	struct timespec deadline;
	pthread_t closer;
	int i, ok = 1, woke = 0;
	long total;

	memset(w, 0, sizeof(w));
	if (!strcmp(how, "recv"))
		wait_how = WAIT_RECV;
	else if (!strcmp(how, "poll"))
		wait_how = WAIT_POLL;
	else if (!strcmp(how, "epoll"))
		wait_how = WAIT_EPOLL;
	else
		return 2;
	if (!strcmp(shut, "rd"))
		closer_how = SHUT_RD;
	else if (!strcmp(shut, "rdwr"))
		closer_how = SHUT_RDWR;
	else
		return 2;
	wait_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (wait_fd < 0)
		die("socket");
	if (connect(wait_fd, (struct sockaddr *)&ts_addr, sizeof(ts_addr)))
		die("connect");
	wait_epfd = epoll_create1(0);
	if (wait_epfd < 0 || epoll_ctl(wait_epfd, EPOLL_CTL_ADD, wait_fd, &ev))
		die("epoll");
	for (i = 0; i < 2; i++)
		if (pthread_create(&w[i].t, NULL, waiter_main, &w[i]))
			die("pthread_create");
	if (waiters_asleep(w, TS_WAKE_S)) {
		printf("hang: the waiters never slept\n");
		return 1;
	}
	if (send(wait_fd, "x", 1, MSG_NOSIGNAL) != 1)
		die("send");
	for (i = 0; i < TS_WAKE_S * 100; i++) {
		if (atomic_load(&w[0].got) + atomic_load(&w[1].got) >= 1)
			break;
		usleep(10000);
	}
	/* both back asleep, and nothing more read: the byte came once */
	if (waiters_asleep(w, TS_WAKE_S))
		ok = 0;
	usleep(100000);
	total = atomic_load(&w[0].got) + atomic_load(&w[1].got);
	printf("%s: 1 byte echoed, read by one waiter: %s\n", names[wait_how],
	       total == 1 && (!w[0].got || !w[1].got) ? "yes" : "no");
	printf("%s: both waiting again afterwards: %s\n", names[wait_how],
	       ok && !w[0].eof && !w[1].eof ? "yes" : "no");
	if (pthread_create(&closer, NULL, closer_main, w))
		die("pthread_create");
	pthread_join(closer, NULL);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += TS_WAKE_S;
	for (i = 0; i < 2; i++)
		if (pthread_timedjoin_np(w[i].t, NULL, &deadline) == 0 &&
		    w[i].eof && !w[i].error)
			woke++;
	printf("%s: shutdown(%s) and close() by a third thread woke both: "
	       "%s\n",
	       names[wait_how], closer_how == SHUT_RD ? "SHUT_RD" : "SHUT_RDWR",
	       woke == 2 ? "yes" : "no");
	if (woke != 2) {
		for (i = 0; i < 2; i++)
			printf("hang: waiter %d eof %d error %s\n", i,
			       atomic_load(&w[i].eof),
			       strerror(atomic_load(&w[i].error)));
		fflush(stdout);
		_exit(1); /* a waiter may still be blocked */
	}
	close(wait_epfd);
	return total == 1 && ok ? 0 : 1;
}

static void usage(void)
{
	fputs("usage: threads_stress reuse IP PORT THREADS N\n"
	      "       threads_stress records IP PORT THREADS N\n"
	      "       threads_stress waiters IP PORT recv|poll|epoll rd|rdwr\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	int threads, rc = 2;
	long n;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 4)
		usage();
	ts_addr = addr_of(argv[2], argv[3]);
	if (argc == 6 &&
	    (!strcmp(argv[1], "reuse") || !strcmp(argv[1], "records"))) {
		threads = atoi(argv[4]);
		n = atol(argv[5]);
		if (threads < 1 || threads > 1024 || n < 1)
			usage();
		rc = !strcmp(argv[1], "reuse") ? do_reuse(threads, n)
					       : do_records(threads, n);
	} else if (argc == 6 && !strcmp(argv[1], "waiters")) {
		rc = do_waiters(argv[4], argv[5]);
	}
	if (rc == 2)
		usage();
	return rc;
}
