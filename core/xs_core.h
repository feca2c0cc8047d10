/*
 * core/xs_core.h - the only core/ header that preload/ sees.
 *
 * Socket objects, the transport decision, device probing, fork handling and
 * counters. The RDMA transport itself (QPs, pool, eager/rendezvous) plugs in
 * behind these calls.
 *
 * Lock order, for the whole library (the fd table itself is lock-free).
 * A thread holding a lock may take only locks further down this list,
 * never one above it; no lock is held around a call into the application.
 *   1. ep_set.lock (core/epoll.c, one per emulated epoll set): held while
 *      a set's members are looked at, so around xs_sock_poll_events(),
 *      xs_sock_poll_arm() and a member's xs_sock_put() - everything below,
 *      and rdma-core - but never around the wait's sleep.
 *   1a. move_out_lock (core/move.c): the owner's one move of its own
 *      connections at a time and its channels' one writer; held around
 *      xs_stream_move_out() (up to 20 s: stream.lock, rdma-core), the
 *      handoff table's writes (handoff_lock) and a give-back.
 *   1b. move_lock (core/move.c): a process's one move at a time, held
 *      while its owner answers (up to 15 s, poll and read(2) only).
 *   2. xs_sock.lock (one per socket): its kind, reason and connect
 *      state; the connect worker takes sock_neg_lock under it. Never two
 *      sockets' at once.
 *   3. sock_pool_lock (core/sock.c, every signal blocked): the socket free
 *      list and the counters file (core/publish.c, which may log).
 *   4. sock_neg_lock (core/sock.c): the negative cache; a leaf at run time.
 *   4a. neg_lock (core/neg.c): the rendezvous listener and the tokens of
 *      negotiations; held by xsock-cm around the listener's events (QP
 *      setup: dev_lock, pool.lock, log_lock below it).
 *   5. sock_linger_lock (core/sock.c): the live and lingering lists; held
 *      around xs_stream_probe() (probe thread) and the FINs, resets and
 *      drain checks of xs_core_exit(), so over stream.lock and rdma-core.
 *   6. stream.lock (core/stream.h, one per stream): around the QP's posts
 *      and CQ polls (rdma-core, pool.lock, log_lock). The leader of a wait
 *      drops it around its poll(2), followers wait on stream.cond. Never
 *      two streams' at once.
 *   7. dev_lock (core/dev.c): the device probe and list; held around
 *      ibv_get_device_list() and the PD's allocation (rdma-core), and
 *      takes log_lock to log.
 *   8. pool.lock (core/pool.h, one per device): around the registration
 *      of a new superblock (rdma-core).
 *   9. log_lock (core/log.c): the log file's identity; a leaf.
 * move_own_lock (core/move.c: the owner's list of its children's
 * channels) is a leaf, taken with sock_linger_lock held or none.
 * ep_table_lock (core/epoll.c) is never held with another lock. The
 * pthread_once of xs_init_once() comes before all of them: the wrappers
 * that wait on it are never entered with a lock held (core/ calls none).
 * rdma-core's own locks come below any of ours that is held around it.
 * fork(): pthread_atfork takes sock_pool_lock, sock_neg_lock, neg_lock,
 * sock_linger_lock, dev_lock and log_lock in prepare, in this order, and
 * releases them in parent and child (xs_core_atfork_*). The per-object
 * locks (1, 2, 6, 8) are not taken there; the child never touches its
 * parent's streams and pools.
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
#include <sys/types.h>
#include <sys/uio.h>

#include "../config/xs_config.h"
#include "log.h"
#include "real.h"
#include "xs_shm.h"

/*
 * Reentrancy depth: above zero while this thread runs libxsock's init or
 * RDMA work (rdma-core, and the conn/stream/dev code that calls it). Every
 * wrapper checks it first and then forwards straight to libc, so
 * rdma-core's own read/write/close/poll/fcntl pass through untouched and
 * pthread_once never recurses. core/'s own libc calls need no depth: they
 * go through xs_real (XS_CALL), never through an interposed name
 * (tests/check-symbols). Changed only by XS_INSIDE(). initial-exec: no
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

/*
 * XS_INSIDE() - raise the reentrancy depth from here to the end of the
 * enclosing block. A scoped guard (the cleanup attribute): every way out
 * of the block - return, goto, break - lowers it again, so an early
 * return can neither leave the depth raised nor skip the decrement, and
 * the leave asserts that the depth is the one this guard set (and above
 * zero). Two guards in one block do not compile, and a guard nested in a
 * block of a guarded function trips -Wshadow. A goto into a guard's scope
 * skips its enter: clang rejects it, gcc warns only when optimising
 * (-Wmaybe-uninitialized), and the leave's assertion catches it at run
 * time.
 *
 * One guard per entry into the RDMA side, placed where core/ hands control
 * to it, with a comment saying why:
 *   - the xs_core.h calls that reach rdma-core: xs_sock_send (the stream
 *     call only), xs_sock_recv, xs_sock_so_error, xs_sock_shutdown and
 *     xs_sock_ioctl (past their checks and kernel-socket cases),
 *     xs_sock_listen, xs_sock_put (the last reference),
 *     xs_sock_poll_events and xs_sock_poll_arm, xs_dev_available,
 *     xs_core_exit (atexit);
 *   - inside xs_sock_connect and xs_sock_accept, the RDMA halves:
 *     sock_rdma_connect() and sock_accept_rdma();
 *   - the start function of each thread the library makes (xsock-linger,
 *     xsock-probe, the non-blocking connect's worker): the depth is per
 *     thread and a new thread starts at 0, so each raises it for its whole
 *     life. The probe thread never returns, nor leaves its guard;
 *   - xs_init_once()'s run (preload/init.c).
 * conn.c, stream.c, pool.c and xs_dev_open() are reached only from these
 * and never raise the depth themselves. tests/unit/test_depth.c pins the
 * guard's behaviour.
 *
 * Never around a kernel wait that core/ makes for a socket still on its
 * way to kernel TCP (the fallback's connect(2), accept(2), the wait for a
 * non-blocking connect's outcome) nor around raise(SIGPIPE): a signal
 * handler that runs while the depth is raised is the application's, and
 * every call it made would pass through to the kernel fd, bypassing its
 * xsock sockets. The RDMA side's own waits do run inside a guard: a
 * blocking send or recv asleep in stream_sleep() (poll(2) on the
 * completion channel, or the stream's condition variable), the rdma_cm
 * handshake of a blocking connect, and a close that lingers (SO_LINGER
 * {1, N}). A signal handler that interrupts one of those sees its xsock
 * sockets as kernel fds until it returns.
 *
 * Where no guard is needed or none can work:
 *   - callbacks from rdma-core: there are none. rdma-core reaches this
 *     library only through the interposed names, which see the depth. A
 *     thread rdma-core starts itself begins at depth 0; its fds are not in
 *     the fd table, so its calls pass through all the same.
 *   - fork(): the child's one thread inherits the forking thread's depth,
 *     0 in the fork() wrapper. xs_core_fork_child() and the atfork
 *     handlers touch no rdma-core (they take and drop locks, reset
 *     state), so they raise nothing.
 */
static inline int xs_depth_enter(void)
{
	return ++xs_tls_depth;
}

static inline void xs_depth_leave(int *entered)
{
	XS_ASSERT(*entered > 0 && xs_tls_depth == *entered);
	xs_tls_depth--;
}

#define XS_INSIDE()                                                            \
	int xs_inside_depth_                                                   \
		__attribute__((cleanup(xs_depth_leave), unused)) =             \
			xs_depth_enter()

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
struct xs_stream;
struct xs_listener;

/* struct xs_sock.neg: a connected socket whose transport its I/O
 * process negotiates over the kernel TCP connection (core/neg.c) */
enum xs_neg_role {
	XS_NEG_NONE,
	XS_NEG_SERVER, /* accepted on an xsock listener */
	XS_NEG_CLIENT, /* connected after a probe, XS_TCP_HELLO sent */
};

/* struct xs_sock.linger_ms without SO_LINGER (l_onoff = 0) */
#define XS_LINGER_OFF INT32_MIN

struct xs_sock {
	atomic_uint refcnt; /* one per fd slot plus one per operation */
	atomic_int kind;    /* enum xs_fd_kind; written under lock */
	pthread_mutex_t lock;
	int reason; /* enum xs_fallback_reason; protected by lock */
	int domain, type, protocol;
	unsigned int incarnation; /* bumped each time the object is reused */
	/* File status the kernel fd has, mirrored by the control wrappers so
	 * the RDMA data path needs no system call to learn it. */
	atomic_bool nonblock; /* O_NONBLOCK (SOCK_NONBLOCK, F_SETFL, FIONBIO) */
	atomic_int rcvtimeo_ms, sndtimeo_ms; /* SO_RCVTIMEO/SNDTIMEO, 0: none */
	atomic_int linger_ms;  /* SO_LINGER (cf. sk_lingertime): XS_LINGER_OFF,
			       * 0 (close resets), ms, or -1 (forever) */
	atomic_int keepidle_s; /* SO_KEEPALIVE on: TCP_KEEPIDLE, s; 0: off */
	/* kind RDMA: set once before the kind is published, then constant */
	struct xs_stream *stream;
	struct sockaddr_storage local, peer; /* what get{sock,peer}name say */
	socklen_t local_len, peer_len;
	pid_t rdma_pid; /* process that made the stream (fork check) */
	/* A non-blocking connect whose RDMA handshake runs on a worker
	 * thread: connecting until the outcome (kind RDMA, or kind TCP with
	 * the kernel's connect started), which wakes the waits (see
	 * xs_sock_connect_evfd(); that eventfd stays until teardown). */
	atomic_bool connecting;
	/* decided for RDMA, connect() not yet called again: it answers 0
	 * once, as the kernel's SS_CONNECTING does */
	atomic_bool connect_unseen;
	atomic_int connect_evfd;
	int connect_err; /* a fallback connect()'s immediate error (errno),
			  * reported once by SO_ERROR; protected by lock */
	/* Kind PENDING with neg set: connected over kernel TCP, the
	 * transport negotiated by the first process that does I/O
	 * (xs_sock_claim()); connecting while its worker runs. */
	atomic_int neg;	       /* enum xs_neg_role */
	atomic_bool neg_hurry; /* the application wants to send now */
	bool neg_expect;       /* server: the client probed, its hello comes */
	pid_t neg_adopter;     /* adopted after it: xs_sock_claim(); -1: TCP */
	/* xs_fork_gen and xs_sock_forks() at its accept or connect, and
	 * whether it went out with SCM_RIGHTS (xs_sock_closing()) */
	unsigned int accept_gen, accept_forks;
	atomic_bool passed;
	atomic_int neg_evfd;  /* the worker's wake-up eventfd, or -1 */
	unsigned int neg_gen; /* xs_fork_gen of the process running it */
	/* a non-blocking connect's socket (SO_COOKIE): a child forked while
	 * it ran takes the outcome from the handoff table */
	uint64_t connect_cookie;
	/* that outcome taken, its negotiation not done: connect() owes a 0 */
	atomic_bool connect_inherited;
	/* Kind TCP: 1 << XS_TCP_* of the control messages that may still
	 * lead the stream; stripped before the application reads. */
	atomic_uint strip;
	/* Kind RDMA, moved to its kernel TCP connection (core/move.c): every
	 * call is the kernel fd's, after the bytes of prefix (what came over
	 * RDMA and the owner had not read when this process took the
	 * connection over; only in the process that asked for the move). */
	atomic_bool moved;
	atomic_bool prefix_left;       /* prefix holds unread bytes */
	uint8_t *prefix;	       /* malloc'ed; lock */
	size_t prefix_len, prefix_off; /* lock */
	bool prefix_eof; /* after prefix, EOF: the peer's FIN came over RDMA */
	uint64_t rdma_cookie; /* kind RDMA: SO_COOKIE of its kernel socket */
	uint64_t listen_retry_us; /* LISTEN: next try at a probe listener */
	/* LISTEN: the address whose probes the helper answers for us, the
	 * process that asked (core/helper.c); family 0: none */
	struct sockaddr_storage probe_addr;
	pid_t probe_pid;
	struct xs_sock *live_next, *live_prev; /* this process's RDMA sockets */
	/* Counters and what xsock-stat shows: a slot of the published file
	 * (core/xs_shm.h), or pub_own without one. Set at creation. */
	struct xs_shm_slot *pub;
	struct xs_shm_slot pub_own;
	struct xs_sock
		*next_free; /* free list link; protected by sock pool lock */
};

/**
 * xs_core_init() - set up core/ once the configuration is loaded
 * @cfg: configuration; must stay valid for the life of the process
 * Opens no RDMA device: devices are probed lazily, on the first socket
 * that a rule lets use RDMA.
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
 * xs_core_exit() - at exit, deliver what RDMA sockets still hold
 * Sends FIN on every open RDMA socket of this process and waits (at most
 * 5 s) until those and the streams still lingering after close() have
 * every byte acknowledged, as the kernel closes a dying process's TCP
 * sockets gracefully; a socket with SO_LINGER {1, 0} is reset instead
 * (RESET, cf. TCP's RST), as the kernel's tcp_close() does at exit too.
 * Context: atexit.
 */
void xs_core_exit(void);

/**
 * xs_core_fork_child() - called in the child right after fork()
 *
 * The child shares the parent's verbs and rdma_cm kernel context; from now
 * on it never touches inherited RDMA objects (an RDMA socket made before
 * the fork fails with ECONNRESET when an RDMA path is needed) and only
 * closes its own fd numbers. Negotiable sockets (core/neg.c) it may claim
 * as its own.
 */
void xs_core_fork_child(void);

/**
 * xs_core_atfork_prepare() - take core/'s process-wide locks before fork(),
 *                            in the lock order above
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
 * xs_sock_set_fd() - record the fd that socket() or accept() returned for
 *                    @s, for xsock-stat
 * @s:  socket
 * @fd: its fd
 */
void xs_sock_set_fd(struct xs_sock *s, int fd);

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
 *
 * The teardown of an RDMA socket is close(2)'s: FIN after the bytes sent,
 * which keep going to the peer after the call returns. SO_LINGER {1, 0}
 * resets the connection instead (RESET, cf. TCP's RST: bytes the peer has
 * not taken are lost); {1, N} first waits up to N s for the bytes to be
 * delivered, as the kernel's inet_release() does.
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
 * Context: blocks 50 ms on a port outside the ephemeral range (the probe
 * listener's lead, core/sock_connect.c), with no lock held.
 * Return: 0, or the negative errno of listen(2).
 */
int xs_sock_listen(struct xs_sock *s, int fd, int backlog);

/**
 * xs_sock_listen_poke() - a listener that has no probe listener of its own
 *                         (inherited across fork, a second SO_REUSEPORT
 *                         one) tries to make one, once a second at most:
 *                         once the process that had it is gone (a
 *                         daemon's parent), clients probe this one
 * @s:  socket; caller holds a reference
 * @fd: its fd
 * Context: accept, poll, select and epoll_ctl call it; no system call
 *          unless a try is due.
 */
void xs_sock_listen_poke(struct xs_sock *s, int fd);

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
 * xs_sock_send() - send on an RDMA socket, as sendmsg(2) on TCP
 * @s:      socket of kind XS_KIND_RDMA; caller holds a reference
 * @fd:     its fd: the kernel's once the connection moved (core/move.c)
 * @iov:    the bytes (iovcnt and the total already validated)
 * @iovcnt: entries in @iov
 * @flags:  MSG_* flags of the call: MSG_DONTWAIT, MSG_NOSIGNAL honoured,
 *          MSG_MORE/MSG_EOR ignored as TCP does, MSG_OOB refused
 *
 * Waits per O_NONBLOCK and SO_SNDTIMEO; raises SIGPIPE on EPIPE unless
 * MSG_NOSIGNAL, as the kernel does.
 * Return: bytes queued, or -EAGAIN, -EINTR, -EPIPE, -ECONNRESET,
 *         -EOPNOTSUPP (MSG_OOB).
 */
ssize_t xs_sock_send(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags);

/**
 * xs_sock_claim() - claim a negotiable socket for this process: its
 *                   worker starts negotiating the transport
 * @s:  socket; caller holds a reference
 * @fd: an fd of it in this process
 *
 * Called by every data call, poll, select and epoll_ctl(ADD) before they
 * look at @s; a no-op unless @s is negotiable and unclaimed. @s reads as
 * connecting from here until its transport is decided.
 * Return: true when @s is connecting now (claimed here or before).
 */
bool xs_sock_claim(struct xs_sock *s, int fd);

/* struct xs_sock.strip bit: the socket's RDMA connection belongs to
 * another process (core/handoff.c); every call fails with ECONNRESET */
#define XS_STRIP_FOREIGN (1u << 31)

/**
 * xs_sock_adopt() - the socket object of @fd, a socket this process got
 *                   without its state (inherited across exec, received
 *                   with SCM_RIGHTS), when core/handoff.c recorded one
 * @fd: any fd
 * Return: a new object (refcnt 1) for the fd table, or NULL: a plain fd.
 */
struct xs_sock *xs_sock_adopt(int fd);

/**
 * xs_sock_same() - whether fds @a and @b are one socket (SO_COOKIE)
 */
bool xs_sock_same(int a, int b);

/**
 * xs_handoff_any() - whether this user's processes recorded any socket
 *                    for adoption (one open(2) until the table is mapped)
 */
bool xs_handoff_any(void);

/**
 * xs_sock_negotiable() - whether @s waits to be claimed (no system call)
 * @s: socket
 */
static inline bool xs_sock_negotiable(const struct xs_sock *s)
{
	return atomic_load_explicit(&s->neg, memory_order_relaxed) !=
	       XS_NEG_NONE;
}

/**
 * xs_sock_send_wait() - a send on @s while its transport is decided (a
 *                       server side waiting for the hello decides soon)
 * @s: socket, claimed; @nonblock: O_NONBLOCK or MSG_DONTWAIT
 * A connected kernel socket takes a first send at once, so a non-blocking
 * one waits too, XSOCK_CONNECT_TIMEOUT_MS at most (a server that writes
 * and closes loses nothing); a connect under way gives -EAGAIN at once.
 * Return: as xs_sock_connect_wait().
 */
int xs_sock_send_wait(struct xs_sock *s, bool nonblock);

/**
 * xs_sock_closing() - the application closes @fd, the last fd of @s
 *                     (xs_fdtab_held(): no other fd holds it)
 *
 * A socket that no process claimed holds its peer's hello (accepted) or
 * reply (connected) unread, and the kernel answers a close with unread
 * data with an RST where the peer, over kernel TCP, would see a FIN (an
 * accept and close: a health check; a client that connects and leaves).
 * That message is taken first, when no other process can hold the socket:
 * none forked since the accept or connect, it never went out with
 * SCM_RIGHTS, and it is close-on-exec or no exec'd image took its record.
 * Context: the close() wrapper, before the kernel's close; never blocks.
 */
void xs_sock_closing(struct xs_sock *s, int fd);

/**
 * xs_sock_passed() - @s goes to another process with SCM_RIGHTS
 */
static inline void xs_sock_passed(struct xs_sock *s)
{
	atomic_store(&s->passed, true);
}

/**
 * xs_sock_exec_bare() - @s on @fd, unclaimed, goes to an image without
 *                       xsock (an exec whose environment lost LD_PRELOAD),
 *                       which would read our control messages as data
 * Decides kernel TCP with the peer first: a server's side takes the hello
 * and answers "rdma 0" (nothing, to a fallback behind it); a client's
 * side takes the reply or sends the fallback, which a server that had not
 * looked finds behind the hello and answers nothing. Not where another
 * process claimed it or decided.
 * Context: exec and posix_spawn wrappers, before the call; blocks for the
 * peer's message, XSOCK_CONNECT_TIMEOUT_MS at most (a probe's client
 * sends its hello at once; a server answers once it looks).
 */
void xs_sock_exec_bare(struct xs_sock *s, int fd);

/**
 * xs_sock_strip() - remove control messages that may still lead the
 *                   stream of a TCP socket (s->strip) before a read
 * @s:        socket of kind TCP
 * @fd:       its fd
 * @nonblock: the read must not wait
 *
 * Context: may block (blocking reads), as recv(2) would, honouring
 * SO_RCVTIMEO.
 * Return: 0 (the application's read goes to the kernel), -EAGAIN, -EINTR,
 *         or -EPROTO (a control message that may not come here).
 */
int xs_sock_strip(struct xs_sock *s, int fd, bool nonblock);

/**
 * xs_sock_connecting() - whether a non-blocking connect's RDMA handshake
 *                        is still running on its worker thread
 * @s: socket
 */
bool xs_sock_connecting(struct xs_sock *s);

/**
 * xs_sock_connect_wait() - wait until a non-blocking connect's outcome
 *                          is known (kind RDMA or TCP)
 * @s:          socket
 * @timeout_ms: 0 never waits, -1 forever, else at most that long
 * Return: 0 when it is known (or there was none), -EAGAIN, -EINTR.
 */
int xs_sock_connect_wait(struct xs_sock *s, int timeout_ms);

/**
 * xs_sock_take_connect_err() - the errno with which the kernel's connect
 *                              refused a fallback at once (ENETUNREACH,
 *                              ...), for SO_ERROR; cleared by the call
 * @s: socket
 * Return: the errno, or 0.
 */
int xs_sock_take_connect_err(struct xs_sock *s);

/**
 * xs_sock_so_error() - getsockopt(SO_ERROR) of an RDMA socket: the reset
 *                      no call has reported yet, which it clears
 * @s: socket of kind XS_KIND_RDMA
 * Return: ECONNRESET (positive; EPIPE for a reset after the peer's FIN)
 *         once, else 0; -1 where the kernel's answer stands (moved).
 */
int xs_sock_so_error(struct xs_sock *s);

/**
 * xs_sock_keep_error() - the reset a call on RDMA socket @s just reported
 *                        (@err, a negative errno) is reported again by the
 *                        next one (see xs_stream_keep_error())
 */
void xs_sock_keep_error(struct xs_sock *s, int err);

/**
 * xs_sock_recv() - receive on an RDMA socket, as recvmsg(2) on TCP
 * @s:      socket of kind XS_KIND_RDMA; caller holds a reference
 * @fd:     its fd: the kernel's once the connection moved (core/move.c)
 * @iov:    room for the bytes
 * @iovcnt: entries in @iov
 * @flags:  MSG_DONTWAIT, MSG_PEEK, MSG_WAITALL; MSG_OOB fails as on a TCP
 *          socket without urgent data
 * Return: bytes, 0 at EOF, or -EAGAIN, -EINTR, -ECONNRESET, -EINVAL.
 */
ssize_t xs_sock_recv(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags);

/**
 * xs_sock_sendfile() - sendfile(2) onto an RDMA socket
 * @s:      socket of kind XS_KIND_RDMA; caller holds a reference
 * @fd:     its fd
 * @in_fd:  file to read
 * @offset: as for sendfile(2): NULL reads from the file position
 * @count:  bytes wanted
 * Return: bytes sent, or a negative errno of read(2) or xs_sock_send().
 */
ssize_t xs_sock_sendfile(struct xs_sock *s, int fd, int in_fd, off_t *offset,
			 size_t count);

/**
 * xs_sock_let_go() - this process lets its RDMA socket @s go: the close of
 *                    its last fd @fd here, or (@ending) its end, fd -1;
 *                    where a child forked after it went live may hold it,
 *                    it moves to kernel TCP first, what came over RDMA and
 *                    nobody read kept for the child's ask (core/move.c) or,
 *                    @ending, sent to it at once; where our parent holds it
 *                    (same fd, /proc), it moves, those bytes recorded for it
 * @s:  socket; caller holds a reference
 *
 * Context: blocks until the peer answered the move and READ our regions
 * (at most about 20 s) when another process may hold the connection; else
 * costs three system calls (the look at /proc). errno as it was.
 * Return: 0 (also: nothing to do), or a negative errno: the move failed
 *         (the connection was reset).
 */
int xs_sock_let_go(struct xs_sock *s, int fd, bool ending);

/**
 * xs_sock_close_failed() - before the last close of an RDMA socket whose
 *                          stream failed (its bytes may not have gone),
 *                          make the kernel socket's close an RST
 *                          (SO_LINGER {1, 0}), so that a peer that goes on
 *                          on the kernel TCP connection (a peer ended
 *                          without a FIN, core/stream.c) reads ECONNRESET,
 *                          not an EOF that would hide the loss
 * @s:  socket; caller holds a reference
 * @fd: its last fd (no other holds @s: xs_fdtab_held()), not closed yet
 * Context: close(2), the application's thread; errno as it was.
 */
void xs_sock_close_failed(struct xs_sock *s, int fd);

/* What xs_sock_hand() prepared for one socket (zeroed: nothing). */
struct xs_handed {
	int fd;
	int memfd;     /* for an exec, or -1 */
	int chan;      /* the channel to the owner lent to an exec, or -1 */
	bool own_lent; /* ours, lent to a spawned image */
	bool shm;      /* the bytes are in /dev/shm/xsock-moved-EUID-KEY */
	uint64_t key;  /* the socket's handoff key */
	size_t len;    /* unread bytes handed over */
	const struct xs_sock *sock; /* the socket, whatever came of it */
	struct xs_sock *s; /* with a reference; NULL: nothing recorded */
};

/**
 * xs_sock_hand() - socket @s goes where RDMA cannot follow it: the image
 *                  an exec makes inherits it on @fd (no FD_CLOEXEC,
 *                  @exec), or sendmsg() passes @fd with SCM_RIGHTS. An
 *                  RDMA connection moves to its kernel TCP connection
 *                  first (core/move.c), and what came over RDMA and
 *                  nobody read goes with it, recorded for the next holder
 * @s:    socket; caller holds a reference; once per socket, not per fd
 * @fd:   one fd of it
 * @how:  XS_HAND_EXEC: the bytes go in a memfd the new image inherits
 *        (else in a file of the user's under /dev/shm); XS_HAND_BARE: the
 *        new image has no library to read them (another process's go
 *        back to it; this process's own reset the connection), nor to
 *        ask an owner itself
 * @h:    receives what was prepared, for xs_sock_hand_done()
 *
 * Context: blocks until the peer answered the move and READ our regions
 * (at most about 20 s); errno as it was.
 * Return: 0 (also for a socket that is not RDMA: nothing to do), or a
 *         negative errno: the next holder cannot follow this connection
 *         (its calls fail with ECONNRESET there).
 */
int xs_sock_hand(struct xs_sock *s, int fd, unsigned int how,
		 struct xs_handed *h);

/**
 * xs_sock_spawn_channel() - before posix_spawn(): a channel for the
 *                           spawned image to ask for the move of this
 *                           process's live RDMA connections, as a forked
 *                           child does (core/move.c)
 * @child: receives the end the image inherits (recorded), or -1
 * Return: our end, served by the probe thread, or -1 (none: no live
 *         connection, or no fd).
 */
int xs_sock_spawn_channel(int *child);

/* xs_move_spawn_close() - after posix_spawn(): our copy of the child's
 * end goes; @ok false (no child): the channel goes whole */
void xs_move_spawn_close(int own, int child, bool ok);

/**
 * xs_sock_spawn_lend() - socket @s (fd @fd) goes to the image
 *                        posix_spawn() makes, as a forked child's exec
 *                        lends it: the image asks for the move at its
 *                        first use, through the channel *@own, *@child
 *                        (made at the first of this process's own
 *                        connections, xs_sock_spawn_channel(); -1 until
 *                        then) or through our own channel to its owner
 * Return: 0, or -ESRCH without a channel (its calls fail with
 *         ECONNRESET there, as before).
 */
int xs_sock_spawn_lend(struct xs_sock *s, int fd, int *own, int *child,
		       struct xs_handed *h);

/* xs_sock_spawn_done() - after posix_spawn() (@ok: a child was made) */
void xs_sock_spawn_done(struct xs_handed *h, bool ok);

#define XS_HAND_EXEC 0x1 /* xs_sock_hand() @how: an exec, not SCM_RIGHTS */
#define XS_HAND_BARE 0x2 /* the new image runs without this library */
#define XS_HAND_SELF 0x4 /* only a connection this process owns (and moves) */

/**
 * xs_sock_hand_done() - the call xs_sock_hand() prepared for returned:
 *                       @ok (the socket went) drops this process's copy
 *                       of the bytes handed over; otherwise the memfd,
 *                       file and record go, and the socket stays moved
 *                       here with its bytes. Drops @h's reference.
 */
void xs_sock_hand_done(struct xs_handed *h, bool ok);

/**
 * xs_sock_take_over() - xs_sock_move() for a socket that needs it: kind
 *                       XS_KIND_RDMA, another process's, not moved yet
 * @s:  socket; caller holds a reference
 * @fd: its fd
 */
void xs_sock_take_over(struct xs_sock *s, int fd);

/**
 * xs_sock_passes() - whether a data call on RDMA socket @s is its kernel
 *                    fd's, as the application made it: @s moved to its
 *                    kernel TCP connection (a read only once the bytes
 *                    taken over are read), or, for a @send, our side of
 *                    it did (core/move.c)
 */
bool xs_sock_passes(struct xs_sock *s, bool send);

/**
 * xs_sock_plain() - whether RDMA socket @s moved to its kernel TCP
 *                   connection and holds no bytes of its own to serve
 *                   first: its fd is the kernel's for every call
 */
bool xs_sock_plain(const struct xs_sock *s);

/**
 * xs_sock_set_moved() - mark RDMA socket @s moved to its kernel TCP
 *                       connection (struct xs_sock.moved), and note it
 *                       (xs_stream_note()) so that epoll sets holding it
 *                       as an idle member look at it again
 * Context: any thread; lock-free (callers may hold s->lock).
 */
void xs_sock_set_moved(struct xs_sock *s);

/**
 * xs_sock_shutdown() - shutdown(2) on a tracked socket
 * @s:   socket; caller holds a reference
 * @fd:  its fd
 * @how: SHUT_RD, SHUT_WR or SHUT_RDWR
 * Return: 0, or -EINVAL, -ENOTCONN, or the errno of shutdown(2).
 */
int xs_sock_shutdown(struct xs_sock *s, int fd, int how);

/**
 * xs_sock_name() - getsockname(2)/getpeername(2) on a tracked socket
 * @s:    socket; caller holds a reference
 * @fd:   its fd
 * @peer: true for getpeername
 * @addr: out, truncated to *@len as the kernel does
 * @len:  in/out
 * Return: 0, or the errno the kernel gives (EFAULT, EINVAL, ENOTCONN).
 */
int xs_sock_name(struct xs_sock *s, int fd, bool peer, struct sockaddr *addr,
		 socklen_t *len);

/**
 * xs_sock_ioctl() - ioctl(2) on a tracked socket
 * @s:       socket; caller holds a reference
 * @fd:      its fd
 * @request: FIONREAD/SIOCINQ and SIOCOUTQ answer from the RDMA stream;
 *           FIONBIO is mirrored; everything goes to the kernel fd too
 * @arg:     the call's argument
 * Return: the ioctl's result, or a negative errno.
 */
int xs_sock_ioctl(struct xs_sock *s, int fd, unsigned long request, void *arg);

/**
 * xs_sock_tcp_connect_failed() - a kernel TCP connect of @s failed with
 *                                @err (connect(2), or SO_ERROR after a
 *                                non-blocking one)
 * @s:   socket of kind TCP
 * @err: errno
 *
 * A destination that refuses kernel TCP as well is down rather than
 * without xsock: its XSOCK_RDMA_RETRY_MS memory is dropped, so that once
 * it is back (a restarted server) the next connect tries RDMA again.
 */
void xs_sock_tcp_connect_failed(struct xs_sock *s, int err);

/**
 * xs_sock_setsockopt_done() - mirror an option the kernel fd just took
 * @s:     socket; caller holds a reference
 * @fd:    its fd
 * @level: level of the successful setsockopt(2)
 * @name:  option name (SO_RCVTIMEO, SO_SNDTIMEO and SO_LINGER are read
 *         back: close() of an RDMA socket honours SO_LINGER as TCP's)
 */
void xs_sock_setsockopt_done(struct xs_sock *s, int fd, int level, int name);

/**
 * xs_sock_set_nonblock() - mirror O_NONBLOCK after F_SETFL or FIONBIO
 * @s:  socket
 * @on: whether O_NONBLOCK is now set
 */
static inline void xs_sock_set_nonblock(struct xs_sock *s, bool on)
{
	atomic_store_explicit(&s->nonblock, on, memory_order_relaxed);
}

/**
 * xs_sock_polled() - whether poll/epoll/select must ask xsock about @s
 * @s: socket
 *
 * True for an RDMA socket in the process that made it, and for a socket
 * whose transport is being decided (connecting: not writable yet, which
 * its kernel fd would claim). Everything else, listeners included, is
 * answered by the kernel fd.
 */
bool xs_sock_polled(struct xs_sock *s);

/*
 * A waiter's spin window (core/spin.c): how long its next wait busy-polls
 * before it arms and sleeps, learnt from its own recent waits and capped
 * by XSOCK_SPIN_US. Zero-initialized: no spin until a wait shows that
 * news comes soon.
 */
struct xs_spin {
	_Atomic uint32_t window_us;
	/* what one look of this waiter costs, in ns (a moving average of
	 * timed spins); 0: not measured yet */
	_Atomic uint32_t look_ns;
	_Atomic uint32_t spins; /* spins begun: one in SPIN_TIME_EVERY timed */
};

/*
 * One wait's spin. Most spins count their looks against a budget of
 * window / look cost and read no clock (on a host whose clocksource has
 * no vDSO, each read is a system call); one in SPIN_TIME_EVERY, and any
 * spin before the look cost is known or whose wait has a timeout shorter
 * than twice its window, reads the clock at each look and measures the
 * look cost, less that of its clock reads, for the others.
 */
struct xs_spin_run {
	struct xs_spin *sp;
	uint64_t window_us; /* 0: no spin (or it ended) */
	uint64_t start_us;  /* the wait's start, once stopped (xs_now_us()) */
	uint64_t start_ns;  /* timed: the spin's start */
	uint32_t clock_ns;  /* timed: what one clock read costs */
	uint32_t reads;	    /* timed: clock reads during the looks */
	uint32_t looks;	    /* looks taken */
	uint32_t budget;    /* untimed: looks allowed */
	bool timed;
	bool stopped; /* the spin ran out: the wait went on to sleep */
};

/**
 * xs_spin_begin() - start a wait's spin
 * @r:        the wait's run (filled in)
 * @sp:       the waiter's state
 * @limit_us: the wait's timeout in us, UINT64_MAX for none
 *
 * Return: the window in us (also r->window_us), 0 for no spin: a window
 * of 0 (the clock is read, so that the wait's length sizes the next), or
 * more runnable threads than CPUs (counted in /proc/loadavg at most every
 * 100 ms by the coarse clock, which needs no system call; nothing is
 * learnt then). Reads the clock otherwise only for a timed spin.
 * Context: any thread; never blocks.
 */
uint64_t xs_spin_begin(struct xs_spin_run *r, struct xs_spin *sp,
		       uint64_t limit_us);

/**
 * xs_spin_more() - whether the spin may take another look (counted)
 * @r: a run begun with a window
 * Return: false once the window is spent. A timed spin reads the clock.
 */
bool xs_spin_more(struct xs_spin_run *r);

/**
 * xs_spin_stop() - the spin ran out without news: the wait arms and sleeps
 * @r: the run
 * Return: the us the spin took (measured or, untimed, estimated from its
 * looks), to come off the wait's timeout. Reads the clock once, so that
 * xs_spin_end() can tell how long the sleep took.
 */
uint64_t xs_spin_stop(struct xs_spin_run *r);

/**
 * xs_spin_end() - what the wait found, to size the next window
 * @r:    the run (one begun without a window learns nothing)
 * @news: the wait ended with news, not a timeout
 *
 * News during the spin keeps the window (no clock read unless timed);
 * news after it but within XSOCK_SPIN_US doubles it (from 10 us); later
 * or none, it halves (KVM's halt-polling rule). Context: any thread;
 * lock-free (racing learners may lose an update, which the next wait
 * makes up).
 */
void xs_spin_end(struct xs_spin_run *r, bool news);

/**
 * xs_spin_timed_out() - the wait timed out with nothing: halve the window
 * @sp: the waiter's state
 */
void xs_spin_timed_out(struct xs_spin *sp);

/* xs_sock_poll_events() @how bits */
/* drain only the fd at index @k of xs_sock_poll_fds() (seen readable) */
#define XS_POLL_DRAIN_FD(k) (0x100u << (k))
/* drain every channel fd too (system calls): XS_POLL_DRAIN_FD(0 to 2) */
#define XS_POLL_DRAIN 0x700u
#define XS_POLL_KICK  0x20 /* the wait took the kick: drain it too */
#define XS_POLL_ARM   0x2  /* arm first, as xs_sock_poll_arm() */
/* a look during a spin: poll the CQ in userspace whatever the last look
 * found, and make no system call */
#define XS_POLL_SPIN  0x4
#define XS_POLL_NOARM 0x8 /* see xs_sock_poll_events() */
/* xs_sock_poll_events() result bit beside the poll(2) ones */
#define XS_POLL_STARVED 0x10000 /* with XS_POLL_ARM: sleep at most 1 ms */
/* ... and: @s moved to its kernel TCP connection: ask its kernel fd now */
#define XS_POLL_MOVED 0x20000

/**
 * xs_sock_poll_events() - @s's readiness, as poll(2) revents
 * @s:   socket for which xs_sock_polled() holds
 * @how: XS_POLL_DRAIN: drain an RDMA socket's channel fds too (system
 *       calls), or XS_POLL_DRAIN_FD(k) only the one at index k of
 *       xs_sock_poll_fds(); left out when the caller saw them not
 *       readable a moment ago (that spares an idle CQ's poll too).
 *       XS_POLL_ARM: request a completion event first (the look just
 *       before a sleep on xs_sock_poll_fds(): news after it wakes the
 *       sleep). XS_POLL_SPIN: a look while spinning: polls the CQ in
 *       userspace even when the last look found it quiet (a completion
 *       lands there before its channel fd turns readable: on hardware,
 *       an interrupt later), drains nothing. XS_POLL_NOARM with
 *       XS_POLL_DRAIN_FD(0): a busy wait's look, which arms before it
 *       sleeps, reads the event and leaves the CQ unarmed; while another
 *       thread waits (xs_wake_others()) it leaves the event to it.
 *
 * RDMA socket: POLLIN/POLLRDNORM (data, EOF or reset), POLLOUT/POLLWRNORM
 * (a credit and a send slot free, or after SHUT_WR), POLLRDHUP, POLLHUP,
 * POLLERR, as tcp_poll(). Listener: POLLIN when an RDMA connection waits
 * to be accepted (the kernel fd answers for the others). Reaps
 * completions and drains the channel fds; never blocks.
 * Return: the revents bits; with XS_POLL_ARM, XS_POLL_STARVED too when
 *         @s waits for pool memory (see xs_sock_poll_arm()).
 */
unsigned int xs_sock_poll_events(struct xs_sock *s, unsigned int how);

#define XS_POLL_FDS 3 /* most fds xs_sock_poll_fds() gives a socket */

/**
 * xs_sock_poll_fds() - fds that turn readable when @s may have news
 * @s:    socket for which xs_sock_polled() holds
 * @fds:  receives up to XS_POLL_FDS non-blocking fds
 * @kick: a wait that the kernel alone wakes (see xs_stream_wait_fds())
 * Return: how many were written.
 */
int xs_sock_poll_fds(struct xs_sock *s, int fds[XS_POLL_FDS], bool kick);

/**
 * xs_sock_poll_gen() - a counter that moves whenever @s's readiness may
 *                      have changed (completions, reset, disconnect): the
 *                      edges of EPOLLET
 * @s: socket for which xs_sock_polled() holds
 */
unsigned long xs_sock_poll_gen(struct xs_sock *s);

/**
 * xs_sock_note() - note that @s's readiness may have changed other than
 *                  through its channel fds (xs_stream_note()): epoll sets
 *                  holding it as an idle member look at it again
 * Context: any thread, any lock, a signal handler too; lock-free.
 */
void xs_sock_note(struct xs_sock *s);

/* xs_sock_notes_end() - where a new reader of xs_sock_notes() starts */
unsigned long xs_sock_notes_end(void);

/**
 * xs_sock_notes() - xs_stream_notes(), whose doc says it all, for sockets:
 *                   up to @max noted since *@pos into @socks (to compare
 *                   only: one may be closed and reused by now), *@pos moved
 * Return: how many; -1 when some are lost: look at every socket.
 */
int xs_sock_notes(unsigned long *pos, struct xs_sock *socks[], int max);

/**
 * xs_sock_news() - a process-wide counter that moves whenever the
 *                  readiness of any xsock socket may have changed other
 *                  than through its channel fds (a call on it, completions
 *                  reaped by another thread, a reset, an accept); see
 *                  xs_stream_news()
 */
unsigned long xs_sock_news(void);

/**
 * xs_sock_poll_arm() - request a completion event before sleeping on the
 *                      fds of xs_sock_poll_fds(); check events again after
 * @s: socket for which xs_sock_polled() holds
 * Return: true when @s waits for pool memory that no fd will announce:
 *         the sleep must end within 1 ms to look again.
 */
bool xs_sock_poll_arm(struct xs_sock *s);

/**
 * xs_wake_enter() - register this thread's own wake-up eventfd for an
 *                   emulated wait (core/wake.c)
 *
 * From here to xs_wake_leave(), xs_wake_all() (a shutdown() by another
 * thread, a failure the probe thread found) makes the fd readable; the
 * caller sleeps on it beside the channel fds of xs_sock_poll_fds() and,
 * when it woke the sleep, drains it with xs_wake_drain(). Call it before
 * the wait's last look, so that news after that look always wakes the
 * sleep. Nests (a signal handler's wait inside a wait): only the
 * outermost pair registers.
 * Context: any thread, signal handlers too; lock-free; the thread's first
 * wait makes its eventfd (three system calls), later ones make none.
 * Return: the fd, or -1 (no fd to be had, or more than 1024 threads
 *         asleep at once: the wait then sleeps at most 100 ms at a time,
 *         logged once). errno is kept.
 */
int xs_wake_enter(void);

/* xs_wake_leave() - the end of the wait xs_wake_enter() began. */
void xs_wake_leave(void);

/* xs_wake_drain() - take @fd's wake-up (xs_wake_enter()); errno kept. */
void xs_wake_drain(int fd);

/**
 * xs_dev_available() - whether an RDMA device usable by xsock exists
 *
 * Probes ibv_get_device_list() once per process (and again in a forked
 * child), honouring XSOCK_DEVICE. rdma-core loads its providers here.
 * Context: any thread; raises the reentrancy depth.
 * Return: the number of usable devices (0 when none).
 */
int xs_dev_available(void);

/**
 * xs_pub_exit() - remove this process's counters file (/dev/shm/xsock-PID,
 *                 see core/xs_shm.h); the mapping stays until exit
 * Context: atexit, registered first so that it runs last.
 */
void xs_pub_exit(void);

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

/**
 * xs_copy_in() - copy @n bytes from an application pointer without
 *                trusting it (process_vm_readv on ourselves fails cleanly
 *                where a plain read would crash)
 * @dst: library memory
 * @src: application memory; NULL or unmapped gives -EFAULT
 * @n:   bytes
 * Return: 0, or -EFAULT as the kernel would answer.
 */
int xs_copy_in(void *dst, const void *src, size_t n);

/* Run @stmt without letting it change errno. */
#define XS_SAVE_ERRNO(stmt)                                                    \
	do {                                                                   \
		int xs_saved_errno_ = errno;                                   \
		stmt;                                                          \
		errno = xs_saved_errno_;                                       \
	} while (0)

/*
 * Readiness waits over mixed kernel and xsock fds (core/poll.c,
 * core/epoll.c). Each takes the arguments of the libc call of its name
 * and answers as that call would: the count of ready entries, 0 on a
 * timeout, or -1 with the kernel's errno (EINTR, EINVAL, EFAULT, EBADF,
 * ENOMEM...). Where no xsock socket is involved, the call goes to libc
 * unchanged. Context: any thread, from a wrapper past its entry check;
 * the waits block up to their timeout (sleeping in one real ppoll or
 * epoll_pwait, after a spin of at most XSOCK_SPIN_US); no lock is held
 * across the sleep.
 */
int xs_poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms);
int xs_poll_ts(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	       const sigset_t *sigmask);
int xs_select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	      struct timeval *timeout);
int xs_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
	       const struct timespec *timeout, const sigset_t *sigmask);
int xs_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int xs_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
		  int timeout_ms);
int xs_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
		   int timeout_ms, const sigset_t *sigmask);
int xs_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
		    const struct timespec *timeout, const sigset_t *sigmask);

/* xs_poll_fd_closed() - forget the epoll emulation state of @fd, an fd
 * being closed (any kind; most have none). Context: close(2)'s wrapper,
 * before the kernel's close; takes ep_table_lock for an epoll fd with
 * xsock members. xs_epoll_created() - @fd (<0: none, at init) is a new
 * epoll fd, inside no wait yet; from epoll_create's wrappers. */
void xs_poll_fd_closed(int fd);
void xs_epoll_created(int fd);

#endif /* XS_CORE_XS_CORE_H */
