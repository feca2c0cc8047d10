/*
 * core/core_int.h - declarations shared between core/ files only.
 */
#ifndef XS_CORE_CORE_INT_H
#define XS_CORE_CORE_INT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conn.h"
#include "xs_core.h"

/*
 * Monotonic microseconds. Inline: the completion-queue spin reads it in a
 * tight loop (XSOCK_SPIN_US).
 */
static inline uint64_t xs_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/**
 * xs_sock_mine() - whether @s's RDMA objects belong to this process
 * @s: socket with a stream or listener
 *
 * False only in a forked child for what its parent made (shared kernel
 * context: the child never touches it). No system call outside a child.
 */
bool xs_sock_mine(const struct xs_sock *s);

/**
 * xs_dev_open() - the opened device for a verbs context
 * @verbs:      context that rdma_cm resolved
 * @pool_bytes: pool limit, used when the device is opened here
 * @rc:         receives the negative errno on failure
 *
 * The PD and the registered pool are made on first use and kept for the
 * life of the process image; a forked child starts with none.
 * Context: any thread, the depth raised (from connection setup); takes
 * dev_lock, and calls rdma-core (PD, pool registration) under it.
 * Return: the device, or NULL with *@rc set.
 */
struct xs_dev *xs_dev_open(struct ibv_context *verbs, size_t pool_bytes,
			   int *rc);

/**
 * xs_dev_fork_child() - forget the parent's device probe and opened
 *                       devices in a forked child
 *
 * Context: the child, right after fork(), single-threaded.
 */
void xs_dev_fork_child(void);

/**
 * xs_dev_inherited() - whether librdmacm's device contexts in this
 *                      process image are an ancestor's: opened before a
 *                      fork (by a connection or listener of its own; the
 *                      probes run in core/helper.c, which keeps them out)
 *
 * Such a process cannot use RDMA: the kernel refuses it the inherited
 * contexts' write() commands (ib_safe_file_access(), EACCES), and
 * librdmacm hands those contexts to every id. Its connections stay on
 * kernel TCP, decided before a byte moves (core/neg.c).
 */
bool xs_dev_inherited(void);

/* librdmacm is about to open contexts in this process (conn.c). */
void xs_dev_note_rdma_cm(void);

/* dev_lock around fork(): see xs_core_atfork_prepare(). */
void xs_dev_lock(void);
void xs_dev_unlock(void);

/**
 * xs_self_add() - list client socket @s, connected on @fd and negotiating,
 *                 by its local address (core/sock_self.c)
 * xs_self_accepted() - list @s, accepted on @fd, if its peer is a listed
 *                      client socket: this process's own connection
 * xs_self_del() - take @s off the list (its negotiation ended, or it goes)
 * xs_self_other() - the other end of listed @s, if no fork came since both
 *                   were listed: a reference for the caller, an fd of
 *                   it in *@other_fd (a dup where the first is closed);
 *                   else NULL
 * xs_self_fork_child() - empty the list in a forked child
 * Context: any thread; a leaf lock. Each costs one load while the list is
 * empty; xs_self_add() and xs_self_accepted() then a getsockname(2) or
 * getpeername(2).
 */
void xs_self_add(struct xs_sock *s, int fd);
void xs_self_accepted(struct xs_sock *s, int fd);
void xs_self_del(const struct xs_sock *s);
struct xs_sock *xs_self_other(const struct xs_sock *s, int *other_fd);
void xs_self_fork_child(void);

/* xs_sock_forks() - forks this process made so far (not counting the
 * library's helper's); see core/sock.c. */
unsigned int xs_sock_forks(void);

/**
 * xs_sig_restarts() - whether a blocking call that a signal handler just
 *                     interrupted restarts, as the kernel's would with
 *                     SA_RESTART (core/sig.c)
 *
 * For a wait in poll(2) that returned EINTR inside a blocking recv, send
 * or connect without a socket timeout (signal(7): those with one always
 * fail with EINTR). True when every signal this thread has unblocked and
 * handled has SA_RESTART: whichever came, the kernel would have restarted.
 * False when one has not: that one may have come.
 * Context: any thread; one sigaction(2) per signal (about 64 system
 * calls), only after an EINTR. errno is kept.
 */
bool xs_sig_restarts(void);

/**
 * xs_wake_all() - wake every thread in an emulated wait, through its own
 *                 eventfd (see xs_wake_enter() and core/wake.c)
 * Context: any thread, any lock held; lock-free, one write(2) per thread
 * asleep. For news that changes every waiter's answer and that no channel
 * fd announces to each of them.
 */
void xs_wake_all(void);

/**
 * xs_sock_connect_evfd() - the eventfd that @s's connect or negotiation
 *                          writes when it is decided, made now if there
 *                          is none: for an epoll set inside another wait,
 *                          which only the kernel wakes (other waits learn
 *                          it through their own wake-ups, core/wake.c)
 * @s: socket whose transport is undecided (xs_sock_polled())
 *
 * Context: any thread; lock-free. An outcome that came before it was made
 * is written to it at once.
 * Return: the fd (kept until the socket's teardown), or -1 (no fd left).
 */
int xs_sock_connect_evfd(struct xs_sock *s);

/**
 * xs_wake_hold() - this thread's own wake-up eventfd (core/wake.c), made
 *                  on its first use, for a wait that hands it to the
 *                  writers that may wake it rather than registering (a
 *                  stream's sleeper, struct xs_stream.sleeper_fd); until
 *                  xs_wake_unhold(), a wait nested in it (a signal
 *                  handler's) that takes a wake-up (xs_wake_drain())
 *                  gives it back when it ends
 * xs_wake_unhold() - the end of that wait
 * Context: any thread; lock-free after the first call. errno is kept.
 * Return: the fd (closed at the thread's exit, once no writer is between
 *         xs_wake_write_begin() and _end(); a late write only wakes this
 *         thread's next wait once), or -1:
 *         none to be had (logged once), or the thread is inside another
 *         wait already (a signal handler's call), whose wake-ups the fd
 *         is for; the caller then sleeps at most 100 ms at a time.
 */
int xs_wake_hold(void);
void xs_wake_unhold(void);

/* xs_wake_write_begin() - before a look at a thread's eventfd (a stream's
 * sleeper_fd) that a write may follow; xs_wake_write_end() after that
 * write: the thread's exit closes its eventfd only when no write is
 * between the two. Lock-free. */
void xs_wake_write_begin(void);
void xs_wake_write_end(void);

/**
 * xs_wake_others() - whether a thread other than the caller is inside an
 *                    emulated wait (between xs_wake_enter() and
 *                    xs_wake_leave()) or another wait counted by
 *                    xs_wake_outside(), where it may sleep on channel fds
 * Context: any thread, any lock held; lock-free. A thread that enters a
 * wait after the answer arms what it sleeps on in its own look.
 */
bool xs_wake_others(void);

/* xs_wake_outside() - count (@n 1) or uncount (-1) a wait that sleeps on
 * channel fds outside the emulated ones (a kernel wait on an epoll set
 * that may get xsock members), for xs_wake_others(). Lock-free. */
void xs_wake_outside(int n);

/* xs_wake_nested() - an epoll fd with xsock members went inside another
 * wait (poll, select, another epoll set), which sleeps on it in the
 * kernel: from now on xs_wake_others() holds. Lock-free. */
void xs_wake_nested(void);

/* xs_wake_depth() - the emulated waits this thread is inside (a signal
 * handler's wait nests in the one it interrupted); 0 outside any. */
int xs_wake_depth(void);

/* xs_wake_fork_child() - forget the parent's waiters and their eventfds
 * (shared with the parent); from the atfork child handler. */
void xs_wake_fork_child(void);

/*
 * The stack of a thread of ours, in bytes, unless its starter asks for
 * another size. glibc's default is RLIMIT_STACK (8 MiB): a mapping that
 * holds whole 2 MiB-aligned ranges, so with transparent huge pages set to
 * "always" (Debian's kernel default) the first touch of a new thread's
 * stack top faults in, and zeroes, a 2 MiB page - for every worker of a
 * burst of non-blocking connects and every probe thread of the xsock-cm
 * helper. Below 2 MiB no such range fits. 512 KiB is twice
 * the linger reaper's 256 KiB and leaves the sanitizer build's larger
 * frames room; the deepest of our threads' calls (rdma-core's first
 * device open: sysfs reads, a provider's dlopen) use far less.
 */
#define XS_THREAD_STACK (512u << 10)

/**
 * xs_thread_start() - start a thread of the library's: detached, every
 *                     signal blocked in it (core/thread.c)
 * @fn, @arg:    what it runs
 * @stack_bytes: its stack size in bytes, 0 for XS_THREAD_STACK
 * @name:        its name (pthread_setname_np: 15 characters), or NULL
 * Context: any thread; the caller's signal mask is restored before return.
 * Return: 0, or a negative errno from pthread_create() (-EAGAIN) or
 *         pthread_attr_setstacksize() (-EINVAL).
 */
int xs_thread_start(void *(*fn)(void *), void *arg, size_t stack_bytes,
		    const char *name);

/**
 * xs_thread_nap() - sleep @ms milliseconds, or until another thread sets
 *                   *@kicked and signals @cond, both under @lock (a
 *                   CLOCK_REALTIME condition variable); *@kicked is
 *                   cleared (core/thread.c)
 * Context: a thread of ours that holds no lock of the library.
 */
void xs_thread_nap(pthread_mutex_t *lock, pthread_cond_t *cond, bool *kicked,
		   int ms);

/* A job for xs_workers_run(), embedded in the caller's own struct. */
struct xs_job {
	void (*run)(struct xs_job *job); /* frees what holds the job */
	struct xs_workers *pool;	 /* the pool that runs it */
	struct xs_job *next;		 /* in its queue */
};

/* The @type whose @member is the xs_job at @job. */
#define xs_job_owner(job, type, member)                                        \
	((type *)(void *)((char *)(job)-offsetof(type, member)))

/*
 * A pool of the library's threads (core/thread.c) that run jobs in the
 * order they came: at most @max at once, the others queued. A worker
 * that finds the queue empty waits @linger_ms for the next job, then
 * ends: a program that connects once in a while keeps no thread, and one
 * that connects again and again starts none per connection (a thread's
 * start is a clone(), a stack mmap() and a first schedule: 0.4-0.8 ms in
 * the Soft-RoCE guest, measured between a probe's request and its thread
 * in xsock-cm's trace log). A forked child's pools start empty: the
 * parent's workers run the parent's queue. Fields: w->lock guards them
 * all but registered.
 */
struct xs_workers {
	pthread_mutex_t lock;
	pthread_cond_t more; /* CLOCK_REALTIME: a job for an idle worker */
	struct xs_job *head, *tail;
	unsigned int queued;   /* jobs no worker has taken yet */
	unsigned int running;  /* workers alive or starting */
	unsigned int starting; /* of them, in xs_thread_start() still */
	unsigned int idle;     /* of them, waiting for a job */
	unsigned int max;
	int linger_ms;
	_Atomic bool registered; /* held across fork() (core/thread.c) */
};

#define XS_WORKERS_INIT(max_, linger_ms_)                                      \
	{                                                                      \
		.lock = PTHREAD_MUTEX_INITIALIZER,                             \
		.more = PTHREAD_COND_INITIALIZER, .max = (max_),               \
		.linger_ms = (linger_ms_)                                      \
	}

/**
 * xs_workers_run() - have @job run on a worker of @w: an idle one, else a
 *                    new one while fewer than w->max run, else the first
 *                    that comes free
 * @w:   the pool
 * @job: job->run set; it runs on a thread of ours, signals blocked
 * Context: any thread; takes w->lock (a leaf lock).
 * Return: 0 (the job will run), or the negative errno of
 *         xs_thread_start() when no worker can start for it (the job is
 *         the caller's again).
 */
int xs_workers_run(struct xs_workers *w, struct xs_job *job);

/**
 * xs_fd_high() - move a library-owned fd up, to RLIMIT_NOFILE / 2 or
 *                above, so that the application's own fds stay as small
 *                as over kernel TCP: an event loop may size its tables by
 *                the connections it opens (wrk's ae: 10 + 3 x connections;
 *                a socket numbered past that is a "connect error")
 * @fd: an fd of ours; CLOEXEC after the move
 * Context: any thread; two system calls.
 * Return: the new fd (@fd closed), or @fd when nothing is free up there.
 */
int xs_fd_high(int fd);

/* core/sock.c for core/neg.c */

/* Connection parameters from the configuration. */
void xs_sock_conn_params(struct xs_conn_params *p);

/* Make @s an RDMA socket around the established @c (ownership moves),
 * its names those of kernel socket @fd. Return: 0 or a negative errno. */
int xs_sock_attach(struct xs_sock *s, struct xs_conn *c, int fd);

/* The fallback reason for an xs_conn_connect() or probe error. */
int xs_sock_connect_reason(int rc);

/* An IPv4-mapped IPv6 address as AF_INET, in place. */
void xs_sock_addr_unmap(struct sockaddr_storage *ss);

/* xs_sock_neg_done() @reason: the peer closed (or reset) the TCP
 * connection before a transport was decided. Nobody's bytes moved, so
 * it is no fallback: kernel TCP carries its EOF, counted undecided. */
#define XS_NEG_PEER_GONE (-1)

/* The negotiation of @s ended: RDMA (@reason XS_FB_NONE, attached), or
 * kernel TCP for @reason (or XS_NEG_PEER_GONE). Wakes the waits. */
void xs_sock_neg_done(struct xs_sock *s, int reason);

/* Incremented in each forked child: a worker of another generation
 * belongs to an ancestor. */
extern unsigned int xs_fork_gen;
/* set by the thread that forks the xsock-cm helper around its fork():
 * that child never holds the application's sockets (core/helper.c) */
extern __thread bool xs_forking_helper;

/* core/handoff.c (see there) */

/* xs_handoff_put() states beside enum xs_neg_role */
#define XS_HANDOFF_STRIP     3 /* TCP, control messages still to strip */
#define XS_HANDOFF_ELSEWHERE 4 /* RDMA in another process */
/* moved to its kernel TCP connection before an exec (core/move.c); its
 * strip field is the memfd of the bytes unread, or XS_MOVE_NO_MEMFD */
#define XS_HANDOFF_MOVED     5
#define XS_HANDOFF_MOVED_EOF 6 /* the same, then EOF: the peer's FIN came */
/* another process's RDMA connection, lent to an exec'd image with the
 * channel to its owner: strip is the channel's fd (core/move.c) */
#define XS_HANDOFF_LENT 7
/* that channel: strip is the owner's pid */
#define XS_HANDOFF_CHANNEL 8
/* strip bit of a negotiable record that an exec'd image adopted and keeps
 * for an image it execs in turn (xs_sock_adopt()), with the pid of the
 * last image that adopted it in bits 8-30 (pid_max is at most 2^22) */
#define XS_HANDOFF_ADOPTED   0x80000000u
#define XS_HANDOFF_PID_SHIFT 8
#define XS_HANDOFF_PID_MASK  (0x7fffffu << XS_HANDOFF_PID_SHIFT)

/*
 * xs_handoff_shared() - whether a socket this image adopted after the
 * image of process @adopter (its record's mark) is shared with a process
 * that may use it too: @adopter runs and is not us, and is not our parent
 * (a shell waiting for the one command it runs; the connection moves to
 * its kernel TCP connection if the shell uses it after us: core/hand.c),
 * or is our parent and has another child (a pipeline). errno is kept.
 * Context: any; reads /proc/PPID/task/PPID/children in the last case.
 */
bool xs_handoff_shared(pid_t adopter);
#define XS_MOVE_NO_MEMFD 0xffffffffu
#define XS_MOVE_SHM	 0xfffffffeu   /* in /dev/shm/xsock-moved-EUID-KEY */
#define XS_MOVE_MEMFD	 "xsock-moved" /* memfd_create() name */

/* Record socket @fd's @state (and @strip mask) for whoever gets it next.
 * Costs a getsockopt(SO_COOKIE); the table is mapped on first use. */
void xs_handoff_put(int fd, unsigned int state, unsigned int strip);

/* @fd's key in the table (from its SO_COOKIE, unique per boot), or 0
 * for no socket. */
uint64_t xs_handoff_cookie(int fd);

/* xs_iov_total() - the bytes @iovcnt entries of @iov hold (core/stream.c) */
size_t xs_iov_total(const struct iovec *iov, int iovcnt);

/* ---------------------------------------------------------- core/move.c */

/**
 * xs_move_atfork_prepare() - before fork(): a channel for the child to ask
 *                            for the move of the @nr connections whose
 *                            SO_COOKIEs are @cookies (malloc'ed: ours from
 *                            now on), this process's live ones; none when
 *                            @nr is 0
 * xs_move_atfork_parent() - after it, in the parent: serve our end
 * xs_move_atfork_child() - after it, in the child: keep the end to ask
 *                          @parent through, drop the parent's ends
 * Context: core/'s fork hooks (locks held; no allocation in the child).
 */
void xs_move_atfork_prepare(uint64_t *cookies, size_t nr);
void xs_move_atfork_parent(void);
void xs_move_atfork_child(pid_t parent);

/* xs_move_spawn_open() - xs_sock_spawn_channel()'s channel for the @nr
 * connections of @cookies (malloc'ed, taken) */
int xs_move_spawn_open(uint64_t *cookies, size_t nr, int *child);

/**
 * xs_move_poll_fds() - our ends of our children's channels, for a poll
 * @p:     the poll array (*@cap entries, grown with realloc as needed;
 *         nothing allocated while there is no channel)
 * @cap:   its room
 * @first: where ours start in it
 * Return: entries written from @first (POLLIN asked).
 */
size_t xs_move_poll_fds(struct pollfd **p, size_t *cap, size_t first);

/**
 * xs_move_serve() - answer the request waiting on channel @fd: move the
 *                   connection it names and hand over its unread bytes;
 *                   a channel at EOF (its processes are gone) is closed
 * Context: the xsock-probe thread; blocks while the peer answers (at
 * most XS_MOVE_TIMEOUT_MS).
 */
void xs_move_serve(int fd);

/**
 * xs_watch_add() - watch the kernel TCP socket @fd under a new RDMA stream
 *                  for the peer's FIN or RST (core/watch.c)
 * @fd:     an fd of that socket (the entry follows its file, not @fd)
 * @cookie: its SO_COOKIE, what xs_watch_ended() reports
 * Context: any thread; takes watch_lock; no-op when @fd < 0 or
 * @cookie is 0, or when no epoll set can be made (logged once).
 */
void xs_watch_add(int fd, uint64_t cookie);

/**
 * xs_watch_ended() - the cookies of watched kernel sockets that got their
 *                    peer's FIN or RST since the last call
 * @cookies: where they go
 * @max:     its room; what does not fit stays for the next call
 * Context: the probe thread; never blocks.
 * Return: how many were written.
 */
size_t xs_watch_ended(uint64_t *cookies, size_t max);

/* xs_watch_fork_child() - a forked child's own, empty set. Context: the
 * child's atfork handler, single-threaded. */
void xs_watch_fork_child(void);

/* xs_sock_probe_kick() - the probe thread looks at its poll set again */
void xs_sock_probe_kick(void);

/**
 * xs_sock_live_find() - this process's RDMA socket whose kernel socket has
 *                       SO_COOKIE @cookie, with a reference, or NULL
 */
struct xs_sock *xs_sock_live_find(uint64_t cookie);

/**
 * xs_sock_move_release() - the last fd of moved socket @s closes here: the
 *                          bytes taken over and not read go back to its
 *                          owner (core/move.c)
 * xs_move_exit() - the same for every such socket, at exit
 * Context: may block while the owner answers (at most 5 s each).
 */
void xs_sock_move_release(struct xs_sock *s);
void xs_move_exit(void);

/* xs_move_exit_push() - at exit: the bytes kept for children of the
 * connections closed here go to them now (core/move.c) */
void xs_move_exit_push(void);

/**
 * xs_move_adopt() - the new holder's side of xs_sock_hand(): socket @s
 *                   (fd @fd), recorded with @state XS_HANDOFF_MOVED or
 *                   XS_HANDOFF_MOVED_EOF and @memfd (or XS_MOVE_SHM),
 *                   takes the bytes of the memfd (then closed) or file
 *                   (then unlinked) as its prefix
 * Return: true when @s has a prefix or an EOF to serve (then it is an RDMA
 *         socket moved, with no stream); false: plain kernel TCP.
 */
bool xs_move_adopt(struct xs_sock *s, int fd, unsigned int state,
		   unsigned int memfd);

/**
 * xs_move_adopt_lent() - the new image's side of an exec that lent it
 *                        another process's RDMA connection: socket @s
 *                        (fd @fd) asks that owner through channel @chan
 *                        at its first use (core/move.c)
 * Return: true, or false when @chan is no channel of ours (then its calls
 *         fail with ECONNRESET).
 */
bool xs_move_adopt_lent(struct xs_sock *s, int fd, unsigned int chan);

/**
 * xs_sock_to_kernel() - move RDMA socket @s (fd @fd) to its kernel TCP
 *                       connection for good, for what only the kernel
 *                       carries (urgent data, MSG_OOB): this process's
 *                       own connection as an exec moves it, another's
 *                       through its owner (xs_sock_move())
 * Context: may block until the peer answers the MOVE (XS_MOVE_TIMEOUT_MS);
 *          takes move_out_lock or move_lock.
 * Return: 0 (also for a socket that is no RDMA one or moved already), or
 *         -ECONNRESET and the like: the move failed, the connection is
 *         reset.
 */
int xs_sock_to_kernel(struct xs_sock *s, int fd);

/* xs_sock_rcvlowat() - SO_RCVLOWAT of kernel socket @fd as the kernel
 * stored it, 1 when it cannot be read (one getsockopt(2)) */
int xs_sock_rcvlowat(int fd);

/* xs_sock_move_free() - forget @s's move state (teardown, reuse) */
void xs_sock_move_free(struct xs_sock *s);

/**
 * xs_move_kernel_io() - sendmsg(2) or recvmsg(2) of @iov past its first
 *                       @skip bytes on kernel socket @fd, with @flags
 * Return: bytes, or a negative errno.
 */
ssize_t xs_move_kernel_io(int fd, const struct iovec *iov, int iovcnt,
			  size_t skip, int flags, bool send);

/**
 * xs_move_recv() - recvmsg(2) of a moved socket: the bytes taken over
 *                  first (MSG_PEEK, MSG_TRUNC and MSG_WAITALL as the
 *                  kernel's), then kernel socket @fd's
 * Return: bytes, 0 at EOF, or a negative errno.
 */
ssize_t xs_move_recv(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags);

/**
 * xs_move_recv_rest() - MSG_WAITALL after @got bytes came from elsewhere
 *                       (the bytes taken over, the RDMA stream): the rest
 *                       of @iov from kernel socket @fd
 * Return: @got plus what the kernel gave; a failure after @got bytes is
 *         reported by the next call, as tcp_recvmsg() does.
 */
ssize_t xs_move_recv_rest(int fd, const struct iovec *iov, int iovcnt,
			  size_t got, int flags);

/* Forget @fd's record (it is claimed here). */
void xs_handoff_drop(int fd);

/* Take the record of @cookie, if there is one: true with *@state and
 * *@strip set (either may be NULL). */
bool xs_handoff_take_cookie(uint64_t cookie, unsigned int *state,
			    unsigned int *strip);

/* xs_handoff_take_cookie() for socket @fd; without a table, one open(2)
 * that fails (handoff_map()) and no other system call. */
bool xs_handoff_take(int fd, unsigned int *state, unsigned int *strip);

/* A probe came from @client, whose TCP socket has port @cport, to
 * listening port @sport (xsock-cm, core/conn.c). */
void xs_handoff_note_probe(const struct sockaddr *client, uint16_t cport,
			   uint16_t sport);

/* Whether the client of accepted @fd probed first (record taken). */
bool xs_handoff_probed(int fd);

/* Map the table now (a listener, before it forks workers that may change
 * user). */
void xs_handoff_init(void);

/* In a forked child: the table's lock, which a thread of the parent may
 * have held, is free. */
void xs_handoff_fork_child(void);

/**
 * xs_sock_move() - take over an RDMA connection that another process of
 *                  this family owns: it moves to its kernel TCP
 *                  connection (core/move.c)
 * @s:  socket of kind XS_KIND_RDMA whose stream is not this process's
 * @fd: its fd (shut down for sending when the owner's FIN had gone)
 *
 * Asks through the channel inherited from the owner at fork(), with
 * write(2), poll(2) and read(2) only (a seccomp sandbox's calls).
 * Context: blocks until the owner answers (at most about 15 s); one move
 * at a time per process (move_lock); errno as it was.
 * Return: 0 (then xs_sock_plain() or the prefix serves every call), or a
 *         negative errno: the connection cannot be taken over (calls then
 *         fail with ECONNRESET, as before).
 */
int xs_sock_move(struct xs_sock *s, int fd);

/* Give a socket object made by xs_sock_adopt() its recorded state. */
void xs_sock_adopted(struct xs_sock *s, int fd, unsigned int state,
		     unsigned int strip);

/* core/helper.c (see there) */

/* xs_conn_probe() run by the helper. */
int xs_helper_probe(const struct sockaddr *dst, uint16_t tcp_port,
		    int timeout_ms);

/* The helper answers probes on @local from now on, while the kernel
 * listener of inode @ino exists. Return: 0, 1 when it did already, or a
 * negative errno of xs_listener_create(). */
int xs_helper_listen(const struct sockaddr *local, int afonly, uint64_t ino);

/* ... and no more. */
void xs_helper_unlisten(const struct sockaddr *local);

/* core/neg.c */

/**
 * xs_neg_start() - start negotiating @s's transport: a client's on a
 *                  worker thread, a server's as a state machine of
 *                  xsock-cm's (core/neg.c)
 * @s:      socket, kind PENDING and connecting; the job takes a reference
 * @fd:     an fd of it (the job dups it)
 * @client: which side
 * Return: 0, or a negative errno (no thread, no fd).
 */
int xs_neg_start(struct xs_sock *s, int fd, bool client);

/**
 * xs_neg_client_run() - the client's negotiation, on the calling thread
 *                       (a non-blocking connect's worker)
 * @s:  socket
 * @fd: its kernel fd, connected, XS_TCP_HELLO sent
 * Context: blocks up to XSOCK_CONNECT_TIMEOUT_MS and the QP's setup.
 * Return: the fallback reason, XS_FB_NONE when @s is RDMA now.
 */
int xs_neg_client_run(struct xs_sock *s, int fd);

/* Send XS_TCP_HELLO on connected @fd. Return: 0 or a negative errno. */
int xs_neg_send_hello(int fd);

/* Send XS_TCP_FALLBACK on @fd. Return: 0 or a negative errno. */
int xs_neg_send_fallback(int fd);

/* neg_lock around fork(), after sock_neg_lock; the child's handler
 * forgets the parent's listeners and negotiations, and unlocks. */
void xs_neg_lock(void);
void xs_neg_unlock(void);
void xs_neg_fork_child(void);

/**
 * xs_fd_dup_high() - a CLOEXEC dup of @fd, numbered as xs_fd_high() would
 *                    place it, or anywhere when nothing is free up there
 * @fd: any fd
 * Return: the new fd, or -1 with errno set (fcntl(2)'s).
 */
int xs_fd_dup_high(int fd);

#endif /* XS_CORE_CORE_INT_H */
