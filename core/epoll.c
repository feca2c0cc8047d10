/*
 * core/epoll.c - epoll sets with xsock members: the set table, the
 * members, nesting bookkeeping and epoll_ctl.
 *
 * Kernel fds live in the application's own epoll set as usual. xsock
 * members are kept beside it (struct ep_set), their channel fds in a
 * private "inner" epoll set; a sleeping epoll_wait waits on both sets.
 * The application's data.u64 values come back untouched. One foreign entry
 * enters the application's set while it has xsock members: the inner set
 * itself, with an eventfd in it that is readable while a member is ready,
 * so that the epoll fd placed in poll(), select() or another epoll set
 * turns readable as the kernel's would (see ep_nest_mark()). Its events
 * never reach the application. The waits on a set are core/epoll_wait.c's;
 * what the two files share is in core/epoll_int.h.
 * Context: any thread, called by the wrappers of preload/poll.c after
 * their entry check.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core_int.h"
#include "fdtab.h"
#include "wait.h"

/* uthash: a failed allocation leaves the element out and says so, never
 * exit()s the application (the default); set before core/epoll_int.h
 * includes it */
#define HASH_NONFATAL_OOM	 1
#define uthash_nonfatal_oom(elt) (ep_hash_oom = true)
static __thread bool ep_hash_oom;
#include <uthash.h>

#include "epoll_int.h"

/* How many members of a set name one socket: more than one when dup'ed
 * fds of it are members. Stale members (fd closed, socket object reused)
 * count until they are dropped, so a count above one is checked member
 * by member (ep_shares()). */
struct ep_sref {
	struct xs_sock *s; /* key */
	unsigned int count;
	struct ep_member *members;	   /* linked by ep_member.sib */
	struct ep_chan *chan[XS_POLL_FDS]; /* its channel fds in by_chan */
	UT_hash_handle hh;		   /* in ep_set.by_sock */
};

/* A channel fd of a socket in the inner set, so that the fds a look finds
 * readable wake their members at once (ep_wake_news()). A number that
 * comes back as another socket's channel replaces its stale entry. */
struct ep_chan {
	int fd; /* key */
	struct ep_sref *r;
	UT_hash_handle hh; /* in ep_set.by_chan */
};

/* fds that were put into some epoll set with epoll_ctl(), before they had
 * xsock members of their own (the epoll fd nested first, filled later) */
static _Atomic(_Atomic(unsigned char) *) ep_in_epoll;

/* epoll fd -> its xsock members, for epoll fds that ever had one */
static _Atomic(struct ep_set *) *ep_table;
/* never held with another lock (lock order: core/xs_core.h) */
static pthread_mutex_t ep_table_lock = PTHREAD_MUTEX_INITIALIZER;

/* The member set of epoll fd @epfd, or NULL when it has none (it never
 * had an xsock member, or it was closed). Lock-free (an acquire load),
 * any thread; the set lives while @epfd stays open, or while held with
 * ep_hold(). */
struct ep_set *ep_lookup(int epfd)
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
	if (ep->nested)
		xs_wake_nested(); /* busy looks leave it the events */
}

/* Set or clear the nest eventfd: readable while a member is ready.
 * Called with ep->lock held; one read or write of the eventfd. */
void ep_nest_mark(struct ep_set *ep, bool ready)
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
	int rc;

	if ((ep->nr > 0) == ep->in_app)
		return;
	ep->in_app = ep->nr > 0;
	if (!ep->in_app)
		ep_nest_mark(ep, false);
	rc = XS_CALL(epoll_ctl, epfd,
		     ep->in_app ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, ep->inner,
		     &ev);
	__atomic_store_n(&ep->inner_told, ep->in_app && rc == 0,
			 __ATOMIC_RELAXED);
}

static _Atomic(unsigned char) *ep_in(bool make);

/* The member set of @epfd, made on first use. Return: set, or NULL with
 * the errno epoll_ctl would give (-EBADF, -EINVAL, -ENOMEM). */
static struct ep_set *ep_get_or_make(int epfd, int *err)
{
	struct ep_set *ep = ep_lookup(epfd);
	_Atomic(unsigned char) *in;
	bool made = false;

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
				ep->notes = xs_sock_notes_end();
				ep_nest_init(epfd, ep);
				atomic_store(&ep_table[epfd], ep);
				made = true;
			}
		}
	}
	pthread_mutex_unlock(&ep_table_lock);
	if (!ep)
		*err = -ENOMEM;
	else if (made && !ep->nested && (in = ep_in(false)) &&
		 atomic_load(&in[epfd]))
		/* marked inside a wait while it was being made, after
		 * ep_nest_init() looked (see xs_ep_nest_check()) */
		xs_ep_nest_check(epfd);
	return ep;
}

static void ep_member_drop(struct ep_set *ep, struct ep_member *m);

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
 * meanwhile does not free it under the waiter. Drop with ep_put().
 * Any thread; takes ep_table_lock briefly. */
struct ep_set *ep_hold(int epfd)
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

/* Drop a hold of ep_hold(); the last one on a set whose epoll fd was
 * closed meanwhile frees it. Any thread, ep->lock not held; takes
 * ep_table_lock briefly. */
void ep_put(struct ep_set *ep)
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

/* Members @i and @j of ep->m[] trade places. */
static void ep_swap(struct ep_set *ep, size_t i, size_t j)
{
	struct ep_member *a = ep->m[i];

	ep->m[i] = ep->m[j];
	ep->m[j] = a;
	ep->m[i]->idx = i;
	a->idx = j;
}

/* Idle member @m into the awake part of ep->m[]: looks look at it again.
 * Called with ep->lock held. */
void ep_wake(struct ep_set *ep, struct ep_member *m)
{
	if (!m->idle)
		return;
	m->idle = false;
	ep_swap(ep, m->idx, ep->nr_awake++);
}

static void ep_wake_sref(struct ep_set *ep, struct ep_sref *r)
{
	struct ep_member *m;

	for (m = r->members; m; m = m->sib)
		ep_wake(ep, m);
}

static void ep_wake_all(struct ep_set *ep)
{
	size_t i;

	for (i = ep->nr_awake; i < ep->nr; i++)
		ep->m[i]->idle = false;
	ep->nr_awake = ep->nr;
}

/* Notes read per look; more since the last and every member is woken. */
#define EP_NOTES_BATCH 256

/*
 * Wake the idle members that may have news: those of the sockets noted
 * since the set's last look (xs_sock_notes()), and those with a channel
 * fd among the @nchan readable ones in @chan. @all: which channel fds are
 * readable is not known: wake every member. O(news): an idle member costs
 * a look nothing. Called with ep->lock held.
 */
void ep_wake_news(struct ep_set *ep, const struct epoll_event *chan, int nchan,
		  bool all)
{
	struct xs_sock *noted[EP_NOTES_BATCH];
	struct ep_sref *r;
	struct ep_chan *c;
	int n, i;

	n = xs_sock_notes(&ep->notes, noted, EP_NOTES_BATCH);
	if (all || n < 0 || (nchan > 0 && ep->chan_lossy)) {
		ep_wake_all(ep);
		return;
	}
	for (i = 0; i < n && ep->nr_awake < ep->nr; i++) {
		r = ep_sref_find(ep, noted[i]);
		if (r)
			ep_wake_sref(ep, r);
	}
	for (i = 0; i < nchan && ep->nr_awake < ep->nr; i++) {
		HASH_FIND_INT(ep->by_chan, &chan[i].data.fd, c);
		if (c)
			ep_wake_sref(ep, c->r);
	}
}

/* The members a look flagged idle leave the awake part of ep->m[].
 * Called with ep->lock held. */
void ep_rest(struct ep_set *ep)
{
	size_t i = 0;

	while (i < ep->nr_awake) {
		if (ep->m[i]->idle)
			ep_swap(ep, i, --ep->nr_awake);
		else
			i++;
	}
}

/* The channel fds of @r leave by_chan. */
static void ep_chan_forget(struct ep_set *ep, struct ep_sref *r)
{
	int k;

	for (k = 0; k < XS_POLL_FDS; k++) {
		if (!r->chan[k])
			continue;
		HASH_DEL(ep->by_chan, r->chan[k]);
		free(r->chan[k]);
		r->chan[k] = NULL;
	}
}

/* Channel fd @fd, @r's @k-th, into by_chan, in place of a stale entry of
 * the same number. Memory short: by_chan is lossy from then on. */
static void ep_chan_learn(struct ep_set *ep, struct ep_sref *r, int k, int fd)
{
	struct ep_chan *c;
	int j;

	HASH_FIND_INT(ep->by_chan, &fd, c);
	if (c) {
		HASH_DEL(ep->by_chan, c);
		for (j = 0; j < XS_POLL_FDS; j++)
			if (c->r->chan[j] == c)
				c->r->chan[j] = NULL;
		free(c);
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		ep->chan_lossy = true;
		return;
	}
	c->fd = fd;
	c->r = r;
	ep_hash_oom = false;
	HASH_ADD_INT(ep->by_chan, fd, c);
	if (ep_hash_oom) {
		free(c);
		ep->chan_lossy = true;
		return;
	}
	r->chan[k] = c;
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
	m->held_fd = fd;
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
	m->sib = r->members;
	r->members = m;
	m->idx = ep->nr;
	ep->m[ep->nr++] = m;
	ep_swap(ep, m->idx, ep->nr_awake++); /* awake: looked at next */
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
	struct ep_member **p;
	size_t i = m->idx;

	if (r) {
		for (p = &r->members; *p; p = &(*p)->sib) {
			if (*p == m) {
				*p = m->sib;
				break;
			}
		}
	}
	if (r && --r->count == 0) {
		ep_chan_forget(ep, r);
		HASH_DEL(ep->by_sock, r);
		free(r);
	}
	HASH_DEL(ep->by_fd, m);
	/* out of its part, then out of the array: what moves into its
	 * place comes from a place after it */
	if (i < ep->nr_awake) {
		ep_swap(ep, i, --ep->nr_awake);
		i = ep->nr_awake;
	}
	ep_swap(ep, i, --ep->nr);
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
	struct ep_member *self = ep_find(ep, fd), *m;
	unsigned int others;

	others = r ? r->count : 0;
	if (self && self->s == s)
		others--;
	if (!others)
		return false;
	for (m = r->members; m; m = m->sib) {
		struct xs_sock *now;

		if (m->fd == fd)
			continue;
		now = ep_member_sock(m);
		if (now)
			xs_sock_put(now);
		if (now == s)
			return true;
	}
	return false;
}

/* The channel fds of @s into the inner set, or out of it (@op), and into
 * or out of by_chan with them. */
static void ep_channels(struct ep_set *ep, struct xs_sock *s, int op)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ep_sref *r = ep_sref_find(ep, s);
	int fds[XS_POLL_FDS], n, k;

	if (r)
		ep_chan_forget(ep, r);
	/* the kick only for a set inside another wait: the kernel alone
	 * wakes that one (see xs_stream_wait_fds()) */
	n = xs_sock_poll_fds(s, fds, ep->nested);
	for (k = 0; k < n; k++) {
		ev.data.fd = fds[k];
		xs_real.epoll_ctl(ep->inner, op, fds[k], &ev);
		if (op == EPOLL_CTL_ADD && r)
			ep_chan_learn(ep, r, k, fds[k]);
		else if (op == EPOLL_CTL_ADD)
			ep->chan_lossy = true; /* no socket entry to name */
	}
}

/* Whether @now, from the fd table, is @m's socket; puts it if not. */
static bool ep_member_is(const struct ep_member *m, struct xs_sock *now)
{
	if (now && now == m->s && now->incarnation == m->incarnation)
		return true;
	xs_sock_put(now);
	return false;
}

/*
 * The member's socket with a reference, or NULL when it is gone: its fd
 * now names another socket, or was closed with the socket's last fd. A
 * member whose fd was closed while a dup keeps the socket is found
 * through the dup (m->held_fd), as the kernel's registration belongs to
 * the open file. Called with ep->lock held; the caller puts the reference
 * (xs_sock_put()).
 */
struct xs_sock *ep_member_sock(struct ep_member *m)
{
	struct xs_sock *now = xs_fdtab_get(m->fd);
	int fd;

	if (now || m->held_fd < 0) {
		if (!ep_member_is(m, now))
			return NULL;
		m->held_fd = m->fd;
		return now;
	}
	/* closed (its number maybe reused by a file that is no socket) */
	fd = xs_fdtab_holder(m->s, m->held_fd);
	now = fd >= 0 ? xs_fdtab_get(fd) : NULL;
	if (!ep_member_is(m, now)) {
		m->held_fd = -1; /* gone for good: no dup is searched again */
		return NULL;
	}
	m->held_fd = fd;
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

/* The eventfd of @s in the inner set, or out of it (@op): a set inside
 * another wait's only (see xs_sock_connect_evfd()). */
static void ep_evfd(struct ep_set *ep, struct xs_sock *s, int op)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = !ep->nested	       ? -1
		 : op == EPOLL_CTL_ADD ? xs_sock_connect_evfd(s)
				       : atomic_load(&s->connect_evfd);

	if (fd < 0)
		return;
	ev.data.fd = fd;
	xs_real.epoll_ctl(ep->inner, op, fd, &ev);
}

/*
 * Set @ep is inside another wait from now on (ep->nested just set), which
 * only the kernel wakes: its members' kicks, and the connect eventfds of
 * those still connecting, join the inner set, and their channel fds are
 * learnt anew. Called with ep->lock held.
 */
void ep_nest_kicks(struct ep_set *ep)
{
	size_t i;

	for (i = 0; i < ep->nr; i++) {
		struct ep_member *m = ep->m[i];
		struct xs_sock *s;

		m->nfds = -1;
		if (!(s = ep_member_sock(m)))
			continue; /* closed: settled later */
		if (m->connecting)
			ep_evfd(ep, s, EPOLL_CTL_ADD);
		else
			ep_channels(ep, s, EPOLL_CTL_ADD);
		xs_sock_put(s);
	}
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
	struct ep_sref *r = ep_sref_find(ep, s);
	struct epoll_event ev;
	size_t i;

	/* awake before the pass below, which a wake's move would upset */
	if (r)
		ep_wake_sref(ep, r);
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
		m->nfds = -1; /* its channels are new */
		if (rdma) {
			i++;
			continue;
		}
		ev.events = m->disabled ? 0 : m->events;
		ev.data = m->data;
		(void)!XS_CALL(epoll_ctl, epfd, EPOLL_CTL_ADD, m->held_fd, &ev);
		ep_member_drop(ep, m);
	}
}

/* Drop members whose fd was closed behind epoll's back (as the kernel's
 * close removes them) and settle decided connects; members that went to
 * TCP move into the application's set @epfd. Called with ep->lock held. */
void ep_settle(int epfd, struct ep_set *ep)
{
	size_t i;

	ep->connecting = false;
	for (i = 0; i < ep->nr;) {
		struct ep_member *m = ep->m[i];
		struct xs_sock *s = ep_member_sock(m);
		bool decided;

		if (!s) {
			ep_remove(ep, m, false);
			ep->idle_valid = false;
			continue;
		}
		/* one look: a connect that the parent process ran is taken
		 * over by that look itself (sock_connect_elsewhere()) */
		decided = m->connecting && !xs_sock_connecting(s);
		/* a connect done, the transport still to negotiate: this
		 * process waits on it, so it does its I/O */
		if (decided && xs_sock_negotiable(s) &&
		    xs_sock_claim(s, m->held_fd)) {
			ep->connecting = true; /* settled once decided */
			xs_sock_put(s);
			i++;
			continue;
		}
		if (decided) {
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

/*
 * Member @m of socket @s was just added (@add) or modified: the kernel's
 * ep_insert() and ep_modify() wake the set's waiters when it is ready
 * then. Their sleep here may watch nothing that will change (what made
 * it ready was taken from its channel fds by an earlier look, e.g. bytes
 * that came while EPOLLONESHOT had disabled it), so the nest eventfd,
 * which every wait on the set watches through the inner set (a kernel
 * wait that began while the set had no members too, and an outer wait of
 * a nested set), is made readable, and ep->ctl_marks counted: a wait
 * that looked before it looks again rather than clear the mark and sleep
 * (ep_wait_events(), ep_nest_after()). A modification looks only while a
 * wait may be under way (an ADD is once per connection). Called with
 * ep->lock held.
 */
static void ep_ctl_wake(struct ep_set *ep, struct ep_member *m,
			struct xs_sock *s, bool add)
{
	uint32_t want =
		(m->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI)) |
		EPOLLERR | EPOLLHUP;

	if (add && atomic_load(&ep_kernel_waiters)) {
		/* a kernel wait that began while the set had no members: it
		 * goes on emulated, where news that no channel fd announces
		 * reaches it (see xs_stream_wait_fds()) */
		__atomic_store_n(&ep->ctl_marks, ep->ctl_marks + 1,
				 __ATOMIC_RELEASE);
		if (ep->nest >= 0)
			ep_nest_mark(ep, true);
	}
	if (m->disabled || m->connecting ||
	    (!add && !ep->nested &&
	     !__atomic_load_n(&ep->users, __ATOMIC_RELAXED) &&
	     !atomic_load(&ep_kernel_waiters)))
		return;
	/* armed first: what comes after the look below raises an event
	 * (a busy look of another set may have read one without arming) */
	(void)xs_sock_poll_arm(s);
	if (!(xs_sock_poll_events(s, 0) & want))
		return;
	__atomic_store_n(&ep->ctl_marks, ep->ctl_marks + 1, __ATOMIC_RELEASE);
	if (ep->nest >= 0)
		ep_nest_mark(ep, true);
	else
		xs_wake_all();
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
		/* a connect that the parent process ran, taken over by that
		 * look, is still to negotiate: ours to claim */
		if (!conn && xs_sock_negotiable(s))
			conn = xs_sock_claim(s, fd);
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
		ep_ctl_wake(ep, m, s, true);
		break;
	case EPOLL_CTL_MOD:
		if (!m) {
			/* decided for TCP by the settle above: the kernel's
			 * set holds it now (ep_decided()) */
			err = xs_sock_polled(s) ? -ENOENT : -EXDEV;
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
		ep_wake(ep, m); /* new events may be ready at once */
		ep_ctl_wake(ep, m, s, false);
		break;
	case EPOLL_CTL_DEL:
		if (!m) {
			err = xs_sock_polled(s) ? -ENOENT : -EXDEV;
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

/* The marks of fds inside a wait (ep_in_mark()), made now if there are
 * none yet and @make. */
static _Atomic(unsigned char) *ep_in(bool make)
{
	_Atomic(unsigned char) *in = atomic_load(&ep_in_epoll), *fresh;

	if (in || !make)
		return in;
	fresh = calloc(xs_fdtab_size(), 1);
	if (!fresh)
		return NULL;
	if (atomic_compare_exchange_strong(&ep_in_epoll, &in, fresh))
		return fresh;
	free(fresh); /* another thread's won; @in is it */
	return in;
}

void ep_in_mark(int fd, bool make)
{
	_Atomic(unsigned char) *in;

	if (fd < 0 || (size_t)fd >= xs_fdtab_size() || !(in = ep_in(make)))
		return;
	if (!atomic_load_explicit(&in[fd], memory_order_relaxed))
		atomic_store(&in[fd], 1);
}

void xs_epoll_created(int fd)
{
	_Atomic(unsigned char) *in = ep_in(true);

	if (in && fd >= 0 && (size_t)fd < xs_fdtab_size())
		atomic_store(&in[fd], 0); /* a mark whose close went unseen */
}

/* Kernel fd @fd went into an epoll set: an epoll fd with xsock members
 * is nested from now on; one without is remembered, for when it gets
 * some. */
static void ep_nest_added(int fd)
{
	ep_in_mark(fd, true);
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
