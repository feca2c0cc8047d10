/*
 * core/epoll_wait.c - the wait side of the epoll engine: epoll_wait,
 * epoll_pwait and epoll_pwait2 on a set with xsock members.
 *
 * A look (ep_collect()) asks the members for their readiness, draining
 * only the channel fds the inner set says are readable. A wait spins on
 * looks, then arms the members and sleeps in ppoll(2) on the
 * application's set, the inner set and this thread's wake-up eventfd;
 * a nested epoll fd's nest eventfd is left exact for its outer waiter.
 * The set table, members and epoll_ctl are core/epoll.c's, shared
 * through core/epoll_int.h.
 * Context: any thread, called by the wrappers of preload/poll.c after
 * their entry check; a set's lock is held around each look, never across
 * a sleep.
 */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"
#include "epoll_int.h"
#include "wait.h"

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

/* Channel fds learnt from the inner set per look; more ready than this
 * and every member is drained. */
#define EP_CHAN_BATCH 64

/* Which of @s's channel fds are among the @nchan readable ones, as the
 * XS_POLL_DRAIN_FD bits that drain just those (EP_CHAN_BATCH: maybe
 * more than were returned: XS_POLL_DRAIN, all of them, one bit each). */
static unsigned int ep_chan_ready(const struct ep_set *ep, struct ep_member *m,
				  struct xs_sock *s,
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
		nfds = xs_sock_poll_fds(s, m->chan_fd, ep->nested);
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
#define EP_NOARM_OK  0x20 /* an event read may leave its CQ unarmed */

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
 * Idle members (struct ep_member.idle) are not looked at: an armed look
 * found nothing to report, no note of their socket came since, and none
 * of their channel fds is known readable (ep_wake_news()). A look then
 * costs O(members with news), not O(members): one busy connection among
 * N idle ones costs the same at any N. A spin's look (no channel fds
 * read) leaves what came on their armed CQs to its next EP_SPIN_CHAN look
 * or to the armed look.
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
	ep_wake_news(ep, chan, nchan, nchan >= EP_CHAN_BATCH);
	/* the awake members only; none leaves that part during the pass
	 * (ep_rest() after it) */
	start = ep->nr_awake ? ep->cursor % ep->nr_awake : 0;
	for (seen = 0; seen < ep->nr_awake && n < max; seen++) {
		size_t i = (start + seen) % ep->nr_awake;
		struct ep_member *m = ep->m[i];
		struct xs_sock *s = ep_member_sock(m);
		uint32_t want, ready;
		unsigned int look;
		unsigned long gen;

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
		look = ep_chan_ready(ep, m, s, chan, nchan);
		if (ep->nested) /* its members' kicks are in the inner set */
			look |= XS_POLL_KICK;
		/* A look that does not arm reads a completion event without
		 * the arm that would follow (a system call on some
		 * providers), needed only before a sleep: the armed look
		 * arms. So the channel fd is quiet again, and the busy
		 * looks that follow ask the kernel's set alone. Only where
		 * ep_wait_events() allows it (EP_NOARM_OK), and not for a
		 * member that no armed look arms (disabled, or soon to be:
		 * EPOLLONESHOT): those leave the event to the armed look,
		 * and poll the CQ meanwhile. */
		if (!(how & EP_ARM) && (look & XS_POLL_DRAIN_FD(0))) {
			if ((how & EP_NOARM_OK) && !m->disabled &&
			    !(m->events & EPOLLONESHOT))
				look |= XS_POLL_NOARM;
			else
				look = (look & ~XS_POLL_DRAIN_FD(0)) |
				       XS_POLL_SPIN;
		}
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
		/* Armed, and nothing: idle until a note of its socket or a
		 * readable channel fd. The notes read before this look
		 * (ep_wake_news()): what changes during it is noted after
		 * them, and wakes it at the next look. A move (core/move.c,
		 * core/hand.c) is noted too; a moved socket's handed-over
		 * bytes are readable, so it never rests. */
		if ((how & EP_ARM) &&
		    !(ready & (want | XS_POLL_STARVED | XS_POLL_MOVED)) &&
		    xs_sock_kind(s) == XS_KIND_RDMA && xs_sock_mine(s) &&
		    !atomic_load(&s->moved))
			m->idle = true;
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
	ep_rest(ep);
	pthread_mutex_unlock(&ep->lock);
	return n;
}

/*
 * The kernel's ready entries of the application's set @epfd, without
 * the inner set's own (epoll_wait's return). The inner set is in the
 * application's (ep_nest_sync()), so the same answer says whether one of
 * its fds is readable: *@inner (may be NULL), false when it is surely
 * not (its entry absent from an answer with room to spare).
 */
static int ep_kernel(int epfd, struct epoll_event *ev, int max, bool *inner)
{
	int k = XS_CALL(epoll_wait, epfd, ev, max, 0), n;

	if (k < 0)
		return k;
	n = ep_unnest(ev, k);
	if (inner)
		*inner = n < k || k == max;
	return n;
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
	unsigned long marks = __atomic_load_n(&ep->ctl_marks, __ATOMIC_ACQUIRE);

	if (!ep->nested)
		return;
	if (!ready)
		ready = ep_collect(epfd, ep, NULL, INT_MAX, EP_PEEK | EP_ARM,
				   NULL) > 0;
	pthread_mutex_lock(&ep->lock);
	/* an epoll_ctl() since the look made a member ready */
	ep_nest_mark(ep, ready || ep->ctl_marks != marks);
	pthread_mutex_unlock(&ep->lock);
}

/* The epoll fd @epfd, which has members, is inside another wait (poll,
 * select, another epoll set): from now on it reflects their readiness. */
static void ep_nest_refresh(int epfd, struct ep_set *ep)
{
	pthread_mutex_lock(&ep->lock);
	if (!ep->nested) {
		ep->nested = true;
		ep_nest_kicks(ep); /* the kernel alone wakes its waiter */
	}
	xs_wake_nested(); /* busy looks leave it the events (before the arm
			   * in ep_nest_after()) */
	pthread_mutex_unlock(&ep->lock);
	ep_nest_after(epfd, ep, false);
}

/* @fd goes into a wait as a kernel fd: if it is an epoll fd with xsock
 * members, make it readable as the kernel's would be (see
 * ep_nest_refresh()); if it may be one without, remember it for when it
 * gets some: the kernel alone wakes that wait. */
void xs_ep_nest_check(int fd)
{
	struct ep_set *ep;

	/* marked before the look (seq_cst), as a set being made publishes
	 * itself before it looks at the mark (ep_get()) */
	ep_in_mark(fd, false);
	atomic_thread_fence(memory_order_seq_cst);
	ep = ep_lookup(fd);
	if (ep)
		ep_nest_refresh(fd, ep);
}

/* Whether @ts (NULL: none) is a zero timeout: a wait that never sleeps. */
static bool ep_ts_zero(const struct timespec *ts)
{
	return ts && !ts->tv_sec && !ts->tv_nsec;
}

/* Microseconds in @ts, and back. */
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
	uint64_t total = 0, spun, nap_us;
	bool starved, arm, slept = false, learn = false, looked = false, inner;
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
	unsigned long marks = __atomic_load_n(&ep->ctl_marks, __ATOMIC_ACQUIRE);
	bool skip_look = inner_quiet && !ep->nested && ep->idle_valid &&
			 xs_sock_news() == ep->idle_news;
	unsigned long news = 0;
	int n, nx, k;
	/* A busy look may read an event and leave its CQ unarmed only while
	 * nothing but this wait's own armed look could need the arm: not
	 * inside a wait of this thread that a signal handler interrupted
	 * (other waits: xs_wake_others(), under the stream's lock). */
	bool noarm_ok = xs_wake_depth() == (zero ? 0 : 1);

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
			k = ep_kernel(epfd, events, 1, NULL);
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
		how = (arm ? EP_ARM : 0) | (noarm_ok ? EP_NOARM_OK : 0);
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
		marks = __atomic_load_n(&ep->ctl_marks, __ATOMIC_ACQUIRE);
		/* A look at both sets asks the kernel's first: its answer
		 * tells whether the inner set has news too, so a busy set's
		 * look costs one system call, not two, and a spin's look at
		 * the inner set is the kernel's turn too. Not while a member
		 * is to be settled: one that goes to the kernel's set is
		 * looked at there after the settle. */
		k = -1;
		if (max > 1 && !kernel_quiet &&
		    (!(how & (EP_NOCHAN | EP_SPIN)) || (how & EP_SPIN_CHAN)) &&
		    __atomic_load_n(&ep->inner_told, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&ep->settle_due, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&ep->connecting, __ATOMIC_RELAXED) &&
		    (arm || (how & EP_SPIN_CHAN) ||
		     spin_looks % EP_SPIN_KERNEL_EVERY == 0)) {
			/* half the room at most: the members' share as
			 * when they are looked at first */
			k = ep_kernel(epfd, events, max / 2, &inner);
			if (k >= 0) {
				spin_looks = 1; /* the kernel's next turn */
				if (!inner)	/* no look at the inner set */
					how = (how | EP_NOCHAN) & ~EP_SPIN_CHAN;
			}
		}
		nx = ep_collect(epfd, ep, events + (k > 0 ? k : 0),
				k >= 0	  ? max - k
				: max > 1 ? max - 1
					  : max,
				how, &starved);
		looked = true;
		n = nx + (k > 0 ? k : 0);
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
		if (k < 0 && n < max && (!kernel_quiet || n) &&
		    (arm || spin_looks++ % EP_SPIN_KERNEL_EVERY == 0)) {
			k = ep_kernel(epfd, events + n, max - n, NULL);
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
		if (ep->ctl_marks != marks) {
			/* an epoll_ctl() since the look made a member ready
			 * (ep_ctl_wake()): look again, its mark left */
			pthread_mutex_unlock(&ep->lock);
			continue;
		}
		ep_nest_mark(ep, false); /* armed: news wakes outer waiters */
		pthread_mutex_unlock(&ep->lock);
		sleep_ts = timeout ? &left : NULL;
		/* pool backpressure: no fd announces a free buffer, look
		 * again within 1 ms; a thread without its own wake-up
		 * (core/wake.c) learns of news that no channel fd announces
		 * (a shutdown() elsewhere, the peer's end) within 100 ms */
		nap_us = starved ? 1000 : wake < 0 ? 100000 : 0;
		if (nap_us && (!timeout || ep_ts_us(&left) > nap_us)) {
			ep_us_ts(nap_us, &nap);
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
			ep_us_ts(ep_ts_us(&left) - (nap_us - ep_ts_us(&nap)),
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

/* Which of the kernel's calls a wait without xsock members makes: the
 * application's own (a seccomp filter may allow only that one). */
enum ep_call { EP_CALL_WAIT, EP_CALL_PWAIT, EP_CALL_PWAIT2 };

/*
 * The kernel's wait on @epfd, for a set without xsock members when the
 * call began (@timeout: NULL waits for ever). Another thread may add one
 * meanwhile (apache's event MPM: its workers add connections while its
 * listener thread waits), and the inner set then enters the application's
 * set: its event (EP_NEST_MAGIC) is ours, never the application's, which
 * would take its data for a pointer of its own. A wait that only it ended
 * goes on, emulated now, for the time left.
 */
atomic_int ep_kernel_waiters;

/* Whether @epfd has xsock members now (a kernel wait about to sleep). */
static bool ep_members_now(int epfd)
{
	struct ep_set *ep = ep_hold(epfd);
	bool some;

	if (!ep)
		return false;
	pthread_mutex_lock(&ep->lock);
	some = ep->nr > 0;
	pthread_mutex_unlock(&ep->lock);
	XS_SAVE_ERRNO(ep_put(ep));
	return some;
}

static int ep_kernel_wait(int epfd, struct epoll_event *events, int max,
			  const struct timespec *timeout,
			  const sigset_t *sigmask, enum ep_call call)
{
	uint64_t end = timeout ? xs_now_us() + ep_ts_us(timeout) : 0, now;
	struct timespec left = timeout ? *timeout : (struct timespec){ 0 };
	bool handled;
	int rc, ms;

	for (;;) {
		/* milliseconds, rounded up, as the kernel's own */
		ms = !timeout ? -1
		     : ep_ts_us(&left) / 1000u >= INT_MAX
			     ? INT_MAX
			     : (int)((ep_ts_us(&left) + 999u) / 1000u);
		atomic_fetch_add(&ep_kernel_waiters, 1);
		/* counted before the look at the set: a member added since
		 * the wait began is looked at (emulated) below, or a busy
		 * look elsewhere leaves its completion event to this sleep
		 * (xs_wake_others()) */
		xs_wake_outside(1);
		if (ep_members_now(epfd))
			rc = -2;
		else if (call == EP_CALL_PWAIT2)
			rc = xs_real.epoll_pwait2(epfd, events, max,
						  timeout ? &left : NULL,
						  sigmask);
		else if (call == EP_CALL_PWAIT)
			rc = XS_CALL(epoll_pwait, epfd, events, max, ms,
				     sigmask);
		else
			rc = XS_CALL(epoll_wait, epfd, events, max, ms);
		XS_SAVE_ERRNO(atomic_fetch_sub(&ep_kernel_waiters, 1));
		xs_wake_outside(-1);
		if (rc == -2)
			rc = 0; /* members now: emulated below */
		else if (rc <= 0 || (rc = ep_unnest(events, rc)) > 0)
			return rc;
		if (timeout) {
			now = xs_now_us();
			if (now >= end)
				return 0;
			ep_us_ts(end - now, &left);
		}
		rc = ep_wait_common(epfd, events, max, timeout ? &left : NULL,
				    sigmask, &handled);
		if (handled)
			return rc;
	}
}

/* epoll_pwait() and epoll_wait() */
static int ep_pwait(int epfd, struct epoll_event *events, int maxevents,
		    int timeout_ms, const sigset_t *sigmask, enum ep_call call)
{
	struct timespec ts = { timeout_ms / 1000,
			       timeout_ms % 1000 * 1000000L };
	bool handled = false;
	int rc = 0;

	/* epoll_wait is epoll_pwait without a mask (fs/eventpoll.c) */
	if (ep_lookup(epfd))
		rc = ep_wait_common(epfd, events, maxevents,
				    timeout_ms < 0 ? NULL : &ts, sigmask,
				    &handled);
	return handled ? rc
		       : ep_kernel_wait(epfd, events, maxevents,
					timeout_ms < 0 ? NULL : &ts, sigmask,
					call);
}

int xs_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  int timeout_ms)
{
	return ep_pwait(epfd, events, maxevents, timeout_ms, NULL,
			EP_CALL_WAIT);
}

int xs_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *sigmask)
{
	return ep_pwait(epfd, events, maxevents, timeout_ms, sigmask,
			EP_CALL_PWAIT);
}

int xs_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		    const struct timespec *timeout, const sigset_t *sigmask)
{
	bool handled = false;
	int rc = 0;

	if (!xs_real.epoll_pwait2)
		return xs_no_symbol();
	/* a timeout the kernel refuses is its EINVAL */
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			timeout->tv_nsec >= 1000000000))
		return xs_real.epoll_pwait2(epfd, events, maxevents, timeout,
					    sigmask);
	rc = ep_wait_common(epfd, events, maxevents, timeout, sigmask,
			    &handled);
	return handled ? rc
		       : ep_kernel_wait(epfd, events, maxevents, timeout,
					sigmask, EP_CALL_PWAIT2);
}
