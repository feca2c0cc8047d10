/*
 * core/xs_core.h - the only core/ header that preload/ sees.
 *
 * Socket objects, the transport decision, device probing, fork handling and
 * counters. The RDMA transport itself (QPs, pool, eager/rendezvous) plugs in
 * behind these calls.
 *
 * Lock order, for the whole library (the fd table itself is lock-free):
 *     sock.lock -> (rdma-core's own locks)
 *     sock_pool_lock, log_lock, dev_lock: leaves, held briefly, never
 *     around a call into rdma-core or the application.
 * fork(): pthread_atfork takes every leaf lock in prepare and releases it
 * in parent and child (xs_core_atfork_*).
 *
 * Return convention: 0, a byte count or a negative errno (libuv, kernel).
 * Wrappers convert with xs_sys_ret() at the boundary; errno is never the
 * internal error channel. libibverbs returns positive errnos and librdmacm
 * -1 with errno: core/ converts on the line of the call.
 */
#ifndef XS_CORE_XS_CORE_H
#define XS_CORE_XS_CORE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../config/xs_config.h"
#include "log.h"
#include "real.h"

/*
 * Reentrancy depth: above zero while control is inside libxsock (init,
 * core/, or a call into rdma-core). Every wrapper checks it first and then
 * forwards straight to libc, so rdma-core's own read/write/close/poll pass
 * through untouched and pthread_once never recurses. initial-exec: no
 * allocation on first access from a new thread.
 */
extern __thread int xs_tls_depth __attribute__((tls_model("initial-exec")));

#define XS_ASSERT(expr)                                                        \
	do {                                                                   \
		if (__builtin_expect(!(expr), 0))                              \
			xs_assert_fail(#expr, __FILE__, __LINE__);             \
	} while (0)

/**
 * xs_assert_fail() - report a broken invariant and abort(); use XS_ASSERT
 * @expr: the expression's text
 * @file: source file
 * @line: source line
 */
void xs_assert_fail(const char *expr, const char *file, int line)
	__attribute__((noreturn));

/* What an fd tracked by libxsock currently is. */
enum xs_fd_kind {
	XS_KIND_PENDING, /* stream socket, transport not chosen yet */
	XS_KIND_TCP,	 /* carried by kernel TCP: every call is passthrough */
	XS_KIND_LISTEN,	 /* listening socket */
	XS_KIND_RDMA,	 /* carried by an RC QP */
	XS_KIND__COUNT,
};

/*
 * Why a socket is carried by kernel TCP (cf. SMC's SMC_CLC_DECL_*).
 * Stored on the socket, counted per reason, printed by XSOCK_STATS.
 */
enum xs_fallback_reason {
	XS_FB_NONE,	     /* not a fallback */
	XS_FB_MODE,	     /* XSOCK_MODE=tcp */
	XS_FB_RULE,	     /* a "tcp" line of the rules file */
	XS_FB_LOOPBACK,	     /* loopback address: no RDMA device serves it */
	XS_FB_NO_DEVICE,     /* no (matching) RDMA device on this host */
	XS_FB_NO_TRANSPORT,  /* the RDMA stream transport is not available */
	XS_FB_PEER_NO_XSOCK, /* the peer came or answered over kernel TCP */
	XS_FB_TIMEOUT,	     /* RDMA connection setup timed out */
	XS_FB_RESOURCE,	     /* QP, CQ, MR or pool allocation failed */
	XS_FB_UNSUPPORTED,   /* an option or call RDMA cannot honour */
	XS_FB__COUNT,
};

/*
 * One stream socket, shared by every fd that dup() made of it (cf. a kernel
 * open file description). Memory is type-stable: objects are recycled, never
 * returned to malloc, so the fd table can read refcnt and kind without a
 * lock (SLAB_TYPESAFE_BY_RCU idea).
 */
struct xs_sock {
	atomic_uint refcnt; /* one per fd slot plus one per operation */
	atomic_int kind;    /* enum xs_fd_kind; written under lock */
	pthread_mutex_t lock;
	int reason; /* enum xs_fallback_reason; protected by lock */
	int domain, type, protocol;
	struct xs_sock
		*next_free; /* free list link; protected by sock pool lock */
};

/**
 * xs_core_init() - set up core/ once the configuration is loaded
 * @cfg: configuration; must stay valid for the life of the process
 *
 * Opens no RDMA device: devices are probed lazily, on the first socket
 * that a rule lets use RDMA.
 *
 * Context: xs_init_once() only.
 * Return: 0.
 */
int xs_core_init(const struct xs_config *cfg);

/**
 * xs_core_cfg() - the configuration given to xs_core_init()
 * Return: the configuration (never NULL after init).
 */
const struct xs_config *xs_core_cfg(void);

/**
 * xs_core_fork_child() - called in the child right after fork()
 *
 * The child shares the parent's verbs and rdma_cm kernel context; from now
 * on it never touches inherited RDMA objects (sockets made before the fork
 * fail with ECONNRESET when an RDMA path is needed) and only closes its own
 * fd numbers.
 */
void xs_core_fork_child(void);

/**
 * xs_core_atfork_prepare() - take core/'s leaf locks before fork()
 * xs_core_atfork_parent() - release them in the parent
 * xs_core_atfork_child() - release them in the child, reset its counters
 *
 * Registered with pthread_atfork() by xs_init_once().
 */
void xs_core_atfork_prepare(void);
void xs_core_atfork_parent(void);
void xs_core_atfork_child(void);

/**
 * xs_sock_wanted() - whether socket(@domain, @type, @protocol) is tracked
 * @domain:   AF_INET or AF_INET6 are candidates
 * @type:     SOCK_STREAM, possibly with SOCK_NONBLOCK/SOCK_CLOEXEC
 * @protocol: 0 or IPPROTO_TCP
 * Return: true when the socket may be carried by RDMA and is tracked.
 */
bool xs_sock_wanted(int domain, int type, int protocol);

/**
 * xs_sock_create() - a new socket object, kind PENDING, refcnt 1
 * @domain, @type, @protocol: as given to socket()
 * Return: the object, or NULL when out of memory (the fd then stays a
 *         plain untracked kernel socket).
 */
struct xs_sock *xs_sock_create(int domain, int type, int protocol);

/**
 * xs_sock_tryget() - take a reference unless the object is being freed
 * @s: socket (type-stable memory, may be recycled)
 * Return: true when a reference was taken.
 */
bool xs_sock_tryget(struct xs_sock *s);

/**
 * xs_sock_get() - take another reference; caller already holds one
 * @s: socket
 */
void xs_sock_get(struct xs_sock *s);

/**
 * xs_sock_put() - drop a reference; the last one tears the socket down
 * @s: socket; NULL is ignored
 */
void xs_sock_put(struct xs_sock *s);

/**
 * xs_sock_kind() - what the socket currently is, read without a lock
 * @s: socket
 * Return: an enum xs_fd_kind.
 */
static inline enum xs_fd_kind xs_sock_kind(const struct xs_sock *s)
{
	return (enum xs_fd_kind)atomic_load_explicit(&s->kind,
						     memory_order_acquire);
}

/**
 * xs_sock_reason() - the fallback reason recorded on the socket
 * @s: socket
 * Return: an enum xs_fallback_reason (XS_FB_NONE for RDMA or undecided).
 */
enum xs_fallback_reason xs_sock_reason(struct xs_sock *s);

/**
 * xs_fallback_name() - short name of a fallback reason ("rule", ...)
 * @reason: enum xs_fallback_reason
 * Return: a static string; "?" when out of range.
 */
const char *xs_fallback_name(int reason);

/**
 * xs_sock_connect() - connect a tracked socket
 * @s:    socket; caller holds a reference
 * @fd:   the application's fd for @s
 * @addr: destination, as given to connect()
 * @len:  size of @addr in bytes
 *
 * Chooses the transport (rules, then device) on the first connect of an
 * AF_INET/AF_INET6 address. A socket that ends up on kernel TCP calls
 * connect(2) on @fd itself, so the result is exactly the kernel's,
 * EINPROGRESS for a non-blocking socket included.
 *
 * Return: 0, or the negative errno of connect(2).
 */
int xs_sock_connect(struct xs_sock *s, int fd, const struct sockaddr *addr,
		    socklen_t len);

/**
 * xs_sock_listen() - listen on a tracked socket
 * @s:       socket; caller holds a reference
 * @fd:      the application's fd
 * @backlog: as given to listen()
 *
 * The kernel TCP listener always exists, so peers without xsock connect.
 *
 * Return: 0, or the negative errno of listen(2).
 */
int xs_sock_listen(struct xs_sock *s, int fd, int backlog);

/**
 * xs_sock_accept() - accept a connection on a tracked listener
 * @s:       listener; caller holds a reference
 * @fd:      the listener's fd
 * @addr:    peer address out, as for accept()
 * @len:     in/out size of @addr
 * @flags:   SOCK_NONBLOCK | SOCK_CLOEXEC, as for accept4()
 * @accept4: false when the application called accept(), true for accept4()
 * @child:   receives the accepted socket's object (refcnt 1), or NULL
 *           when it is not tracked (out of memory)
 *
 * Return: the new fd, or the negative errno of accept(2)/accept4(2).
 */
int xs_sock_accept(struct xs_sock *s, int fd, struct sockaddr *addr,
		   socklen_t *len, int flags, bool accept4,
		   struct xs_sock **child);

/**
 * xs_dev_available() - whether an RDMA device usable by xsock exists
 *
 * Probes ibv_get_device_list() once per process (and again in a forked
 * child), honouring XSOCK_DEVICE. rdma-core loads its providers here.
 *
 * Context: any thread; raises the reentrancy depth.
 * Return: the number of usable devices (0 when none).
 */
int xs_dev_available(void);

/**
 * xs_stats_dump() - print the XSOCK_STATS summary, if configured
 *
 * Context: atexit; errno is kept.
 */
void xs_stats_dump(void);

/**
 * xs_sys_ret() - convert an internal result to the libc convention
 * @rc: value >= 0, or a negative errno
 * Return: @rc, or -1 with errno set to -@rc.
 */
static inline long xs_sys_ret(long rc)
{
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	return rc;
}

#endif /* XS_CORE_XS_CORE_H */
