/*
 * core/poll.c - poll/ppoll and select/pselect over mixed kernel and xsock
 * fds, and what the epoll engine (core/epoll.c) shares with them.
 *
 * Kernel fds (kernel TCP sockets included) are waited on by the kernel
 * itself, so timeouts, EINTR and sigmask handling are the kernel's own.
 * A wait that involves an RDMA socket (or a listener with an rdma_cm
 * listener) runs the hybrid backend: check xsock readiness, spin on it for
 * the waiter's window (core/spin.c, capped by XSOCK_SPIN_US), arm the CQs,
 * check again, then sleep in one real ppoll(2) over the application's
 * kernel fds and the sockets' completion and CM channel fds. Nothing is
 * lost between the check and the sleep: a completion after the arm makes
 * its channel fd readable.
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
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"
#include "fdtab.h"
#include "wait.h"

#define POLL_FOREVER UINT64_MAX
#define POLL_ALWAYS  (POLLERR | POLLHUP | POLLNVAL) /* reported unasked */

static uint64_t poll_deadline_ms(int timeout_ms)
{
	return timeout_ms < 0 ? POLL_FOREVER
			      : xs_now_us() + (uint64_t)timeout_ms * 1000u;
}

static uint64_t poll_deadline_ts(const struct timespec *ts)
{
	if (!ts)
		return POLL_FOREVER;
	return xs_now_us() + (uint64_t)ts->tv_sec * 1000000u +
	       (uint64_t)ts->tv_nsec / 1000u;
}

/* Time left to @deadline as a timespec for ppoll; NULL when forever. */
static const struct timespec *poll_left(uint64_t deadline, struct timespec *ts)
{
	uint64_t now, left;

	if (deadline == POLL_FOREVER)
		return NULL;
	now = xs_now_us();
	left = deadline > now ? deadline - now : 0;
	ts->tv_sec = (time_t)(left / 1000000u);
	ts->tv_nsec = (long)(left % 1000000u) * 1000;
	return ts;
}

/* @deadline, or @us from now when that is sooner: 1 ms for pool
 * backpressure, 100 ms for a wait without its own wake-up */
static uint64_t poll_soon(uint64_t deadline, uint64_t us)
{
	uint64_t soon = xs_now_us() + us;

	return soon < deadline ? soon : deadline;
}

/* poll(), ppoll(), select() and pselect()'s spin window: one for the
 * process (these calls have no state between them) */
static struct xs_spin poll_spin;

/*
 * Whether the application's memory behind a wait's pointer is there, as
 * the kernel's copy_from_user()/copy_to_user() would find it: a bad
 * pollfd array, fd set, epoll_event or timeval is the kernel's EFAULT
 * (the call goes to it), where touching it here would crash. A byte of
 * each page is read with process_vm_readv(2) on ourselves, which fails
 * cleanly; where the kernel writes, a byte it writes anyway is written
 * back with process_vm_writev(2): any byte of an fd set, the revents of
 * a pollfd array's first and last entry, the first byte of an epoll
 * events buffer (the kernel only checks that range, and writes the
 * events it delivers). A pollfd array is checked by the very call the
 * application made, poll(2) or ppoll(2), with a zero timeout: a seccomp
 * filter that lets the program poll lets that through too, where
 * process_vm_readv(2) may kill the process (sshd's preauth sandbox). Event
 * loops pass the same buffers every time: the last ranges found good are
 * remembered per thread. Where those calls are not allowed (a seccomp
 * filter that answers with an error but EFAULT), nothing is checked.
 */
#define USER_OK_SLOTS 8
#define USER_PAGE     4096u

static __thread struct {
	uintptr_t p;
	size_t n;
	enum user_use use;
} user_ok[USER_OK_SLOTS];
static __thread unsigned int user_ok_next;

/* A byte of each page of @n bytes at @a read (and, @write, written back).
 * Return: false for the kernel's EFAULT. */
static bool user_probe(uintptr_t a, size_t n, bool write)
{
	struct iovec local, remote[64];
	unsigned char bytes[64] = { 0 };
	uintptr_t end = a + n, page;
	unsigned int k;
	ssize_t r;

	for (page = a; page < end;) {
		for (k = 0; k < 64 && page < end; k++) {
			remote[k] = (struct iovec){ (void *)page, 1 };
			page = (page & ~(uintptr_t)(USER_PAGE - 1)) + USER_PAGE;
		}
		local = (struct iovec){ bytes, k };
		r = process_vm_readv(getpid(), &local, 1, remote, k, 0);
		if (r < 0 && errno != EFAULT)
			return true; /* not allowed here: unchecked */
		if (r != (ssize_t)k)
			return false;
		if (!write)
			continue;
		r = process_vm_writev(getpid(), &local, 1, remote, k, 0);
		if (r < 0 && errno != EFAULT)
			return true;
		if (r != (ssize_t)k)
			return false;
	}
	return true;
}

static bool user_check(uintptr_t a, size_t n, enum user_use use)
{
	const struct timespec zero = { 0, 0 };
	struct pollfd *f = (void *)a;

	switch (use) {
	case USER_READ:
		return user_probe(a, n, false);
	case USER_FDSET:
		return user_probe(a, n, true);
	case USER_POLLFD: /* revents it writes are written again later */
		return xs_real.poll(f, n / sizeof(*f), 0) >= 0 ||
		       errno != EFAULT;
	case USER_PPOLLFD:
		return xs_real.ppoll(f, n / sizeof(*f), &zero, NULL) >= 0 ||
		       errno != EFAULT;
	case USER_EVENTS:
		return user_probe(a, 1, true);
	}
	return false;
}

/* Whether @n bytes at @p are there for @use; errno as it was. */
bool xs_user_ok(const void *p, size_t n, enum user_use use)
{
	uintptr_t a = (uintptr_t)p;
	int saved = errno;
	unsigned int i;
	bool ok;

	if (!n)
		return true;
	if (!p || a + n < a)
		return false;
	for (i = 0; i < USER_OK_SLOTS; i++)
		if (user_ok[i].p == a && user_ok[i].n >= n &&
		    user_ok[i].use == use)
			return true;
	ok = user_check(a, n, use);
	if (ok) {
		i = user_ok_next++ % USER_OK_SLOTS;
		user_ok[i].p = a;
		user_ok[i].n = n;
		user_ok[i].use = use;
	}
	errno = saved;
	return ok;
}

/* The socket behind @fd when a wait must ask xsock about it, or NULL
 * (a kernel fd; an epoll fd with xsock members is readied for it). */
struct xs_sock *xs_poll_sock(int fd)
{
	struct xs_sock *s = xs_fdtab_get(fd);

	if (s) {
		xs_sock_claim(s, fd); /* this process waits on it: its I/O */
		xs_sock_take_over(s, fd);
		xs_sock_listen_poke(s, fd);
	}
	if (s && !xs_sock_polled(s)) {
		xs_sock_put(s);
		return NULL;
	}
	if (!s)
		xs_ep_nest_check(fd);
	return s;
}

/* ---------------------------------------------------------------- poll */

/*
 * Fill in the revents of the xsock entries (socks[i] != NULL); kernel
 * entries keep what they have. *@moved: an entry moved to its kernel TCP
 * connection meanwhile (its kernel fd answers from now on). Return:
 * entries with revents.
 */
static int poll_collect(struct pollfd *fds, nfds_t n, struct xs_sock **socks,
			short *kernel_revents, bool *moved, unsigned int how)
{
	unsigned int ev;
	int ready = 0;
	nfds_t i;

	for (i = 0; i < n; i++) {
		short rev = kernel_revents ? kernel_revents[i] : 0;

		if (socks[i]) {
			ev = xs_sock_poll_events(socks[i], how);
			*moved |= (ev & XS_POLL_MOVED) != 0;
			rev |= (short)(ev & (fds[i].events | POLL_ALWAYS));
		}
		fds[i].revents = rev;
		ready += rev != 0;
	}
	return ready;
}

/*
 * After a non-blocking connect of one of @socks is decided: those now
 * served by the kernel become plain entries (reference dropped). Return:
 * whether any was decided, so the wait is set up again.
 */
static bool poll_decided(const struct pollfd *fds, struct xs_sock **socks,
			 bool *connecting, nfds_t n)
{
	bool changed = false;
	nfds_t i;

	for (i = 0; i < n; i++) {
		if (!connecting[i] || xs_sock_connecting(socks[i]))
			continue;
		/* a connect done, the transport still to negotiate (one that
		 * the parent process ran): this process waits on it, so it
		 * does its I/O */
		if (xs_sock_negotiable(socks[i]) &&
		    xs_sock_claim(socks[i], fds[i].fd))
			continue;
		connecting[i] = false;
		changed = true;
		if (!xs_sock_polled(socks[i])) {
			xs_sock_put(socks[i]);
			socks[i] = NULL;
		}
	}
	return changed;
}

/*
 * The emulated wait. @socks[i] holds a reference for each xsock entry
 * (dropped here, and set to NULL, for one whose non-blocking connect falls
 * back to the kernel meanwhile). *@wake: this thread's wake-up, registered
 * (xs_wake_enter()) before the look that precedes a sleep, so a
 * shutdown() by another thread after that look always ends the sleep; a
 * wait answered at its first look makes no system call for it (a seccomp
 * sandbox may not allow eventfd(2)). Return: as poll(2).
 */
static int poll_wait(struct pollfd *fds, nfds_t n, struct xs_sock **socks,
		     uint64_t deadline, const sigset_t *sigmask, int *wake)
{
	struct pollfd *real;
	size_t *back; /* real index -> fds index, or SIZE_MAX for channels */
	short *krev;
	bool *connecting, starved, moved = false, spun = false;
	struct xs_spin_run run = { 0 };
	uint64_t now;
	struct timespec ts;
	nfds_t i, m;
	int ready, rc, k, cfds[XS_POLL_FDS];

	/* each entry: itself or its socket's XS_POLL_FDS channels */
	real = calloc((XS_POLL_FDS + 1) * n + 1, sizeof(*real));
	back = calloc((XS_POLL_FDS + 1) * n + 1, sizeof(*back));
	krev = calloc(n + 1, sizeof(*krev));
	connecting = calloc(n + 1, sizeof(*connecting));
	if (!real || !back || !krev || !connecting) {
		free(real);
		free(back);
		free(krev);
		free(connecting);
		return (int)xs_sys_ret(-ENOMEM);
	}
	for (i = 0; i < n; i++)
		connecting[i] = socks[i] && xs_sock_connecting(socks[i]);
rebuild:
	m = 0;
	memset(krev, 0, (n + 1) * sizeof(*krev));
	for (i = 0; i < n; i++) /* decided for TCP before the snapshot */
		if (socks[i] && !connecting[i] && !xs_sock_polled(socks[i])) {
			xs_sock_put(socks[i]);
			socks[i] = NULL;
		}
	/* kernel entries (and a listener's own kernel fd) as given */
	for (i = 0; i < n; i++) {
		if (socks[i] &&
		    (xs_sock_kind(socks[i]) == XS_KIND_RDMA || connecting[i]))
			continue;
		real[m] = fds[i];
		back[m++] = i;
	}
	for (i = 0; i < n; i++) {
		if (!socks[i])
			continue;
		/* no kick: this wait's own wake-up (*wake) takes its news */
		rc = xs_sock_poll_fds(socks[i], cfds, false);
		for (k = 0; k < rc; k++) {
			real[m] = (struct pollfd){ cfds[k], POLLIN, 0 };
			back[m++] = SIZE_MAX;
		}
	}
	/* a zero timeout neither spins nor learns */
	if (deadline == POLL_FOREVER) {
		xs_spin_begin(&run, &poll_spin, UINT64_MAX);
	} else if (deadline) {
		now = xs_now_us();
		xs_spin_begin(&run, &poll_spin,
			      deadline > now ? deadline - now : 0);
	}
	for (;;) {
		/* the spin's looks poll the CQs, no system call */
		ready = poll_collect(fds, n, socks, krev, &moved,
				     spun ? XS_POLL_SPIN : XS_POLL_DRAIN);
		if (!ready && moved) { /* its kernel fd answers: ask it */
			moved = false;
			goto rebuild;
		}
		if (ready || deadline == 0)
			break;
		if (xs_spin_more(&run)) {
			spun = true;
			continue;
		}
		xs_spin_stop(&run);
		if (*wake == -2)
			*wake = xs_wake_enter();
		starved = false;
		for (i = 0; i < n; i++)
			if (socks[i])
				starved |= xs_sock_poll_arm(socks[i]);
		ready = poll_collect(fds, n, socks, krev, &moved,
				     XS_POLL_DRAIN);
		if (!ready && moved) {
			moved = false;
			goto rebuild;
		}
		if (ready)
			break;
		/* this thread's own wake-up, after the channels (the spare
		 * slot of real[]) */
		real[m] = (struct pollfd){ *wake, POLLIN, 0 };
		rc = xs_real.ppoll(
			real, m + (*wake >= 0),
			poll_left(starved     ? poll_soon(deadline, 1000)
				  : *wake < 0 ? poll_soon(deadline, 100000)
					      : deadline,
				  &ts),
			sigmask);
		if (rc < 0) {
			ready = -errno;
			break;
		}
		if (*wake >= 0 && real[m].revents)
			xs_wake_drain(*wake);
		if (poll_decided(fds, socks, connecting, n))
			goto rebuild;
		for (i = 0; i < m; i++)
			if (back[i] != SIZE_MAX)
				krev[back[i]] = real[i].revents;
		if (rc == 0 && deadline != POLL_FOREVER &&
		    xs_now_us() >= deadline) {
			ready = poll_collect(fds, n, socks, krev, &moved,
					     XS_POLL_DRAIN);
			break;
		}
	}
	if (deadline && ready >= 0) /* how long the news took */
		xs_spin_end(&run, ready > 0);
	/* Kernel entries not yet looked at this round: a final peek. */
	if (ready >= 0 && m) {
		for (i = 0; i < m; i++)
			real[i].revents = 0;
		if (xs_real.poll(real, m, 0) > 0) {
			for (i = 0; i < m; i++)
				if (back[i] != SIZE_MAX)
					krev[back[i]] = real[i].revents;
			ready = poll_collect(fds, n, socks, krev, &moved,
					     XS_POLL_DRAIN);
		}
	}
	free(real);
	free(back);
	free(krev);
	free(connecting);
	return (int)xs_sys_ret(ready);
}

/*
 * poll_wait(), and errno as it was when it succeeds: a drained eventfd
 * or completion channel leaves EAGAIN in errno, which no successful
 * poll, ppoll or select of the kernel's ever shows (errno(3)).
 */
static int poll_emulated(struct pollfd *fds, nfds_t n, struct xs_sock **socks,
			 uint64_t deadline, const sigset_t *sigmask)
{
	int saved = errno, rc, wake = deadline ? -2 : -1; /* -2: not yet */

	rc = poll_wait(fds, n, socks, deadline, sigmask, &wake);
	if (wake != -2 && deadline)
		xs_wake_leave();
	if (rc >= 0)
		errno = saved;
	return rc;
}

/* Whether any of @fds needs emulation; fills @socks (NULL when none). */
static struct xs_sock **poll_socks(struct pollfd *fds, nfds_t n)
{
	struct xs_sock **socks = NULL;
	nfds_t i;

	for (i = 0; i < n; i++) {
		struct xs_sock *s = xs_poll_sock(fds[i].fd);

		if (!s)
			continue;
		if (!socks && !(socks = calloc(n, sizeof(*socks)))) {
			xs_sock_put(s);
			return NULL; /* out of memory: the kernel answers */
		}
		socks[i] = s;
	}
	return socks;
}

static void poll_put_all(struct xs_sock **socks, nfds_t n)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		xs_sock_put(socks[i]);
	free(socks);
}

static int poll_common(struct pollfd *fds, nfds_t nfds, uint64_t deadline,
		       const sigset_t *sigmask, bool ppoll, bool *handled)
{
	struct xs_sock **socks;
	int rc;

	*handled = false;
	if (!fds || nfds > xs_fdtab_size())
		return 0;
	if (!xs_user_ok(fds, nfds * sizeof(*fds),
			ppoll ? USER_PPOLLFD : USER_POLLFD))
		return 0; /* the kernel's EFAULT */
	socks = poll_socks(fds, nfds);
	if (!socks)
		return 0;
	*handled = true;
	rc = poll_emulated(fds, nfds, socks, deadline, sigmask);
	XS_SAVE_ERRNO(poll_put_all(socks, nfds));
	return rc;
}

/* poll() and __poll_chk() after its check (never through the exported
 * name, which may resolve to another library's poll first) */
int xs_poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	bool handled;
	int rc = poll_common(fds, nfds,
			     timeout_ms == 0 ? 0 : poll_deadline_ms(timeout_ms),
			     NULL, false, &handled);

	return handled ? rc : XS_CALL(poll, fds, nfds, timeout_ms);
}

/* ppoll() and __ppoll_chk() after its check */
int xs_poll_ts(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	       const sigset_t *sigmask)
{
	bool handled = false;
	int rc = 0;

	/* An invalid timeout is the kernel's EINVAL: let it answer. */
	if (!timeout || (timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 &&
			 timeout->tv_nsec < 1000000000))
		rc = poll_common(fds, nfds,
				 timeout && !timeout->tv_sec &&
						 !timeout->tv_nsec
					 ? 0
					 : poll_deadline_ts(timeout),
				 sigmask, true, &handled);
	return handled ? rc : XS_CALL(ppoll, fds, nfds, timeout, sigmask);
}

/* -------------------------------------------------------------- select */

/* The bytes of an fd set that select(@nfds) reads and writes back: the
 * kernel's FDS_BYTES(), whole longs (a program may size its sets so). */
static size_t select_set_bytes(int nfds)
{
	return (size_t)(nfds + 63) / 64 * 8;
}

/* Whether a set bit of the fd sets below @nfds is an emulated socket. */
static bool select_needed(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	struct xs_sock *s;
	size_t bytes;
	int fd;

	if (nfds <= 0 || nfds > FD_SETSIZE)
		return false;
	bytes = select_set_bytes(nfds);
	if ((r && !xs_user_ok(r, bytes, USER_FDSET)) ||
	    (w && !xs_user_ok(w, bytes, USER_FDSET)) ||
	    (e && !xs_user_ok(e, bytes, USER_FDSET)))
		return false; /* the kernel's EFAULT */
	for (fd = 0; fd < nfds; fd++) {
		if (!((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) ||
		      (e && FD_ISSET(fd, e))))
			continue;
		s = xs_poll_sock(fd);
		if (s) {
			xs_sock_put(s);
			return true;
		}
	}
	return false;
}

/* select over poll_emulated(), as the kernel maps the two (fs/select.c). */
static int select_emulated(int nfds, fd_set *r, fd_set *w, fd_set *e,
			   uint64_t deadline, const sigset_t *sigmask)
{
	struct pollfd *fds = calloc((size_t)nfds, sizeof(*fds));
	struct xs_sock **socks;
	nfds_t n = 0, i;
	int fd, rc, count = 0;
	size_t bytes;

	if (!fds)
		return (int)xs_sys_ret(-ENOMEM);
	for (fd = 0; fd < nfds; fd++) {
		short ev = 0;

		ev |= r && FD_ISSET(fd, r) ? POLLIN : 0;
		ev |= w && FD_ISSET(fd, w) ? POLLOUT : 0;
		ev |= e && FD_ISSET(fd, e) ? POLLPRI : 0;
		if (ev)
			fds[n++] = (struct pollfd){ fd, ev, 0 };
	}
	socks = poll_socks(fds, n);
	if (!socks) {
		free(fds);
		return (int)xs_sys_ret(-ENOMEM);
	}
	rc = poll_emulated(fds, n, socks, deadline, sigmask);
	XS_SAVE_ERRNO(poll_put_all(socks, n));
	if (rc >= 0) {
		for (i = 0; i < n && rc >= 0; i++) {
			if (fds[i].revents & POLLNVAL) {
				rc = (int)xs_sys_ret(-EBADF);
				break;
			}
		}
	}
	if (rc < 0) {
		free(fds);
		return rc;
	}
	/* FDS_BYTES(nfds) of each set, no more (libevent's select backend
	 * sizes its sets by nfds) */
	bytes = select_set_bytes(nfds);
	if (r)
		memset(r, 0, bytes);
	if (w)
		memset(w, 0, bytes);
	if (e)
		memset(e, 0, bytes);
	for (i = 0; i < n; i++) {
		short rev = fds[i].revents;

		if (r && (fds[i].events & POLLIN) &&
		    (rev & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(fds[i].fd, r);
			count++;
		}
		if (w && (fds[i].events & POLLOUT) &&
		    (rev & (POLLOUT | POLLERR))) {
			FD_SET(fds[i].fd, w);
			count++;
		}
		if (e && (fds[i].events & POLLPRI) && (rev & POLLPRI)) {
			FD_SET(fds[i].fd, e);
			count++;
		}
	}
	free(fds);
	return count;
}

/*
 * Linux's select() writes back the time left (select(2), "Linux"; fs/
 * select.c poll_select_finish()): none after a timeout, the rest when an
 * fd was ready first or a signal came, whatever select returned.
 */
static void select_time_left(struct timeval *timeout, uint64_t deadline)
{
	uint64_t now, left = 0;

	if (deadline) {
		now = xs_now_us();
		left = deadline > now ? deadline - now : 0;
	}
	timeout->tv_sec = (time_t)(left / 1000000u);
	timeout->tv_usec = (suseconds_t)(left % 1000000u);
}

int xs_select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	      struct timeval *timeout)
{
	uint64_t deadline = POLL_FOREVER;
	int rc;

	if (!select_needed(nfds, rfds, wfds, efds) ||
	    (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)))
		return XS_CALL(select, nfds, rfds, wfds, efds, timeout);
	if (timeout)
		deadline =
			timeout->tv_sec || timeout->tv_usec
				? xs_now_us() +
					  (uint64_t)timeout->tv_sec * 1000000u +
					  (uint64_t)timeout->tv_usec
				: 0;
	rc = select_emulated(nfds, rfds, wfds, efds, deadline, NULL);
	/* none for a zero timeout, and none where the kernel's copy would
	 * fail (it ignores that): poll_select_finish() */
	if (timeout && deadline &&
	    xs_user_ok(timeout, sizeof(*timeout), USER_FDSET))
		XS_SAVE_ERRNO(select_time_left(timeout, deadline));
	return rc;
}

int xs_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	       const struct timespec *timeout, const sigset_t *sigmask)
{
	uint64_t deadline;

	if (!select_needed(nfds, rfds, wfds, efds) ||
	    (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			 timeout->tv_nsec >= 1000000000)))
		return XS_CALL(pselect, nfds, rfds, wfds, efds, timeout,
			       sigmask);
	deadline = timeout && !timeout->tv_sec && !timeout->tv_nsec
			   ? 0
			   : poll_deadline_ts(timeout);
	return select_emulated(nfds, rfds, wfds, efds, deadline, sigmask);
}
