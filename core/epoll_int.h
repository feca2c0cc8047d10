/*
 * core/epoll_int.h - what the two files of the epoll engine share:
 * core/epoll.c (the set table, members, nesting bookkeeping, epoll_ctl)
 * and core/epoll_wait.c (looks at the members, the waits). Each
 * function's comment is at its definition in core/epoll.c.
 */
#ifndef XS_CORE_EPOLL_INT_H
#define XS_CORE_EPOLL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
/* only UT_hash_handle here; core/epoll.c configures uthash for its
 * insertions before including this header */
#include <uthash.h>

#include "core_int.h"

/*
 * One xsock socket in an epoll set. It holds no reference, as the kernel's
 * epoll holds none on a file's last fd: close() tears the socket down at
 * once (FIN), and the member is found stale - no fd maps to the same
 * incarnation of the object (type-stable memory) any more - and dropped.
 * As the kernel's registration belongs to the open file, a member whose
 * fd was closed while a dup of it lives stays, found through the dup.
 */
struct ep_member {
	int fd;
	int held_fd;	   /* fd, or the dup it was last found through */
	struct xs_sock *s; /* no reference: check with ep_member_sock() */
	unsigned int incarnation; /* of s when registered */
	uint32_t events;	  /* as registered, EPOLLET/ONESHOT included */
	epoll_data_t data;
	uint32_t reported;	/* EPOLLET: bits reported */
	unsigned long last_gen; /* EPOLLET: readiness counter when reported */
	bool disabled;		/* EPOLLONESHOT fired, awaiting EPOLL_CTL_MOD */
	bool connecting; /* registered while a non-blocking connect ran: its
			  * eventfd, not channels, is in the inner set */
	/* An armed look found it with nothing to report: it waits in the
	 * idle part of ep_set.m[], which looks skip, until a note of its
	 * socket (xs_sock_notes()) or a readable channel fd of it wakes it
	 * (ep_wake()); what could change it arrives on its armed CQ and
	 * makes a channel fd readable, or is noted. */
	bool idle;
	struct ep_member *sib;	  /* the next member of the same socket */
	int nfds;		  /* chan_fd[] entries; -1: not learnt yet */
	int chan_fd[XS_POLL_FDS]; /* its socket's channel fds, in order */
	size_t idx;		  /* its place in ep_set.m[] */
	UT_hash_handle hh;	  /* in ep_set.by_fd, keyed by fd */
};

struct ep_sref; /* core/epoll.c's: member counts by socket */
struct ep_chan; /* core/epoll.c's: a channel fd's socket */

struct ep_set {
	pthread_mutex_t lock; /* before any core/ lock: core/xs_core.h */
	int inner;	      /* private epoll fd: the members' channel fds */
	/* nr members, each m[i]->idx = i: the awake ones first (nr_awake,
	 * in no order), which looks look at, then the idle ones */
	struct ep_member **m;
	size_t nr, nr_awake, cap;
	unsigned long notes;	 /* the next note to read (xs_sock_notes()) */
	struct ep_chan *by_chan; /* channel fd -> its socket (uthash) */
	bool chan_lossy; /* by_chan lost an entry (no memory): a readable
			  * channel fd wakes every member */
	struct ep_member *by_fd; /* the members by fd (uthash): O(1) ctl */
	struct ep_sref *by_sock; /* member counts by socket (uthash) */
	size_t cursor; /* where the next collection starts (round robin) */
	/* nesting: the epoll fd inside poll/select or another epoll set */
	int nest;      /* eventfd in the inner set: readable = a member ready */
	bool nest_set; /* its counter is non-zero */
	bool nested; /* seen inside another wait: keep nest exact, CQs armed */
	bool in_app; /* the inner set is in the application's set */
	/* ...and its epoll_ctl() succeeded: the application's set reports
	 * the inner one ready while a channel fd is readable, so one look
	 * at the kernel's fds tells whether the inner set has any */
	bool inner_told;
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
	/* ep_ctl_wake() made the nest eventfd readable (ep->lock): a wait
	 * that saw another count before its look looks again instead of
	 * clearing it and sleeping */
	unsigned long ctl_marks;
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

/* threads of the process in a kernel wait on a set that had no members
 * when it began (ep_kernel_wait()): while there are any, an epoll_ctl()
 * that makes a member ready marks its set's nest eventfd, which wakes
 * such a wait on that set (core/epoll_wait.c) */
extern atomic_int ep_kernel_waiters;

/* core/epoll.c */
struct ep_set *ep_lookup(int epfd);
struct ep_set *ep_hold(int epfd);
void ep_put(struct ep_set *ep);
struct xs_sock *ep_member_sock(struct ep_member *m);
void ep_nest_mark(struct ep_set *ep, bool ready);
void ep_nest_kicks(struct ep_set *ep);
/* ep_in_mark() - kernel fd @fd is inside another wait (an epoll set,
 * poll, select): an epoll set made on it later is nested from the start,
 * until the fd is closed (xs_poll_fd_closed()) or made anew by
 * epoll_create (xs_epoll_created()). @make: allocate the marks if there
 * are none (not from poll or select, which a signal handler may call:
 * the library's init made them). Lock-free. */
void ep_in_mark(int fd, bool make);
void ep_settle(int epfd, struct ep_set *ep);
void ep_wake(struct ep_set *ep, struct ep_member *m);
void ep_wake_news(struct ep_set *ep, const struct epoll_event *chan, int nchan,
		  bool all);
void ep_rest(struct ep_set *ep);

#endif /* XS_CORE_EPOLL_INT_H */
