/*
 * tests/tools/wready.c - a socket that epoll calls writable takes a write.
 *
 * The pattern of redis-benchmark --threads and of most event loops: the
 * main thread starts non-blocking connects and adds each socket, for
 * EPOLLOUT, to the epoll set of one of several threads; each thread
 * writes its request as soon as its socket is reported writable. Over
 * kernel TCP a fresh connection that is reported writable takes a small
 * write: such a write that fails with EAGAIN leaves the application
 * waiting for an EPOLLOUT that may never come back.
 *
 *   wready IP PORT CONNS ROUNDS THREADS
 *       ROUNDS times: THREADS threads poll their epoll sets without
 *       sleeping while the main thread connects CONNS sockets to the echo
 *       server at IP:PORT (storm serve); each socket, once writable,
 *       writes an 8-byte request naming it and reads its echo back; then
 *       all are closed. Prints "connections N eagain E failed F
 *       mismatches M" (E: writes that found EAGAIN on a socket reported
 *       writable).
 *
 * Uses only the socket API, so it runs the same with and without
 * LD_PRELOAD=libxsock.so. Exit status: 0 when every connection echoed
 * its request and no write found EAGAIN, 1 otherwise, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WREADY_MSG	 8
#define WREADY_TIMEOUT_S 30 /* a round that takes longer fails */
#define WREADY_THREADS	 16

struct wready_conn {
	int fd;
	int ep;	     /* the epoll set of its thread */
	int written; /* request bytes written */
	int got;     /* echo bytes read */
	char msg[WREADY_MSG];
	char echo[WREADY_MSG];
};

static struct wready_conn *conns;
static int nr_conns;
static atomic_int nr_done;    /* this round: connections finished */
static atomic_long nr_eagain; /* writes refused after EPOLLOUT */
static atomic_long nr_failed;
static atomic_long nr_mismatch;
static atomic_int round_over;

static void die(const char *what)
{
	fprintf(stderr, "wready: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void conn_end(struct wready_conn *c, bool ok)
{
	epoll_ctl(c->ep, EPOLL_CTL_DEL, c->fd, NULL);
	if (!ok)
		atomic_fetch_add(&nr_failed, 1);
	atomic_fetch_add(&nr_done, 1);
}

/* events @ev of connection @c, on its thread */
static void conn_event(struct wready_conn *c, unsigned int ev)
{
	struct epoll_event in = { .events = EPOLLIN, .data.ptr = c };
	ssize_t n;

	if (c->written < WREADY_MSG) {
		if (!(ev & EPOLLOUT))
			return;
		n = write(c->fd, c->msg + c->written,
			  (size_t)(WREADY_MSG - c->written));
		if (n < 0 && errno == EAGAIN) {
			atomic_fetch_add(&nr_eagain, 1);
			return; /* as an event loop: wait for EPOLLOUT again */
		}
		if (n <= 0) {
			conn_end(c, false);
			return;
		}
		c->written += (int)n;
		if (c->written == WREADY_MSG &&
		    epoll_ctl(c->ep, EPOLL_CTL_MOD, c->fd, &in) < 0)
			die("epoll_ctl MOD");
		return;
	}
	n = read(c->fd, c->echo + c->got, (size_t)(WREADY_MSG - c->got));
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		conn_end(c, false);
		return;
	}
	c->got += (int)n;
	if (c->got < WREADY_MSG)
		return;
	if (memcmp(c->msg, c->echo, WREADY_MSG))
		atomic_fetch_add(&nr_mismatch, 1);
	conn_end(c, true);
}

/* a thread: polls its set @arg without sleeping until the round ends */
static void *wready_thread(void *arg)
{
	int ep = (int)(long)arg, i, n;
	struct epoll_event ev[64];

	while (!atomic_load(&round_over)) {
		n = epoll_wait(ep, ev, 64, 0);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (i = 0; i < n; i++)
			conn_event(ev[i].data.ptr, ev[i].events);
	}
	return NULL;
}

static int round_run(const struct sockaddr_in *sa, int nthreads, int round)
{
	pthread_t tid[WREADY_THREADS];
	int ep[WREADY_THREADS];
	time_t deadline;
	int i;

	atomic_store(&nr_done, 0);
	atomic_store(&round_over, 0);
	for (i = 0; i < nthreads; i++) {
		ep[i] = epoll_create1(EPOLL_CLOEXEC);
		if (ep[i] < 0)
			die("epoll_create1");
		if (pthread_create(&tid[i], NULL, wready_thread,
				   (void *)(long)ep[i]))
			die("pthread_create");
	}
	for (i = 0; i < nr_conns; i++) {
		struct wready_conn *c = &conns[i];
		struct epoll_event out = { .events = EPOLLOUT, .data.ptr = c };

		char name[32];

		memset(c, 0, sizeof(*c));
		snprintf(name, sizeof(name), "%03d%05d", round % 1000,
			 i % 100000);
		memcpy(c->msg, name, WREADY_MSG);
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (c->fd < 0)
			die("socket");
		if (connect(c->fd, (const struct sockaddr *)sa, sizeof(*sa)) <
			    0 &&
		    errno != EINPROGRESS)
			die("connect");
		c->ep = ep[i % nthreads];
		if (epoll_ctl(c->ep, EPOLL_CTL_ADD, c->fd, &out) < 0)
			die("epoll_ctl ADD");
	}
	deadline = time(NULL) + WREADY_TIMEOUT_S;
	while (atomic_load(&nr_done) < nr_conns && time(NULL) < deadline)
		usleep(1000);
	atomic_store(&round_over, 1);
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		close(ep[i]);
	}
	for (i = 0; i < nr_conns; i++)
		close(conns[i].fd);
	return atomic_load(&nr_done) == nr_conns ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int rounds, nthreads, r, stuck = 0;

	if (argc != 6 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: wready IP PORT CONNS ROUNDS THREADS\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	nr_conns = atoi(argv[3]);
	rounds = atoi(argv[4]);
	nthreads = atoi(argv[5]);
	if (nr_conns < 1 || rounds < 1 || nthreads < 1 ||
	    nthreads > WREADY_THREADS) {
		fprintf(stderr, "wready: CONNS, ROUNDS >= 1, THREADS 1..%d\n",
			WREADY_THREADS);
		return 2;
	}
	conns = calloc((size_t)nr_conns, sizeof(*conns));
	if (!conns)
		die("calloc");
	for (r = 0; r < rounds; r++)
		if (round_run(&sa, nthreads, r) < 0)
			stuck++;
	printf("connections %ld eagain %ld failed %ld mismatches %ld stuck "
	       "rounds %d\n",
	       (long)nr_conns * rounds, atomic_load(&nr_eagain),
	       atomic_load(&nr_failed), atomic_load(&nr_mismatch), stuck);
	free(conns);
	return atomic_load(&nr_eagain) || atomic_load(&nr_failed) ||
			       atomic_load(&nr_mismatch) || stuck
		       ? 1
		       : 0;
}
