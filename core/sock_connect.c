/*
 * core/sock_connect.c - connect, listen and accept: the transport each
 * connection takes (core/sock.c's decision, the negative cache of peers
 * that refused RDMA), the non-blocking connect's worker, the probe of a
 * peer's listener and the hand-over to the negotiation (core/neg.c).
 * Context: any thread; s->lock is taken after fdtab.lock, never before.
 */
#include <arpa/inet.h>
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
	const struct xs_config *cfg = xs_core_cfg();
	unsigned int line;

	if (cfg->mode == XS_MODE_TCP)
		return XS_FB_MODE;
	switch (xs_rules_match(&cfg->rule_set, program_invocation_short_name,
			       role, addr, len, &line)) {
	case XS_ACTION_TCP:
		xs_dbg("sock", "rule at %s:%u chooses tcp", cfg->rules, line);
		return XS_FB_RULE;
	case XS_ACTION_RDMA:
	case XS_ACTION_NONE:
		break;
	}
	/* no RDMA device serves loopback, to connect to or to listen on */
	if (sock_is_loopback(addr, len))
		return XS_FB_LOOPBACK;
	if (xs_dev_available() == 0)
		return XS_FB_NO_DEVICE;
	return XS_FB_NONE;
}

/*
 * The peer address of @s as published for xsock-stat ("10.0.0.2:6379",
 * "[fe80::1]:6379"), or "?" before one is known, in @buf of @len bytes
 * (SOCK_ADDR_TEXT holds any). Return: @buf. For debug lines.
 */
const char *sock_peer_text(const struct xs_sock *s, char *buf, size_t len)
{
	const struct sockaddr_in6 *a = &s->pub->peer;
	char ip[INET6_ADDRSTRLEN];

	if (a->sin6_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, ip,
		      sizeof(ip)))
		snprintf(buf, len, "%s:%u", ip,
			 ntohs(((const struct sockaddr_in *)a)->sin_port));
	else if (a->sin6_family == AF_INET6 &&
		 inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip)))
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	else
		snprintf(buf, len, "?");
	return buf;
}

/* The fallback reason for an xs_conn_connect() error. */
int xs_sock_connect_reason(int rc)
{
	switch (rc) {
	case -ENODEV:
	case -EADDRNOTAVAIL:
		return XS_FB_NO_DEVICE;
	case -ETIMEDOUT:
		return XS_FB_TIMEOUT;
	case -EPROTONOSUPPORT:
		return XS_FB_NO_TRANSPORT; /* iWARP */
	case -ENOMEM:
	case -ENOBUFS:
	case -EMFILE:
	case -ENFILE:
	case -ENOSPC:
		return XS_FB_RESOURCE;
	default: /* refused, unreachable, not an xsock hello */
		return XS_FB_PEER_NO_XSOCK;
	}
}

static uint16_t sock_addr_port(const struct sockaddr *sa);

/*
 * The probe of connect() (core/neg.c): whether an xsock listener serves
 * @dst. A destination that refused is remembered XSOCK_RDMA_RETRY_MS.
 * Return: XS_FB_NONE when xsock listens there, else the reason for TCP.
 */
static int sock_probe(int fd, const struct sockaddr *dst)
{
	uint64_t t0 = xs_now_us();
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	int reason, rc;

	/* The port first (connect() would pick it a moment later anyway):
	 * the probe tells the listener which connection will be ours. */
	if (xs_real.getsockname(fd, (struct sockaddr *)&me, &len) == 0 &&
	    sock_addr_port((struct sockaddr *)&me) == 0) {
		struct sockaddr_storage any = { .ss_family = me.ss_family };

		len = me.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					       : sizeof(struct sockaddr_in);
		if (xs_real.bind(fd, (struct sockaddr *)&any, len) == 0) {
			len = sizeof(me);
			xs_real.getsockname(fd, (struct sockaddr *)&me, &len);
		}
	}
	rc = xs_helper_probe(dst, sock_addr_port((struct sockaddr *)&me),
			     (int)xs_core_cfg()->connect_timeout_ms);
	if (rc == 0) {
		xs_dbg("sock", "fd %d: xsock listens there (%llu us)", fd,
		       (unsigned long long)(xs_now_us() - t0));
		return XS_FB_NONE;
	}
	reason = xs_sock_connect_reason(rc);
	if (reason != XS_FB_RESOURCE)
		sock_neg_add(dst, reason);
	xs_info("sock", "fd %d: no xsock at the destination (%s), tcp", fd,
		strerror(-rc));
	return reason;
}

void xs_sock_adopted(struct xs_sock *s, int fd, unsigned int state,
		     unsigned int strip)
{
	sock_pub_kernel_addrs(s, fd, NULL, 0);
	if (state == XS_NEG_SERVER || state == XS_NEG_CLIENT) {
		atomic_store(&s->neg, (int)state);
		return;
	}
	if (state == XS_HANDOFF_LENT) {
		/* kernel TCP here once this image uses it: counted so */
		pthread_mutex_lock(&s->lock);
		sock_set_kind(s, XS_KIND_TCP, XS_FB_UNSUPPORTED);
		pthread_mutex_unlock(&s->lock);
		if (xs_move_adopt_lent(s, fd, strip))
			atomic_store_explicit(&s->kind, XS_KIND_RDMA,
					      memory_order_release);
		else
			atomic_store(&s->strip, XS_STRIP_FOREIGN);
		return;
	}
	if (state == XS_HANDOFF_MOVED || state == XS_HANDOFF_MOVED_EOF) {
		/* kernel TCP here: RDMA could not follow the exec */
		pthread_mutex_lock(&s->lock);
		sock_set_kind(s, XS_KIND_TCP, XS_FB_UNSUPPORTED);
		pthread_mutex_unlock(&s->lock);
		/* with bytes of the old image to serve first: an RDMA socket
		 * moved (core/move.c), without a stream, counted as TCP */
		if (xs_move_adopt(s, fd, state, strip))
			atomic_store_explicit(&s->kind, XS_KIND_RDMA,
					      memory_order_release);
		return;
	}
	atomic_store(&s->strip,
		     state == XS_HANDOFF_ELSEWHERE ? XS_STRIP_FOREIGN : strip);
	pthread_mutex_lock(&s->lock);
	sock_set_kind(s, XS_KIND_TCP,
		      state == XS_HANDOFF_ELSEWHERE ? XS_FB_UNSUPPORTED
						    : XS_FB_PEER_NO_XSOCK);
	pthread_mutex_unlock(&s->lock);
}

int xs_sock_connect_evfd(struct xs_sock *s)
{
	int fd = atomic_load(&s->connect_evfd), made;

	if (fd >= 0)
		return fd;
	made = xs_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (made < 0)
		return -1;
	/* seq_cst, before the look at s->connecting: a decision that comes
	 * after it finds the eventfd (sock_decided()), one that came before
	 * is written to it here */
	if (!atomic_compare_exchange_strong(&s->connect_evfd, &fd, made)) {
		xs_real.close(made); /* another thread's came first */
		return fd;
	}
	if (!atomic_load(&s->connecting))
		(void)!eventfd_write(made, 1);
	return made;
}

/*
 * The outcome of @s's connect or negotiation is there: it is no longer
 * connecting, and every wait on it learns so. An emulated wait (poll,
 * select, epoll) through a note of the socket and its thread's own
 * wake-up (core/wake.c), a blocked call the same way
 * (xs_sock_connect_wait()), and an epoll set inside another wait, which
 * only the kernel wakes, through the eventfd it made (@evfd; false for a
 * connect that the parent process ran: its worker wrote it there).
 */
static void sock_decided(struct xs_sock *s, bool evfd)
{
	int fd;

	/* seq_cst: before the loads of the eventfd and of the waiters */
	atomic_store(&s->connecting, false);
	xs_sock_note(s);
	xs_stream_news_bump();
	fd = evfd ? atomic_load(&s->connect_evfd) : -1;
	if (fd >= 0)
		(void)!eventfd_write(fd, 1);
	xs_wake_all();
}

void xs_sock_neg_done(struct xs_sock *s, int reason)
{
	char peer[SOCK_ADDR_TEXT];

	if (reason != XS_FB_NONE && reason != XS_NEG_PEER_GONE)
		xs_dbg("sock", "connection with %s over tcp (%s)",
		       sock_peer_text(s, peer, sizeof(peer)),
		       xs_fallback_name(reason));
	xs_self_del(s);
	pthread_mutex_lock(&s->lock);
	/* decided before no longer negotiable: a send that finds it neither
	 * waits for the end of the connect (xs_sock_send_wait()) */
	if (xs_sock_kind(s) == XS_KIND_PENDING)
		sock_set_kind(s, XS_KIND_TCP, reason);
	atomic_store(&s->neg, XS_NEG_NONE);
	atomic_store(&s->neg_evfd, -1);
	pthread_mutex_unlock(&s->lock);
	/* a connect() that returned 0 saw it done; one inherited from the
	 * parent process's worker not yet */
	if (reason == XS_FB_NONE &&
	    !atomic_exchange(&s->connect_inherited, false))
		atomic_store(&s->connect_unseen, false);
	sock_decided(s, true);
}

/*
 * The handoff record of @s, taken before this process negotiates: another
 * process that shares the socket (a child forked after it was made, one
 * that an exec made of such a child, another command of a shell's
 * pipeline) negotiated it, and either carried it over RDMA and let it go
 * while we hold it, moved to its kernel TCP connection (XS_HANDOFF_MOVED:
 * move_to_parent() in core/hand.c), or decided TCP (XS_HANDOFF_STRIP,
 * kept for the other holders). Then the socket goes on as it says, its
 * unread bytes first, and true; else false, the record dropped (a
 * negotiable socket's own, for a next image).
 */
static bool sock_claim_recorded(struct xs_sock *s, int fd, bool *found)
{
	unsigned int state = 0, strip = 0;
	int saved = errno;
	bool decided;

	*found = xs_handoff_take(fd, &state, &strip);
	decided = *found &&
		  (state == XS_HANDOFF_MOVED || state == XS_HANDOFF_MOVED_EOF ||
		   state == XS_HANDOFF_STRIP);

	if (decided) {
		xs_sock_adopted(s, fd, state, strip);
		if (state == XS_HANDOFF_STRIP)
			xs_handoff_put(fd, state, strip);
		xs_sock_neg_done(s, XS_NEG_PEER_GONE); /* no fallback */
	}
	errno = saved;
	return decided;
}

bool xs_sock_claim(struct xs_sock *s, int fd)
{
	struct xs_sock *other;
	int role, rc, other_fd;
	uint64_t deadline;
	bool found;

	/* a connect that the parent process ran: its outcome first (the
	 * socket may be negotiable now, and this process the one that
	 * negotiates) */
	if (s->neg_gen != xs_fork_gen && xs_sock_connecting(s))
		return true;
	role = atomic_load_explicit(&s->neg, memory_order_relaxed);

	if (role == XS_NEG_NONE)
		return xs_sock_connecting(s);
	if (xs_sock_kind(s) != XS_KIND_PENDING ||
	    atomic_exchange(&s->connecting, true))
		return xs_sock_connecting(s);
	s->neg_gen = xs_fork_gen;
	if (sock_claim_recorded(s, fd, &found))
		return false;
	/* Adopted after another image that still runs beside us (another
	 * command of a shell's pipeline): TCP for all, decided by whichever
	 * claims it first, and recorded for the others; one whose record
	 * another holder took waits for that. */
	if (s->neg_adopter > 0)
		s->neg_adopter = xs_handoff_shared(s->neg_adopter) ? -1 : 0;
	if (s->neg_adopter < 0 && !found) {
		deadline = xs_now_us() +
			   (uint64_t)xs_core_cfg()->connect_timeout_ms * 1000u;
		do {
			xs_real.poll(NULL, 0, 1);
			if (sock_claim_recorded(s, fd, &found))
				return false;
		} while (xs_now_us() < deadline);
		atomic_store(&s->strip, (1u << XS_TCP_HELLO) |
						(1u << XS_TCP_FALLBACK) |
						(1u << XS_TCP_REPLY));
		xs_sock_neg_done(s, XS_FB_TIMEOUT);
		return false;
	}
	if (s->neg_adopter < 0 && role == XS_NEG_CLIENT) {
		/* another command of the pipeline holds it too: TCP for all
		 * (the server's reply, if any, is stripped), recorded for
		 * them (a server's side says so in its reply: core/neg.c) */
		(void)xs_neg_send_fallback(fd);
		atomic_store(&s->strip, 1u << XS_TCP_REPLY);
		xs_handoff_put(fd, XS_HANDOFF_STRIP, 1u << XS_TCP_REPLY);
		xs_sock_neg_done(s, XS_FB_UNSUPPORTED);
		return false;
	}
	if (s->connect_evfd >= 0) { /* a connect's outcome, seen */
		eventfd_t v;

		(void)!eventfd_read(s->connect_evfd, &v);
	}
	rc = xs_neg_start(s, fd, role == XS_NEG_CLIENT);
	if (rc) {
		/* no worker: TCP, and what the peer may still send is
		 * stripped */
		if (role == XS_NEG_CLIENT) {
			(void)xs_neg_send_fallback(fd);
			atomic_store(&s->strip, 1u << XS_TCP_REPLY);
		} else {
			atomic_store(&s->strip,
				     (1u << XS_TCP_HELLO) |
					     (1u << XS_TCP_FALLBACK));
		}
		xs_sock_neg_done(s, XS_FB_RESOURCE);
		return false;
	}
	xs_dbg("neg", "fd %d claimed (%s side)", fd,
	       role == XS_NEG_CLIENT ? "client" : "server");
	/* a connection to ourselves: its other end waits for this one's
	 * answer, and is ours too unless we forked since */
	other = xs_self_other(s, &other_fd);
	if (other) {
		xs_self_del(s);
		(void)xs_sock_claim(other, other_fd);
		xs_sock_put(other);
	}
	/* A non-blocking connect that the parent's worker completed: over
	 * kernel TCP it is done, writable even to a poll that does not
	 * wait. Its worker would have negotiated before saying so; here
	 * the first call after it does, and waits for that. */
	if (atomic_load(&s->connect_inherited) &&
	    xs_sock_connect_wait(s, (int)xs_core_cfg()->connect_timeout_ms) ==
		    0)
		return xs_sock_connecting(s);
	return true;
}

int xs_sock_send_wait(struct xs_sock *s, bool nonblock)
{
	int evfd, ms = -1;

	if (!atomic_exchange(&s->neg_hurry, true)) {
		evfd = atomic_load(&s->neg_evfd);
		if (evfd >= 0)
			(void)!eventfd_write(evfd, 1);
	}
	/* neg set: the kernel's connection is up, only ours is deciding (or
	 * decided, the connect about to say so); a blocking send waits no
	 * longer than SO_SNDTIMEO lets it */
	if (nonblock)
		ms = atomic_load_explicit(&s->neg, memory_order_acquire) !=
					     XS_NEG_NONE ||
				     xs_sock_kind(s) != XS_KIND_PENDING
			     ? (int)xs_core_cfg()->connect_timeout_ms
			     : 0;
	else if (atomic_load(&s->sndtimeo_ms) > 0)
		ms = atomic_load(&s->sndtimeo_ms);
	return xs_sock_connect_wait(s, ms);
}

/*
 * The kernel connect of a socket whose destination runs xsock, done: the
 * hello goes first on the stream. @negotiable: the socket waits to be
 * claimed (xs_sock_negotiable()) from now on; else its caller negotiates
 * at once, and nothing may see it negotiable meanwhile (a poll would
 * call it writable, and the send that follows would find the
 * negotiation under way: EAGAIN). @forks: xs_sock_forks() when the
 * connect began; a child forked since then may hold the socket, and a
 * close here must leave it to that child (xs_sock_closing()). Return: 0,
 * or the errno the hello's send met (the connection then goes on as
 * TCP, whose calls report it).
 */
static int sock_connected_hello(struct xs_sock *s, int fd, bool negotiable,
				unsigned int forks)
{
	int rc = xs_neg_send_hello(fd);

	pthread_mutex_lock(&s->lock);
	if (rc)
		sock_set_kind(s, XS_KIND_TCP, XS_FB_PEER_NO_XSOCK);
	else if (negotiable)
		atomic_store(&s->neg, XS_NEG_CLIENT);
	if (!rc) {
		xs_handoff_put(fd, XS_NEG_CLIENT, 0);
		xs_self_add(s, fd); /* its server may be this process */
		s->accept_gen = xs_fork_gen; /* see xs_sock_closing() */
		s->accept_forks = forks;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* A non-blocking connect handed to a worker thread. */
struct sock_connecting {
	struct xs_sock *s; /* a reference */
	int app_fd;	   /* the application's fd, for the log */
	int fd;		   /* our dup of the application's fd */
	struct sockaddr_storage addr, rdma_addr; /* as given; unmapped */
	socklen_t len;
	struct xs_conn_params p;
	unsigned int forks; /* sock_forks when the connect began */
	struct xs_job job;  /* on sock_cw */
};

/*
 * Non-blocking connects run on a pool of worker threads, at most
 * SOCK_CONNECT_WORKERS at a time; the others wait in the queue, in the
 * order of their connect() calls, and a worker that ends one takes the
 * next. A burst of connects (redis-benchmark -c 1000) then does not start
 * a thread per connection, whose handshakes would crowd out the threads
 * that answer them: with a thread each, 259-553 of 1,001 connections fell
 * back with reason timeout; with 16 or 64 workers, none did (redis-benchmark
 * -c 1000 SET, both ends under xsock, in one Soft-RoCE guest). 64 keeps a
 * few peers that never answer (each holds a worker up to
 * XSOCK_CONNECT_TIMEOUT_MS) from stalling the connects behind them. A
 * queued connect's time limit starts when a worker takes it; meanwhile
 * the application sees it in progress, as a kernel connect to a slow peer.
 * An idle worker waits SOCK_CONNECT_LINGER_MS for the next connect (a
 * client that opens a connection per request, such as ab or wrk against
 * a server that closes, starts no thread per connection).
 */
#define SOCK_CONNECT_WORKERS   64
#define SOCK_CONNECT_LINGER_MS 2000

static void sock_connect_job(struct xs_job *job);

/* a forked child's copy of the queue is the parent's work (its workers
 * run it there, and the child learns each outcome as it does for a
 * connect that was running: sock_connect_elsewhere()) */
static struct xs_workers sock_cw =
	XS_WORKERS_INIT(SOCK_CONNECT_WORKERS, SOCK_CONNECT_LINGER_MS);

/* Whether the process forked since @a began: a child may hold the socket. */
static bool sock_connect_shared(const struct sock_connecting *a)
{
	return xs_sock_forks() != a->forks;
}

/*
 * Wait for the kernel's non-blocking connect on @fd; its SO_ERROR (read,
 * so cleared) is kept for the application's. Return: 0 connected, else
 * the errno it failed with (or ECANCELED: nobody wants the socket; never
 * when @shared, a child forked since may hold it).
 */
static int sock_connect_finish(struct xs_sock *s, int fd, bool shared)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	while (xs_real.poll(&p, 1, 100) <= 0)
		if (atomic_load(&s->refcnt) <= 1 && !shared)
			return ECANCELED;
	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	return err;
}

/*
 * Non-blocking connect @a's handshake, on a connect worker: the probe,
 * then the kernel's connect - with the hello and the client's negotiation
 * right after it (this process is the one that uses the socket: it
 * connected non-blocking) when xsock listens there - then the outcome
 * published: kind RDMA, or kind TCP (for an undecided fallback, with the
 * kernel's non-blocking connect started on the same socket, its progress
 * and SO_ERROR the kernel's), and its waits woken to look again
 * (sock_decided()). Frees @a.
 */
static void sock_connect_run(struct sock_connecting *a)
{
	struct xs_sock *s = a->s;
	bool negotiable = false;
	int reason, err = 0;

	reason = sock_probe(a->fd, (struct sockaddr *)&a->rdma_addr);
	pthread_mutex_lock(&s->lock);
	/* Unless the application closed every fd of it meanwhile: then
	 * our reference is the last and nobody wants the connection (a
	 * child forked since may hold it: then it goes on). The kernel's
	 * connect goes first, so no wait ever sees the unconnected
	 * socket's POLLOUT|POLLHUP. */
	if (atomic_load(&s->refcnt) <= 1 && !sock_connect_shared(a))
		err = ECANCELED;
	else if (xs_real.connect(a->fd, (struct sockaddr *)&a->addr, a->len) <
			 0 &&
		 errno != EINPROGRESS)
		err = errno;
	if (err && err != ECANCELED) {
		s->connect_err = err;
		sock_neg_forget((struct sockaddr *)&a->rdma_addr, err);
	}
	if (xs_sock_kind(s) == XS_KIND_PENDING &&
	    (reason != XS_FB_NONE || err)) {
		sock_set_kind(s, XS_KIND_TCP,
			      reason != XS_FB_NONE ? reason
						   : XS_FB_PEER_NO_XSOCK);
		sock_pub_kernel_addrs(s, a->fd, (struct sockaddr *)&a->addr,
				      a->len);
	}
	pthread_mutex_unlock(&s->lock);
	if (reason == XS_FB_NONE && !err) {
		err = sock_connect_finish(s, a->fd, sock_connect_shared(a));
		if (err && err != ECANCELED) {
			pthread_mutex_lock(&s->lock);
			s->connect_err = err;
			pthread_mutex_unlock(&s->lock);
			xs_sock_tcp_connect_failed(s, err);
		}
		/* connected, the hello sent: a non-blocking connect is an
		 * event loop's, whose process does the I/O - negotiate now,
		 * so that writable means writable, as over kernel TCP.
		 * Unless the process forked meanwhile: the child may be the
		 * one that uses it, so the first process that does I/O claims
		 * it (its record, XS_NEG_CLIENT, is in the handoff table). */
		if (!err &&
		    sock_connected_hello(s, a->fd, false, a->forks) == 0) {
			if (sock_connect_shared(a)) {
				atomic_store(&s->neg, XS_NEG_CLIENT);
				negotiable = true;
			} else {
				xs_handoff_drop(a->fd);
				reason = xs_neg_client_run(s, a->fd);
				if (reason == XS_FB_NONE)
					atomic_store(&s->connect_unseen, true);
			}
		}
		pthread_mutex_lock(&s->lock);
		if (!negotiable && xs_sock_kind(s) == XS_KIND_PENDING) {
			sock_set_kind(s, XS_KIND_TCP,
				      reason != XS_FB_NONE
					      ? reason
					      : XS_FB_PEER_NO_XSOCK);
			sock_pub_kernel_addrs(s, a->fd, NULL, 0);
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (!negotiable && xs_sock_kind(s) == XS_KIND_TCP)
		xs_dbg("sock", "fd %d connects over tcp (%s)", a->app_fd,
		       xs_fallback_name(s->reason));
	/* a child forked meanwhile learns a TCP outcome from the table */
	if (!negotiable && sock_connect_shared(a) &&
	    xs_sock_kind(s) == XS_KIND_TCP)
		xs_handoff_put(a->fd, XS_HANDOFF_STRIP, atomic_load(&s->strip));
	xs_real.close(a->fd);
	sock_decided(s, true);
	xs_sock_put(s);
	free(a);
}

static void sock_connect_job(struct xs_job *job)
{
	XS_INSIDE(); /* a thread of ours: the handshakes, maybe last puts */

	sock_connect_run(xs_job_owner(job, struct sock_connecting, job));
}

/* Run @a on a connect worker (see SOCK_CONNECT_WORKERS). Return: 0, or a
 * negative errno when no worker will run it. */
static int sock_connect_queue(struct sock_connecting *a)
{
	a->job.run = sock_connect_job;
	return xs_workers_run(&sock_cw, &a->job);
}

/*
 * Start a non-blocking connect: the RDMA handshake goes to a connect
 * worker (signals blocked, so none meant for the application lands there;
 * see SOCK_CONNECT_WORKERS). Return: 0 (the caller answers EINPROGRESS),
 * or a negative errno when no worker will run it (the caller connects
 * synchronously).
 */
static int sock_connect_async(struct xs_sock *s, int fd,
			      const struct sockaddr *addr, socklen_t len,
			      const struct sockaddr_storage *rdma_addr)
{
	struct sock_connecting *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	/* one connect at a time, as the kernel's SS_CONNECTING */
	if (atomic_exchange(&s->connecting, true)) {
		free(a);
		return -EALREADY;
	}
	s->neg_gen = xs_fork_gen;
	a->fd = xs_fd_dup_high(fd);
	if (a->fd < 0) {
		rc = -errno;
		free(a);
		atomic_store(&s->connecting, false);
		return rc;
	}
	memcpy(&a->addr, addr, len);
	a->len = len;
	a->app_fd = fd;
	a->rdma_addr = *rdma_addr;
	a->forks = xs_sock_forks();
	s->connect_cookie = xs_handoff_cookie(fd);
	xs_sock_conn_params(&a->p);
	a->s = s;
	xs_sock_get(s);
	rc = sock_connect_queue(a);
	if (rc) {
		atomic_store_explicit(&s->connecting, false,
				      memory_order_release);
		xs_real.close(a->fd);
		free(a);
		xs_sock_put(s);
	}
	return rc;
}

/*
 * A connect that a worker of the process this one was forked from runs,
 * there: its outcome, once that worker recorded it in the handoff table
 * (the connection negotiable, or TCP), becomes this copy's. Return:
 * whether it still runs. Called by a forked child only.
 */
static bool sock_connect_elsewhere(struct xs_sock *s)
{
	unsigned int state, strip;
	bool done;

	xs_handoff_init(); /* the parent may have mapped it after the fork */
	pthread_mutex_lock(&s->lock);
	done = !atomic_load(&s->connecting) || s->neg_gen == xs_fork_gen;
	if (!done && s->connect_cookie &&
	    xs_handoff_take_cookie(s->connect_cookie, &state, &strip)) {
		xs_dbg("sock", "the parent's connect: %s",
		       state == XS_NEG_CLIENT ? "to negotiate" : "tcp");
		s->neg_gen = xs_fork_gen;
		pthread_mutex_unlock(&s->lock);
		xs_sock_adopted(s, -1, state, strip);
		/* the application's connect() again then answers 0 once */
		atomic_store(&s->connect_unseen, true);
		atomic_store(&s->connect_inherited, true);
		/* Decided here, maybe inside a wait's own look (this is
		 * called from the looks): every wait looks again, as after
		 * our own worker's outcome. Not the eventfd: the parent's
		 * worker wrote it, and it is the parent's too. */
		sock_decided(s, false);
		return false;
	}
	pthread_mutex_unlock(&s->lock);
	return !done;
}

bool xs_sock_connecting(struct xs_sock *s)
{
	if (!atomic_load_explicit(&s->connecting, memory_order_acquire))
		return false;
	if (s->neg_gen == xs_fork_gen)
		return true;
	/* a worker of the process this one was forked from runs there */
	return sock_connect_elsewhere(s);
}

int xs_sock_connect_wait(struct xs_sock *s, int timeout_ms)
{
	uint64_t deadline =
		timeout_ms > 0 ? xs_now_us() + (uint64_t)timeout_ms * 1000u : 0;
	struct pollfd pfd = { .events = POLLIN };
	int n, ms, rc = 0, wake = -2; /* -2: not registered yet */

	while (xs_sock_connecting(s)) {
		if (timeout_ms == 0)
			return -EAGAIN;
		if (wake == -2) {
			/* registered before the look that precedes the sleep:
			 * a decision after it wakes us (sock_decided()) */
			wake = xs_wake_enter();
			continue;
		}
		ms = timeout_ms;
		if (deadline) {
			uint64_t now = xs_now_us();

			if (now >= deadline) {
				rc = -EAGAIN;
				break;
			}
			ms = (int)((deadline - now + 999) / 1000);
		}
		/* Without a wake-up of our own, the socket's eventfd (left
		 * readable by the outcome), or a look every ms. A connect that
		 * the parent process runs decides there: look at the table
		 * every 10 ms. */
		pfd.fd = wake >= 0 ? wake : xs_sock_connect_evfd(s);
		if (pfd.fd < 0 && (ms < 0 || ms > 1))
			ms = 1;
		else if (s->neg_gen != xs_fork_gen && (ms < 0 || ms > 10))
			ms = 10;
		n = xs_real.poll(&pfd, 1, ms);
		if (n > 0 && wake >= 0)
			xs_wake_drain(wake);
		/* SA_RESTART: as the kernel's connect, unless SO_SNDTIMEO */
		if (n < 0 && errno == EINTR &&
		    (deadline || !xs_sig_restarts())) {
			rc = -EINTR;
			break;
		}
	}
	if (wake != -2)
		xs_wake_leave();
	return rc;
}

int xs_sock_take_connect_err(struct xs_sock *s)
{
	int err;

	pthread_mutex_lock(&s->lock);
	err = s->connect_err;
	s->connect_err = 0;
	pthread_mutex_unlock(&s->lock);
	return err;
}

int xs_sock_connect(struct xs_sock *s, int fd, const struct sockaddr *addr,
		    socklen_t len)
{
	struct sockaddr_storage copy;
	int reason, rc;

	if (xs_sock_connecting(s)) {
		/* The kernel's connection is up while the hello is answered
		 * (poll says writable then): a connect again answers as the
		 * kernel's does then (0, then EISCONN), which APR's
		 * apr_socket_connect() awaits once writable. Before, as the
		 * kernel while SYN_SENT. */
		socklen_t l = sizeof(copy);

		if (xs_real.getpeername(fd, (struct sockaddr *)&copy, &l) < 0)
			return -EALREADY;
		return xs_real.connect(fd, addr, len) < 0 ? -errno : 0;
	}
	if (xs_sock_kind(s) == XS_KIND_RDMA)
		return atomic_exchange(&s->connect_unseen, false) ? 0
								  : -EISCONN;
	if (xs_sock_negotiable(s) || atomic_load(&s->strip))
		return xs_real.connect(fd, addr, len) < 0 ? -errno : 0;
	if (xs_sock_kind(s) == XS_KIND_PENDING &&
	    len <= sizeof(copy) && /* longer: the kernel's EINVAL */
	    sock_copy_addr(addr, len, &copy) &&
	    sock_is_inet((struct sockaddr *)&copy, len)) {
		reason = sock_choose(XS_ROLE_CLIENT, (struct sockaddr *)&copy,
				     len);
		xs_sock_addr_unmap(&copy);
		if (reason == XS_FB_NONE)
			reason = sock_neg_lookup((struct sockaddr *)&copy);
		if (reason == XS_FB_NONE &&
		    atomic_load_explicit(&s->nonblock, memory_order_relaxed)) {
			rc = sock_connect_async(s, fd, addr, len, &copy);
			if (rc == 0)
				return -EINPROGRESS;
			if (rc == -EALREADY)
				return rc; /* another thread's connect */
		}
		if (reason == XS_FB_NONE)
			reason = sock_probe(fd, (struct sockaddr *)&copy);
		if (reason == XS_FB_NONE) {
			rc = xs_real.connect(fd, addr, len) < 0 ? -errno : 0;
			sock_pub_kernel_addrs(s, fd, NULL, 0);
			if (rc == 0) {
				(void)sock_connected_hello(s, fd, true,
							   xs_sock_forks());
				return 0;
			}
			/* an interrupted blocking connect goes on in the
			 * kernel: it is TCP now */
			pthread_mutex_lock(&s->lock);
			sock_set_kind(s, XS_KIND_TCP, XS_FB_PEER_NO_XSOCK);
			pthread_mutex_unlock(&s->lock);
			xs_sock_tcp_connect_failed(s, -rc);
			return rc;
		}
		pthread_mutex_lock(&s->lock);
		if (xs_sock_kind(s) == XS_KIND_PENDING)
			sock_set_kind(s, XS_KIND_TCP, reason);
		pthread_mutex_unlock(&s->lock);
		xs_dbg("sock", "fd %d connects over tcp (%s)", fd,
		       xs_fallback_name(reason));
	}
	rc = xs_real.connect(fd, addr, len) < 0 ? -errno : 0;
	if (s->pub->peer.sin6_family == 0 && xs_sock_kind(s) == XS_KIND_TCP)
		sock_pub_kernel_addrs(s, fd, addr, len);
	if (rc)
		xs_sock_tcp_connect_failed(s, -rc);
	return rc;
}

/* Whether IPV6_V6ONLY is set on @fd (an AF_INET6 socket). */
static int sock_v6only(int fd)
{
	int on = 0;
	socklen_t len = sizeof(on);

	if (xs_real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, &len) < 0)
		return 0;
	return on != 0;
}

/* The port of an AF_INET or AF_INET6 address, host order; 0 for others. */
static uint16_t sock_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

/*
 * Probes of @local answered by the helper from now on (core/helper.c):
 * clients learn that xsock listens on the port (core/neg.c); connections
 * themselves come over the kernel listener. Return: 0, 1 when they were
 * answered already (another socket of the family, or this one before it
 * listened again), or a negative errno (-EADDRINUSE or, for a wildcard
 * address, -EADDRNOTAVAIL: a listener of another process family has the
 * port).
 */
static int sock_probe_listener(struct xs_sock *s, int fd,
			       struct sockaddr *local, int afonly)
{
	struct stat st;
	int rc;

	xs_handoff_init(); /* shared with workers, whatever user they become */
	rc = xs_helper_listen(local, afonly,
			      fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0);
	if (rc >= 0) {
		pthread_mutex_lock(&s->lock);
		memset(&s->probe_addr, 0, sizeof(s->probe_addr));
		memcpy(&s->probe_addr, local,
		       local->sa_family == AF_INET6
			       ? sizeof(struct sockaddr_in6)
			       : sizeof(struct sockaddr_in));
		s->probe_pid = getpid();
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

/*
 * A listener whose probes another process family's helper answers (a
 * second SO_REUSEPORT server) asks its own helper again, once a second
 * at most: when the other one is gone, ours takes over.
 */
static void sock_listen_retry(struct xs_sock *s, int fd)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	uint64_t now = xs_now_us();

	pthread_mutex_lock(&s->lock);
	if (s->probe_addr.ss_family || now < s->listen_retry_us) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->listen_retry_us = now + 1000000u;
	pthread_mutex_unlock(&s->lock);
	if (xs_real.getsockname(fd, (struct sockaddr *)&local, &len) < 0)
		return;
	xs_sock_addr_unmap(&local);
	if (sock_probe_listener(s, fd, (struct sockaddr *)&local,
				local.ss_family == AF_INET6 &&
					sock_v6only(fd)) >= 0)
		xs_dbg("sock", "fd %d: probes answered here now", fd);
}

void xs_sock_listen_poke(struct xs_sock *s, int fd)
{
	if (xs_sock_kind(s) == XS_KIND_LISTEN && !s->probe_addr.ss_family &&
	    xs_sock_reason(s) == XS_FB_NONE)
		sock_listen_retry(s, fd);
}

/*
 * Whether @port is in the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range, read once; 32768-60999, its
 * default, when it cannot be read): a port the kernel picked, that no
 * client can know before the server tells it.
 */
static bool sock_port_ephemeral(uint16_t port)
{
	static _Atomic uint32_t range; /* lo << 16 | hi; 0: not read yet */
	uint32_t r = atomic_load_explicit(&range, memory_order_relaxed);
	unsigned int lo = 32768, hi = 60999;
	FILE *f;

	if (r == 0) {
		f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
		if (f) {
			if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo > hi ||
			    hi > 65535 || lo == 0)
				lo = 32768, hi = 60999;
			fclose(f);
		}
		r = (uint32_t)lo << 16 | hi;
		atomic_store_explicit(&range, r, memory_order_relaxed);
	}
	return port >= r >> 16 && port <= (r & 0xffffu);
}

/*
 * SOCK_LISTEN_SETTLE_MS: how long listen() of a socket bound to a port a
 * client may know already (any port outside the ephemeral range) waits
 * between the start of its probe listener and the kernel's listen(), when
 * probes were not answered there already. A
 * client whose probe came just before the probe listener was up was told
 * "no xsock there"; its kernel connect, a moment later, is then refused
 * (the client tries again, and finds both) rather than accepted over
 * kernel TCP, with "no xsock" remembered for XSOCK_RDMA_RETRY_MS (a
 * restarted server's clients). It covers a client's time from a rejected
 * probe to its SYN: connect() to a port nobody listens on, rejected probe
 * and refused SYN together, took 4.4-6.0 ms at the median and 17-44 ms at
 * the 99th percentile of 200, in three runs (Soft-RoCE guest under
 * emulation, one topology); on RDMA hardware it is well under a
 * millisecond.
 */
#define SOCK_LISTEN_SETTLE_MS 50

static void sock_listen_settle(void)
{
	struct timespec t = { 0, SOCK_LISTEN_SETTLE_MS * 1000000L };

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

int xs_sock_listen(struct xs_sock *s, int fd, int backlog)
{
	struct sockaddr_storage local, probe;
	socklen_t len = sizeof(local);
	int reason, rc, afonly;
	bool bound, created = false;

	if (xs_sock_connecting(s) || xs_sock_kind(s) == XS_KIND_RDMA)
		return -EINVAL; /* inet_listen() of a connecting or connected
				 * socket */
	/* probes are answered first when the port is known (bound): a client
	 * that finds the kernel's listener up then finds the probe listener
	 * too, and
	 * is never turned to kernel TCP (and XSOCK_RDMA_RETRY_MS) by a
	 * server that is just starting. An unbound socket gets its port
	 * from the kernel's listen(). */
	bound = xs_sock_kind(s) != XS_KIND_LISTEN &&
		xs_real.getsockname(fd, (struct sockaddr *)&local, &len) == 0 &&
		sock_addr_port((struct sockaddr *)&local) != 0;
	if (!bound) {
		if (xs_real.listen(fd, backlog) < 0)
			return -errno;
		if (xs_sock_kind(s) == XS_KIND_LISTEN)
			return 0; /* listen() again only changes the backlog */
		len = sizeof(local);
		if (xs_real.getsockname(fd, (struct sockaddr *)&local, &len) <
		    0)
			return 0; /* listening: the decision can wait */
	}
	reason = sock_choose(XS_ROLE_SERVER, (struct sockaddr *)&local, len);
	if (reason == XS_FB_NONE) {
		afonly = local.ss_family == AF_INET6 && sock_v6only(fd);
		xs_sock_addr_unmap(&local);
		rc = sock_probe_listener(s, fd, (struct sockaddr *)&local,
					 afonly);
		created = rc == 0;
		if (created && bound &&
		    !sock_port_ephemeral(
			    sock_addr_port((struct sockaddr *)&local)))
			sock_listen_settle();
		if (rc == -EADDRINUSE || rc == -EADDRNOTAVAIL) {
			/* another process family's helper answers probes
			 * (SO_REUSEPORT); ours tries again on accept */
			xs_info("sock", "fd %d: probes answered elsewhere", fd);
		} else if (rc < 0) {
			reason = rc == -ENODEV ? XS_FB_NO_DEVICE
					       : XS_FB_RESOURCE;
			xs_info("sock", "fd %d: no rdma listener (%s)", fd,
				strerror(-rc));
		}
	}
	if (bound && xs_real.listen(fd, backlog) < 0) {
		rc = -errno;
		pthread_mutex_lock(&s->lock);
		probe = s->probe_addr;
		s->probe_addr.ss_family = 0;
		pthread_mutex_unlock(&s->lock);
		/* the probe listener goes if this call made it; one that
		 * answered already speaks for another socket of the family */
		if (probe.ss_family && created)
			xs_helper_unlisten((struct sockaddr *)&probe);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	sock_set_kind(s, XS_KIND_LISTEN, reason);
	sock_pub_kernel_addrs(s, fd, NULL, 0);
	memset(&s->pub->peer, 0, sizeof(s->pub->peer));
	pthread_mutex_unlock(&s->lock);
	xs_dbg("sock", "fd %d listens on kernel tcp%s (%s)", fd,
	       s->probe_addr.ss_family ? ", probes answered" : " only",
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
	if (accept4 && (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)))
		return -EINVAL;
	if (!accept4)
		flags = 0;
	/* every connection comes over the kernel listener: an xsock
	 * client's then negotiates RDMA over it (core/neg.c) */
	xs_sock_listen_poke(s, fd);
	nfd = accept4 ? xs_real.accept4(fd, addr, len, flags)
		      : xs_real.accept(fd, addr, len);
	if (nfd < 0)
		return -errno;
	c = xs_sock_create(s->domain, s->type | flags, s->protocol);
	if (!c) {
		xs_log_once(XS_LOG_WARN, "sock",
			    "out of memory: accepted fd %d left untracked",
			    nfd);
		return nfd;
	}
	/* Over the kernel listener: the peer did not use RDMA (or came over
	 * loopback, which no device serves), or the listener is not xsock's,
	 * for its own reason. */
	sock_pub_kernel_addrs(c, nfd, NULL, 0);
	reason = xs_sock_reason(s);
	if (reason == XS_FB_NONE &&
	    sock_is_loopback((struct sockaddr *)&c->pub->peer,
			     sizeof(c->pub->peer)))
		reason = XS_FB_LOOPBACK;
	if (reason == XS_FB_NONE) {
		/* its I/O process negotiates: the client may run xsock */
		atomic_store(&c->neg, XS_NEG_SERVER);
		c->neg_expect = xs_handoff_probed(nfd);
		c->accept_gen = xs_fork_gen;
		c->accept_forks = xs_sock_forks();
		atomic_store(&c->passed, false);
		xs_handoff_put(nfd, XS_NEG_SERVER, 0);
		atomic_store(&c->linger_ms, atomic_load(&s->linger_ms));
		atomic_store(&c->keepidle_s, atomic_load(&s->keepidle_s));
	} else {
		pthread_mutex_lock(&c->lock);
		sock_set_kind(c, XS_KIND_TCP, reason);
		pthread_mutex_unlock(&c->lock);
	}
	*child = c;
	/* a connection from this very process (core/sock_self.c) */
	if (reason == XS_FB_NONE)
		xs_self_accepted(c, nfd);
	return nfd;
}
