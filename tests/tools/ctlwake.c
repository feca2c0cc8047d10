/*
 * tests/tools/ctlwake.c - epoll_ctl() by one thread wakes another thread
 * asleep in epoll_wait() on the same set when it makes a member ready.
 *
 * The kernel's ep_modify() and ep_insert() wake a set's waiters when the
 * member is ready at once. Thread pools that re-arm EPOLLONESHOT from a
 * worker, and loops that add EPOLLOUT from another thread once they have
 * something to send, depend on it.
 *
 *   ctlwake IP PORT    against an echo server (xsnet serve), each case on
 *                      a connection of its own, one line each:
 *     oneshot: the waiter reports EPOLLIN|EPOLLONESHOT; the worker reads
 *              it, sends again and, once the echo is in (200 ms later),
 *              re-arms with EPOLL_CTL_MOD
 *     modout:  the waiter sleeps on EPOLLIN with nothing to come; another
 *              thread adds EPOLLOUT with EPOLL_CTL_MOD
 *     addin:   a thread reads the first echo's start, then adds the socket,
 *              the rest of the echo still unread, to the set of a thread
 *              already asleep on another, idle connection (EPOLL_CTL_ADD)
 *   "CASE: woken" when the sleeping thread returned with the event within
 *   3 s, else "CASE: not woken".
 *
 * Uses only the socket API, so it runs the same with and without
 * LD_PRELOAD=libxsock.so. Exit status: 0 when every case was woken, 1
 * otherwise, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTLWAKE_WAIT_MS 3000 /* a waiter not woken by then failed */

struct waiter {
	int ep;
	int fd;		/* the member whose event ends its wait */
	uint32_t want;	/* the event bit that ends its wait */
	atomic_int got; /* 1 woken with @want, -1 timed out or failed */
	atomic_int n;	/* epoll_wait returns so far */
};

static void die(const char *what)
{
	fprintf(stderr, "ctlwake: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int connect_to(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		die("connect");
	return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("write");
}

/* the waiting thread: until its event comes, or CTLWAKE_WAIT_MS after
 * the last return with nothing of it */
static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	struct epoll_event ev;
	int k;

	for (;;) {
		k = epoll_wait(w->ep, &ev, 1, CTLWAKE_WAIT_MS);
		atomic_fetch_add(&w->n, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 1 && (ev.events & w->want) && ev.data.fd == w->fd) {
			atomic_store(&w->got, 1);
			return NULL;
		}
		if (k <= 0) {
			atomic_store(&w->got, -1);
			return NULL;
		}
	}
}

static void waiter_start(struct waiter *w, pthread_t *t, int fd, uint32_t want)
{
	w->fd = fd;
	w->want = want;
	atomic_store(&w->got, 0);
	atomic_store(&w->n, 0);
	if (pthread_create(t, NULL, wait_thread, w))
		die("pthread_create");
}

static bool waiter_end(struct waiter *w, pthread_t t)
{
	pthread_join(t, NULL);
	close(w->ep);
	return atomic_load(&w->got) == 1;
}

/* a new set of waiter @w holding @fd for @events */
static void set_make(struct waiter *w, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	w->ep = epoll_create1(EPOLL_CLOEXEC);
	if (w->ep < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl ADD");
}

/* @fd's registration changed to @events while waiter @w sleeps: whether
 * that woke it; @fd is closed */
static bool mod_and_end(struct waiter *w, pthread_t t, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };
	bool ok;

	if (epoll_ctl(w->ep, EPOLL_CTL_MOD, fd, &ev) < 0)
		die("epoll_ctl MOD");
	ok = waiter_end(w, t);
	close(fd);
	return ok;
}

/* EPOLLONESHOT re-armed by a worker once the next echo is in */
static bool case_oneshot(const struct sockaddr_in *sa)
{
	struct epoll_event ev;
	struct waiter w;
	pthread_t t;
	char buf[8];
	int fd = connect_to(sa);

	set_make(&w, fd, EPOLLIN | EPOLLONESHOT);
	write_all(fd, "ping", 4);
	if (epoll_wait(w.ep, &ev, 1, CTLWAKE_WAIT_MS) != 1 ||
	    read(fd, buf, 4) != 4)
		die("first echo");
	/* the set's waiter sleeps while the next echo comes in */
	waiter_start(&w, &t, fd, EPOLLIN);
	write_all(fd, "pong", 4);
	usleep(200000);
	return mod_and_end(&w, t, fd, EPOLLIN | EPOLLONESHOT);
}

/* EPOLLOUT added by another thread while the waiter sleeps on EPOLLIN */
static bool case_modout(const struct sockaddr_in *sa)
{
	struct waiter w;
	pthread_t t;
	int fd = connect_to(sa);

	set_make(&w, fd, EPOLLIN);
	waiter_start(&w, &t, fd, EPOLLOUT);
	usleep(200000);
	return mod_and_end(&w, t, fd, EPOLLIN | EPOLLOUT);
}

/* a socket with bytes unread added to a sleeping thread's set */
static bool case_addin(const struct sockaddr_in *sa)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct waiter w;
	pthread_t t;
	char buf[8];
	int fd = connect_to(sa), idle = connect_to(sa);
	bool ok;

	set_make(&w, idle, EPOLLIN);
	write_all(fd, "abcdefgh", 8);
	if (read(fd, buf, 1) != 1) /* the echo is in: 7 bytes unread */
		die("read");
	usleep(100000);
	waiter_start(&w, &t, fd, EPOLLIN);
	usleep(200000);
	ev.data.fd = fd;
	if (epoll_ctl(w.ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl ADD");
	ok = waiter_end(&w, t);
	close(fd);
	close(idle);
	return ok;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	bool a, b, c;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: ctlwake IP PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	a = case_oneshot(&sa);
	printf("oneshot: %s\n", a ? "woken" : "not woken");
	b = case_modout(&sa);
	printf("modout: %s\n", b ? "woken" : "not woken");
	c = case_addin(&sa);
	printf("addin: %s\n", c ? "woken" : "not woken");
	return a && b && c ? 0 : 1;
}
