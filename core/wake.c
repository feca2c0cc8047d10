/*
 * core/wake.c - a wake-up of its own for each thread asleep in an
 * emulated poll, select or epoll_wait.
 *
 * The channel fds of a socket (its completion channel, a CM channel of
 * its own: xs_sock_poll_fds()) are shared by every thread that waits on
 * it, and the first to wake drains them. A second thread woken by the
 * same write looks at its fds again inside poll(2), finds them quiet and
 * sleeps on, where the kernel wakes both waiters of a TCP socket
 * (sk_state_change() -> sk_wake_async(), every entry of the wait queue).
 * News that changes every waiter's answer and that no channel fd
 * announces - a shutdown() by another thread, the peer's end that the CM
 * thread read, a failure the probe thread found, a connect decided -
 * therefore goes to each sleeping thread's own eventfd, which only that
 * thread drains, with a note of the socket (xs_sock_note()) for the
 * epoll sets that look only at members with news. A socket needs no
 * eventfd of its own for it, but for an epoll set inside another wait,
 * which only the kernel wakes (struct xs_stream.kick_fd,
 * xs_sock_connect_evfd()).
 *
 * A thread registers its eventfd for the whole of an emulated wait
 * (xs_wake_enter() to xs_wake_leave()) and sleeps on it beside the channel
 * fds; xs_wake_all() writes to every registered one. A write that finds a
 * thread already past its sleep only costs its next sleep one look more.
 *
 * The table of registered threads is lock-free, so that a signal handler
 * that waits while its thread was interrupted inside a wait, and the
 * writers (under stream.lock), never block on it. A thread's eventfd lives
 * as long as the thread: its exit closes it once no writer is between its
 * look at the thread's slot (or a stream's sleeper_fd) and its write
 * (wake_writers), so a write racing with a thread's exit never reaches an
 * fd the application opened meanwhile, and threads that come and go leave
 * no fd behind.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core_int.h"
#include "log.h"

/* Threads asleep at once that get a wake-up of their own; a thread past
 * this many sleeps at most 100 ms at a time. Servers run a few threads per
 * core; 1024 leaves room for thread-per-connection ones.
 */
#define WAKE_SLOTS 1024

/* fd + 1 of each registered thread's eventfd, 0 for a free slot */
static _Atomic int wake_slot[WAKE_SLOTS];
static atomic_int wake_high; /* slots at or past this one were never used */
/* threads inside an emulated wait, registered or not, and the waits
 * outside the emulation that sleep on channel fds (xs_wake_outside()) */
static atomic_int wake_inside;
/* an epoll fd with xsock members went inside another wait (a fork keeps
 * it: the sets are the child's too) */
static atomic_bool wake_nested;

/* Writers between their look at a thread's eventfd (a slot, a stream's
 * sleeper_fd) and their write to it (xs_wake_write_begin()). */
static atomic_int wake_writers;

static pthread_once_t wake_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t wake_key;
static bool wake_key_ok;

struct waker {
	int fd;	   /* this thread's eventfd, -1 before its first wait */
	int slot;  /* its slot while registered, else -1 */
	int depth; /* waits entered (a signal handler's wait nests) */
	int holds; /* stream sleeps that left fd to their writers */
	/* a wait nested in another (a signal handler's) took a wake-up:
	 * maybe the interrupted one's, given back when the nested ends */
	bool owed;
};

static __thread struct waker wake_self __attribute__((
	tls_model("initial-exec"))) = { .fd = -1, .slot = -1, .depth = 0 };

/* A wait of this thread ended: a wake-up that a nested wait took goes
 * back to the wait it interrupted, which looks once more. */
static void wake_settle(struct waker *w)
{
	if (!w->owed)
		return;
	if (w->depth + w->holds > 0 && w->fd >= 0)
		(void)!eventfd_write(w->fd, 1);
	w->owed = false;
}

/* A thread's exit: its eventfd closed once no writer may still write it
 * (see the file comment). */
static void wake_thread_exit(void *arg)
{
	struct waker *w = arg;

	if (w->slot >= 0)
		atomic_store(&wake_slot[w->slot], 0);
	w->slot = -1;
	if (w->depth > 0) /* ended inside a wait (cancelled) */
		atomic_fetch_sub(&wake_inside, 1);
	w->depth = 0;
	if (w->fd < 0)
		return;
	/* seq_cst, after the slot's store: a writer that counted itself
	 * later finds the slot empty (and the thread asleep in no stream) */
	while (atomic_load(&wake_writers))
		sched_yield();
	xs_real.close(w->fd);
	w->fd = -1;
}

static void wake_key_init(void)
{
	wake_key_ok = pthread_key_create(&wake_key, wake_thread_exit) == 0;
}

/* This thread's eventfd, made on its first wait. Return: the fd, or -1
 * (none to be had: logged once). */
static int wake_fd(struct waker *w)
{
	int fd;

	if (w->fd >= 0)
		return w->fd;
	pthread_once(&wake_key_once, wake_key_init);
	if (!wake_key_ok)
		return -1;
	fd = xs_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (fd < 0) {
		xs_log_once(XS_LOG_WARN, "wake",
			    "eventfd: %s: a shutdown() by another thread may "
			    "wake a waiter 100 ms late",
			    strerror(errno));
		return -1;
	}
	w->fd = fd;
	pthread_setspecific(wake_key, w); /* for wake_thread_exit() */
	return fd;
}

int xs_wake_enter(void)
{
	struct waker *w = &wake_self;
	int err = errno, i, high;

	if (w->depth++ > 0)
		return w->slot >= 0 ? w->fd : -1;
	atomic_fetch_add(&wake_inside, 1);
	if (wake_fd(w) < 0) {
		errno = err;
		return -1;
	}
	for (i = 0; i < WAKE_SLOTS; i++) {
		int expect = 0;

		if (atomic_compare_exchange_strong(&wake_slot[i], &expect,
						   w->fd + 1)) {
			w->slot = i;
			high = atomic_load(&wake_high);
			while (high <= i && !atomic_compare_exchange_weak(
						    &wake_high, &high, i + 1))
				;
			/* registered before the loads of the look that
			 * follows (the news counter, the notes, a stream's
			 * marks): a writer that stored them after those
			 * loads finds this slot (xs_wake_all()) */
			atomic_thread_fence(memory_order_seq_cst);
			errno = err;
			return w->fd;
		}
	}
	xs_log_once(XS_LOG_WARN, "wake",
		    "more than %d threads asleep at once: a shutdown() by "
		    "another thread may wake a waiter 100 ms late",
		    WAKE_SLOTS);
	errno = err;
	return -1;
}

void xs_wake_leave(void)
{
	struct waker *w = &wake_self;
	int slot;

	if (w->depth == 0)
		return;
	if (w->depth > 1) {
		w->depth--;
		wake_settle(w);
		return;
	}
	/* the slot goes before the depth: a signal handler's wait that
	 * comes in between registers anew, and leaves nothing behind */
	slot = w->slot;
	w->slot = -1;
	atomic_signal_fence(memory_order_seq_cst);
	if (slot >= 0)
		atomic_store(&wake_slot[slot], 0);
	w->depth = 0;
	wake_settle(w);
	atomic_fetch_sub(&wake_inside, 1);
}

void xs_wake_drain(int fd)
{
	struct waker *w = &wake_self;
	int err = errno;
	eventfd_t v;

	if (eventfd_read(fd, &v) == 0 && w->depth + w->holds > 1)
		w->owed = true;
	errno = err;
}

bool xs_wake_others(void)
{
	return atomic_load(&wake_nested) ||
	       atomic_load(&wake_inside) > (wake_self.depth > 0 ? 1 : 0);
}

int xs_wake_depth(void)
{
	return wake_self.depth;
}

void xs_wake_outside(int n)
{
	atomic_fetch_add(&wake_inside, n);
}

void xs_wake_nested(void)
{
	atomic_store(&wake_nested, true);
}

void xs_wake_write_begin(void)
{
	atomic_fetch_add(&wake_writers, 1);
}

void xs_wake_write_end(void)
{
	atomic_fetch_sub(&wake_writers, 1);
}

int xs_wake_hold(void)
{
	struct waker *w = &wake_self;
	int err = errno, fd;

	/* Inside another wait of this thread (a signal handler's call):
	 * none. Its wake-ups are that wait's, and a sleep that took one and
	 * gave it back at its end would find it again at its next turn. */
	fd = w->depth + w->holds++ > 0 ? -1 : wake_fd(w);
	errno = err;
	return fd;
}

void xs_wake_unhold(void)
{
	struct waker *w = &wake_self;

	if (w->holds > 0)
		w->holds--;
	wake_settle(w);
}

void xs_wake_all(void)
{
	int i, high, v, err = errno;

	/* the news that the caller stored before it (see xs_wake_enter()) */
	atomic_thread_fence(memory_order_seq_cst);
	xs_wake_write_begin();
	high = atomic_load(&wake_high);
	for (i = 0; i < high; i++) {
		v = atomic_load(&wake_slot[i]);
		if (v)
			(void)!eventfd_write(v - 1, 1);
	}
	xs_wake_write_end();
	errno = err;
}

void xs_wake_fork_child(void)
{
	int i;

	/* The parent's eventfds are shared with it: a drain here would take
	 * its threads' wake-ups. The child's one thread starts afresh. */
	for (i = 0; i < WAKE_SLOTS; i++)
		atomic_store(&wake_slot[i], 0);
	atomic_store(&wake_high, 0);
	atomic_store(&wake_inside, wake_self.depth > 0 ? 1 : 0);
	atomic_store(&wake_writers, 0); /* the parent's threads' writes */
	if (wake_self.fd >= 0)
		xs_real.close(wake_self.fd);
	wake_self.fd = -1;
	wake_self.slot = -1;
	wake_self.owed = false;
}
