/*
 * core/sock.c - stream socket objects.
 *
 * Owns struct xs_sock (type-stable, refcounted), its kind and fallback
 * reason, its life after close (lingering streams, the reaper, the probe
 * thread, exit) and across fork(), and the negative cache of peers that
 * refused RDMA. The control calls that choose between RDMA and kernel TCP
 * (connect, listen, accept) are core/sock_connect.c's. It does not own the
 * fd table (core/fdtab.c) nor the RDMA data path.
 * Context: any thread; s->lock is taken after fdtab.lock, never before.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"
#include "stats.h"
#include "sock_int.h"
#include "stream.h"

/* How long close() lets queued bytes drain to the peer (cf. the kernel's
 * FIN_WAIT; sends complete in microseconds unless the link is dead). */
#define SOCK_CLOSE_DRAIN_MS 5000

/*
 * Destinations where RDMA setup failed, remembered XSOCK_RDMA_RETRY_MS so
 * a server without xsock costs one rdma_cm attempt, not one per connect
 * (cf. SMC-R's fallback, which retries every time). A small array with
 * oldest-first replacement: it only ever holds the few peers that
 * refused.
 */
#define SOCK_NEG_SLOTS 64

struct sock_neg {
	uint8_t addr[16]; /* IPv4 as a mapped IPv6 address */
	uint16_t port;
	int reason;	 /* enum xs_fallback_reason to report */
	uint64_t expiry; /* xs_now_us(); 0: free */
};

/*
 * close() never waits for the peer, as the kernel's does not (unless
 * SO_LINGER {1, N} asks it to, see sock_close_stream()): a stream
 * whose last bytes and FIN are still in flight lingers on this list, and
 * is released by later calls (sock_linger_reap) or at exit, after
 * SOCK_CLOSE_DRAIN_MS at most. The HCA delivers the bytes meanwhile on
 * its own. sock_live lists this process's open RDMA sockets, so exit()
 * can close them gracefully as the kernel closes a dying process's fds.
 *
 * A process that goes quiet after its last close() makes no later call:
 * its lingering streams would keep their QP, cm_id and channel fds for
 * good (the kernel's timers free a socket in LAST_ACK). So while any
 * stream lingers, a helper thread (xsock-linger, signals blocked) reaps
 * them, napping 0.2 to 20 ms between looks, and exits once none is left.
 */
struct sock_linger {
	struct xs_stream *st;
	uint64_t deadline; /* xs_now_us() */
	struct sock_linger *next;
};

static pthread_mutex_t sock_linger_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sock_linger *sock_lingering; /* protected by the lock */
static atomic_uint sock_nr_lingering;
static atomic_bool sock_reaper_running; /* the xsock-linger thread is up */
static atomic_bool sock_reaper_stop;	/* exit(): reap no more */
static struct xs_sock *sock_live;	/* protected by sock_linger_lock */
static bool sock_probe_running; /* sock_probe_main(); sock_linger_lock */
static bool sock_probe_stopped; /* at exit; sock_linger_lock */
/* Wake the probe thread when a child's move channel joins its poll set:
 * while it has none it naps on sock_probe_cond (no fd spent on it by a
 * process that never forks with RDMA connections), then in a poll(2)
 * that sock_probe_evfd, made at the first fork that makes a channel,
 * wakes. */
static _Atomic int sock_probe_evfd = -1;
static pthread_mutex_t sock_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sock_probe_cond = PTHREAD_COND_INITIALIZER;
static bool sock_probe_kicked; /* sock_probe_lock */

/* Sockets of ours between the two halves of their last close (see
 * xs_sock_put()), which another thread may run while the process exits:
 * a negotiation's reference dropped by xsock-cm after the application's
 * close. The exit summary waits for them, SOCK_TEARDOWN_WAIT_MS at most
 * (a teardown never waits on the peer: a stream still draining lingers
 * on its own). */
static atomic_uint sock_tear_starts, sock_tear_ends;
#define SOCK_TEARDOWN_WAIT_MS 200

static pthread_mutex_t sock_neg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sock_neg sock_neg[SOCK_NEG_SLOTS]; /* protected by the lock */

static const struct xs_config *core_cfg;
static bool core_forked; /* set in a forked child; see xs_core_fork_child() */
unsigned int xs_fork_gen;
/* forks this process made (xs_core_atfork_parent()): a non-blocking
 * connect's worker sees whether a child may now share its socket */
static atomic_uint sock_forks;
static pid_t sock_owner_pid; /* this process: xs_core_init(), and a
				forked child's atfork handler */
__thread bool xs_forking_helper;
static __thread sigset_t core_fork_sigmask; /* mask restored after fork() */

/*
 * Type-stable memory: sockets come from mmap'ed slabs and released ones wait
 * on a free list to be reused; nothing is returned to malloc. The list's
 * lock is held with every signal blocked, and slabs come from mmap, not
 * malloc, so socket() and close() stay async-signal-safe as libc's are.
 */
#define SOCK_SLAB_BYTES (64u << 10)

static pthread_mutex_t sock_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xs_sock *sock_free_list; /* protected by sock_pool_lock */

static void sock_pool_lock_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	pthread_mutex_lock(&sock_pool_lock);
}

static void sock_pool_unlock_all(const sigset_t *old)
{
	pthread_mutex_unlock(&sock_pool_lock);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Carve a new slab onto the free list. Called with sock_pool_lock held. */
static int sock_slab_grow(void)
{
	struct xs_sock *slab;
	size_t i, n = SOCK_SLAB_BYTES / sizeof(*slab);

	slab = mmap(NULL, SOCK_SLAB_BYTES, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (slab == MAP_FAILED)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		pthread_mutex_init(&slab[i].lock, NULL);
		slab[i].next_free = sock_free_list;
		sock_free_list = &slab[i];
	}
	return 0;
}

static const char *const fallback_names[XS_FB__COUNT] = {
	[XS_FB_NONE] = "none",
	[XS_FB_MODE] = "mode",
	[XS_FB_RULE] = "rule",
	[XS_FB_LOOPBACK] = "loopback",
	[XS_FB_NO_DEVICE] = "no-device",
	[XS_FB_NO_TRANSPORT] = "no-transport",
	[XS_FB_PEER_NO_XSOCK] = "peer-no-xsock",
	[XS_FB_TIMEOUT] = "timeout",
	[XS_FB_RESOURCE] = "resource",
	[XS_FB_UNSUPPORTED] = "unsupported",
};

__thread int xs_tls_depth __attribute__((tls_model("initial-exec")));

void xs_assert_fail(const char *expr, const char *file, int line)
{
	char msg[256];
	int n;

	n = snprintf(msg, sizeof(msg), "xsock: assertion failed: %s (%s:%d)\n",
		     expr, file, line);
	if (n > 0 && xs_real.write)
		(void)!xs_real.write(STDERR_FILENO, msg,
				     (size_t)n < sizeof(msg) ? (size_t)n
							     : sizeof(msg) - 1);
	abort();
}

int xs_core_init(const struct xs_config *cfg)
{
	core_cfg = cfg;
	sock_owner_pid = getpid();
	xs_log_init(cfg);
	return 0;
}

const struct xs_config *xs_core_cfg(void)
{
	return core_cfg;
}

bool xs_sock_mine(const struct xs_sock *s)
{
	/* a socket that came without its stream (core/move.c) is its
	 * owner's; getpid() is a system call: ask only in a forked child */
	if (!s->stream)
		return false;
	return !core_forked || s->rdma_pid == getpid();
}

unsigned int xs_sock_forks(void)
{
	return atomic_load(&sock_forks);
}

void xs_core_fork_child(void)
{
	core_forked = true;
	xs_fork_gen++;
	xs_dev_fork_child();
}

/*
 * The cookies of our live RDMA connections (@moved too, or not), which a
 * child's move channel may name (malloc'ed, *@nr of them, or NULL); with
 * any, the probe thread gets the eventfd that wakes it for that channel.
 * Called with sock_linger_lock held.
 */
static uint64_t *sock_live_cookies(bool moved, size_t *nr)
{
	uint64_t *cookies;
	struct xs_sock *s;

	*nr = 0;
	for (s = sock_live; s; s = s->live_next)
		(*nr)++;
	cookies = *nr ? malloc(*nr * sizeof(*cookies)) : NULL;
	*nr = 0;
	for (s = sock_live; s && cookies; s = s->live_next)
		if (s->rdma_cookie && (moved || !atomic_load(&s->moved)))
			cookies[(*nr)++] = s->rdma_cookie;
	if (*nr && sock_probe_evfd < 0)
		sock_probe_evfd =
			xs_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	return cookies;
}

/* The move channel of the child about to be forked, for our live RDMA
 * connections (core/move.c). Called with sock_linger_lock held. */
static void sock_fork_channel(void)
{
	uint64_t *cookies;
	size_t nr;

	cookies = sock_live_cookies(true, &nr);
	xs_move_atfork_prepare(cookies, nr);
}

int xs_sock_spawn_channel(int *child)
{
	uint64_t *cookies;
	size_t nr;

	pthread_mutex_lock(&sock_linger_lock);
	cookies = sock_live_cookies(false, &nr);
	pthread_mutex_unlock(&sock_linger_lock);
	return xs_move_spawn_open(cookies, nr, child);
}

void xs_core_atfork_prepare(void)
{
	sigset_t all;

	/* Signals stay blocked until parent/child restore them (the
	 * pool lock's rule); fork() itself blocks them meanwhile too. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &core_fork_sigmask);
	/* in the lock order of core/xs_core.h: dev_lock before log_lock,
	 * which the device probe takes to log while it holds dev_lock */
	pthread_mutex_lock(&sock_pool_lock);
	pthread_mutex_lock(&sock_neg_lock);
	xs_neg_lock();
	pthread_mutex_lock(&sock_linger_lock);
	/* a child may take one of our connections over (core/move.c) */
	sock_fork_channel();
	xs_dev_lock();
	xs_log_lock();
}

void xs_core_atfork_parent(void)
{
	if (!xs_forking_helper)
		atomic_fetch_add(&sock_forks, 1);
	xs_log_unlock();
	xs_dev_unlock();
	pthread_mutex_unlock(&sock_linger_lock);
	xs_move_atfork_parent();
	xs_neg_unlock();
	pthread_mutex_unlock(&sock_neg_lock);
	pthread_mutex_unlock(&sock_pool_lock);
	pthread_sigmask(SIG_SETMASK, &core_fork_sigmask, NULL);
}

void xs_core_atfork_child(void)
{
	pid_t parent = sock_owner_pid;

	sock_owner_pid = getpid();
	/* a teardown another thread of the parent ran is not this one's */
	atomic_store(&sock_tear_ends, atomic_load(&sock_tear_starts));
	xs_log_unlock();
	xs_dev_unlock();
	/* the parent's lingering streams and open sockets are not ours */
	sock_lingering = NULL;
	atomic_store(&sock_nr_lingering, 0);
	atomic_store(&sock_reaper_running, false); /* not in this process */
	sock_live = NULL;
	sock_probe_running = false; /* threads do not survive fork() */
	xs_move_atfork_child(parent);
	pthread_mutex_init(&sock_probe_lock, NULL);
	pthread_cond_init(&sock_probe_cond, NULL);
	sock_probe_kicked = false;
	if (sock_probe_evfd >= 0) /* the parent's probe thread's */
		xs_real.close(sock_probe_evfd);
	sock_probe_evfd = -1;
	xs_watch_fork_child();
	xs_handoff_fork_child();
	pthread_mutex_unlock(&sock_linger_lock);
	xs_neg_fork_child(); /* unlocks neg_lock */
	pthread_mutex_unlock(&sock_neg_lock);
	pthread_mutex_unlock(&sock_pool_lock);
	/* The child counts its own sockets, not its parent's again. */
	xs_pub_fork_child();
	xs_wake_fork_child();
	xs_self_fork_child();
	pthread_sigmask(SIG_SETMASK, &core_fork_sigmask, NULL);
}

const char *xs_fallback_name(int reason)
{
	if (reason < 0 || reason >= XS_FB__COUNT)
		return "?";
	return fallback_names[reason];
}

bool xs_sock_wanted(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	return (domain == AF_INET || domain == AF_INET6) &&
	       base == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

struct xs_sock *xs_sock_create(int domain, int type, int protocol)
{
	struct xs_sock *s;
	sigset_t old;

	sock_pool_lock_all(&old);
	if (!sock_free_list)
		sock_slab_grow();
	s = sock_free_list;
	if (s) {
		sock_free_list = s->next_free;
		s->pub = xs_pub_take(&s->pub_own);
	}
	sock_pool_unlock_all(&old);
	if (!s)
		return NULL;
	s->next_free = NULL;
	s->incarnation++;
	s->reason = XS_FB_NONE;
	s->stream = NULL;
	s->live_next = s->live_prev = NULL;
	s->local_len = s->peer_len = 0;
	s->rdma_pid = 0;
	s->rdma_cookie = 0;
	s->prefix = NULL;
	xs_sock_move_free(s);
	atomic_store_explicit(&s->connecting, false, memory_order_relaxed);
	atomic_store_explicit(&s->connect_unseen, false, memory_order_relaxed);
	atomic_store_explicit(&s->connect_inherited, false,
			      memory_order_relaxed);
	s->connect_cookie = 0;
	s->connect_evfd = -1;
	s->connect_err = 0;
	atomic_store_explicit(&s->neg, XS_NEG_NONE, memory_order_relaxed);
	atomic_store_explicit(&s->neg_hurry, false, memory_order_relaxed);
	s->neg_expect = false;
	atomic_store_explicit(&s->neg_evfd, -1, memory_order_relaxed);
	atomic_store_explicit(&s->strip, 0, memory_order_relaxed);
	s->neg_gen = 0;
	s->listen_retry_us = 0;
	memset(&s->probe_addr, 0, sizeof(s->probe_addr));
	s->probe_pid = 0;
	atomic_store_explicit(&s->nonblock, (type & SOCK_NONBLOCK) != 0,
			      memory_order_relaxed);
	atomic_store_explicit(&s->rcvtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->sndtimeo_ms, 0, memory_order_relaxed);
	atomic_store_explicit(&s->linger_ms, XS_LINGER_OFF,
			      memory_order_relaxed);
	atomic_store_explicit(&s->keepidle_s, 0, memory_order_relaxed);
	s->domain = domain;
	s->type = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	s->protocol = protocol;
	atomic_store_explicit(&s->kind, XS_KIND_PENDING, memory_order_relaxed);
	/* Last: a stale reader's xs_sock_tryget() can succeed from here on. */
	atomic_store_explicit(&s->refcnt, 1, memory_order_release);
	xs_stats_inc(sockets);
	return s;
}

bool xs_sock_tryget(struct xs_sock *s)
{
	unsigned int n = atomic_load_explicit(&s->refcnt, memory_order_relaxed);

	while (n != 0)
		if (atomic_compare_exchange_weak_explicit(&s->refcnt, &n, n + 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return true;
	return false;
}

void xs_sock_get(struct xs_sock *s)
{
	unsigned int old =
		atomic_fetch_add_explicit(&s->refcnt, 1, memory_order_relaxed);

	XS_ASSERT(old > 0);
}

/* Release lingering streams that are drained or past their deadline.
 * Cheap when none linger; never blocks on a busy list. Context: the depth
 * raised (the xsock-linger thread, a socket's last put, sock_attach()). */
static void sock_linger_reap(void)
{
	struct sock_linger *l, *next, *keep = NULL, **tail;
	uint64_t now;

	if (!atomic_load_explicit(&sock_nr_lingering, memory_order_relaxed) ||
	    pthread_mutex_trylock(&sock_linger_lock))
		return;
	l = sock_lingering;
	sock_lingering = NULL;
	pthread_mutex_unlock(&sock_linger_lock);
	now = xs_now_us();
	for (; l; l = next) {
		next = l->next;
		if (!xs_stream_drained(l->st) && now < l->deadline) {
			l->next = keep;
			keep = l;
			continue;
		}
		xs_stream_close(l->st, 0);
		free(l->st);
		free(l);
		atomic_fetch_sub(&sock_nr_lingering, 1);
	}
	pthread_mutex_lock(&sock_linger_lock);
	for (tail = &sock_lingering; *tail; tail = &(*tail)->next)
		;
	*tail = keep;
	pthread_mutex_unlock(&sock_linger_lock);
}

/* The xsock-linger thread: reap until nothing lingers (or exit). */
static void *sock_reaper_main(void *arg)
{
	unsigned int nap_us = 200;
	XS_INSIDE(); /* a thread of ours: it closes lingering streams */

	(void)arg;
	pthread_setname_np(pthread_self(), "xsock-linger");
	for (;;) {
		while (atomic_load(&sock_nr_lingering) &&
		       !atomic_load(&sock_reaper_stop)) {
			usleep(nap_us);
			sock_linger_reap();
			if (nap_us < 20000)
				nap_us *= 2;
		}
		atomic_store(&sock_reaper_running, false);
		/* a stream that began to linger after the last look, while
		 * this thread still counted as running, is ours to reap */
		if (!atomic_load(&sock_nr_lingering) ||
		    atomic_load(&sock_reaper_stop) ||
		    atomic_exchange(&sock_reaper_running, true))
			return NULL;
	}
}

/* Start the xsock-linger thread unless it runs. Without one (no thread
 * left), later calls and exit reap, as before. */
static void sock_reaper_start(void)
{
	if (atomic_load(&sock_reaper_stop) ||
	    atomic_exchange(&sock_reaper_running, true))
		return;
	if (xs_thread_start(sock_reaper_main, NULL, 256u << 10, NULL))
		atomic_store(&sock_reaper_running, false);
}

/*
 * Close @st as close(2) does (inet_release, tcp_close): FIN after the
 * data, never waiting; the bytes are delivered from the lingering list.
 * Data received and never read resets the connection instead (RESET, cf.
 * the RST of tcp_close()).
 * SO_LINGER (@linger_ms, struct xs_sock.linger_ms) changes it: {1, 0}
 * resets the connection (RESET, cf. RST) and only lingers until that has
 * left; {1, N} waits up to N s for delivery first (a signal ends the
 * wait), then lingers as usual.
 */
static void sock_close_stream(struct xs_stream *st, int linger_ms)
{
	struct sock_linger *l;

	/* tcp_close(): data the application never read resets the
	 * connection, as SO_LINGER {1, 0} does */
	if (linger_ms == 0 || xs_stream_unread(st)) {
		xs_stream_abort(st);
	} else {
		xs_stream_shutdown(st, SHUT_WR);
		if (linger_ms != XS_LINGER_OFF)
			xs_stream_linger(st, linger_ms);
	}
	if (!xs_stream_drained(st) && (l = malloc(sizeof(*l)))) {
		l->st = st;
		l->deadline = xs_now_us() + SOCK_CLOSE_DRAIN_MS * 1000u;
		pthread_mutex_lock(&sock_linger_lock);
		l->next = sock_lingering;
		sock_lingering = l;
		atomic_fetch_add(&sock_nr_lingering, 1);
		pthread_mutex_unlock(&sock_linger_lock);
		sock_reaper_start();
		return;
	}
	xs_stream_close(st, SOCK_CLOSE_DRAIN_MS); /* drained: at once */
	free(st);
}

static void sock_live_unlink(struct xs_sock *s)
{
	pthread_mutex_lock(&sock_linger_lock);
	if (s->live_prev)
		s->live_prev->live_next = s->live_next;
	else if (sock_live == s)
		sock_live = s->live_next;
	if (s->live_next)
		s->live_next->live_prev = s->live_prev;
	s->live_next = s->live_prev = NULL;
	pthread_mutex_unlock(&sock_linger_lock);
}

struct xs_sock *xs_sock_live_find(uint64_t cookie)
{
	struct xs_sock *s;

	pthread_mutex_lock(&sock_linger_lock);
	for (s = sock_live; s; s = s->live_next)
		if (s->rdma_cookie == cookie && xs_sock_tryget(s))
			break;
	pthread_mutex_unlock(&sock_linger_lock);
	return s;
}

/*
 * At exit: every live RDMA connection that a child forked after it went
 * live may still hold moves to its kernel TCP connection, the bytes that
 * came over RDMA and nobody read sent to that child (xs_sock_let_go()).
 * Outside sock_linger_lock: a move waits for the peer (move_lock first).
 */
static void sock_exit_let_go(void)
{
	struct xs_sock **v = NULL, **n, *s;
	size_t nr = 0, cap = 0, i;

	pthread_mutex_lock(&sock_linger_lock);
	for (s = sock_live; s; s = s->live_next) {
		if (atomic_load(&s->moved))
			continue;
		if (nr == cap &&
		    (n = realloc(v, (cap ? 2 * cap : 16) * sizeof(*v)))) {
			v = n;
			cap = cap ? 2 * cap : 16;
		}
		if (nr < cap && xs_sock_tryget(s))
			v[nr++] = s;
	}
	pthread_mutex_unlock(&sock_linger_lock);
	for (i = 0; i < nr; i++) {
		(void)xs_sock_let_go(v[i], -1, true);
		xs_sock_put(v[i]);
	}
	free(v);
	xs_move_exit_push();
}

void xs_core_exit(void)
{
	uint64_t deadline = xs_now_us() + SOCK_CLOSE_DRAIN_MS * 1000u;
	struct sock_linger *l;
	struct xs_sock *s;
	bool pending;
	XS_INSIDE(); /* atexit: FINs, resets and CQ polls on every stream */

	/* A child that shares our memory without fork() (clone(CLONE_VM):
	 * no atfork handler ran) and _exit()s: the streams, the reaper and
	 * the probe thread are its parent's. */
	if (getpid() != sock_owner_pid)
		return;
	/* bytes taken over from another process and not read go back */
	xs_move_exit();
	/* connections a child may still hold go on over kernel TCP */
	sock_exit_let_go();

	/* The reaper stops within one nap (20 ms at most) and a pass: from
	 * here on only this thread closes streams. */
	atomic_store(&sock_reaper_stop, true);
	while (atomic_load(&sock_reaper_running) && xs_now_us() < deadline)
		usleep(200);
	/* The kernel closes a dying process's sockets gracefully: so do we.
	 * No probe from here on: the verbs libraries' destructors follow. */
	pthread_mutex_lock(&sock_linger_lock);
	sock_probe_stopped = true;
	for (s = sock_live; s; s = s->live_next)
		if (atomic_load(&s->linger_ms) == 0 ||
		    xs_stream_unread(s->stream))
			xs_stream_abort(s->stream); /* tcp_close() does too */
		else
			xs_stream_shutdown(s->stream, SHUT_WR);
	pthread_mutex_unlock(&sock_linger_lock);
	do {
		pending = false;
		pthread_mutex_lock(&sock_linger_lock);
		for (s = sock_live; s && !pending; s = s->live_next)
			pending = !xs_stream_drained(s->stream);
		for (l = sock_lingering; l && !pending; l = l->next)
			pending = !xs_stream_drained(l->st);
		pthread_mutex_unlock(&sock_linger_lock);
		if (pending)
			usleep(200);
	} while (pending && xs_now_us() < deadline);
	/* the drained lingering streams go now, not with the process: the
	 * exit summary that follows counts the pool they gave back */
	sock_linger_reap();
}

/*
 * The timers of TCP that an fd whose connection is a QP does not get from
 * the kernel: the keepalive timer (SO_KEEPALIVE) and the persist timer (a
 * sender waiting on a silent peer). Once a second this thread hands every
 * live RDMA socket to xs_stream_probe(), which probes a peer that owes
 * this side something, or has been idle for TCP_KEEPIDLE with keepalive
 * on; a second is the granularity of TCP_KEEPIDLE itself. Started by the
 * first RDMA connection; runs until the process exits (a forked child
 * starts its own).
 */
void xs_sock_probe_kick(void)
{
	uint64_t one = 1;

	if (sock_probe_evfd >= 0)
		(void)!xs_real.write(sock_probe_evfd, &one, sizeof(one));
	pthread_mutex_lock(&sock_probe_lock);
	sock_probe_kicked = true;
	pthread_cond_signal(&sock_probe_cond);
	pthread_mutex_unlock(&sock_probe_lock);
}

/* Kernel connections found ended (core/watch.c) taken per look; more
 * wait for the next. */
#define SOCK_PROBE_ENDED 64

/* Between two looks, a stream whose reader makes no call while its peer
 * sends is looked at again this soon (µs): its peer then waits at most
 * this long for the window it filled, not a second. 10 ms, a 100 Hz
 * tick: its cost, a CQ poll per live stream, is paid only then. */
#define SOCK_PROBE_TAKE_IN_US 10000u

/*
 * The probe thread: once a second, a look at every live stream (silence,
 * keepalive, its kernel TCP connection's end), and every
 * SOCK_PROBE_TAKE_IN_US one that takes arrivals in while a look found some
 * unread; meanwhile it answers the channels through which the children
 * forked since ask for the move of one of our connections (core/move.c).
 */
static void *sock_probe_main(void *arg)
{
	uint64_t now, next = xs_now_us() + 1000000u, v, ended[SOCK_PROBE_ENDED];
	uint64_t until, take_in = UINT64_MAX;
	size_t cap = 0, n, i, nr_ended;
	struct pollfd *p = NULL;
	struct xs_sock *s;
	int idle, wait_ms;
	bool full, more;
	XS_INSIDE(); /* a thread of ours, for good: it probes streams */

	(void)arg;
	for (;;) {
		now = xs_now_us();
		until = take_in < next ? take_in : next;
		wait_ms = until > now ? (int)((until - now + 999u) / 1000u) : 0;
		n = 1 + xs_move_poll_fds(&p, &cap, 1);
		if (n == 1 || cap < 1) { /* no channel, or no memory */
			n = 0;
			xs_thread_nap(&sock_probe_lock, &sock_probe_cond,
				      &sock_probe_kicked, wait_ms);
		} else {
			p[0] = (struct pollfd){ .fd = sock_probe_evfd,
						.events = POLLIN };
		}
		if (n && xs_real.poll(p, (nfds_t)n, wait_ms) > 0) {
			if (p[0].revents)
				(void)!xs_real.read(sock_probe_evfd, &v,
						    sizeof(v));
			for (i = 1; i < n; i++)
				if (p[i].revents)
					xs_move_serve(p[i].fd);
		}
		now = xs_now_us();
		full = now >= next;
		if (!full && now < take_in)
			continue;
		if (full)
			next = now + 1000000u;
		nr_ended = full ? xs_watch_ended(ended, SOCK_PROBE_ENDED) : 0;
		more = false;
		pthread_mutex_lock(&sock_linger_lock);
		for (s = sock_probe_stopped ? NULL : sock_live; s;
		     s = s->live_next) {
			if (!full) {
				more |= xs_stream_take_in(s->stream);
				continue;
			}
			for (i = 0; i < nr_ended; i++)
				if (ended[i] == s->rdma_cookie)
					xs_stream_kernel_ended(s->stream);
			idle = atomic_load_explicit(&s->keepidle_s,
						    memory_order_relaxed);
			more |= xs_stream_probe(s->stream, now,
						(uint64_t)idle * 1000000u);
		}
		pthread_mutex_unlock(&sock_linger_lock);
		take_in = more ? now + SOCK_PROBE_TAKE_IN_US : UINT64_MAX;
	}
	return NULL;
}

/* Start the probe thread unless it runs. Context: sock_linger_lock held. */
static void sock_probe_start_locked(void)
{
	int rc;

	if (sock_probe_running)
		return;
	rc = xs_thread_start(sock_probe_main, NULL, 0, "xsock-probe");
	if (rc == 0)
		sock_probe_running = true;
	else
		xs_log_once(XS_LOG_WARN, "sock",
			    "no probe thread (%s): a silent peer is found "
			    "only by the WRs in flight to it",
			    strerror(-rc));
}

void xs_sock_live_sum(struct xs_shm_counters *sum)
{
	struct xs_sock *s;

	pthread_mutex_lock(&sock_linger_lock);
	for (s = sock_live; s; s = s->live_next)
		xs_pub_sum(sum, s->pub);
	pthread_mutex_unlock(&sock_linger_lock);
}

/*
 * Release the RDMA objects of a socket whose last fd is gone. A forked
 * child only frees its copy of the memory: the verbs and rdma_cm objects
 * are its parent's (shared kernel context).
 */
static void sock_teardown(struct xs_sock *s)
{
	bool mine;

	if (s->connect_evfd >= 0) {
		xs_real.close(s->connect_evfd);
		s->connect_evfd = -1;
	}
	/* the probe listener goes with the kernel listener, wherever the
	 * family holds that last (core/helper.c) */
	s->probe_addr.ss_family = 0;
	xs_sock_move_release(s); /* bytes taken over, not read: back */
	xs_sock_move_free(s);
	if (!s->stream)
		return;
	mine = xs_sock_mine(s);
	if (s->stream) {
		if (mine) {
			sock_live_unlink(s);
			xs_stream_unpublish(s->stream);
			sock_close_stream(s->stream,
					  atomic_load(&s->linger_ms));
		} else {
			xs_stream_abandon(s->stream);
			free(s->stream);
		}
		s->stream = NULL;
	}
	if (mine)
		sock_linger_reap();
}

void xs_sock_close_failed(struct xs_sock *s, int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	int err = errno;

	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved) ||
	    !xs_sock_mine(s) || !xs_stream_failed(s->stream))
		return;
	(void)xs_real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	errno = err;
}

void xs_sock_put(struct xs_sock *s)
{
	unsigned int refs;
	sigset_t old;

	if (!s)
		return;
	refs = atomic_fetch_sub_explicit(&s->refcnt, 1, memory_order_acq_rel);
	XS_ASSERT(refs > 0);
	if (refs != 1)
		return;

	XS_INSIDE(); /* the last reference: QP, CQ, ids and MRs go */
	xs_self_del(s);
	if (xs_sock_kind(s) == XS_KIND_PENDING)
		xs_stats_inc(decided[XS_KIND_PENDING]); /* closed undecided */
	/* from its unlink off sock_live to its counters in the closed
	 * ones, the exit summary would count it nowhere */
	atomic_fetch_add(&sock_tear_starts, 1);
	sock_teardown(s);
	sock_pool_lock_all(&old);
	xs_pub_give(s->pub, &s->pub_own);
	s->pub = NULL;
	s->next_free = sock_free_list;
	sock_free_list = s;
	sock_pool_unlock_all(&old);
	atomic_fetch_add(&sock_tear_ends, 1);
}

unsigned int xs_sock_teardowns_wait(void)
{
	uint64_t deadline = xs_now_us() + SOCK_TEARDOWN_WAIT_MS * 1000u;
	unsigned int starts;

	while ((starts = atomic_load(&sock_tear_starts)) !=
		       atomic_load(&sock_tear_ends) &&
	       xs_now_us() < deadline)
		usleep(200);
	return starts;
}

unsigned int xs_sock_teardowns(void)
{
	return atomic_load(&sock_tear_starts);
}

enum xs_fallback_reason xs_sock_reason(struct xs_sock *s)
{
	int reason;

	pthread_mutex_lock(&s->lock);
	reason = s->reason;
	pthread_mutex_unlock(&s->lock);
	return (enum xs_fallback_reason)reason;
}

/* A slot address (core/xs_shm.h) from @sa: AF_INET or AF_INET6, else
 * none (family 0). */
static void sock_pub_addr(struct sockaddr_in6 *dst, const struct sockaddr *sa,
			  socklen_t len)
{
	memset(dst, 0, sizeof(*dst));
	if (!sa)
		return;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		memcpy(dst, sa, sizeof(struct sockaddr_in));
	else if (sa->sa_family == AF_INET6 && len >= sizeof(*dst))
		memcpy(dst, sa, sizeof(*dst));
}

/*
 * Addresses of a socket the kernel carries, for xsock-stat: the local one
 * from getsockname(2), the peer @peer (as connect() gave it) or, when
 * NULL, from getpeername(2). errno is kept.
 */
void sock_pub_kernel_addrs(struct xs_sock *s, int fd,
			   const struct sockaddr *peer, socklen_t peer_len)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int err = errno;

	if (xs_real.getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		sock_pub_addr(&s->pub->local, (struct sockaddr *)&ss, len);
	if (!peer) {
		len = sizeof(ss);
		if (xs_real.getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
			sock_pub_addr(&s->pub->peer, (struct sockaddr *)&ss,
				      len);
	} else {
		sock_pub_addr(&s->pub->peer, peer, peer_len);
	}
	errno = err;
}

void xs_sock_set_fd(struct xs_sock *s, int fd)
{
	s->pub->fd = fd;
}

/*
 * Legal kind transitions; everything else is a bug:
 *   PENDING -> TCP | LISTEN | RDMA      (transport chosen)
 *   TCP     -> LISTEN                   (listen after a failed connect)
 *   X       -> X                        (no change)
 */
void sock_set_kind(struct xs_sock *s, enum xs_fd_kind kind, int reason)
{
	enum xs_fd_kind old = xs_sock_kind(s);
	bool gone = reason == XS_NEG_PEER_GONE; /* counted undecided */

	XS_ASSERT(old == kind || old == XS_KIND_PENDING ||
		  (old == XS_KIND_TCP && kind == XS_KIND_LISTEN));
	if (old == kind)
		return;
	if (gone)
		reason = XS_FB_NONE;
	s->reason = reason;
	s->pub->kind = (uint8_t)kind;
	s->pub->reason = (uint8_t)reason;
	xs_stats_inc(decided[gone ? XS_KIND_PENDING : kind]);
	if (reason != XS_FB_NONE)
		xs_stats_inc(fallback[reason]);
	atomic_store_explicit(&s->kind, kind, memory_order_release);
}

int xs_copy_in(void *dst, const void *src, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)src, n };
	ssize_t r;

	if (!src)
		return -EFAULT;
	r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (r < 0 && errno != EFAULT) { /* not allowed here (seccomp) */
		memcpy(dst, src, n);
		return 0;
	}
	return r == (ssize_t)n ? 0 : -EFAULT;
}

/*
 * Copy the application's address without trusting the pointer: the kernel
 * answers EFAULT for a bad one, where reading it here would crash. The
 * copy goes through process_vm_readv(2) on ourselves, which fails cleanly.
 */
bool sock_copy_addr(const struct sockaddr *addr, socklen_t len,
		    struct sockaddr_storage *out)
{
	size_t n = len < sizeof(*out) ? len : sizeof(*out);

	memset(out, 0, sizeof(*out));
	if (len < sizeof(sa_family_t))
		return false;
	return xs_copy_in(out, addr, n) == 0;
}

static void sock_addr_as(int domain, const struct sockaddr *sa,
			 struct sockaddr_storage *out, socklen_t *len);

/* @addr as an IPv6 address (IPv4 mapped) and port, for the memory. */
static void sock_neg_key(const struct sockaddr *addr, uint8_t key[16],
			 uint16_t *port)
{
	struct sockaddr_storage ss;
	const struct sockaddr_in6 *sin6 = (const void *)&ss;
	socklen_t len;

	sock_addr_as(AF_INET6, addr, &ss, &len);
	memcpy(key, &sin6->sin6_addr, 16);
	*port = sin6->sin6_port;
}

/* The reason RDMA failed to @addr recently, or XS_FB_NONE. */
int sock_neg_lookup(const struct sockaddr *addr)
{
	uint64_t now = xs_now_us();
	int i, reason = XS_FB_NONE;
	uint8_t key[16];
	uint16_t port;

	sock_neg_key(addr, key, &port);
	pthread_mutex_lock(&sock_neg_lock);
	for (i = 0; i < SOCK_NEG_SLOTS; i++) {
		struct sock_neg *n = &sock_neg[i];

		if (n->expiry > now && n->port == port &&
		    !memcmp(n->addr, key, 16)) {
			reason = n->reason;
			break;
		}
	}
	pthread_mutex_unlock(&sock_neg_lock);
	return reason;
}

/* Remember that RDMA to @addr failed for @reason. */
void sock_neg_add(const struct sockaddr *addr, int reason)
{
	uint64_t now = xs_now_us(), ttl = core_cfg->rdma_retry_ms * 1000u;
	struct sock_neg *victim = &sock_neg[0];
	uint8_t key[16];
	uint16_t port;
	int i;

	if (ttl == 0)
		return;
	sock_neg_key(addr, key, &port);
	pthread_mutex_lock(&sock_neg_lock);
	for (i = 0; i < SOCK_NEG_SLOTS; i++) {
		struct sock_neg *n = &sock_neg[i];

		if ((n->port == port && !memcmp(n->addr, key, 16)) ||
		    n->expiry <= now) {
			victim = n;
			break;
		}
		if (n->expiry < victim->expiry)
			victim = n;
	}
	memcpy(victim->addr, key, 16);
	victim->port = port;
	victim->reason = reason;
	victim->expiry = now + ttl;
	pthread_mutex_unlock(&sock_neg_lock);
}

/*
 * Kernel TCP to @addr failed too, with @err: if that says nobody is there
 * (refused, unreachable, timed out), RDMA failed because the destination is
 * down, not because it lacks xsock; forget it, so that the first connect
 * after it comes back (a server restart) tries RDMA again.
 */
void sock_neg_forget(const struct sockaddr *addr, int err)
{
	uint8_t key[16];
	uint16_t port;
	int i;

	if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH &&
	    err != ENETUNREACH)
		return;
	sock_neg_key(addr, key, &port);
	pthread_mutex_lock(&sock_neg_lock);
	for (i = 0; i < SOCK_NEG_SLOTS; i++)
		if (sock_neg[i].port == port &&
		    !memcmp(sock_neg[i].addr, key, 16))
			sock_neg[i].expiry = 0;
	pthread_mutex_unlock(&sock_neg_lock);
}

void xs_sock_tcp_connect_failed(struct xs_sock *s, int err)
{
	if (xs_sock_kind(s) == XS_KIND_TCP && s->pub->peer.sin6_family)
		sock_neg_forget((const struct sockaddr *)&s->pub->peer, err);
}

/*
 * rdma_cm and the kernel speak of an IPv4 peer of an AF_INET6 socket
 * differently: rdma_cm wants AF_INET, the application expects a mapped
 * IPv6 address. These convert in place.
 */
void xs_sock_addr_unmap(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
		return;
	sin.sin_port = sin6->sin6_port;
	memcpy(&sin.sin_addr, &sin6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &sin, sizeof(sin));
}

/* @sa (from rdma_cm) into @out/@len, as the @domain socket shows it. */
static void sock_addr_as(int domain, const struct sockaddr *sa,
			 struct sockaddr_storage *out, socklen_t *len)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET && domain == AF_INET6) {
		const struct sockaddr_in *sin = (const void *)sa;
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = sin->sin_port;
		sin6->sin6_addr.s6_addr[10] = sin6->sin6_addr.s6_addr[11] =
			0xff;
		memcpy(&sin6->sin6_addr.s6_addr[12], &sin->sin_addr, 4);
		*len = sizeof(*sin6);
	} else if (sa->sa_family == AF_INET) {
		memcpy(out, sa, sizeof(struct sockaddr_in));
		*len = sizeof(struct sockaddr_in);
	} else {
		memcpy(out, sa, sizeof(struct sockaddr_in6));
		*len = sizeof(struct sockaddr_in6);
	}
}

/* What this process offers in its hello, from the configuration. */
void xs_sock_conn_params(struct xs_conn_params *p)
{
	memset(p, 0, sizeof(*p));
	p->credits = (uint16_t)core_cfg->recv_bufs;
	p->eager_size = (uint32_t)core_cfg->eager_limit;
	p->inline_max = (uint32_t)core_cfg->inline_max;
	p->max_rndv = XS_RNDV_MAX_REGION; /* regions we READ */
	p->timeout_ms = (int)core_cfg->connect_timeout_ms;
	p->pool_bytes = (size_t)core_cfg->pool_mb << 20;
}

/*
 * Make @s an RDMA socket around the established @c: stream, addresses,
 * kind. Ownership of @c moves here. Return: 0 or -ENOMEM.
 */
int xs_sock_attach(struct xs_sock *s, struct xs_conn *c, int fd)
{
	struct xs_stream *st = malloc(sizeof(*st));
	char peer[SOCK_ADDR_TEXT];
	int rc;

	if (!st) {
		xs_conn_destroy(c);
		return -ENOMEM;
	}
	rc = xs_stream_init(st, c);
	if (rc) {
		free(st);
		return rc;
	}
	s->local_len = sizeof(s->local);
	s->peer_len = sizeof(s->peer);
	if (fd < 0 || xs_real.getsockname(fd, (struct sockaddr *)&s->local,
					  &s->local_len) < 0)
		sock_addr_as(s->domain, rdma_get_local_addr(c->id), &s->local,
			     &s->local_len);
	if (fd < 0 || xs_real.getpeername(fd, (struct sockaddr *)&s->peer,
					  &s->peer_len) < 0)
		sock_addr_as(s->domain, rdma_get_peer_addr(c->id), &s->peer,
			     &s->peer_len);
	sock_pub_addr(&s->pub->local, (struct sockaddr *)&s->local,
		      s->local_len);
	sock_pub_addr(&s->pub->peer, (struct sockaddr *)&s->peer, s->peer_len);
	snprintf(s->pub->device, sizeof(s->pub->device), "%s",
		 ibv_get_device_name(c->id->verbs->device));
	s->pub->qp_num = c->id->qp->qp_num;
	if (fd >= 0) /* an exec'd program or fd receiver cannot follow */
		xs_handoff_put(fd, XS_HANDOFF_ELSEWHERE, 0);
	/* how a process that takes the connection over names it to us */
	s->rdma_cookie = fd >= 0 ? xs_handoff_cookie(fd) : 0;
	s->pub->setup_us = c->setup_us;
	if (fd >= 0) /* SO_RCVLOWAT set while the transport was decided */
		st->rcvlowat = xs_sock_rcvlowat(fd);
	xs_stream_publish(st, s->pub);
	st->owner = s;
	s->stream = st;
	s->rdma_pid = getpid();
	pthread_mutex_lock(&sock_linger_lock);
	s->live_prev = NULL;
	s->live_next = sock_live;
	if (sock_live)
		sock_live->live_prev = s;
	sock_live = s;
	sock_probe_start_locked();
	pthread_mutex_unlock(&sock_linger_lock);
	xs_watch_add(fd, s->rdma_cookie);
	pthread_mutex_lock(&s->lock);
	sock_set_kind(s, XS_KIND_RDMA, XS_FB_NONE);
	pthread_mutex_unlock(&s->lock);
	xs_dbg("sock", "connection with %s over rdma (%s, qp %u) in %llu us",
	       sock_peer_text(s, peer, sizeof(peer)), s->pub->device,
	       s->pub->qp_num, (unsigned long long)s->pub->setup_us);
	sock_linger_reap();
	return 0;
}
