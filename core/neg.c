/*
 * core/neg.c - a connection's RDMA set up over its own kernel TCP
 *              connection, in whichever process does its I/O.
 *
 * Every connection between two xsock ends is a real kernel TCP connection
 * first (cf. SMC-R, which keeps one under every SMC socket and negotiates
 * over it). What makes RDMA possible, in order:
 *   1. connect(): a probe (xs_conn_probe(), a CM REQ the server's probe
 *      listener rejects with "xsock here", both in the xsock-cm helper
 *      process of core/helper.c) tells the client that xsock serves the
 *      port; then the kernel connects, and the client's first bytes on the
 *      stream are XS_TCP_HELLO. The probe names the client's port: the
 *      accepting process then knows the hello is coming (core/handoff.c). Without the probe's answer the client
 *      sends nothing of ours: a server without xsock never sees a byte it
 *      did not expect.
 *   2. The first process that does I/O on the socket (a data call, poll,
 *      select, or adding it to an epoll set) claims it, and negotiates
 *      while the socket reads as "connecting": the server's side is a
 *      state machine that xsock-cm steps (neg_server_step()), which reads
 *      XS_TCP_HELLO and answers XS_TCP_REPLY with its process's rendezvous
 *      listener (port, one-time token); the client's side, on a worker
 *      thread of its own, connects a QP there (token in the hello's
 *      conn_id). No thread per accepted connection: a burst of them would
 *      leave the application's allocator an arena per thread (jemalloc),
 *      and redis refreshes the stats of every arena ten times a second.
 *      Both sockets become RDMA; the TCP connection stays idle under them.
 *   3. Whatever goes wrong before a byte moved turns both ends to TCP, in
 *      agreement: the server answers "rdma 0", or the client sends
 *      XS_TCP_FALLBACK (its QP did not connect, or no reply came within
 *      XSOCK_CONNECT_TIMEOUT_MS), or the stream's first bytes are not ours
 *      (a client without xsock; a server that wrote first). A control
 *      message that may still arrive after that is stripped on the TCP
 *      path (s->strip) before the application reads.
 * So a fork, a fork and exec, an inherited listener, SO_REUSEPORT or a
 * daemon's double fork all leave the decision to the process that uses
 * the connection, and QPs live only in the process that made them.
 *
 * The process's rendezvous listener and its servers' negotiations are
 * served by one thread, xsock-cm (signals blocked): a connection's QP is
 * made off the application's thread, which waits for the decision.
 *
 * Context: any thread. neg_lock (after sock_neg_lock in the lock order of
 * core/xs_core.h) protects the tables below; it is held around the
 * listeners' rdma-core calls (QP setup: dev_lock, pool.lock, log_lock).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "core_int.h"
#include "fdtab.h"
#include "stats.h"
#include "stream.h"

#define NEG_WAITS   1024 /* negotiations between reply and QP */
#define NEG_STEP_MS 100	 /* a worker looks at refcnt this often */
/*
 * The application writes before the client's hello came: a client with
 * xsock sent it right after its handshake's last ACK, so it is at most a
 * moment behind. Waiting this long for it keeps a write-first server
 * (SMTP, MySQL) on RDMA; a client without xsock costs it once.
 */
#define NEG_HURRY_MS 5 /* for a client whose probe this host never saw */
/*
 * The longest close() of an unclaimed socket waits for the hello of a
 * client that probed (neg_close_await_hello()). The hello trails the
 * handshake by a moment; 20 ms covers a sender descheduled for a few
 * timeslices on a loaded host, and is paid only by a server that closes
 * before reading a connection accepted that very moment.
 */
#define NEG_CLOSE_HELLO_MS 20

struct neg_wait {
	uint64_t token;	      /* 0: free */
	struct xs_conn *conn; /* the QP that came with the token */
	struct xs_conn *pre;  /* made ahead for it (neg_prepare()), or NULL */
	int evfd;	      /* the worker's: written when conn is set */
	struct sockaddr_storage peer; /* the TCP peer: only its host may come */
};

/* One claimed socket's negotiation: a client's on a worker thread of its
 * own, a server's a state machine that xsock-cm steps (neg_server_step). */
struct neg_job {
	struct xs_sock *s; /* a reference */
	int fd;		   /* our dup of the kernel socket */
	int evfd;	   /* wakes the worker: hurry, or the QP came */
	bool client;
	uint64_t deadline_us; /* client: give up waiting for the reply */
	/* server */
	int state;	      /* NEG_S_HELLO, then NEG_S_QP */
	int slot;	      /* NEG_S_QP: its neg_waits[] entry */
	uint64_t idle_until;  /* no hello by then: TCP */
	uint64_t hurry_until; /* the application writes first: TCP then */
	uint64_t looked_us;   /* its last step */
	uint64_t pre_until;   /* NEG_S_QP: when its prepared QP goes */
	bool pre_wanted;      /* its QP to be made ahead (neg_prepare()) */
	int pidx;	      /* its socket's entry in xsock-cm's poll set */
	struct neg_job *next; /* neg_jobs */
	struct xs_job job;    /* client: on neg_clients */
};

enum { NEG_S_HELLO, NEG_S_QP };
#define NEG_CONTINUE (-100) /* neg_server_step(): not decided yet */

static pthread_mutex_t neg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct neg_job *neg_jobs;    /* servers' negotiations; neg_lock */
static struct xs_listener *neg_rdv; /* rendezvous listener; neg_lock */
static uint16_t neg_rdv_port;	    /* its port; neg_lock */
static struct neg_wait neg_waits[NEG_WAITS]; /* neg_lock */
static int neg_wake = -1;		     /* eventfd for xsock-cm */
static bool neg_running;		     /* xsock-cm is up; neg_lock */

/* ------------------------------------------------------- xsock-cm */

static bool neg_same_host(const struct sockaddr *a,
			  const struct sockaddr_storage *b)
{
	struct sockaddr_storage x, y;
	socklen_t len = sizeof(x);

	memset(&x, 0, sizeof(x));
	memcpy(&x, a,
	       a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					: sizeof(struct sockaddr_in));
	y = *b;
	xs_sock_addr_unmap(&x);
	xs_sock_addr_unmap(&y);
	(void)len;
	if (x.ss_family != y.ss_family)
		return false;
	if (x.ss_family == AF_INET)
		return ((struct sockaddr_in *)&x)->sin_addr.s_addr ==
		       ((struct sockaddr_in *)&y)->sin_addr.s_addr;
	return memcmp(&((struct sockaddr_in6 *)&x)->sin6_addr,
		      &((struct sockaddr_in6 *)&y)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

/* An established rendezvous QP goes to the negotiation of its token.
 * Called with neg_lock held. */
static void neg_route(struct xs_conn *c)
{
	size_t i;

	for (i = 0; i < NEG_WAITS; i++) {
		struct neg_wait *w = &neg_waits[i];

		if (!w->token || w->token != c->peer.conn_id || w->conn)
			continue;
		if (!neg_same_host(rdma_get_peer_addr(c->id), &w->peer))
			break; /* a token from another host: not its own */
		w->conn = c;
		(void)!eventfd_write(w->evfd, 1);
		return;
	}
	xs_info("neg", "a rendezvous connection with an unknown token");
	xs_conn_destroy(c);
}

/*
 * The rendezvous listener's l->prepared: whether the request of token
 * @conn_id from @peer is one a negotiation here awaits, and the
 * connection made ahead for it (*@out, or NULL). A token that none
 * awaits, taken already, or from a host other than the negotiation's TCP
 * peer (a client whose route leaves from another address than its TCP
 * connection) is refused before a QP is made: the client falls back to
 * TCP, as its server then does, where an accepted connection would look
 * up to the client and be dropped here (neg_route()). Return: 0, or a
 * negative errno to reject. Called with neg_lock held (xsock-cm polls the
 * listener under it).
 */
static int neg_prepared(uint64_t conn_id, const struct sockaddr *peer,
			struct xs_conn **out)
{
	size_t i;

	*out = NULL;
	for (i = 0; conn_id && i < NEG_WAITS; i++) {
		struct neg_wait *w = &neg_waits[i];

		if (w->token != conn_id)
			continue;
		if (!neg_same_host(peer, &w->peer))
			return -EACCES;
		if (w->conn)
			return -EALREADY;
		*out = w->pre;
		w->pre = NULL;
		return 0;
	}
	return -ENOENT;
}

static int neg_server_step(struct neg_job *j);
static void neg_finish(struct neg_job *j, int reason);
static void neg_prepare(struct neg_job *j);

/* The poll set of xsock-cm: its eventfd, the rendezvous listener, and
 * each server negotiation's socket and eventfd. Return: the entries. */
static nfds_t neg_poll_set(struct pollfd **pfd, size_t *cap, int *timeout)
{
	struct neg_job *j;
	size_t want = 2;
	nfds_t n = 0;

	for (j = neg_jobs; j; j = j->next)
		want += 2;
	if (want > *cap) {
		struct pollfd *p = realloc(*pfd, want * sizeof(*p));

		if (p) {
			*pfd = p;
			*cap = want;
		}
	}
	(*pfd)[n++] = (struct pollfd){ .fd = neg_wake, .events = POLLIN };
	if (neg_rdv)
		(*pfd)[n++] = (struct pollfd){ .fd = xs_listener_fd(neg_rdv),
					       .events = POLLIN };
	/* a negotiation looks at the clock and at its socket's references
	 * (the application closed it) every NEG_STEP_MS, 1 ms hurried */
	*timeout = neg_jobs ? NEG_STEP_MS : -1;
	for (j = neg_jobs; j; j = j->next) {
		if (j->hurry_until)
			*timeout = 1;
		j->pidx = -1;
		if (n + 2 > *cap)
			continue; /* no room: the timeout looks at it */
		j->pidx = (int)n;
		(*pfd)[n++] = (struct pollfd){ .fd = j->fd, .events = POLLIN };
		(*pfd)[n++] =
			(struct pollfd){ .fd = j->evfd, .events = POLLIN };
	}
	return n;
}

static void *neg_main(void *arg)
{
	struct pollfd *pfd = NULL;
	struct neg_job *j, *todo, *keep;
	struct xs_conn *c;
	size_t cap = 0;
	eventfd_t v;
	int timeout, reason;
	uint64_t now;
	bool rdv;
	nfds_t n;
	XS_INSIDE(); /* a thread of ours: rdma_cm and QP setup throughout */

	(void)arg;
	pfd = calloc(2, sizeof(*pfd));
	if (!pfd)
		return NULL; /* neg_running stays: new servers wait, then TCP */
	cap = 2;
	for (;;) {
		pthread_mutex_lock(&neg_lock);
		n = neg_poll_set(&pfd, &cap, &timeout);
		pthread_mutex_unlock(&neg_lock);
		/* The listener's channel, the eventfds (a new listener, a new
		 * negotiation, its news) or a negotiation's clock wake it: an
		 * idle process never runs it. */
		if (xs_real.poll(pfd, n, timeout) < 0 && errno != EINTR)
			xs_real.poll(NULL, 0, 10);
		pthread_mutex_lock(&neg_lock);
		if (pfd[0].revents)
			(void)!eventfd_read(neg_wake, &v);
		rdv = neg_rdv && n > 1 && pfd[1].revents &&
		      pfd[1].fd == xs_listener_fd(neg_rdv);
		if (rdv && xs_listener_poll(neg_rdv, true) > 0)
			while (xs_listener_accept(neg_rdv, &c, 0) == 0)
				neg_route(c);
		todo = neg_jobs;
		neg_jobs = NULL;
		pthread_mutex_unlock(&neg_lock);
		/* each negotiation a step, off the lock (attach takes the
		 * socket's locks, a reply may create the listener) */
		keep = NULL;
		now = xs_now_us();
		while ((j = todo)) {
			todo = j->next;
			/* its socket or eventfd spoke, or its clock is due */
			if (j->pidx >= 0 && (nfds_t)j->pidx + 1 < n &&
			    !pfd[j->pidx].revents &&
			    !pfd[j->pidx + 1].revents &&
			    now - j->looked_us <
				    (j->hurry_until ? 1000u
						    : NEG_STEP_MS * 1000u)) {
				j->next = keep;
				keep = j;
				continue;
			}
			j->looked_us = now;
			reason = neg_server_step(j);
			if (reason == NEG_CONTINUE) {
				j->next = keep;
				keep = j;
			} else {
				neg_finish(j, reason);
			}
		}
		/* the QPs made ahead once every reply of this pass is out: a
		 * burst of clients each gets its reply without waiting behind
		 * the QPs of those before it */
		for (j = keep; j; j = j->next)
			if (j->pre_wanted) {
				j->pre_wanted = false;
				neg_prepare(j);
			}
		pthread_mutex_lock(&neg_lock);
		while ((j = keep)) {
			keep = j->next;
			j->next = neg_jobs;
			neg_jobs = j;
		}
		pthread_mutex_unlock(&neg_lock);
	}
	return NULL;
}

/* Start xsock-cm once per process. Called with neg_lock held. */
static int neg_start_locked(void)
{
	int rc;

	if (neg_running)
		return 0;
	if (neg_wake < 0)
		neg_wake = xs_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (neg_wake < 0)
		return -errno;
	rc = xs_thread_start(neg_main, NULL, 0, "xsock-cm");
	if (rc == 0)
		neg_running = true;
	return rc;
}

/*
 * Register a negotiation: a token, the rendezvous port to announce.
 * Return: the slot index, or a negative errno (-ENOBUFS when full, or
 * the rendezvous listener's own error).
 */
static int neg_wait_add(int evfd, const struct sockaddr_storage *peer,
			uint16_t *port, uint64_t *token)
{
	static const struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
	struct xs_conn_params p;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&neg_lock);
	if (!neg_rdv) {
		xs_sock_conn_params(&p);
		p.afonly = 0; /* IPv4 peers too */
		rc = xs_listener_create(&neg_rdv, (const struct sockaddr *)&any,
					1024, &p);
		if (rc == 0) {
			neg_rdv->prepared = neg_prepared;
			neg_rdv_port = ntohs(rdma_get_src_port(neg_rdv->id));
			rc = neg_start_locked();
			if (rc == 0)
				(void)!eventfd_write(neg_wake, 1);
		} else {
			neg_rdv = NULL;
		}
	}
	if (rc)
		goto out;
	rc = -ENOBUFS;
	for (i = 0; i < NEG_WAITS; i++) {
		struct neg_wait *w = &neg_waits[i];

		if (w->token)
			continue;
		do {
			if (getrandom(&w->token, sizeof(w->token), 0) !=
			    sizeof(w->token))
				w->token = xs_now_us() ^ (uintptr_t)w;
		} while (!w->token);
		w->conn = NULL;
		w->evfd = evfd;
		w->peer = *peer;
		*port = neg_rdv_port;
		*token = w->token;
		rc = (int)i;
		break;
	}
out:
	pthread_mutex_unlock(&neg_lock);
	return rc;
}

/* A connection made ahead (xs_conn_prepare()) on the device of TCP socket
 * @fd's own address, or NULL where none can be (an ancestor's rdma-core
 * state, no RDMA device there, resources). */
static struct xs_conn *neg_prepare_on(int fd)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct xs_conn_params p;
	struct xs_conn *c;

	if (xs_dev_inherited() ||
	    xs_real.getsockname(fd, (struct sockaddr *)&local, &len) < 0)
		return NULL;
	xs_sock_addr_unmap(&local);
	xs_sock_conn_params(&p);
	return xs_conn_prepare(&c, (struct sockaddr *)&local, &p) ? NULL : c;
}

/* Free slot @i; the QP that came, if any, is the caller's (one made
 * ahead that no request took goes). */
static struct xs_conn *neg_wait_take(int i)
{
	struct xs_conn *c, *pre;

	pthread_mutex_lock(&neg_lock);
	c = neg_waits[i].conn;
	pre = neg_waits[i].pre;
	memset(&neg_waits[i], 0, sizeof(neg_waits[i]));
	pthread_mutex_unlock(&neg_lock);
	xs_conn_destroy(pre);
	return c;
}

/*
 * The server's QP for @j's client, made while the reply travels and the
 * client connects (xs_conn_prepare() on the device of the kernel
 * connection's own address), so that the client's request finds it ready
 * (neg_prepared()) instead of waiting for its setup: 0.65-0.9 ms of each
 * connection's in the Soft-RoCE guest (connrate rate, trace log). Only for
 * a client whose probe this host saw (an xsock client probes first; bytes
 * that merely look like a hello cost no QP), and for
 * XSOCK_CONNECT_TIMEOUT_MS at most (neg_unprepare()); elsewhere the
 * request makes its QP, as before. Called by xsock-cm.
 */
static void neg_prepare(struct neg_job *j)
{
	struct xs_conn *c = j->s->neg_expect ? neg_prepare_on(j->fd) : NULL;

	if (!c)
		return;
	pthread_mutex_lock(&neg_lock);
	if (neg_waits[j->slot].token && !neg_waits[j->slot].conn &&
	    !neg_waits[j->slot].pre) {
		neg_waits[j->slot].pre = c;
		c = NULL;
		j->pre_until =
			xs_now_us() +
			(uint64_t)xs_core_cfg()->connect_timeout_ms * 1000u;
	}
	pthread_mutex_unlock(&neg_lock);
	xs_conn_destroy(c);
}

/* The prepared QP of @j whose client did not connect in time goes (the
 * negotiation waits on, as before, for a request that makes its own). */
static void neg_unprepare(struct neg_job *j)
{
	struct xs_conn *c;

	if (!j->pre_until || xs_now_us() < j->pre_until)
		return;
	j->pre_until = 0;
	pthread_mutex_lock(&neg_lock);
	c = neg_waits[j->slot].pre;
	neg_waits[j->slot].pre = NULL;
	pthread_mutex_unlock(&neg_lock);
	xs_conn_destroy(c);
}

void xs_neg_lock(void)
{
	pthread_mutex_lock(&neg_lock);
}

void xs_neg_unlock(void)
{
	pthread_mutex_unlock(&neg_lock);
}

void xs_neg_fork_child(void)
{
	/* xsock-cm is the parent's, so is its rendezvous listener: closing
	 * our copy of its CM channel lets it go with the parent */
	if (neg_rdv)
		xs_real.close(xs_listener_fd(neg_rdv));
	neg_rdv = NULL;
	neg_rdv_port = 0;
	memset(neg_waits, 0, sizeof(neg_waits));
	neg_jobs = NULL; /* the parent's, which its xsock-cm finishes */
	neg_running = false;
	pthread_mutex_unlock(&neg_lock);
}

/* --------------------------------------------------- the negotiation */

static int neg_send_msg(int fd, const struct xs_tcp_msg *m)
{
	uint8_t buf[XS_TCP_MSG_LEN];
	size_t off = 0;
	ssize_t n;

	xs_wire_tcp_encode(m, buf);
	while (off < sizeof(buf)) {
		n = xs_real.send(fd, buf + off, sizeof(buf) - off,
				 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			xs_real.poll(&p, 1, NEG_STEP_MS);
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		off += (size_t)n;
	}
	return 0;
}

int xs_neg_send_hello(int fd)
{
	struct xs_tcp_msg m = { .type = XS_TCP_HELLO };

	return neg_send_msg(fd, &m);
}

/*
 * Bytes queued to be read on TCP socket @fd (SIOCINQ), or -1 when it
 * cannot tell. Unlike a recv(MSG_PEEK) on an empty queue, it never takes
 * the socket's pending error (a reset) that the application must see.
 */
static int neg_inq(int fd)
{
	int n;

	return xs_real.ioctl(fd, SIOCINQ, &n) == 0 ? n : -1;
}

/*
 * Look at the head of @fd's stream for a control message of @type (0:
 * any). Return: 1 with @m (and the bytes consumed), 0 nothing decisive
 * yet (no bytes, or a prefix), -1 application bytes, -2 end of stream or
 * an error (left for the application to read).
 */
static int neg_peek(int fd, int type, struct xs_tcp_msg *m)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	uint8_t buf[XS_TCP_MSG_LEN];
	ssize_t n;
	int r;

	/* A pending error (a reset) is the application's to read: a recv
	 * on an empty queue would take it (sock_error() clears it), one
	 * that finds bytes leaves it (tcp_recvmsg()). So the bytes that came
	 * before the reset are looked at: a FALLBACK there, once the REPLY
	 * drew the RST of a client that had ended, is ours to take, never
	 * the application's to read. */
	r = neg_inq(fd);
	if (xs_real.poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLNVAL)) &&
	    r <= 0)
		return -2;
	/* Nor may one that comes after that look be taken: a recv finds an
	 * error only when no byte is queued, so none is made then. */
	if (r == 0 || neg_inq(fd) == 0)
		return p.revents & (POLLHUP | POLLRDHUP | POLLERR) ? -2 : 0;
	n = xs_real.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
			       ? 0
			       : -2;
	if (n == 0)
		return -2;
	r = xs_wire_tcp_decode(buf, (size_t)n, type, m);
	if (r == 1)
		(void)!xs_real.recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	return r;
}

/* Wait for bytes on @fd or news on @evfd for at most @ms. Return: the
 * revents of @evfd (nonzero: news). */
static short neg_wait_io(int fd, int evfd, int ms)
{
	struct pollfd p[2] = {
		{ .fd = fd, .events = POLLIN },
		{ .fd = evfd, .events = POLLIN },
	};
	eventfd_t v;

	if (xs_real.poll(p, 2, ms) > 0 && p[1].revents) {
		(void)!eventfd_read(evfd, &v);
		return p[1].revents;
	}
	return 0;
}

/* Whether the application still holds the socket (our reference aside). */
static bool neg_wanted(struct xs_sock *s)
{
	return atomic_load(&s->refcnt) > 1;
}

/* neg_client()'s steps: the reply, then the QP, *@pre's when it has one
 * (taken: NULL after). Return: as neg_client(). */
static int neg_client_steps(struct neg_job *j, struct xs_conn **pre)
{
	struct xs_sock *s = j->s;
	struct sockaddr_storage dst;
	struct xs_conn_params p;
	struct xs_tcp_msg m, fb = { .type = XS_TCP_FALLBACK };
	socklen_t len = sizeof(dst);
	struct xs_conn *c = *pre;
	int r, rc;

	for (;;) {
		r = neg_peek(j->fd, XS_TCP_REPLY, &m);
		if (r == 1)
			break;
		if (r == -2)
			return XS_NEG_PEER_GONE;
		if (r < 0)
			return XS_FB_PEER_NO_XSOCK; /* the server wrote first */
		if (!neg_wanted(s))
			return XS_FB_TIMEOUT;
		if (xs_now_us() >= j->deadline_us) {
			/* the server's side never looked: TCP, and its reply
			 * may still come (stripped) */
			atomic_store(&s->strip, 1u << XS_TCP_REPLY);
			(void)neg_send_msg(j->fd, &fb);
			return XS_FB_TIMEOUT;
		}
		neg_wait_io(j->fd, j->evfd, NEG_STEP_MS);
	}
	if (!m.rdma)
		return XS_FB_RESOURCE; /* the server could not take it */
	if (xs_dev_inherited()) {
		/* rdma-core's contexts here are an ancestor's: the kernel
		 * refuses this process their write() commands (EACCES) */
		(void)neg_send_msg(j->fd, &fb);
		return XS_FB_RESOURCE;
	}
	if (xs_real.getpeername(j->fd, (struct sockaddr *)&dst, &len) < 0) {
		(void)neg_send_msg(j->fd, &fb);
		return XS_FB_RESOURCE;
	}
	xs_sock_addr_unmap(&dst);
	if (dst.ss_family == AF_INET)
		((struct sockaddr_in *)&dst)->sin_port = htons(m.port);
	else
		((struct sockaddr_in6 *)&dst)->sin6_port = htons(m.port);
	xs_sock_conn_params(&p);
	p.token = m.token;
	*pre = NULL;
	if (c)
		rc = xs_conn_connect_prepared(&c, (struct sockaddr *)&dst, &p);
	else
		rc = xs_conn_connect(&c, (struct sockaddr *)&dst, &p);
	if (rc == 0)
		rc = xs_sock_attach(s, c, j->fd);
	if (rc == 0) {
		xs_stats_inc(rdma_connects);
		return XS_FB_NONE;
	}
	xs_info("neg", "rendezvous connect failed (%s): tcp", strerror(-rc));
	/* No fallback where the server's side is over (its negotiation
	 * ended: -ESTALE; its rendezvous listener gone with its process:
	 * -ECONNREFUSED) and its end of the stream is closed: sent to a
	 * closed socket, it would draw the reset that, over kernel TCP,
	 * only the application's first send draws, after that send
	 * succeeded. A server's side that still waits (one that refused a
	 * token from another host and shut its socket down for writing)
	 * ends at the client's first bytes or its end, as without one. */
	if ((rc != -ESTALE && rc != -ECONNREFUSED) ||
	    neg_peek(j->fd, 0, &m) != -2)
		(void)neg_send_msg(j->fd, &fb);
	return xs_sock_connect_reason(rc);
}

/*
 * The client's side: the reply, then the QP. The QP is made while the
 * reply comes (xs_conn_prepare() on the device of the kernel connection's
 * own address, which the route to the server leaves from), so that its
 * setup overlaps that round trip; where that cannot be, it is made after.
 * Return: the fallback reason, XS_FB_NONE when the socket is RDMA.
 */
static int neg_client(struct neg_job *j)
{
	struct xs_conn *pre = neg_prepare_on(j->fd);
	int reason;

	reason = neg_client_steps(j, &pre);
	xs_conn_destroy(pre);
	return reason;
}

/*
 * One step of the server's side: the hello, the reply, then the QP.
 * Called by xsock-cm, without neg_lock, whenever the socket or the
 * eventfd is readable or NEG_STEP_MS (1 ms hurried) passed.
 * Return: the fallback reason, XS_FB_NONE when RDMA, or NEG_CONTINUE.
 */
static int neg_server_step(struct neg_job *j)
{
	struct xs_sock *s = j->s;
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	struct xs_tcp_msg m, reply = { .type = XS_TCP_REPLY };
	struct xs_conn *c;
	eventfd_t v;
	uint64_t now;
	int r, rc;

	(void)!eventfd_read(j->evfd, &v);
	if (j->state == NEG_S_QP)
		goto qp;
	r = neg_peek(j->fd, XS_TCP_HELLO, &m);
	if (r == -2)
		return XS_NEG_PEER_GONE;
	if (r < 0)
		return XS_FB_PEER_NO_XSOCK; /* its bytes */
	if (r == 0) {
		if (!neg_wanted(s))
			return XS_FB_PEER_NO_XSOCK;
		now = xs_now_us();
		/* a client that probed sends its hello: worth the wait */
		if (atomic_load(&s->neg_hurry) && !s->neg_expect &&
		    !j->hurry_until)
			j->hurry_until = now + NEG_HURRY_MS * 1000u;
		if ((j->hurry_until && now >= j->hurry_until) ||
		    now >= j->idle_until) {
			/* the application writes first, or the peer says
			 * nothing: TCP; a hello that comes late is stripped */
			atomic_store(&s->strip,
				     (1u << XS_TCP_HELLO) |
					     (1u << XS_TCP_FALLBACK));
			return XS_FB_PEER_NO_XSOCK;
		}
		return NEG_CONTINUE;
	}
	j->hurry_until = 0;
	if (xs_real.getpeername(j->fd, (struct sockaddr *)&peer, &len) < 0)
		memset(&peer, 0, sizeof(peer));
	/* see neg_client(): an ancestor's rdma-core state cannot serve; a
	 * socket that another command of a shell's pipeline holds (-EBUSY)
	 * stays TCP for both */
	j->slot = xs_dev_inherited() ? -EACCES
		  : s->neg_adopter < 0
			  ? -EBUSY
			  : neg_wait_add(j->evfd, &peer, &reply.port,
					 &reply.token);
	reply.rdma = j->slot >= 0;
	/* The client decided TCP before we answered (its image runs without
	 * xsock: xs_sock_exec_bare()), so no reply, which that image would
	 * read: looked at the last moment, after the listener's setup. */
	r = neg_peek(j->fd, XS_TCP_FALLBACK, &m);
	if (r == 1 || r == -2 || neg_send_msg(j->fd, &reply) < 0) {
		if (j->slot >= 0)
			xs_conn_destroy(neg_wait_take(j->slot));
		return r == 1 ? XS_FB_UNSUPPORTED : XS_NEG_PEER_GONE;
	}
	if (j->slot < 0) {
		xs_info("neg", "no rendezvous listener (%s): tcp",
			strerror(-j->slot));
		return j->slot == -ENODEV  ? XS_FB_NO_DEVICE
		       : j->slot == -EBUSY ? XS_FB_UNSUPPORTED
					   : XS_FB_RESOURCE;
	}
	j->state = NEG_S_QP;
	j->pre_wanted = true; /* once this pass's replies are out */
qp:
	/* The client decides from here: its QP comes, or its fallback. */
	pthread_mutex_lock(&neg_lock);
	c = neg_waits[j->slot].conn;
	pthread_mutex_unlock(&neg_lock);
	if (!c) {
		r = neg_peek(j->fd, XS_TCP_FALLBACK, &m);
		if (r == 0 && neg_wanted(s)) {
			neg_unprepare(j);
			return NEG_CONTINUE;
		}
		xs_conn_destroy(neg_wait_take(j->slot));
		return r == 1	 ? XS_FB_RESOURCE
		       : r == -2 ? XS_NEG_PEER_GONE
				 : XS_FB_PEER_NO_XSOCK;
	}
	c = neg_wait_take(j->slot);
	rc = xs_sock_attach(s, c, j->fd);
	if (rc)
		return XS_FB_RESOURCE;
	xs_stats_inc(rdma_accepts);
	return XS_FB_NONE;
}

/* The negotiation of @j ended for @reason: the socket learns it, the job
 * goes. */
static void neg_finish(struct neg_job *j, int reason)
{
	struct xs_sock *s = j->s;

	/* for an exec'd program, an fd receiver, the other commands of a
	 * pipeline (TCP with nothing to strip, for them) */
	if (atomic_load(&s->strip) ||
	    (s->neg_adopter < 0 && reason != XS_FB_NONE))
		xs_handoff_put(j->fd, XS_HANDOFF_STRIP, atomic_load(&s->strip));
	xs_sock_neg_done(s, reason);
	xs_real.close(j->fd);
	xs_real.close(j->evfd);
	xs_sock_put(s);
	free(j);
}

/*
 * Clients' negotiations run on a pool of threads, one per negotiation in
 * flight: each waits for its server's reply, so none waits behind
 * another's (NEG_CLIENTS is far beyond any count seen: redis-benchmark
 * -c 1000 connects non-blocking, 64 at a time). An idle one waits
 * NEG_CLIENT_LINGER_MS for the next, so that a program that connects again
 * and again with blocking connects starts no thread per connection.
 * A forked child leaves the parent's queue to the parent, as it leaves the
 * negotiations running there.
 */
#define NEG_CLIENTS	     4096
#define NEG_CLIENT_LINGER_MS 2000

static struct xs_workers neg_clients =
	XS_WORKERS_INIT(NEG_CLIENTS, NEG_CLIENT_LINGER_MS);
/* A client's negotiation, on a worker of neg_clients. */
static void neg_client_job(struct xs_job *job)
{
	struct neg_job *j = xs_job_owner(job, struct neg_job, job);
	int reason;

	{
		XS_INSIDE(); /* rdma_cm, the QP, the stream */

		reason = neg_client(j);
	}
	neg_finish(j, reason);
}

int xs_neg_start(struct xs_sock *s, int fd, bool client)
{
	struct neg_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -ENOMEM;
	j->s = s;
	j->client = client;
	j->deadline_us = xs_now_us() +
			 (uint64_t)xs_core_cfg()->connect_timeout_ms * 1000u;
	j->fd = xs_fd_dup_high(fd);
	j->evfd = xs_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (j->fd < 0 || j->evfd < 0) {
		rc = -errno;
		goto out_free;
	}
	atomic_store(&s->neg_evfd, j->evfd);
	xs_sock_get(s);
	if (!client) { /* a step of xsock-cm's at a time */
		j->idle_until = j->deadline_us;
		j->pidx = -1; /* not in the poll set yet: stepped at once */
		pthread_mutex_lock(&neg_lock);
		rc = neg_start_locked();
		if (rc == 0) {
			j->next = neg_jobs;
			neg_jobs = j;
			(void)!eventfd_write(neg_wake, 1);
		}
		pthread_mutex_unlock(&neg_lock);
		if (rc == 0)
			return 0;
		atomic_store(&s->neg_evfd, -1);
		xs_sock_put(s);
		goto out_free;
	}
	j->job.run = neg_client_job;
	rc = xs_workers_run(&neg_clients, &j->job);
	if (rc == 0)
		return 0;
	atomic_store(&s->neg_evfd, -1);
	xs_sock_put(s);
out_free:
	if (j->fd >= 0)
		xs_real.close(j->fd);
	if (j->evfd >= 0)
		xs_real.close(j->evfd);
	free(j);
	return rc;
}

/* ---------------------------------------------------------- strip */

/*
 * A server that closes a connection it never read before its client's
 * hello came (a health check's target that accepts and closes at once):
 * the hello would meet a closed socket, and its RST would fail the
 * client's next send with EPIPE, where over kernel TCP that send succeeds
 * (the application's own first bytes draw the RST, later). A client that
 * probed sent its hello right after its handshake's last ACK, before this
 * accept returned: wait for it, NEG_CLOSE_HELLO_MS at most, and take it,
 * so that the close sends a FIN and nothing of ours is left unread.
 * Context: close() of an unclaimed socket, on the application's thread.
 */
static void neg_close_await_hello(struct xs_sock *s, int fd)
{
	uint64_t until = xs_now_us() + NEG_CLOSE_HELLO_MS * 1000u, now;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while ((atomic_load(&s->strip) & (1u << XS_TCP_HELLO)) &&
	       (now = xs_now_us()) < until) {
		if (xs_real.poll(&p, 1, (int)((until - now + 999u) / 1000u)) <
			    0 &&
		    errno != EINTR)
			return;
		/* takes the hello, or ends the wait: bytes not ours, EOF; a
		 * part of it: the rest a moment later */
		if (xs_sock_strip(s, fd, true) == -EAGAIN)
			xs_real.poll(NULL, 0, 1);
	}
}

/*
 * Whether no exec'd image holds @fd, a socket of @role made here and not
 * close-on-exec: one that system() or popen() spawned (inside glibc,
 * unseen) takes the socket's handoff record, made at the accept or the
 * connect, when it starts (preload/init.c), and keeps it marked
 * XS_HANDOFF_ADOPTED for its own execs. So the record there unmarked
 * means no such image took the socket over; it is taken here, and one
 * that starts later finds what it would meet instead: TCP, with @strip
 * (the control messages that may still come) to strip.
 */
static bool neg_close_unshared(int fd, int role, unsigned int strip_next)
{
	unsigned int state = 0, strip = 0;

	if (!xs_handoff_take(fd, &state, &strip) || state != (unsigned)role)
		return false;
	if (strip & XS_HANDOFF_ADOPTED) { /* an image has it: its record */
		xs_handoff_put(fd, state, strip);
		return false;
	}
	xs_handoff_put(fd, XS_HANDOFF_STRIP, strip_next);
	return true;
}

/* Whether another process may hold @s: one forked since its accept or
 * connect, or one it went to with SCM_RIGHTS or an exec. */
static bool neg_maybe_shared(struct xs_sock *s)
{
	return s->accept_gen != xs_fork_gen ||
	       s->accept_forks != xs_sock_forks() || atomic_load(&s->passed);
}

void xs_sock_closing(struct xs_sock *s, int fd)
{
	int fl, err = errno, role = atomic_load(&s->neg);
	/* what the peer sent of ours and may still send: the client's hello
	 * and fallback; the server's reply */
	unsigned int strip =
		role == XS_NEG_SERVER
			? (1u << XS_TCP_HELLO) | (1u << XS_TCP_FALLBACK)
			: 1u << XS_TCP_REPLY;

	if ((role != XS_NEG_SERVER && role != XS_NEG_CLIENT) ||
	    xs_sock_kind(s) != XS_KIND_PENDING || xs_sock_connecting(s) ||
	    xs_fdtab_held(s) || neg_maybe_shared(s))
		return;
	fl = xs_real.fcntl(fd, F_GETFD);
	if (fl < 0 ||
	    (!(fl & FD_CLOEXEC) && !neg_close_unshared(fd, role, strip))) {
		errno = err;
		return;
	}
	atomic_store(&s->strip, strip);
	(void)xs_sock_strip(s, fd, true);
	if (role == XS_NEG_SERVER && s->neg_expect)
		neg_close_await_hello(s, fd);
	errno = err;
}

/*
 * The head of @fd's stream, waited for @ms at most: the control message
 * of @type (r == 1, taken, in @m), or what neg_peek() found at the end.
 */
static int neg_peek_wait(int fd, int type, struct xs_tcp_msg *m, int ms)
{
	uint64_t until = xs_now_us() + (uint64_t)ms * 1000u, now;
	int r;

	while ((r = neg_peek(fd, type, m)) == 0 && (now = xs_now_us()) < until)
		neg_wait_io(fd, -1, (int)((until - now + 999u) / 1000u));
	return r;
}

void xs_sock_exec_bare(struct xs_sock *s, int fd)
{
	struct xs_tcp_msg m, msg = { .type = XS_TCP_REPLY }; /* rdma 0 */
	int role = atomic_load(&s->neg), err = errno, r;
	unsigned int strip = 0, state = 0, was = 0;
	bool found;

	if ((role != XS_NEG_SERVER && role != XS_NEG_CLIENT) ||
	    xs_sock_kind(s) != XS_KIND_PENDING)
		return;
	/* Another process that holds it took its record when it claimed it,
	 * or recorded what it decided: that one goes on; without a record,
	 * only where no other process can hold it (neg_maybe_shared()). */
	found = xs_handoff_take(fd, &state, &was);
	if ((found ? state != (unsigned int)role : neg_maybe_shared(s)) ||
	    atomic_exchange(&s->connecting, true)) {
		if (found)
			xs_handoff_put(fd, state, was);
		errno = err;
		return;
	}
	s->neg_gen = xs_fork_gen;
	if (role == XS_NEG_SERVER) {
		/* the hello: certain after a probe, else a client whose probe
		 * went elsewhere (another user's listener) sends it at once;
		 * a fallback behind it (the client gave up, or its image runs
		 * without xsock too) wants no answer */
		r = neg_peek_wait(
			fd, XS_TCP_HELLO, &m,
			s->neg_expect ? (int)xs_core_cfg()->connect_timeout_ms
				      : NEG_HURRY_MS);
		if (r == 1 && neg_peek(fd, XS_TCP_FALLBACK, &m) != 1 &&
		    neg_send_msg(fd, &msg) < 0)
			r = -2;
		if (r == 0 && s->neg_expect)
			xs_info("neg",
				"fd %d: the hello came late: the "
				"image without xsock reads it",
				fd);
	} else {
		/* the reply of a server that looks, waited for as the
		 * client's own negotiation waits; one that never does finds
		 * our fallback behind the hello, and answers nothing */
		r = neg_peek_wait(fd, XS_TCP_REPLY, &m,
				  (int)xs_core_cfg()->connect_timeout_ms);
		if (r == 0 || (r == 1 && m.rdma)) {
			msg.type = XS_TCP_FALLBACK;
			(void)neg_send_msg(fd, &msg);
		}
		/* A server that looks after the wait, before the fallback
		 * comes, answers, and that image reads the answer: a window
		 * of one trip of the fallback, after XSOCK_CONNECT_TIMEOUT_MS
		 * of silence, as for a client's own negotiation. */
		if (r == 0)
			strip = 1u << XS_TCP_REPLY; /* for us, not that image */
	}
	atomic_store(&s->strip, strip);
	xs_handoff_put(fd, XS_HANDOFF_STRIP, strip);
	xs_sock_neg_done(s, r == -2 ? XS_NEG_PEER_GONE : XS_FB_UNSUPPORTED);
	errno = err;
}

int xs_sock_strip(struct xs_sock *s, int fd, bool nonblock)
{
	struct xs_tcp_msg m;
	unsigned int mask;
	int r, timeout = atomic_load(&s->rcvtimeo_ms);

	for (;;) {
		mask = atomic_load(&s->strip);
		if (mask & XS_STRIP_FOREIGN)
			return -ECONNRESET;
		if (!mask)
			return 0;
		r = neg_peek(fd, 0, &m);
		if (r == 1) {
			if (!(mask & (1u << m.type))) {
				atomic_store(&s->strip, 0);
				return -EPROTO; /* not one that may come */
			}
			/* a hello may be followed by a fallback; a fallback
			 * or a reply is the last word */
			atomic_store(&s->strip,
				     m.type == XS_TCP_HELLO
					     ? mask & ~(1u << XS_TCP_HELLO)
					     : 0);
			continue;
		}
		if (r < 0) { /* application bytes, EOF or an error */
			atomic_store(&s->strip, 0);
			return 0;
		}
		if (nonblock) {
			uint8_t b;

			/* nothing at all: the kernel's EAGAIN; a prefix of
			 * ours: ours, until the rest comes */
			if (neg_inq(fd) == 0) /* (and no error taken) */
				return 0;
			return xs_real.recv(fd, &b, 1,
					    MSG_PEEK | MSG_DONTWAIT) > 0
				       ? -EAGAIN
				       : 0;
		}
		{
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int n = xs_real.poll(&p, 1, timeout ? timeout : -1);

			/* SA_RESTART: as the kernel's recv, unless
			 * SO_RCVTIMEO */
			if (n < 0 && errno == EINTR &&
			    (timeout || !xs_sig_restarts()))
				return -EINTR;
			if (n == 0)
				return -EAGAIN; /* SO_RCVTIMEO */
		}
	}
}

int xs_neg_send_fallback(int fd)
{
	struct xs_tcp_msg m = { .type = XS_TCP_FALLBACK };

	return neg_send_msg(fd, &m);
}

int xs_neg_client_run(struct xs_sock *s, int fd)
{
	struct neg_job j = {
		.s = s,
		.fd = fd,
		.client = true,
		.deadline_us =
			xs_now_us() +
			(uint64_t)xs_core_cfg()->connect_timeout_ms * 1000u,
	};
	int reason;

	j.evfd = xs_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (j.evfd < 0) {
		(void)xs_neg_send_fallback(fd);
		return XS_FB_RESOURCE;
	}
	reason = neg_client(&j);
	xs_real.close(j.evfd);
	if (atomic_load(&s->strip))
		xs_handoff_put(fd, XS_HANDOFF_STRIP, atomic_load(&s->strip));
	return reason;
}
