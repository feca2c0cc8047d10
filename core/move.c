/*
 * core/move.c - a live RDMA connection moved back to its kernel TCP
 *               connection, for a process that is not its owner.
 *
 * A connection is carried over RDMA by the process that claimed it
 * (core/neg.c); its QP lives there alone. A process that got the socket
 * later (a child forked after the first I/O, as sshd forks its
 * privilege-separated child after the version exchange) cannot touch
 * that QP. When it does I/O on the socket, it asks the owner to move the
 * connection to the kernel TCP connection that stays idle under it:
 *   1. a process that owns RDMA connections makes a socketpair at each
 *      fork(): the child (and its descendants) ask through their end,
 *      with write() and read() alone, which even a seccomp sandbox such
 *      as sshd's preauth child's allows (no socket(), no connect(), no
 *      SCM_RIGHTS there, and RLIMIT_NOFILE 0); only a process forked from
 *      the owner holds an end, so the channel is the proof of the right
 *      to the connection's bytes;
 *   2. the owner's xsock-probe thread posts MOVE after its last byte over
 *      RDMA; the peer answers MOVE after its own last, and from its MOVE
 *      on each side writes to the kernel socket (core/stream.c);
 *   3. the owner READs what the peer announced, takes every byte that
 *      came over RDMA and nobody read, and sends them back on the
 *      channel;
 *   4. the asker serves those bytes before the kernel socket's own
 *      (struct xs_sock.prefix), then every call is the kernel's. The
 *      owner's own calls are the kernel's from then on too.
 * The peer reads what came over RDMA up to the MOVE, then the kernel
 * socket: each direction of the byte stream is whole and in order.
 * A connection that cannot move (owner gone, stream reset, no MOVE from
 * the peer within XS_MOVE_TIMEOUT_MS, the channel closed by the program)
 * fails the asker's calls with ECONNRESET, as before the move existed.
 * An exec, SCM_RIGHTS, posix_spawn() and an owner that lets go first
 * hand a connection on through the same move (core/hand.c).
 *
 * Context: the asker, any thread (one move at a time per process,
 * move_lock); the owner, its xsock-probe thread; the fork hooks with
 * core/'s fork locks held.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "move.h"
#include "stream.h"

pthread_mutex_t move_lock = PTHREAD_MUTEX_INITIALIZER;
struct move_ask_fd move_ask_fds[MOVE_ASK_MAX];
static uint32_t move_seq; /* asker: the last request's (move_lock) */
pthread_mutex_t move_out_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t move_own_lock = PTHREAD_MUTEX_INITIALIZER;
struct move_chan *move_own;
size_t move_nr_own;
static size_t move_cap_own;
struct move_left *move_lefts;
/* the channel a fork() hands out: [0] stays, [1] goes to the child */
static int move_fork_fds[2] = { -1, -1 };
static uint64_t *move_fork_cookies;
static size_t move_fork_nr;

static void move_pushed_forget(void);
static int move_keep_pushed(int u, const struct move_rep *rep);

void xs_move_atfork_prepare(uint64_t *cookies, size_t nr)
{
	move_fork_fds[0] = move_fork_fds[1] = -1;
	move_fork_cookies = cookies;
	move_fork_nr = nr;
	if (!nr)
		return;
	if (xs_real.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
			       move_fork_fds) < 0) {
		move_fork_fds[0] = move_fork_fds[1] = -1;
		return;
	}
	/* out of the application's way (xs_fd_high()) */
	move_fork_fds[0] = xs_fd_high(move_fork_fds[0]);
	move_fork_fds[1] = xs_fd_high(move_fork_fds[1]);
}

void xs_move_atfork_parent(void)
{
	if (move_fork_fds[0] < 0) {
		free(move_fork_cookies);
		move_fork_cookies = NULL;
		return;
	}
	xs_real.close(move_fork_fds[1]);
	move_own_add(move_fork_fds[0], move_fork_cookies, move_fork_nr);
	move_fork_fds[0] = move_fork_fds[1] = -1;
	move_fork_cookies = NULL;
}

/* Serve channel @fd of a child that may take over the @nr connections of
 * @cookies (malloc'ed, ours now). Return: false when it could not join
 * (then closed: that child cannot ask). */
bool move_own_add(int fd, uint64_t *cookies, size_t nr)
{
	struct move_chan *n;
	bool ok;

	pthread_mutex_lock(&move_own_lock);
	if (move_nr_own == move_cap_own) {
		n = realloc(move_own,
			    (move_cap_own ? 2 * move_cap_own : 8) * sizeof(*n));
		if (n) {
			move_own = n;
			move_cap_own = move_cap_own ? 2 * move_cap_own : 8;
		}
	}
	ok = move_nr_own < move_cap_own;
	if (ok)
		move_own[move_nr_own++] = (struct move_chan){ fd, cookies, nr };
	pthread_mutex_unlock(&move_own_lock);
	if (!ok) {
		xs_real.close(fd);
		free(cookies);
		return false;
	}
	xs_sock_probe_kick(); /* its poll set has one more */
	return true;
}

void xs_move_atfork_child(pid_t parent)
{
	size_t i;

	/* the parent's ends are the parent's to serve */
	for (i = 0; i < move_nr_own; i++) {
		xs_real.close(move_own[i].fd);
		free(move_own[i].cookies);
	}
	move_nr_own = 0;
	free(move_fork_cookies);
	move_fork_cookies = NULL;
	pthread_mutex_init(&move_own_lock, NULL);
	pthread_mutex_init(&move_lock, NULL);
	pthread_mutex_init(&move_out_lock, NULL);
	move_pushed_forget(); /* answers kept here are the parent's */
	if (move_fork_fds[0] < 0)
		return;
	xs_real.close(move_fork_fds[0]);
	/* the nearest owner first; the farthest goes when all are taken */
	if (move_ask_fds[MOVE_ASK_MAX - 1].owner)
		xs_real.close(move_ask_fds[MOVE_ASK_MAX - 1].fd);
	memmove(&move_ask_fds[1], &move_ask_fds[0],
		(MOVE_ASK_MAX - 1) * sizeof(move_ask_fds[0]));
	move_ask_fds[0].owner = parent;
	move_ask_fds[0].fd = move_fork_fds[1];
	move_fork_fds[0] = move_fork_fds[1] = -1;
}

size_t xs_move_poll_fds(struct pollfd **p, size_t *cap, size_t first)
{
	struct pollfd *np;
	size_t i, n = first;

	pthread_mutex_lock(&move_own_lock);
	/* No channel, no allocation: the probe thread that asks calls no
	 * malloc until a fork makes one, so the application's allocator
	 * keeps no per-thread state for it (a jemalloc arena, which
	 * redis's 10 Hz memory statistics walk) */
	if (move_nr_own && first + move_nr_own > *cap) {
		np = realloc(*p, (first + move_nr_own + 1) * sizeof(*np));
		if (np) {
			*p = np;
			*cap = first + move_nr_own + 1;
		}
	}
	for (i = 0; i < move_nr_own && n < *cap; i++)
		(*p)[n++] = (struct pollfd){ .fd = move_own[i].fd,
					     .events = POLLIN };
	pthread_mutex_unlock(&move_own_lock);
	return n - first;
}

/*
 * Write all of @len bytes of @buf to blocking @fd. @ours: the owner's
 * end, written with MSG_NOSIGNAL (a child gone must not kill us with
 * SIGPIPE); the asker writes with write(2), which a sandbox allows where
 * send(2) is not, after a poll that finds the owner's end still there.
 * Return: 0 or -errno.
 */
static int move_write_all(int fd, const void *buf, size_t len, bool ours)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	const uint8_t *q = buf;
	ssize_t n;

	if (!ours && xs_real.poll(&p, 1, 0) > 0 &&
	    (p.revents & (POLLHUP | POLLERR)))
		return -ECONNRESET; /* the owner is gone */
	while (len) {
		n = ours ? xs_real.send(fd, q, len, MSG_NOSIGNAL)
			 : xs_real.write(fd, q, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		q += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read all of @len bytes into @buf (NULL: read and drop them) from @fd,
 * each wait at most @timeout_ms. Return: 0 or -errno (-ETIMEDOUT,
 * -ECONNRESET at EOF). */
static int move_read_all(int fd, void *buf, size_t len, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t *q = buf, drop[4096] = { 0 };
	ssize_t n;
	int rc;

	while (len) {
		rc = xs_real.poll(&p, 1, timeout_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return rc < 0 ? -errno : -ETIMEDOUT;
		n = xs_real.read(fd, q ? q : drop,
				 q || len < sizeof(drop) ? len : sizeof(drop));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		if (q)
			q += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---------------------------------------------------------- the owner */

/* Whether a child's channel lists @cookie. Called with move_own_lock. */
bool move_held_locked(uint64_t cookie)
{
	size_t i, k;

	for (i = 0; i < move_nr_own; i++)
		for (k = 0; k < move_own[i].nr; k++)
			if (move_own[i].cookies[k] == cookie)
				return true;
	return false;
}

/* Take @cookie's entry of move_lefts (NULL: none). */
static struct move_left *move_left_take(uint64_t cookie)
{
	struct move_left **pp, *l = NULL;

	pthread_mutex_lock(&move_own_lock);
	for (pp = &move_lefts; *pp; pp = &(*pp)->next) {
		if ((*pp)->cookie == cookie) {
			l = *pp;
			*pp = l->next;
			break;
		}
	}
	pthread_mutex_unlock(&move_own_lock);
	return l;
}

/* Forget channel @fd: its child and the child's descendants are gone. */
void move_own_drop(int fd)
{
	size_t i;

	struct move_left **pp, *l;

	pthread_mutex_lock(&move_own_lock);
	for (i = 0; i < move_nr_own; i++) {
		if (move_own[i].fd == fd) {
			free(move_own[i].cookies);
			move_own[i] = move_own[--move_nr_own];
			break;
		}
	}
	/* what no child left can ask for: gone, as with a socket's last
	 * close */
	for (pp = &move_lefts; (l = *pp);) {
		if (move_held_locked(l->cookie)) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		free(l->bytes);
		free(l);
	}
	pthread_mutex_unlock(&move_own_lock);
	xs_real.close(fd);
}

/* Whether the child of channel @fd may take over connection @cookie: it
 * was live when that child was forked. */
static bool move_allowed(int fd, uint64_t cookie)
{
	bool ok = false;
	size_t i, k;

	pthread_mutex_lock(&move_own_lock);
	for (i = 0; i < move_nr_own && !ok; i++)
		if (move_own[i].fd == fd)
			for (k = 0; k < move_own[i].nr && !ok; k++)
				ok = move_own[i].cookies[k] == cookie;
	pthread_mutex_unlock(&move_own_lock);
	return ok;
}

/*
 * A child gives back the handed-over bytes it did not read (it closed the
 * socket or ends): they lead the socket again, here, before the kernel's
 * (what the kernel's receive queue would still hold for us). The child
 * waits for the answer, so they are ours before its end is seen.
 */
static void move_take_back(int cfd, const struct move_req *req,
			   struct move_rep *rep)
{
	struct xs_sock *s = NULL;
	uint8_t *bytes, *nb;
	size_t have;
	int rc = 0;

	bytes = req->len <= (64u << 20) ? malloc(req->len ? req->len : 1)
					: NULL;
	if (!bytes || move_read_all(cfd, bytes, req->len, 5000)) {
		free(bytes);
		move_own_drop(cfd); /* out of step: nothing more from it */
		return;
	}
	if (!move_allowed(cfd, req->cookie))
		rc = -EPERM;
	else if (!(s = xs_sock_live_find(req->cookie)) ||
		 !atomic_load(&s->moved))
		rc = -ENOENT;
	if (!rc && req->len) {
		pthread_mutex_lock(&s->lock);
		have = s->prefix_len - s->prefix_off;
		nb = realloc(bytes, req->len + have);
		if (nb) {
			memcpy(nb + req->len, s->prefix + s->prefix_off, have);
			free(s->prefix);
			s->prefix = nb;
			s->prefix_len = req->len + have;
			s->prefix_off = 0;
			atomic_store(&s->prefix_left, true);
			bytes = NULL;
		} else {
			rc = -ENOMEM;
		}
		pthread_mutex_unlock(&s->lock);
		xs_wake_all(); /* a waiter of ours: readable now */
	}
	xs_info("move", "%zu handed-over bytes given back: %s",
		(size_t)req->len, rc ? strerror(-rc) : "they lead the socket");
	xs_sock_put(s);
	free(bytes);
	rep->status = rc;
	(void)move_write_all(cfd, rep, sizeof(*rep), true);
}

/* The answer for @cookie, a connection this process let go: its entry
 * of move_lefts. Return: 0, or -ENOENT for none. */
static int move_serve_left(uint64_t cookie, uint8_t **bytes, size_t *len,
			   unsigned int *ended)
{
	struct move_left *l = move_left_take(cookie);

	if (!l)
		return -ENOENT;
	*bytes = l->bytes;
	*len = l->len;
	*ended = l->ended;
	free(l);
	return 0;
}

/* The answer for moved socket @s of ours: its bytes not read here. */
static void move_serve_moved(struct xs_sock *s, uint8_t **bytes, size_t *len,
			     unsigned int *ended)
{
	/* let go here while a child held it: those bytes are the child's */
	if (move_serve_left(s->rdma_cookie, bytes, len, ended) == 0)
		return;
	pthread_mutex_lock(&s->lock);
	*ended = s->prefix_eof ? XS_MOVE_EOF : 0;
	if (s->prefix_off < s->prefix_len) {
		*len = s->prefix_len - s->prefix_off;
		*bytes = malloc(*len);
		if (*bytes) {
			memcpy(*bytes, s->prefix + s->prefix_off, *len);
			move_prefix_clear(s);
		} else {
			*len = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void xs_move_serve(int cfd)
{
	struct move_rep rep = { .magic = MOVE_MAGIC };
	struct move_req req;
	struct xs_sock *s = NULL;
	uint8_t *bytes = NULL;
	size_t len = 0;
	int rc;

	rc = move_read_all(cfd, &req, sizeof(req), 2000);
	if (rc || req.magic != MOVE_MAGIC || req.version != XS_WIRE_VERSION) {
		move_own_drop(cfd); /* EOF, or not ours to answer */
		return;
	}
	rep.cookie = req.cookie;
	rep.seq = req.seq;
	pthread_mutex_lock(&move_out_lock);
	if (req.kind == MOVE_GIVE) {
		move_take_back(cfd, &req, &rep);
		pthread_mutex_unlock(&move_out_lock);
		return;
	}
	if (req.kind != MOVE_ASK || req.len)
		rc = -EINVAL;
	else if (!req.cookie || !move_allowed(cfd, req.cookie))
		rc = -EPERM; /* not one the child got from us */
	else if (!(s = xs_sock_live_find(req.cookie)))
		rc = move_serve_left(req.cookie, &bytes, &len, &rep.ended);
	else if (atomic_load(&s->moved))
		/* asked before, or moved here: the kernel's now; what is
		 * still unread here goes to the asker, as the kernel gives
		 * a byte to one reader */
		move_serve_moved(s, &bytes, &len, &rep.ended);
	else
		rc = xs_stream_move_out(s->stream, XS_MOVE_TIMEOUT_MS, &bytes,
					&len, &rep.ended);
	if (s && rc == 0 && !atomic_load(&s->moved)) {
		/* this process's own calls: the kernel's too; its reads
		 * end where the peer's FIN over RDMA ended them */
		pthread_mutex_lock(&s->lock);
		if (rep.ended & XS_MOVE_EOF) {
			s->prefix_eof = true;
			atomic_store(&s->prefix_left, true);
		}
		xs_sock_set_moved(s);
		pthread_mutex_unlock(&s->lock);
		/* a thread of ours asleep on the stream's channels, whose
		 * news this thread took, looks at its kernel fd now */
		xs_wake_all();
	}
	if (s && rc != -ENOENT)
		xs_info("move",
			"connection moved to kernel TCP for another "
			"process: %s, %zu unread bytes handed over",
			rc ? strerror(-rc) : "done", len);
	xs_sock_put(s);
	rep.status = rc;
	rep.len = len;
	if (move_write_all(cfd, &rep, sizeof(rep), true) == 0 && len)
		(void)move_write_all(cfd, bytes, len, true);
	pthread_mutex_unlock(&move_out_lock);
	free(bytes);
}

/* ---------------------------------------------------------- the asker */

/* Forget the channel @fd to an owner: it is out of step or gone. */
static void move_ask_drop(int fd)
{
	int i;

	for (i = 0; i < MOVE_ASK_MAX; i++)
		if (move_ask_fds[i].owner && move_ask_fds[i].fd == fd)
			move_ask_fds[i].owner = 0;
	xs_real.close(fd);
}

/* Ask @owner for the move of the socket with cookie @cookie. Return: 0
 * with the unread bytes in *@bytes (malloc'ed, or NULL) and *@len, or
 * -errno. Called with move_lock held. */
/* The channel to @owner, or -1. Called with move_lock held. */
int move_ask_fd(pid_t owner)
{
	int i;

	if (owner <= 0)
		return -1; /* none: a socket that came without its owner */
	for (i = 0; i < MOVE_ASK_MAX; i++)
		if (move_ask_fds[i].owner == owner)
			return move_ask_fds[i].fd;
	return -1;
}

/*
 * Send request @req (and @len bytes of @data after it) on channel @u,
 * then read its reply into *@rep within @timeout_ms: replies to earlier
 * requests that timed out here come first, each naming its request, and
 * are skipped. Return: 0 or -errno. Called with move_lock held.
 */
static int move_call(int u, const struct move_req *req, const void *data,
		     size_t len, struct move_rep *rep, int timeout_ms)
{
	uint64_t deadline = xs_now_us() + (uint64_t)timeout_ms * 1000u, now;
	int rc, left_ms;

	rc = move_write_all(u, req, sizeof(*req), false);
	if (rc == 0 && len)
		rc = move_write_all(u, data, len, false);
	while (rc == 0) {
		now = xs_now_us();
		left_ms = now < deadline ? (int)((deadline - now) / 1000u) : 0;
		rc = move_read_all(u, rep, sizeof(*rep), left_ms);
		if (rc == 0 && rep->magic != MOVE_MAGIC)
			rc = -EPROTO;
		if (rc || (rep->seq == req->seq && rep->cookie == req->cookie))
			break;
		if (rep->seq == 0 && rep->status == 0) /* pushed meanwhile */
			rc = move_keep_pushed(u, rep);
		else
			rc = move_read_all(u, NULL, (size_t)rep->len, 5000);
		if (rc == 0 && xs_now_us() >= deadline)
			rc = -ETIMEDOUT;
	}
	return rc;
}

/*
 * Answers an owner sent unasked as it let connections go at its end
 * (xs_sock_let_go()), each for the first asker of its cookie here
 * (move_lock).
 */
struct move_pushed {
	uint64_t cookie;
	uint8_t *bytes;
	size_t len;
	unsigned int ended;
	struct move_pushed *next;
};
static struct move_pushed *move_pushed;

/* Forget every pushed answer kept (a forked child: they are its
 * parent's to serve). */
static void move_pushed_forget(void)
{
	struct move_pushed *p;

	while ((p = move_pushed)) {
		move_pushed = p->next;
		free(p->bytes);
		free(p);
	}
}

/* Keep the pushed answer @rep whose bytes follow on channel @u. */
static int move_keep_pushed(int u, const struct move_rep *rep)
{
	struct move_pushed *p = calloc(1, sizeof(*p));
	int rc;

	if (!p || rep->len > (64u << 20) ||
	    (rep->len && !(p->bytes = malloc((size_t)rep->len)))) {
		free(p);
		return move_read_all(u, NULL, (size_t)rep->len, 5000);
	}
	rc = move_read_all(u, p->bytes, (size_t)rep->len, 5000);
	if (rc) {
		free(p->bytes);
		free(p);
		return rc;
	}
	p->cookie = rep->cookie;
	p->len = (size_t)rep->len;
	p->ended = rep->ended & ~XS_MOVE_FILE;
	if (rep->ended & XS_MOVE_FILE) /* the bytes wait in a file */
		move_file_take(rep->cookie, &p->bytes, &p->len);
	p->next = move_pushed;
	move_pushed = p;
	return 0;
}

/* Read every answer waiting on channel @u (the owner may be gone). */
static void move_read_pushed(int u)
{
	struct pollfd p = { .fd = u, .events = POLLIN };
	struct move_rep rep;

	while (xs_real.poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
		if (move_read_all(u, &rep, sizeof(rep), 1000) ||
		    rep.magic != MOVE_MAGIC)
			return;
		if (rep.seq == 0 && rep.status == 0) {
			if (move_keep_pushed(u, &rep))
				return;
		} else if (move_read_all(u, NULL, (size_t)rep.len, 5000)) {
			return;
		}
	}
}

/* Take the pushed answer for @cookie. Return: true when there was one. */
static bool move_take_pushed(uint64_t cookie, uint8_t **bytes, size_t *len,
			     unsigned int *ended)
{
	struct move_pushed **pp, *p;

	for (pp = &move_pushed; (p = *pp); pp = &p->next) {
		if (p->cookie != cookie)
			continue;
		*pp = p->next;
		*bytes = p->bytes;
		*len = p->len;
		*ended = p->ended;
		free(p);
		return true;
	}
	return false;
}

static int move_ask(pid_t owner, uint64_t cookie, uint8_t **bytes, size_t *len,
		    unsigned int *ended)
{
	struct move_req req = { MOVE_MAGIC, XS_WIRE_VERSION, cookie,
				++move_seq, MOVE_ASK,	     0 };
	struct move_rep rep;
	uint8_t *buf = NULL;
	int u = move_ask_fd(owner), rc;

	if (u < 0)
		return -ESRCH; /* not forked from the owner since it owned */
	move_read_pushed(u);
	if (move_take_pushed(cookie, bytes, len, ended))
		return 0; /* the owner let it go before we asked */
	rc = move_call(u, &req, NULL, 0, &rep, XS_MOVE_TIMEOUT_MS + 5000);
	if (rc == 0 && rep.status == 0 && !rep.len &&
	    move_take_pushed(cookie, bytes, len, ended))
		return 0; /* pushed while we asked: those are the bytes */
	if (rc && move_take_pushed(cookie, bytes, len, ended))
		return 0; /* the owner ended, pushing them first */
	if (rc == 0 && rep.status)
		return rep.status;
	if (rc == 0 && rep.len) {
		buf = rep.len <= SIZE_MAX ? malloc((size_t)rep.len) : NULL;
		rc = buf ? move_read_all(u, buf, (size_t)rep.len, 5000)
			 : -ENOMEM;
	}
	if (rc) {
		free(buf);
		if (rc != -ETIMEDOUT) /* a late reply is skipped; the rest */
			move_ask_drop(u); /* leave the channel out of step */
		return rc;
	}
	*bytes = buf;
	*len = (size_t)rep.len;
	*ended = rep.ended;
	return 0;
}

/* All of @s's bytes taken over are gone (read, or given back): only an
 * EOF that came with them is left to report. Called with s->lock held, or
 * with @s not in use. */
void move_prefix_clear(struct xs_sock *s)
{
	free(s->prefix);
	s->prefix = NULL;
	s->prefix_len = s->prefix_off = 0;
	atomic_store(&s->prefix_left, s->prefix_eof);
}

/* Sockets of this process that hold bytes taken over, for the give-back
 * at exit (move_lock); one past these is given back only at its close */
#define MOVE_HELD_MAX 64
static struct {
	struct xs_sock *s; /* type-stable memory: checked by incarnation */
	unsigned int incarnation;
} move_held[MOVE_HELD_MAX];

/*
 * Give @s's taken-over bytes that nobody read back to its owner: this
 * process closes the socket or ends, and another holder (the owner, a
 * sibling) may read on, as from the kernel's receive queue. Waits for the
 * owner's answer, so the bytes are its before this end is seen. Called
 * with move_lock held.
 */
void move_give(struct xs_sock *s)
{
	struct move_req req = { MOVE_MAGIC, XS_WIRE_VERSION, s->rdma_cookie,
				++move_seq, MOVE_GIVE,	     0 };
	struct move_rep rep;
	uint8_t *bytes = NULL;
	size_t off = 0;
	int u = move_ask_fd(s->rdma_pid), rc;

	pthread_mutex_lock(&s->lock);
	if (s->prefix_off < s->prefix_len) {
		bytes = s->prefix;
		off = s->prefix_off;
		req.len = s->prefix_len - off;
		s->prefix = NULL; /* ours now, not freed by the clear */
		move_prefix_clear(s);
	}
	pthread_mutex_unlock(&s->lock);
	if (!bytes)
		return;
	rc = u < 0 ? -ESRCH
		   : move_call(u, &req, bytes + off, req.len, &rep, 5000);
	if (rc == 0)
		rc = rep.status;
	xs_info("move", "%zu bytes taken over and not read, given back: %s",
		(size_t)req.len, rc ? strerror(-rc) : "done");
	free(bytes);
}

void xs_sock_move_release(struct xs_sock *s)
{
	int saved = errno, i;

	if (!atomic_load(&s->moved) || !atomic_load(&s->prefix_left) ||
	    xs_sock_mine(s))
		return;
	pthread_mutex_lock(&move_lock);
	move_give(s);
	for (i = 0; i < MOVE_HELD_MAX; i++)
		if (move_held[i].s == s)
			move_held[i].s = NULL;
	pthread_mutex_unlock(&move_lock);
	errno = saved;
}

void xs_move_exit(void)
{
	struct xs_sock *s;
	int i;

	pthread_mutex_lock(&move_lock);
	for (i = 0; i < MOVE_HELD_MAX; i++) {
		s = move_held[i].s;
		if (s && s->incarnation == move_held[i].incarnation &&
		    atomic_load(&s->moved) && !xs_sock_mine(s))
			move_give(s);
		move_held[i].s = NULL;
	}
	pthread_mutex_unlock(&move_lock);
}

int xs_sock_move(struct xs_sock *s, int fd)
{
	unsigned int ended = 0;
	int saved = errno, rc = 0, i;
	uint8_t *bytes = NULL;
	size_t len = 0;
	bool eof;

	pthread_mutex_lock(&move_lock);
	if (!atomic_load(&s->moved)) {
		rc = move_ask(s->rdma_pid, s->rdma_cookie, &bytes, &len,
			      &ended);
		eof = ended & XS_MOVE_EOF;
		/* the owner's FIN went over RDMA: the kernel socket's sends
		 * end too, for every process that holds it */
		if (rc == 0 && (ended & XS_MOVE_SHUT_WR))
			(void)xs_real.shutdown(fd, SHUT_WR);
		xs_info("move",
			"fd %d: connection of pid %d moved to kernel "
			"TCP: %s, %zu unread bytes taken over%s",
			fd, (int)s->rdma_pid, rc ? strerror(-rc) : "done", len,
			rc == 0 && eof ? ", then EOF" : "");
		if (rc == 0) {
			pthread_mutex_lock(&s->lock);
			s->prefix = bytes;
			s->prefix_len = len;
			s->prefix_off = 0;
			s->prefix_eof = eof;
			atomic_store(&s->prefix_left, len > 0 || eof);
			xs_sock_set_moved(s);
			pthread_mutex_unlock(&s->lock);
		}
		for (i = 0; rc == 0 && len && i < MOVE_HELD_MAX; i++) {
			if (!move_held[i].s) {
				move_held[i].s = s;
				move_held[i].incarnation = s->incarnation;
				break;
			}
		}
	}
	pthread_mutex_unlock(&move_lock);
	errno = saved; /* a successful call shows none of ours */
	return rc;
}

bool xs_sock_passes(struct xs_sock *s, bool send)
{
	if (atomic_load_explicit(&s->moved, memory_order_acquire))
		return send || !atomic_load_explicit(&s->prefix_left,
						     memory_order_relaxed);
	/* our MOVE went: sends are the kernel's before the peer's came */
	return send && xs_sock_mine(s) &&
	       atomic_load_explicit(&s->stream->moved_tx, memory_order_relaxed);
}

bool xs_sock_plain(const struct xs_sock *s)
{
	return atomic_load_explicit(&s->moved, memory_order_acquire) &&
	       !atomic_load_explicit(&s->prefix_left, memory_order_relaxed);
}

void xs_sock_set_moved(struct xs_sock *s)
{
	atomic_store(&s->moved, true);
	xs_sock_note(s); /* epoll sets look at it again */
}

void xs_sock_move_free(struct xs_sock *s)
{
	s->prefix_eof = false;
	move_prefix_clear(s);
	atomic_store(&s->moved, false);
}

/* ------------------------------------------------- calls after a move */

/* @iov past its first @skip bytes, in @tmp (iovcnt entries). */
static int move_iov_skip(const struct iovec *iov, int iovcnt, size_t skip,
			 struct iovec *tmp)
{
	int i, n = 0;

	for (i = 0; i < iovcnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		tmp[n].iov_base = (uint8_t *)iov[i].iov_base + skip;
		tmp[n].iov_len = iov[i].iov_len - skip;
		skip = 0;
		n++;
	}
	return n;
}

ssize_t xs_move_kernel_io(int fd, const struct iovec *iov, int iovcnt,
			  size_t skip, int flags, bool send)
{
	struct iovec *tmp = NULL;
	struct msghdr msg = { 0 };
	ssize_t n;

	if (skip) {
		tmp = malloc((size_t)(iovcnt ? iovcnt : 1) * sizeof(*tmp));
		if (!tmp)
			return -ENOMEM;
		iovcnt = move_iov_skip(iov, iovcnt, skip, tmp);
		iov = tmp;
	}
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = (size_t)iovcnt;
	n = send ? xs_real.sendmsg(fd, &msg, flags)
		 : xs_real.recvmsg(fd, &msg, flags);
	if (n < 0)
		n = -errno;
	free(tmp);
	return n;
}

ssize_t xs_move_recv(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags)
{
	size_t total = xs_iov_total(iov, iovcnt), n = 0, k;
	const uint8_t *src;
	bool eof;
	int i;

	if (flags & MSG_OOB) /* urgent data is the kernel socket's alone */
		return xs_move_kernel_io(fd, iov, iovcnt, 0, flags, false);
	pthread_mutex_lock(&s->lock);
	if (s->prefix_off < s->prefix_len && total) {
		src = s->prefix + s->prefix_off;
		n = s->prefix_len - s->prefix_off;
		if (n > total)
			n = total;
		for (i = 0, k = 0; i < iovcnt && k < n; i++) {
			size_t c =
				iov[i].iov_len < n - k ? iov[i].iov_len : n - k;

			if (!(flags & MSG_TRUNC))
				memcpy(iov[i].iov_base, src + k, c);
			k += c;
		}
		if (!(flags & MSG_PEEK)) {
			s->prefix_off += n;
			if (s->prefix_off == s->prefix_len)
				move_prefix_clear(s);
		}
	}
	eof = s->prefix_eof;
	pthread_mutex_unlock(&s->lock);
	if (!n && eof)
		return 0; /* the peer's FIN came over RDMA, before the move */
	if (!n)
		return xs_move_kernel_io(fd, iov, iovcnt, 0, flags, false);
	if (!(flags & MSG_WAITALL) || (flags & MSG_PEEK) || eof)
		return (ssize_t)n;
	return xs_move_recv_rest(fd, iov, iovcnt, n, flags);
}

ssize_t xs_move_recv_rest(int fd, const struct iovec *iov, int iovcnt,
			  size_t got, int flags)
{
	ssize_t more;

	if (got >= xs_iov_total(iov, iovcnt))
		return (ssize_t)got;
	more = xs_move_kernel_io(fd, iov, iovcnt, got, flags, false);
	return more > 0 ? (ssize_t)got + more : (ssize_t)got;
}

void xs_sock_take_over(struct xs_sock *s, int fd)
{
	if (xs_sock_kind(s) == XS_KIND_RDMA && !atomic_load(&s->moved) &&
	    !xs_sock_mine(s))
		(void)xs_sock_move(s, fd);
}
