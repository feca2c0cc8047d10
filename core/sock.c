/*
 * core/sock.c - stream socket objects and the transport decision.
 *
 * Owns struct xs_sock (type-stable, refcounted), the choice between RDMA and
 * kernel TCP for each socket with its fallback reason, and the control calls
 * that make the choice: connect, listen, accept. It does not own the fd
 * table (preload/fdtab.c) nor the RDMA data path.
 * Context: any thread; s->lock is taken after fdtab.lock, never before.
 */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_int.h"
#include "stats.h"

static const struct xs_config *core_cfg;
static bool core_forked; /* set in a forked child; see xs_core_fork_child() */
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
	xs_log_init(cfg);
	return 0;
}

const struct xs_config *xs_core_cfg(void)
{
	return core_cfg;
}

void xs_core_fork_child(void)
{
	core_forked = true;
	xs_dev_fork_child();
}

void xs_core_atfork_prepare(void)
{
	sigset_t all;

	/* Signals stay blocked until parent/child restore them (the
	 * pool lock's rule); fork() itself blocks them meanwhile too. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &core_fork_sigmask);
	pthread_mutex_lock(&sock_pool_lock);
	xs_log_lock();
	xs_dev_lock();
}

void xs_core_atfork_parent(void)
{
	xs_dev_unlock();
	xs_log_unlock();
	pthread_mutex_unlock(&sock_pool_lock);
	pthread_sigmask(SIG_SETMASK, &core_fork_sigmask, NULL);
}

void xs_core_atfork_child(void)
{
	xs_dev_unlock();
	xs_log_unlock();
	pthread_mutex_unlock(&sock_pool_lock);
	/* The child counts its own sockets, not its parent's again. */
	memset(&xs_stats, 0, sizeof(xs_stats));
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
	if (s)
		sock_free_list = s->next_free;
	sock_pool_unlock_all(&old);
	if (!s)
		return NULL;
	s->next_free = NULL;
	s->reason = XS_FB_NONE;
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
	if (xs_sock_kind(s) == XS_KIND_PENDING)
		xs_stats_inc(decided[XS_KIND_PENDING]); /* closed undecided */
	sock_pool_lock_all(&old);
	s->next_free = sock_free_list;
	sock_free_list = s;
	sock_pool_unlock_all(&old);
}

enum xs_fallback_reason xs_sock_reason(struct xs_sock *s)
{
	int reason;

	pthread_mutex_lock(&s->lock);
	reason = s->reason;
	pthread_mutex_unlock(&s->lock);
	return (enum xs_fallback_reason)reason;
}

/*
 * Legal kind transitions; everything else is a bug:
 *   PENDING -> TCP | LISTEN | RDMA      (transport chosen)
 *   TCP     -> LISTEN                   (listen after a failed connect)
 *   X       -> X                        (no change)
 */
static void sock_set_kind(struct xs_sock *s, enum xs_fd_kind kind, int reason)
{
	enum xs_fd_kind old = xs_sock_kind(s);

	XS_ASSERT(old == kind || old == XS_KIND_PENDING ||
		  (old == XS_KIND_TCP && kind == XS_KIND_LISTEN));
	if (old == kind)
		return;
	s->reason = reason;
	xs_stats_inc(decided[kind]);
	if (reason != XS_FB_NONE)
		xs_stats_inc(fallback[reason]);
	atomic_store_explicit(&s->kind, kind, memory_order_release);
}

static bool sock_is_loopback(const struct sockaddr *addr, socklen_t len)
{
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const void *)addr;

		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	}
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const void *)addr;
		const uint8_t *b = sin6->sin6_addr.s6_addr;

		return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && b[12] == 127);
	}
	return false;
}

static bool sock_is_inet(const struct sockaddr *addr, socklen_t len)
{
	return addr && ((addr->sa_family == AF_INET &&
			 len >= sizeof(struct sockaddr_in)) ||
			(addr->sa_family == AF_INET6 &&
			 len >= sizeof(struct sockaddr_in6)));
}

/*
 * The transport for a socket about to connect (@role client, @addr = peer)
 * or listen (@role server, @addr = local address): XS_FB_NONE means RDMA,
 * anything else is the reason for kernel TCP. Cheapest checks first; the
 * device probe loads rdma-core's providers and runs once.
 */
static int sock_choose(enum xs_role role, const struct sockaddr *addr,
		       socklen_t len)
{
	unsigned int line;

	if (core_cfg->mode == XS_MODE_TCP)
		return XS_FB_MODE;
	switch (xs_rules_match(&core_cfg->rule_set,
			       program_invocation_short_name, role, addr, len,
			       &line)) {
	case XS_ACTION_TCP:
		xs_dbg("sock", "rule at %s:%u chooses tcp", core_cfg->rules,
		       line);
		return XS_FB_RULE;
	case XS_ACTION_RDMA:
	case XS_ACTION_NONE:
		break;
	}
	if (role == XS_ROLE_CLIENT && sock_is_loopback(addr, len))
		return XS_FB_LOOPBACK;
	if (core_forked)
		return XS_FB_RESOURCE; /* no fresh verbs context in a child yet */
	if (xs_dev_available() == 0)
		return XS_FB_NO_DEVICE;
	/* The RC QP stream transport plugs in here. */
	return XS_FB_NO_TRANSPORT;
}

/*
 * Copy the application's address without trusting the pointer: the kernel
 * answers EFAULT for a bad one, where reading it here would crash. The
 * copy goes through process_vm_readv(2) on ourselves, which fails cleanly.
 */
static bool sock_copy_addr(const struct sockaddr *addr, socklen_t len,
			   struct sockaddr_storage *out)
{
	size_t n = len < sizeof(*out) ? len : sizeof(*out);
	struct iovec local = { out, n }, remote = { (void *)addr, n };

	memset(out, 0, sizeof(*out));
	if (!addr || len < sizeof(sa_family_t))
		return false;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	       (ssize_t)n;
}

int xs_sock_connect(struct xs_sock *s, int fd, const struct sockaddr *addr,
		    socklen_t len)
{
	struct sockaddr_storage copy;
	int reason;

	if (xs_sock_kind(s) == XS_KIND_PENDING &&
	    sock_copy_addr(addr, len, &copy) &&
	    sock_is_inet((struct sockaddr *)&copy, len)) {
		reason = sock_choose(XS_ROLE_CLIENT, (struct sockaddr *)&copy,
				     len);
		pthread_mutex_lock(&s->lock);
		if (xs_sock_kind(s) == XS_KIND_PENDING)
			sock_set_kind(s, XS_KIND_TCP, reason);
		pthread_mutex_unlock(&s->lock);
		xs_dbg("sock", "fd %d connects over tcp (%s)", fd,
		       xs_fallback_name(reason));
	}
	if (xs_real.connect(fd, addr, len) < 0)
		return -errno;
	return 0;
}

int xs_sock_listen(struct xs_sock *s, int fd, int backlog)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	int reason;

	if (xs_real.listen(fd, backlog) < 0)
		return -errno;
	if (xs_sock_kind(s) == XS_KIND_LISTEN)
		return 0; /* listen() again only changes the backlog */
	if (xs_real.getsockname(fd, (struct sockaddr *)&local, &len) < 0)
		return 0; /* listening: the decision can wait for accept */
	reason = sock_choose(XS_ROLE_SERVER, (struct sockaddr *)&local, len);
	pthread_mutex_lock(&s->lock);
	sock_set_kind(s, XS_KIND_LISTEN, reason);
	pthread_mutex_unlock(&s->lock);
	xs_dbg("sock", "fd %d listens on kernel tcp only (%s)", fd,
	       xs_fallback_name(reason));
	return 0;
}

int xs_sock_accept(struct xs_sock *s, int fd, struct sockaddr *addr,
		   socklen_t *len, int flags, bool accept4,
		   struct xs_sock **child)
{
	struct xs_sock *c;
	int nfd, reason;

	*child = NULL;
	nfd = accept4 ? xs_real.accept4(fd, addr, len, flags)
		      : xs_real.accept(fd, addr, len);
	if (nfd < 0)
		return -errno;
	c = xs_sock_create(s->domain, s->type, s->protocol);
	if (!c) {
		xs_log_once(XS_LOG_WARN, "sock",
			    "out of memory: accepted fd %d left untracked",
			    nfd);
		return nfd;
	}
	/* Over the kernel listener: the peer did not use RDMA. */
	reason = xs_sock_reason(s);
	pthread_mutex_lock(&c->lock);
	sock_set_kind(c, XS_KIND_TCP,
		      reason != XS_FB_NONE && reason != XS_FB_NO_TRANSPORT
			      ? reason
			      : XS_FB_PEER_NO_XSOCK);
	pthread_mutex_unlock(&c->lock);
	*child = c;
	return nfd;
}
