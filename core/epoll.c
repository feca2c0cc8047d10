/*
 * core/epoll.c - epoll sets with xsock members.
 *
 * Kernel fds live in the application's own epoll set as usual. xsock
 * members are kept beside it (struct ep_set), their channel fds in a
 * private "inner" epoll set; a sleeping epoll_wait waits on both sets.
 * The application's data.u64 values come back untouched. One foreign entry
 * enters the application's set while it has xsock members: the inner set
 * itself, with an eventfd in it that is readable while a member is ready,
 * so that the epoll fd placed in poll(), select() or another epoll set
 * turns readable as the kernel's would (see ep_nest_mark()). Its events
 * never reach the application.
 * Context: any thread, called by the wrappers of preload/poll.c after
 * their entry check.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"
#include "fdtab.h"
#include "wait.h"

/* uthash: a failed allocation leaves the element out and says so, never
 * exit()s the application (the default) */
#define HASH_NONFATAL_OOM	 1
#define uthash_nonfatal_oom(elt) (ep_hash_oom = true)
static __thread bool ep_hash_oom;
#include <uthash.h>

/*
 * One xsock socket in an epoll set. It holds no reference, as the kernel's
 * epoll holds none on a file's last fd: close() tears the socket down at
 * once (FIN), and the member is found stale - its fd no longer maps to the
 * same incarnation of the object (type-stable memory) - and dropped.
 */
struct ep_member {
	int fd;
	struct xs_sock *s; /* no reference: check with ep_member_sock() */
	unsigned int incarnation; /* of s when registered */
	uint32_t events;	  /* as registered, EPOLLET/ONESHOT included */
	epoll_data_t data;
	uint32_t reported;	/* EPOLLET: bits reported */
	unsigned long last_gen; /* EPOLLET: readiness counter when reported */
	bool disabled;		/* EPOLLONESHOT fired, awaiting EPOLL_CTL_MOD */
	bool connecting; /* registered while a non-blocking connect ran: its
			  * eventfd, not channels, is in the inner set */
	/* An armed look found it with nothing to report, and its stream's
	 * readiness counter was idle_gen: while that holds and none of its
	 * channel fds is readable, nothing changed (what could arrives on
	 * its armed CQ and makes a channel fd readable), so looks skip it
	 * (ep_collect()). */
	bool idle;
	unsigned long idle_gen;
	int nfds;		  /* chan_fd[] entries; -1: not learnt yet */
	int chan_fd[XS_POLL_FDS]; /* its socket's channel fds, in order */
	size_t idx;		  /* its place in ep_set.m[] */
	UT_hash_handle hh;	  /* in ep_set.by_fd, keyed by fd */
};

/* How many members of a set name one socket: more than one when dup'ed
 * fds of it are members. Stale members (fd closed, socket object reused)
 * count until they are dropped, so a count above one is checked member
 * by member (ep_shares()). */
struct ep_sref {
	struct xs_sock *s; /* key */
	unsigned int count;
	UT_hash_handle hh; /* in ep_set.by_sock */
};

struct ep_set {
	pthread_mutex_t lock; /* before any core/ lock: core/xs_core.h */
	int inner;	      /* private epoll fd: the members' channel fds */
	struct ep_member **m; /* nr members, in no order; each m[i]->idx = i */
	size_t nr, cap;
	struct ep_member *by_fd; /* the members by fd (uthash): O(1) ctl */
	struct ep_sref *by_sock; /* member counts by socket (uthash) */
	size_t cursor; /* where the next collection starts (round robin) */
	/* nesting: the epoll fd inside poll/select or another epoll set */
	int nest;      /* eventfd in the inner set: readable = a member ready */
	bool nest_set; /* its counter is non-zero */
	bool nested; /* seen inside another wait: keep nest exact, CQs armed */
	bool in_app; /* the inner set is in the application's set */
	_Atomic bool quiet; /* the last wait slept and timed out with nothing */
	struct xs_spin spin; /* its waits' spin window */
	/* the last armed look found nothing ready, and xs_sock_news() was
	 * idle_news when it began: see ep_wait_events() */
	_Atomic bool idle_valid;
	_Atomic unsigned long idle_news;
	_Atomic bool kernel_first; /* maxevents 1: whose turn it is */
	/* a member moved to its kernel TCP connection during a look:
	 * settle, then look again */
	_Atomic bool moved;
	bool connecting; /* a member's connect was undecided at the last
			  * settle (ep_settle(); ep->lock) */
	bool settle_due; /* a look found a member closed or moved: the next
			  * look settles first (ep_collect(); ep->lock) */
	/* waits inside ep_wait_events(), and whether the epoll fd was closed
	 * meanwhile: the last of them frees the set (ep_table_lock) */
	unsigned int users;
	bool closed;
};

/* data.u64 of the inner set's entry in the application's epoll set */
#define EP_NEST_MAGIC 0x78736f636b4e5354ull

/* fds that were put into some epoll set with epoll_ctl(), before they had
 * xsock members of their own (the epoll fd nested first, filled later) */
static _Atomic(_Atomic(unsigned char) *) ep_in_epoll;

/* epoll fd -> its xsock members, for epoll fds that ever had one */
static _Atomic(struct ep_set *) *ep_table;
/* never held with another lock (lock order: core/xs_core.h) */
static pthread_mutex_t ep_table_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ep_set *ep_lookup(int epfd)
{
	_Atomic(struct ep_set *) *t = ep_table;

	if (!t || epfd < 0 || (size_t)epfd >= xs_fdtab_size())
		return NULL;
	return atomic_load_explicit(&t[epfd], memory_order_acquire);
}

/* Whether @fd is an epoll instance (what epoll_ctl would accept). */
static bool ep_is_epoll(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = '\0';
	return strcmp(link, "anon_inode:[eventpoll]") == 0;
}

/* The eventfd of a new set's inner set (the nest fd, -1 when none can be
 * had: nesting then follows the channel fds alone). */
static void ep_nest_init(int epfd, struct ep_set *ep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	_Atomic(unsigned char) *in = atomic_load(&ep_in_epoll);

	ep->nest = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->nest >= 0) {
		ev.data.fd = ep->nest;
		xs_real.epoll_ctl(ep->inner, EPOLL_CTL_ADD, ep->nest, &ev);
	}
	ep->nested = in && atomic_load(&in[epfd]);
}

/* Set or clear the nest eventfd: readable while a member is ready.
 * Called with ep->lock held. */
static void ep_nest_mark(struct ep_set *ep, bool ready)
{
	uint64_t one = 1;

	if (ep->nest < 0 || ready == ep->nest_set)
		return;
	if (ready)
		(void)!XS_CALL(write, ep->nest, &one, sizeof(one));
	else
		(void)!XS_CALL(read, ep->nest, &one, sizeof(one));
	ep->nest_set = ready;
}

/*
 * The inner set enters the application's set @epfd while there are
 * members, and leaves it with the last one, so that an epoll fd without
 * xsock members is the kernel's alone. Called with ep->lock held.
 */
static void ep_nest_sync(int epfd, struct ep_set *ep)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = EP_NEST_MAGIC };

	if ((ep->nr > 0) == ep->in_app)
		return;
	ep->in_app = ep->nr > 0;
	if (!ep->in_app)
		ep_nest_mark(ep, false);
	XS_CALL(epoll_ctl, epfd, ep->in_app ? EPOLL_CTL_ADD : EPOLL_CTL_DEL,
		ep->inner, &ev);
}

/* Drop the inner set's own events from what the kernel returned for the
 * application's set. Return: the events left. */
static int ep_unnest(struct epoll_event *ev, int k)
{
	int i, n = 0;

	for (i = 0; i < k; i++)
		if (ev[i].data.u64 != EP_NEST_MAGIC)
			ev[n++] = ev[i];
	return n;
}

/* The member set of @epfd, made on first use. Return: set, or NULL with
 * the errno epoll_ctl would give (-EBADF, -EINVAL, -ENOMEM). */
static struct ep_set *ep_get_or_make(int epfd, int *err)
{
	struct ep_set *ep = ep_lookup(epfd);

	if (ep)
		return ep;
	if (epfd < 0 || (size_t)epfd >= xs_fdtab_size() ||
	    xs_real.fcntl(epfd, F_GETFD) < 0) {
		*err = -EBADF;
		return NULL;
	}
	if (!ep_is_epoll(epfd)) {
		*err = -EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&ep_table_lock);
	if (!ep_table)
		ep_table = calloc(xs_fdtab_size(), sizeof(*ep_table));
	ep = ep_table ? atomic_load(&ep_table[epfd]) : NULL;
	if (ep_table && !ep) {
		ep = calloc(1, sizeof(*ep));
		if (ep) {
			pthread_mutex_init(&ep->lock, NULL);
			ep->inner = xs_real.epoll_create1(EPOLL_CLOEXEC);
			if (ep->inner < 0) {
				free(ep);
				ep = NULL;
			} else {
				ep_nest_init(epfd, ep);
				atomic_store(&ep_table[epfd], ep);
			}
		}
	}
	pthread_mutex_unlock(&ep_table_lock);
	if (!ep)
		*err = -ENOMEM;
	return ep;
}

static void ep_member_drop(struct ep_set *ep, struct ep_member *m);
static struct xs_sock *ep_member_sock(const struct ep_member *m);

static void ep_free(struct ep_set *ep)
{
	xs_real.close(ep->inner);
	if (ep->nest >= 0)
		xs_real.close(ep->nest);
	while (ep->nr)
		ep_member_drop(ep, ep->m[ep->nr - 1]);
	free(ep->m);
	pthread_mutex_destroy(&ep->lock);
	free(ep);
}

/* The set of @epfd, held for a wait (NULL: none): closing the epoll fd
 * meanwhile does not free it under the waiter. Drop with ep_put(). */
static struct ep_set *ep_hold(int epfd)
{
	struct ep_set *ep;

	if (!ep_lookup(epfd))
		return NULL;
	pthread_mutex_lock(&ep_table_lock);
	ep = ep_lookup(epfd);
	if (ep)
		ep->users++;
	pthread_mutex_unlock(&ep_table_lock);
	return ep;
}

static void ep_put(struct ep_set *ep)
{
	bool last;

	pthread_mutex_lock(&ep_table_lock);
	last = --ep->users == 0 && ep->closed;
	pthread_mutex_unlock(&ep_table_lock);
	if (last)
		ep_free(ep);
}

/* Forget the members of @fd, an epoll fd being closed. */
void xs_poll_fd_closed(int fd)
{
	_Atomic(unsigned char) *in = atomic_load(&ep_in_epoll);
	struct ep_set *ep;

	if (fd < 0 || (size_t)fd >= xs_fdtab_size())
		return;
	if (in)
		atomic_store(&in[fd], 0);
	if (!ep_lookup(fd))
		return; /* most fds: no lock taken */
	pthread_mutex_lock(&ep_table_lock);
	ep = atomic_exchange(&ep_table[fd], NULL);
	if (ep && ep->users) {
		ep->closed = true; /* a wait still runs on it: it frees */
		ep = NULL;
	}
	pthread_mutex_unlock(&ep_table_lock);
	if (ep)
		ep_free(ep);
}

static struct ep_member *ep_find(struct ep_set *ep, int fd)
{
	struct ep_member *m;

	HASH_FIND_INT(ep->by_fd, &fd, m);
	return m;
}

static struct ep_sref *ep_sref_find(struct ep_set *ep, struct xs_sock *s)
{
	struct ep_sref *r;

	HASH_FIND_PTR(ep->by_sock, &s, r);
	return r;
}

/*
 * A new member @fd of socket @s (its other fields zero but nfds, -1).
 * Return: it, or NULL when memory ran out (nothing added: -ENOMEM).
 * Called with ep->lock held.
 */
static struct ep_member *ep_member_add(struct ep_set *ep, int fd,
				       struct xs_sock *s)
{
	struct ep_sref *r = ep_sref_find(ep, s);
	struct ep_member *m;

	if (ep->nr == ep->cap) {
		size_t cap = ep->cap ? 2 * ep->cap : 8;
		struct ep_member **nm = realloc(ep->m, cap * sizeof(*nm));

		if (!nm)
			return NULL;
		ep->m = nm;
		ep->cap = cap;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			goto fail;
		r->s = s;
		ep_hash_oom = false;
		HASH_ADD_PTR(ep->by_sock, s, r);
		if (ep_hash_oom) {
			free(r);
			goto fail;
		}
	}
	m->fd = fd;
	m->s = s;
	m->nfds = -1;
	ep_hash_oom = false;
	HASH_ADD_INT(ep->by_fd, fd, m);
	if (ep_hash_oom) {
		if (!r->count) {
			HASH_DEL(ep->by_sock, r);
			free(r);
		}
		goto fail;
	}
	r->count++;
	m->idx = ep->nr;
	ep->m[ep->nr++] = m;
	return m;
fail:
	free(m);
	return NULL;
}

/* Member @m leaves the set and is freed; the last member takes its place
 * in ep->m[]. Called with ep->lock held. */
static void ep_member_drop(struct ep_set *ep, struct ep_member *m)
{
	struct ep_sref *r = ep_sref_find(ep, m->s);
	size_t i = m->idx;

	if (r && --r->count == 0) {
		HASH_DEL(ep->by_sock, r);
		free(r);
	}
	HASH_DEL(ep->by_fd, m);
	ep->m[i] = ep->m[--ep->nr];
	ep->m[i]->idx = i;
	free(m);
}

/*
 * Whether another member of @ep, not @fd, is a live fd of @s (a dup'ed
 * fd). The socket's member count answers at once in the usual case, one
 * member per socket; above that, each member of @s is checked, as stale
 * ones (their fd closed) count too. Called with ep->lock held.
 */
static bool ep_shares(struct ep_set *ep, struct xs_sock *s, int fd)
{
	struct ep_sref *r = ep_sref_find(ep, s);
	struct ep_member *self = ep_find(ep, fd);
	unsigned int others;
	size_t i;

	others = r ? r->count : 0;
	if (self && self->s == s)
		others--;
	if (!others)
		return false;
	for (i = 0; i < ep->nr; i++) {
		struct ep_member *m = ep->m[i];
		struct xs_sock *now;

		if (m->s != s || m->fd == fd)
			continue;
		now = ep_member_sock(m);
		if (now)
			xs_sock_put(now);
		if (now == s)
			return true;
	}
	return false;
}

static void ep_channels(struct ep_set *ep, struct xs_sock *s, int op)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fds[XS_POLL_FDS], n, k;

	n = xs_sock_poll_fds(s, fds);
	for (k = 0; k < n; k++) {
		ev.data.fd = fds[k];
		xs_real.epoll_ctl(ep->inner, op, fds[k], &ev);
	}
}

/* The member's socket with a reference, or NULL when its fd was closed
 * (or now names another socket). */
static struct xs_sock *ep_member_sock(const struct ep_member *m)
{
	struct xs_sock *now = xs_fdtab_get(m->fd);

	if (now && (now != m->s || now->incarnation != m->incarnation)) {
		xs_sock_put(now);
		now = NULL;
	}
	return now;
}

/*
 * Drop member @m. @live: its socket still exists, so its channel fds leave
 * the inner set; a closed socket's fds left it when they were closed (and
 * their numbers may belong to someone else by now).
 */
static void ep_remove(struct ep_set *ep, struct ep_member *m, bool live)
{
	struct xs_sock *s = m->s;
	int fd = m->fd;

	ep_member_drop(ep, m);
	if (live && !ep_shares(ep, s, fd))
		ep_channels(ep, s, EPOLL_CTL_DEL);
}

/* The eventfd of @s in the inner set, or out of it (@op). */
static void ep_evfd(struct ep_set *ep, struct xs_sock *s, int op)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (s->connect_evfd < 0)
		return;
	ev.data.fd = s->connect_evfd;
	xs_real.epoll_ctl(ep->inner, op, s->connect_evfd, &ev);
}

/*
 * The members of socket @s (one per dup'ed fd) were registered while its
 * non-blocking connect ran, and that is decided now: its eventfd leaves
 * the inner set; an RDMA socket's channels take its place; a socket that
 * fell back to TCP moves into the application's kernel set @epfd, each fd
 * as registered, and stops being a member. @moved: an RDMA socket moved
 * to its kernel TCP connection: its channels leave the inner set, and its
 * members go to @epfd the same way. Called with ep->lock held.
 */
static void ep_decided(int epfd, struct ep_set *ep, struct xs_sock *s,
		       bool moved)
{
	bool rdma = !moved && xs_sock_polled(s);
	struct epoll_event ev;
	size_t i;

	if (moved) {
		ep_channels(ep, s, EPOLL_CTL_DEL);
	} else {
		ep_evfd(ep, s, EPOLL_CTL_DEL);
		if (rdma)
			ep_channels(ep, s, EPOLL_CTL_ADD);
	}
	for (i = 0; i < ep->nr;) {
		struct ep_member *m = ep->m[i];

		if (m->s != s) {
			i++;
			continue;
		}
		m->connecting = false;
		m->idle = false;
		m->nfds = -1; /* its channels are new */
		if (rdma) {
			i++;
			continue;
		}
		ev.events = m->disabled ? 0 : m->events;
		ev.data = m->data;
		(void)!XS_CALL(epoll_ctl, epfd, EPOLL_CTL_ADD, m->fd, &ev);
		ep_member_drop(ep, m);
	}
}

/* Drop members whose fd was closed behind epoll's back (as the kernel's
 * close removes them) and settle decided connects. Called with ep->lock
 * held. */
static void ep_settle(int epfd, struct ep_set *ep)
{
	size_t i;

	ep->connecting = false;
	for (i = 0; i < ep->nr;) {
		struct ep_member *m = ep->m[i];
		struct xs_sock *s = ep_member_sock(m);

		if (!s) {
			ep_remove(ep, m, false);
			ep->idle_valid = false;
			continue;
		}
		/* a connect done, the transport still to negotiate: this
		 * process waits on it, so it does its I/O */
		if (m->connecting && !xs_sock_connecting(s) &&
		    xs_sock_negotiable(s) && xs_sock_claim(s, m->fd)) {
			xs_sock_put(s);
			i++;
			continue;
		}
		if (m->connecting && !xs_sock_connecting(s)) {
			ep->idle_valid = false;
			ep_decided(epfd, ep, s, false); /* may move members */
			xs_sock_put(s);
			i = 0; /* look again from the start */
			continue;
		}
		if (!m->connecting && xs_sock_kind(s) == XS_KIND_RDMA &&
		    xs_sock_plain(s)) {
			/* moved to its kernel TCP connection: the kernel's
			 * set watches it from now on */
			ep->idle_valid = false;
			ep_decided(epfd, ep, s, true);
			xs_sock_put(s);
			i = 0;
			continue;
		}
		ep->connecting |= m->connecting;
		xs_sock_put(s);
		i++;
	}
	ep_nest_sync(epfd, ep);
}

/*
 * What an epoll_ctl() needs settled, without a pass over every member:
 * the whole set while a connect is undecided or a look found a member
 * closed or moved; else only the member of @fd (-1: none), a kernel fd
 * now: closed behind epoll's back, or moved to its kernel TCP connection
 * (the kernel's set must hold it before the call goes there). A member
 * whose fd number came back as another socket is dropped by the caller
 * (ep_ctl()). Called with ep->lock held.
 */
static void ep_settle_fd(int epfd, struct ep_set *ep, int fd)
{
	struct ep_member *m;
	struct xs_sock *s;

	if (ep->settle_due || ep->connecting) {
		ep->settle_due = false;
		ep_settle(epfd, ep);
		return;
	}
	m = fd >= 0 ? ep_find(ep, fd) : NULL;
	if (!m)
		return;
	s = ep_member_sock(m);
	if (!s) {
		ep_remove(ep, m, false);
		ep->idle_valid = false;
	} else if (!m->connecting && xs_sock_kind(s) == XS_KIND_RDMA &&
		   xs_sock_plain(s)) {
		ep->idle_valid = false;
		ep_decided(epfd, ep, s, true);
	}
	if (s)
		xs_sock_put(s);
	ep_nest_sync(epfd, ep);
}

/* epoll_ctl for an emulated socket; @s's reference is the caller's. */
static int ep_ctl(int epfd, int op, int fd, struct xs_sock *s,
		  struct epoll_event *event)
{
	struct ep_set *ep;
	struct ep_member *m;
	bool conn, shared;
	int err = 0;

	if (epfd == fd)
		return -EINVAL;
	ep = ep_get_or_make(epfd, &err);
	if (!ep)
		return err;
	if (op != EPOLL_CTL_DEL &&
	    (!event || !xs_user_ok(event, sizeof(*event), USER_READ)))
		return -EFAULT;
	/* EPOLLEXCLUSIVE: only with ADD, and with few other bits
	 * (EPOLLEXCLUSIVE_OK_BITS of fs/eventpoll.c) */
	if (op != EPOLL_CTL_DEL && (event->events & EPOLLEXCLUSIVE) &&
	    (op == EPOLL_CTL_MOD ||
	     (event->events & ~(EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
				EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE))))
		return -EINVAL;
	pthread_mutex_lock(&ep->lock);
	ep_settle_fd(epfd, ep, -1);
	m = ep_find(ep, fd);
	if (m && (m->s != s || m->incarnation != s->incarnation)) {
		ep_remove(ep, m, false); /* fd closed and reused meanwhile */
		m = NULL;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (m) {
			err = -EEXIST;
			break;
		}
		/* connecting first: decided meanwhile, it is read below */
		xs_sock_claim(s, fd); /* this process waits on it: its I/O */
		xs_sock_take_over(s, fd);
		conn = xs_sock_connecting(s);
		if (!conn && !xs_sock_polled(s)) {
			err = -EXDEV; /* decided for TCP: the kernel's */
			break;
		}
		shared = ep_shares(ep, s, fd);
		m = ep_member_add(ep, fd, s);
		if (!m) {
			err = -ENOMEM;
			break;
		}
		if (!shared) {
			if (conn)
				ep_evfd(ep, s, EPOLL_CTL_ADD);
			else
				ep_channels(ep, s, EPOLL_CTL_ADD);
		}
		m->incarnation = s->incarnation;
		m->events = event->events;
		m->data = event->data;
		m->connecting = conn;
		ep->connecting |= conn;
		break;
	case EPOLL_CTL_MOD:
		if (!m) {
			err = -ENOENT;
			break;
		}
		if (m->events & EPOLLEXCLUSIVE) {
			err = -EINVAL; /* the kernel's answer too */
			break;
		}
		m->events = event->events;
		m->data = event->data;
		m->reported = 0;
		m->disabled = false;
		m->idle = false; /* new events may be ready at once */
		break;
	case EPOLL_CTL_DEL:
		if (!m) {
			err = -ENOENT;
			break;
		}
		ep_remove(ep, m, true);
		break;
	default:
		err = -EINVAL;
	}
	ep->idle_valid = false; /* the kernel looks again at a change */
	ep_nest_sync(epfd, ep);
	if (!err && op == EPOLL_CTL_ADD && ep->nested)
		(void)xs_sock_poll_arm(s); /* news wakes the outer waiter */
	pthread_mutex_unlock(&ep->lock);
	return err;
}

/* Kernel fd @fd went into an epoll set: an epoll fd with xsock members
 * is nested from now on; one without is remembered, for when it gets
 * some. */
static void ep_nest_added(int fd)
{
	_Atomic(unsigned char) *in = atomic_load(&ep_in_epoll), *fresh = NULL;

	if (fd < 0 || (size_t)fd >= xs_fdtab_size())
		return;
	if (!in) {
		fresh = calloc(xs_fdtab_size(), 1);
		if (!fresh)
			return;
		if (atomic_compare_exchange_strong(&ep_in_epoll, &in, fresh))
			in = fresh;
		else
			free(fresh); /* another thread's won; @in is it */
	}
	atomic_store(&in[fd], 1);
	xs_ep_nest_check(fd);
}

int xs_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct xs_sock *s;
	int rc;

	if (!(s = xs_poll_sock(fd))) {
		struct ep_set *ep = ep_lookup(epfd);

		if (ep) { /* a member that fell back to TCP: the kernel's now */
			pthread_mutex_lock(&ep->lock);
			ep_settle_fd(epfd, ep, fd);
			pthread_mutex_unlock(&ep->lock);
		}
		rc = XS_CALL(epoll_ctl, epfd, op, fd, event);
		if (rc == 0 && op == EPOLL_CTL_ADD)
			XS_SAVE_ERRNO(ep_nest_added(fd));
		return rc;
	}
	if (xs_sock_kind(s) == XS_KIND_LISTEN) {
		/* the kernel listener answers for peers without xsock */
		rc = XS_CALL(epoll_ctl, epfd, op, fd, event);
		if (rc == 0)
			XS_SAVE_ERRNO(ep_ctl(epfd, op, fd, s, event));
		XS_SAVE_ERRNO(xs_sock_put(s));
		return rc;
	}
	rc = ep_ctl(epfd, op, fd, s, event);
	xs_sock_put(s);
	if (rc == -EXDEV) /* a connect decided for TCP this instant */
		return XS_CALL(epoll_ctl, epfd, op, fd, event);
	return (int)xs_sys_ret(rc);
}

/* Channel fds learnt from the inner set per look; more ready than this
 * and every member is drained. */
#define EP_CHAN_BATCH 64

/* Which of @s's channel fds are among the @nchan readable ones, as the
 * XS_POLL_DRAIN_FD bits that drain just those (EP_CHAN_BATCH: maybe
 * more than were returned: XS_POLL_DRAIN, all of them, one bit each). */
static unsigned int ep_chan_ready(struct ep_member *m, struct xs_sock *s,
				  const struct epoll_event *chan, int nchan)
{
	unsigned int which = 0;
	int k, i, nfds = m->nfds;

	if (nchan >= EP_CHAN_BATCH)
		return XS_POLL_DRAIN;
	if (nchan == 0)
		return 0;
	/* An RDMA socket's channel fds stay what they are until it moves
	 * or closes (ep_settle() then drops or redoes the member): learnt
	 * once, under the stream's lock, and compared without it after. */
	if (nfds < 0) {
		nfds = xs_sock_poll_fds(s, m->chan_fd);
		if (xs_sock_kind(s) == XS_KIND_RDMA && xs_sock_mine(s) &&
		    nfds > 0)
			m->nfds = nfds;
	}
	for (k = 0; k < nfds; k++)
		for (i = 0; i < nchan; i++)
			if (chan[i].data.fd == m->chan_fd[k])
				which |= XS_POLL_DRAIN_FD(k);
	return which;
}

/* ep_collect() @how bits */
#define EP_PEEK	     0x1  /* only count what would be reported */
#define EP_ARM	     0x2  /* arm each member as it is looked at */
#define EP_NOCHAN    0x4  /* take no channel fd for readable: no look at them */
#define EP_SPIN	     0x8  /* a spin's look: CQs polled, no system call */
#define EP_SPIN_CHAN 0x10 /* with EP_SPIN: the inner set looked at too */

/*
 * Ready xsock members into @out (at most @max), starting where the last
 * collection stopped so that no member starves. Drops members whose fd
 * was closed behind epoll's back, as the kernel's close removes them.
 *
 * One look at the inner set tells whose channel fds are readable: only
 * those are drained (system calls) and have their CQs polled; an idle
 * member's look is a lock and a few loads. An idle set of N connections
 * then costs a few system calls a wait, not 2N.
 *
 * @how: EP_PEEK: only count the members that would be reported (@out
 * unused), changing no EPOLLET or EPOLLONESHOT state: what a poll of the
 * epoll fd itself asks. EP_ARM: the look before a sleep; each member's CQ
 * is armed before it is looked at, so news after its look makes a channel
 * fd readable (members whose EPOLLONESHOT fired are not armed).
 * EP_NOCHAN: the caller knows that no channel fd is readable (a sleep on
 * the inner set just said so), or sleeps on them next, which one that is
 * readable ends at once: the inner set is not looked at (a system call).
 * EP_SPIN: a look while spinning: each member's CQ is polled in
 * userspace, the inner set is not looked at, nothing is drained; the
 * armed look after the spin drains what the spin left readable.
 * EP_SPIN_CHAN (with EP_SPIN): the inner set is looked at too, so that
 * members with news on a readable channel fd are looked at.
 * Idle members (struct ep_member.idle) are skipped: an armed look found
 * nothing to report, their counter has not moved since, and none of their
 * channel fds is known readable. An idle set of N members then costs a
 * look at the members with news, plus a reference each, not N looks; a
 * spin's look (no channel fds read) leaves their news to its next
 * EP_SPIN_CHAN look or to the armed look.
 * @starved: set when an armed member waits for pool memory (may be NULL).
 */
static int ep_collect(int epfd, struct ep_set *ep, struct epoll_event *out,
		      int max, unsigned int how, bool *starved)
{
	struct epoll_event chan[EP_CHAN_BATCH];
	bool peek = how & EP_PEEK;
	size_t seen, start;
	int n = 0, nchan;

	pthread_mutex_lock(&ep->lock);
	/* Closed members and decided connects first. The look below finds
	 * a member closed or moved on its own way (the reference it takes
	 * anyway): the next look settles, so an unchanged set's look is one
	 * pass over its members, not two. */
	if (ep->settle_due || ep->connecting) {
		ep->settle_due = false;
		ep_settle(epfd, ep);
	}
	nchan = 0;
	if (!(how & (EP_NOCHAN | EP_SPIN)) || (how & EP_SPIN_CHAN)) {
		nchan = XS_CALL(epoll_wait, ep->inner, chan, EP_CHAN_BATCH, 0);
		if (nchan < 0)
			nchan = EP_CHAN_BATCH; /* cannot tell: drain them all */
	}
	start = ep->nr ? ep->cursor % ep->nr : 0;
	for (seen = 0; seen < ep->nr && n < max; seen++) {
		size_t i = (start + seen) % ep->nr;
		struct ep_member *m = ep->m[i];
		struct xs_sock *s = ep_member_sock(m);
		uint32_t want, ready;
		unsigned int look;
		unsigned long gen, idle_gen;

		if (!s) {
			ep->settle_due = true; /* closed: the next drops it */
			continue;
		}
		if (!m->connecting && xs_sock_kind(s) == XS_KIND_RDMA &&
		    xs_sock_plain(s)) {
			/* moved to its kernel TCP connection: into the
			 * kernel's set (ep_settle()), then looked at again */
			ep->settle_due = true;
			ep->moved = true;
			xs_sock_put(s);
			continue;
		}
		look = ep_chan_ready(m, s, chan, nchan);
		/* Idle since an armed look, and none of its channel fds
		 * readable (a spin's look reads none: what came on its armed
		 * CQ waits for the spin's channel look, or the armed look);
		 * a move (core/move.c, core/hand.c) changes no counter, and
		 * its handed-over bytes are readable: never skipped */
		if (m->idle && !look && !atomic_load(&s->moved) &&
		    xs_sock_poll_idle_gen(s) == m->idle_gen) {
			xs_sock_put(s);
			continue;
		}
		m->idle = false;
		/* before the look: what happens during it shows next time */
		idle_gen = xs_sock_poll_idle_gen(s);
		/* A completion event read now would only be followed by an
		 * arm (two system calls on some providers), needed only
		 * before a sleep: a look that does not arm polls the CQ
		 * instead and leaves the event to the armed look. */
		if (!(how & EP_ARM) && (look & XS_POLL_DRAIN_FD(0)))
			look = (look & ~XS_POLL_DRAIN_FD(0)) | XS_POLL_SPIN;
		if (m->disabled) {
			/* no report, but its channel fds are drained here
			 * too: left readable, they would wake every sleep */
			(void)xs_sock_poll_events(s, look);
			xs_sock_put(s);
			continue;
		}
		if (how & EP_ARM)
			look |= XS_POLL_ARM;
		if (how & EP_SPIN)
			look |= XS_POLL_SPIN;
		want = (m->events &
			(EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI)) |
		       EPOLLERR | EPOLLHUP;
		/* The counter after the events: they reap completions, and
		 * what they reap is in @ready. (Read before, every edge
		 * this call reaped was reported again by the next wait.)
		 * One reaped by another thread in between is in the
		 * stream already: the reader this event wakes finds it. */
		ready = xs_sock_poll_events(s, look);
		if ((ready & XS_POLL_STARVED) && starved)
			*starved = true;
		if (ready & XS_POLL_MOVED) {
			ep->moved = true; /* settled by the next look */
			ep->settle_due = true;
		}
		/* armed, and nothing: idle until its counter moves */
		if ((how & EP_ARM) &&
		    !(ready & (want | XS_POLL_STARVED | XS_POLL_MOVED)) &&
		    xs_sock_kind(s) == XS_KIND_RDMA && xs_sock_mine(s) &&
		    !atomic_load(&s->moved)) {
			m->idle = true;
			m->idle_gen = idle_gen;
		}
		ready &= want;
		gen = xs_sock_poll_gen(s);
		xs_sock_put(s);
		if ((m->events & EPOLLET) && ready) {
			/* an edge: a new bit, or anything happened since the
			 * last report (more data, freed credits) */
			bool edge =
				(ready & ~m->reported) || gen != m->last_gen;

			if (!peek) {
				m->reported = ready;
				m->last_gen = gen;
			}
			if (!edge)
				continue;
		} else if ((m->events & EPOLLET) && !peek) {
			m->reported = 0;
		}
		if (!ready)
			continue;
		if (peek) {
			n++;
			continue;
		}
		out[n].events = ready;
		out[n].data = m->data;
		n++;
		ep->cursor = i + 1;
		if (m->events & EPOLLONESHOT)
			m->disabled = true;
	}
	pthread_mutex_unlock(&ep->lock);
	return n;
}

/* The kernel's ready entries of the application's set @epfd, without
 * the inner set's own (epoll_wait's return). */
static int ep_kernel(int epfd, struct epoll_event *ev, int max)
{
	int k = XS_CALL(epoll_wait, epfd, ev, max, 0);

	return k > 0 ? ep_unnest(ev, k) : k;
}

/*
 * A wait on a nested epoll fd returns: leave its nest eventfd exact for
 * the outer waiter. @ready: a member was just reported. Otherwise the
 * members are armed first, so that news after this look makes a channel
 * fd, and with it the epoll fd, readable; then looked at again without
 * consuming anything (completions that came before the arm).
 */
static void ep_nest_after(int epfd, struct ep_set *ep, bool ready)
{
	if (!ep->nested)
		return;
	if (!ready)
		ready = ep_collect(epfd, ep, NULL, INT_MAX, EP_PEEK | EP_ARM,
				   NULL) > 0;
	pthread_mutex_lock(&ep->lock);
	ep_nest_mark(ep, ready);
	pthread_mutex_unlock(&ep->lock);
}

/* The epoll fd @epfd, which has members, is inside another wait (poll,
 * select, another epoll set): from now on it reflects their readiness. */
static void ep_nest_refresh(int epfd, struct ep_set *ep)
{
	pthread_mutex_lock(&ep->lock);
	ep->nested = true;
	pthread_mutex_unlock(&ep->lock);
	ep_nest_after(epfd, ep, false);
}

/* @fd goes into a wait as a kernel fd: if it is an epoll fd with xsock
 * members, make it readable as the kernel's would be (see
 * ep_nest_refresh()). */
void xs_ep_nest_check(int fd)
{
	struct ep_set *ep = ep_lookup(fd);

	if (ep)
		ep_nest_refresh(fd, ep);
}

/* Microseconds in @ts, and back. */
/* Whether @ts (NULL: none) is a zero timeout: a wait that never sleeps. */
static bool ep_ts_zero(const struct timespec *ts)
{
	return ts && !ts->tv_sec && !ts->tv_nsec;
}

static uint64_t ep_ts_us(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000u + (uint64_t)ts->tv_nsec / 1000u;
}

static void ep_us_ts(uint64_t us, struct timespec *ts)
{
	ts->tv_sec = (time_t)(us / 1000000u);
	ts->tv_nsec = (long)(us % 1000000u) * 1000;
}

/*
 * Sleep in ppoll(2) on @pfd for at most @ts (NULL: no limit). The system
 * call itself, not glibc's wrapper: the kernel writes the time left back
 * into @ts (the wrapper hides that), so a wait needs no clock reads of
 * its own, which cost a trap each where the clock source is not the
 * vDSO's (hpet). Still a cancellation point, as epoll_wait is.
 */
static int ep_sleep(struct pollfd pfd[3], struct timespec *ts,
		    const sigset_t *sigmask)
{
	int old, rc;

	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
	rc = (int)syscall(SYS_ppoll, pfd, pfd[2].fd >= 0 ? 3 : 2, ts, sigmask,
			  _NSIG / 8);
	pthread_setcanceltype(old, NULL);
	return rc;
}

/* A spinning epoll wait looks at the application's kernel fds once in
 * this many looks (one system call each). */
#define EP_SPIN_KERNEL_EVERY 8

/*
 * The emulated epoll_wait on a set with xsock members. @timeout: relative,
 * NULL for none. Return: as epoll_wait(2).
 */
static int ep_wait_events(int epfd, struct ep_set *ep,
			  struct epoll_event *events, int max,
			  const struct timespec *timeout,
			  const sigset_t *sigmask, int wake)
{
	/* the application's set, the inner one, this thread's wake-up */
	struct pollfd pfd[3] = { { epfd, POLLIN, 0 },
				 { ep->inner, POLLIN, 0 },
				 { wake, POLLIN, 0 } };
	bool zero = ep_ts_zero(timeout);
	struct timespec left = { 0, 0 }, nap, *sleep_ts;
	struct xs_spin_run run = { 0 };
	uint64_t total = 0, spun;
	bool starved, arm, slept = false, learn = false, looked = false;
	unsigned int spin_looks = 0, chan_looks = 0, how;
	/* what is known not readable without asking: after a sleep, what
	 * it said; an idle set's first look, what the sleep that follows
	 * it will tell (a readable fd ends it at once) */
	bool inner_quiet = ep->quiet && !zero, kernel_quiet = inner_quiet;
	/* An idle set whose last look, armed, found nothing: while no socket
	 * had news that bypasses the channel fds (a call, completions reaped
	 * elsewhere), any news since made a channel fd readable, so the
	 * sleep alone tells; redis' idle cron then costs one system call a
	 * turn, as over kernel TCP. */
	bool skip_look = inner_quiet && !ep->nested && ep->idle_valid &&
			 xs_sock_news() == ep->idle_news;
	unsigned long news = 0;
	int n, nx, k;

	if (timeout) {
		left = *timeout;
		total = ep_ts_us(timeout);
	}
	/* Spin only while there is traffic: a wait after one that slept
	 * and timed out with nothing sleeps at once, so an idle loop (redis'
	 * 10 Hz cron) costs one look and a sleep a turn, not a spin, and
	 * reads no clock. A busy wait spins for the window its set learnt
	 * (core/spin.c), and what it finds sizes the next. */
	if (!ep->quiet &&
	    !zero) { /* no spin, nothing learnt: XSOCK_SPIN_US=0 */
		xs_spin_begin(&run, &ep->spin, timeout ? total : UINT64_MAX);
		learn = true;
	}
	for (;;) {
		if (skip_look) {
			skip_look = false;
			starved = false;
			news = ep->idle_news;
			goto sleep;
		}
		/* One event only: the kernel's fds and ours take turns, so
		 * neither starves the other (the kernel's round robin). */
		if (max == 1 && (ep->kernel_first = !ep->kernel_first)) {
			k = ep_kernel(epfd, events, 1);
			if (k > 0) {
				ep->quiet = false;
				return k;
			}
		}
		/* Past the spin, the look arms as it goes: what comes after
		 * it makes a channel fd readable and ends the sleep. A busy
		 * set's first look does not arm: it polls the CQs, and news
		 * found there costs no arm, nor the completion event an
		 * armed CQ would raise later (two system calls on some
		 * providers); arming is for a wait that goes on to sleep. */
		arm = !zero && (looked || ep->quiet);
		if (run.window_us && !run.stopped) {
			if (xs_spin_more(&run)) {
				arm = false;
			} else { /* the spin's time comes off the timeout */
				spun = xs_spin_stop(&run);
				if (timeout)
					ep_us_ts(spun < total ? total - spun
							      : 0,
						 &left);
			}
		}
		starved = false;
		news = xs_sock_news();
		/* one slot always left for the kernel's own fds; the spin's
		 * looks after the first poll the CQs, no system call */
		how = arm ? EP_ARM : 0;
		if (inner_quiet)
			how |= EP_NOCHAN;
		if (!arm && looked) {
			how |= EP_SPIN;
			/* idle members are skipped while spinning: what
			 * came on their armed CQs shows on the inner set,
			 * looked at every few looks (one system call) */
			if (++chan_looks % EP_SPIN_KERNEL_EVERY == 0)
				how |= EP_SPIN_CHAN;
		}
		nx = ep_collect(epfd, ep, events, max > 1 ? max - 1 : max, how,
				&starved);
		looked = true;
		n = nx;
		if (ep->moved) {
			/* a member's kernel fd answers now: into the kernel's
			 * set (ep_settle()), then everything looked at again */
			ep->moved = false;
			if (!n) {
				kernel_quiet = inner_quiet = false;
				continue;
			}
		}
		/* while spinning, the kernel's fds every few looks: one
		 * system call each */
		if (n < max && (!kernel_quiet || n) &&
		    (arm || spin_looks++ % EP_SPIN_KERNEL_EVERY == 0)) {
			k = ep_kernel(epfd, events + n, max - n);
			if (k < 0 && !n)
				return -1;
			n += k > 0 ? k : 0;
		}
		if (n || zero) {
			if (learn) /* how long the news took */
				xs_spin_end(&run, n > 0);
			ep_nest_after(epfd, ep, nx > 0);
			if (n || slept)
				ep->quiet = !n;
			if (n)
				ep->idle_valid = false;
			return n;
		}
		if (!arm)
			continue;
		ep->idle_news = news;
		ep->idle_valid = !starved;
	sleep:
		pthread_mutex_lock(&ep->lock);
		ep_nest_mark(ep, false); /* armed: news wakes outer waiters */
		pthread_mutex_unlock(&ep->lock);
		sleep_ts = timeout ? &left : NULL;
		if (starved && (!timeout || ep_ts_us(&left) > 1000)) {
			/* pool backpressure: no fd announces a free buffer,
			 * look again within 1 ms */
			ep_us_ts(1000, &nap);
			sleep_ts = &nap;
		}
		pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
		k = ep_sleep(pfd, sleep_ts, sigmask);
		if (k < 0)
			return -1;
		slept = true;
		if (pfd[2].revents) { /* news for every waiter: look at all */
			xs_wake_drain(wake);
			pfd[1].revents |= POLLIN;
		}
		inner_quiet = !pfd[1].revents;
		kernel_quiet = !pfd[0].revents;
		if (sleep_ts == &nap && timeout)
			ep_us_ts(ep_ts_us(&left) - (1000 - ep_ts_us(&nap)),
				 &left);
		if (!timeout || left.tv_sec || left.tv_nsec)
			continue; /* the fds that woke us: drained by the look */
		/* Timed out with neither fd readable: every member was armed
		 * and looked at before the sleep, so none has news (the
		 * kernel's ep_poll() timing out). Unless one waits for pool
		 * memory, which no fd announces, or another thread took news
		 * that bypassed the channel fds (its poll drained them). */
		if (k == 0 && !starved && xs_sock_news() == news) {
			if (learn)
				xs_spin_timed_out(&ep->spin);
			ep_nest_after(epfd, ep, false);
			ep->quiet = true;
			return 0;
		}
		/* Past the deadline even when the sleep did not time out:
		 * a channel fd whose news changed no member's readiness
		 * ends it early, again and again. */
		zero = true; /* one last look, then 0 */
	}
}

/* ep_wait_events(), and errno as it was when it succeeds (as for poll) */
static int ep_wait(int epfd, struct ep_set *ep, struct epoll_event *events,
		   int max, const struct timespec *timeout,
		   const sigset_t *sigmask)
{
	bool zero = ep_ts_zero(timeout);
	int saved = errno, rc;

	/* registered before the first look (see poll_emulated()) */
	rc = ep_wait_events(epfd, ep, events, max, timeout, sigmask,
			    zero ? -1 : xs_wake_enter());
	if (!zero)
		xs_wake_leave();
	if (rc >= 0)
		errno = saved;
	return rc;
}

static int ep_wait_common(int epfd, struct epoll_event *events, int max,
			  const struct timespec *timeout,
			  const sigset_t *sigmask, bool *handled)
{
	struct ep_set *ep;

	int rc = 0;

	*handled = false;
	if (max <= 0 || !events || !(ep = ep_hold(epfd)))
		return 0;
	pthread_mutex_lock(&ep->lock);
	*handled = ep->nr > 0;
	pthread_mutex_unlock(&ep->lock);
	/* a buffer the kernel could not write is its EFAULT; not through
	 * the kernel's call here, which would hand out our inner set's
	 * event */
	if (*handled && !xs_user_ok(events, sizeof(*events), USER_EVENTS))
		rc = (int)xs_sys_ret(-EFAULT);
	else if (*handled)
		rc = ep_wait(epfd, ep, events, max, timeout, sigmask);
	XS_SAVE_ERRNO(ep_put(ep));
	return rc;
}

/* epoll_pwait(), and epoll_wait() for a set with xsock members */
static int ep_pwait(int epfd, struct epoll_event *events, int maxevents,
		    int timeout_ms, const sigset_t *sigmask)
{
	struct timespec ts = { timeout_ms / 1000,
			       timeout_ms % 1000 * 1000000L };
	bool handled;
	int rc = ep_wait_common(epfd, events, maxevents,
				timeout_ms < 0 ? NULL : &ts, sigmask, &handled);

	return handled ? rc
		       : XS_CALL(epoll_pwait, epfd, events, maxevents,
				 timeout_ms, sigmask);
}

int xs_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  int timeout_ms)
{
	/* epoll_wait is epoll_pwait without a mask (fs/eventpoll.c) */
	if (!ep_lookup(epfd))
		return XS_CALL(epoll_wait, epfd, events, maxevents, timeout_ms);
	return ep_pwait(epfd, events, maxevents, timeout_ms, NULL);
}

int xs_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *sigmask)
{
	return ep_pwait(epfd, events, maxevents, timeout_ms, sigmask);
}

int xs_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		    const struct timespec *timeout, const sigset_t *sigmask)
{
	bool handled = false;
	int rc = 0;

	if (!xs_real.epoll_pwait2)
		return xs_no_symbol();
	if (!timeout || (timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 &&
			 timeout->tv_nsec < 1000000000))
		rc = ep_wait_common(epfd, events, maxevents, timeout, sigmask,
				    &handled);
	return handled ? rc
		       : xs_real.epoll_pwait2(epfd, events, maxevents, timeout,
					      sigmask);
}
