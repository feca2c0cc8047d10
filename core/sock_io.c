/*
 * core/sock_io.c - the socket calls of an RDMA socket, as TCP answers them.
 *
 * Turns send/recv flags, O_NONBLOCK and SO_RCVTIMEO/SO_SNDTIMEO into the
 * stream's timeouts, raises SIGPIPE like the kernel, answers shutdown,
 * get{sock,peer}name and the queue ioctls from the RC stream, and mirrors
 * the file status that control calls set on the kernel fd (and SO_LINGER,
 * which close honours, sock.c). It does not own
 * the stream protocol (stream.c) nor the transport decision (sock.c).
 * Context: any thread; the stream has its own lock.
 */
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core_int.h"
#include "stats.h"
#include "stream.h"

/*
 * The inherited RDMA socket of a forked child: its QP belongs to the
 * parent (shared kernel context), so the child never touches it.
 */
static bool sock_foreign(const struct xs_sock *s)
{
	return !xs_sock_mine(s);
}

/*
 * Whether @s's calls are its kernel fd's: it moved to its kernel TCP
 * connection, or moves now, being another process's RDMA connection
 * (core/move.c). False: the stream serves it; *@reset when it can be
 * neither (a foreign connection that could not move).
 */
static bool sock_moved(struct xs_sock *s, int fd, bool *reset)
{
	*reset = false;
	if (atomic_load(&s->moved))
		return true;
	if (!sock_foreign(s))
		return false;
	if (fd >= 0 && xs_sock_move(s, fd) == 0)
		return true;
	*reset = true;
	return false;
}

/* Both directions of @s's stream moved: its fd is the kernel's now. */
static void sock_moved_check(struct xs_sock *s)
{
	unsigned int both = XS_MOVED_TX | XS_MOVED_RX;

	if ((xs_stream_moved(s->stream) & both) == both)
		xs_sock_set_moved(s);
}

static int sock_timeout(struct xs_sock *s, int flags, bool send)
{
	int t;

	if ((flags & MSG_DONTWAIT) ||
	    atomic_load_explicit(&s->nonblock, memory_order_relaxed))
		return 0;
	t = send ? atomic_load_explicit(&s->sndtimeo_ms, memory_order_relaxed)
		 : atomic_load_explicit(&s->rcvtimeo_ms, memory_order_relaxed);
	return t ? t : -1;
}

ssize_t xs_sock_send(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags)
{
	ssize_t rc, more;
	bool reset;

	if (sock_moved(s, fd, &reset))
		return xs_move_kernel_io(fd, iov, iovcnt, 0, flags, true);
	if (reset)
		return -ECONNRESET;
	/* Urgent data has no place in the stream: the connection moves to
	 * its kernel TCP connection, every byte before it in order, and the
	 * kernel sends it; the peer's kernel socket gets it (SIOCATMARK,
	 * POLLPRI, recv(MSG_OOB)), as the rest from then on. */
	if (flags & MSG_OOB) {
		rc = xs_sock_to_kernel(s, fd);
		return rc ? rc
			  : xs_move_kernel_io(fd, iov, iovcnt, 0, flags, true);
	}
	{
		XS_INSIDE(); /* the stream posts WRs and polls its CQ */
		rc = xs_stream_send(s->stream, iov, iovcnt,
				    sock_timeout(s, flags, true));
		if (rc == XS_STREAM_MOVED ||
		    (rc > 0 && (xs_stream_moved(s->stream) & XS_MOVED_TX))) {
			/* our MOVE went meanwhile: the rest over TCP, after
			 * what went over RDMA */
			sock_moved_check(s);
			more = xs_move_kernel_io(fd, iov, iovcnt,
						 rc > 0 ? (size_t)rc : 0, flags,
						 true);
			if (rc > 0)
				return more > 0 ? rc + more : rc;
			return more;
		}
	}
	/* with the depth back: a SIGPIPE handler is the application's */
	if (rc == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE); /* the kernel's send_sig(SIGPIPE, current) */
	return rc;
}

int xs_sock_so_error(struct xs_sock *s)
{
	int rc;

	if (sock_foreign(s) || atomic_load(&s->moved))
		return -1; /* the kernel's answer stands */

	XS_INSIDE(); /* a stream call, as every one, with the depth raised */
	rc = xs_stream_take_error(s->stream);
	return -rc;
}

void xs_sock_keep_error(struct xs_sock *s, int err)
{
	if (xs_sock_kind(s) != XS_KIND_RDMA || sock_foreign(s) ||
	    atomic_load(&s->moved))
		return;
	xs_stream_keep_error(s->stream, err);
}

ssize_t xs_sock_recv(struct xs_sock *s, int fd, const struct iovec *iov,
		     int iovcnt, int flags)
{
	int rflags = 0;
	ssize_t rc;
	bool reset;

	if (sock_moved(s, fd, &reset))
		return xs_move_recv(s, fd, iov, iovcnt, flags);
	/* Urgent data comes to the kernel socket only, after the peer
	 * moved there (xs_sock_send()); before, there is none. */
	if (flags & MSG_OOB)
		return xs_stream_moved(s->stream) & XS_MOVED_PEER
			       ? xs_move_kernel_io(fd, iov, iovcnt, 0, flags,
						   false)
			       : -EINVAL; /* tcp_recv_urg() without it */
	if (flags & MSG_ERRQUEUE)
		return -EAGAIN; /* nothing is ever queued there */
	if (reset)
		return -ECONNRESET;
	if (flags & MSG_PEEK)
		rflags |= XS_RECV_PEEK;
	if (flags & MSG_WAITALL)
		rflags |= XS_RECV_WAITALL;
	if (flags & MSG_TRUNC) /* tcp_recvmsg(): discard, as many as asked */
		rflags |= XS_RECV_DISCARD;

	XS_INSIDE(); /* the stream polls its CQ and sleeps on its channels */
	rc = xs_stream_recv(s->stream, iov, iovcnt, rflags,
			    sock_timeout(s, flags, false));
	if (rc == XS_STREAM_MOVED) { /* the peer's bytes come over TCP now */
		sock_moved_check(s);
		return xs_move_kernel_io(fd, iov, iovcnt, 0, flags, false);
	}
	if (rc > 0 && (flags & MSG_WAITALL) && !(flags & MSG_PEEK) &&
	    (xs_stream_moved(s->stream) & XS_MOVED_RX))
		rc = xs_move_recv_rest(fd, iov, iovcnt, (size_t)rc, flags);
	return rc;
}

ssize_t xs_sock_sendfile(struct xs_sock *s, int fd, int in_fd, off_t *offset,
			 size_t count)
{
	size_t chunk = 64u << 10, done = 0;
	struct iovec v;
	ssize_t n, m;
	char *buf;
	bool reset;

	if (sock_moved(s, fd, &reset)) {
		n = xs_real.sendfile(fd, in_fd, offset, count);
		return n < 0 ? -errno : n;
	}
	if (reset)
		return -ECONNRESET;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (done < count) {
		size_t want = count - done < chunk ? count - done : chunk;

		n = offset ? pread(in_fd, buf, want, *offset)
			   : xs_real.read(in_fd, buf, want);
		if (n <= 0) {
			if (n < 0 && !done)
				done = (size_t)-errno; /* reported below */
			break;
		}
		v = (struct iovec){ buf, (size_t)n };
		m = xs_sock_send(s, fd, &v, 1, 0);
		if (m <= 0) {
			if (!done)
				done = (size_t)m;
			break;
		}
		if (offset)
			*offset += m;
		else if (m < n) /* give back what was read and not sent */
			lseek(in_fd, m - n, SEEK_CUR);
		done += (size_t)m;
		if (m < n)
			break;
	}
	free(buf);
	return (ssize_t)done;
}

int xs_sock_shutdown(struct xs_sock *s, int fd, int how)
{
	int rc;

	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (xs_sock_kind(s) == XS_KIND_RDMA)
		xs_sock_take_over(s, fd); /* another process's: moves now */
	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved)) {
		rc = xs_real.shutdown(fd, how);
		return rc < 0 ? -errno : 0;
	}
	if (sock_foreign(s))
		return -ENOTCONN;

	XS_INSIDE(); /* the stream polls its CQ and posts the FIN */
	rc = xs_stream_shutdown(s->stream, how);
	if (rc == XS_STREAM_MOVED) {
		/* the peer reads our end on the kernel connection */
		rc = xs_real.shutdown(fd, how);
		return rc < 0 ? -errno : 0;
	}
	/* the kernel's shutdown succeeds */
	return rc == -ECONNRESET || rc == -EPIPE ? 0 : rc;
}

int xs_sock_name(struct xs_sock *s, int fd, bool peer, struct sockaddr *addr,
		 socklen_t *len)
{
	const struct sockaddr_storage *a = peer ? &s->peer : &s->local;
	socklen_t room, alen = peer ? s->peer_len : s->local_len;
	int rc;

	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved)) {
		rc = peer ? xs_real.getpeername(fd, addr, len)
			  : xs_real.getsockname(fd, addr, len);
		return rc < 0 ? -errno : 0;
	}
	/*
	 * The kernel checks the caller's pointers and length (EFAULT,
	 * EINVAL) on the library's own unconnected fd, of the same family
	 * and address size; then the RC connection's address replaces what
	 * it wrote, cut to the caller's room as the kernel cuts it.
	 */
	rc = xs_copy_in(&room, len, sizeof(room));
	if (rc)
		return rc;
	if (xs_real.getsockname(fd, addr, len) < 0)
		return -errno;
	if (room)
		memcpy(addr, a, room < alen ? room : alen);
	*len = alen;
	return 0;
}

/* Whether every byte that came over RDMA is read, and the kernel socket's
 * come next: a stream whose peer moved, read to its MOVE; a moved socket
 * whose bytes taken over are read. */
static bool sock_at_kernel(struct xs_sock *s)
{
	if (atomic_load(&s->moved))
		return !atomic_load(&s->prefix_left);
	XS_INSIDE(); /* a stream call */
	return xs_stream_moved(s->stream) & XS_MOVED_RX;
}

/*
 * FIONREAD of a socket whose transport is not the stream's: bytes the
 * application can read, never our control messages, and never a wait (the
 * kernel's FIONREAD does not block). A socket that waits to be claimed is
 * this process's I/O: claimed, its negotiation starts, and until it is
 * decided nothing is readable yet, as while a connect that its worker
 * runs is under way (poll has not called it readable either). A TCP
 * socket's messages of ours still leading its stream are taken first.
 * Return: true when nothing is readable yet (undecided; a message of ours
 * not all there; a reset, which the read reports); false when the
 * stream's or the kernel's count stands.
 */
static bool sock_inq_none(struct xs_sock *s, int fd)
{
	int rc;

	if (xs_sock_kind(s) == XS_KIND_PENDING) {
		(void)xs_sock_claim(s, fd);
		if (xs_sock_connect_wait(s, 0))
			return true;
	}
	if (xs_sock_kind(s) != XS_KIND_TCP || !atomic_load(&s->strip))
		return false;
	rc = xs_sock_strip(s, fd, true);
	return rc == -EAGAIN || rc == -ECONNRESET;
}

int xs_sock_ioctl(struct xs_sock *s, int fd, unsigned long request, void *arg)
{
	int rc, v;

	if (request == SIOCINQ &&
	    (xs_sock_kind(s) == XS_KIND_PENDING ||
	     (xs_sock_kind(s) == XS_KIND_TCP && atomic_load(&s->strip)))) {
		/* the kernel validates the pointer on its own socket first */
		if (xs_real.ioctl(fd, request, arg) < 0)
			return -errno;
		if (sock_inq_none(s, fd)) {
			*(int *)arg = 0;
			return 0;
		}
	}
	if (xs_sock_kind(s) == XS_KIND_RDMA && !sock_foreign(s) &&
	    !atomic_load(&s->moved) &&
	    (request == SIOCINQ || request == SIOCOUTQ ||
	     request == SIOCOUTQNSD)) {
		/* the kernel validates the pointer on its own socket first */
		rc = xs_real.ioctl(fd, request, arg);
		if (rc < 0 && errno == EFAULT)
			return -EFAULT;
		XS_INSIDE(); /* the stream reaps its CQ first */
		v = (int)(request == SIOCINQ ? xs_stream_inq(s->stream)
					     : xs_stream_outq(s->stream));
		*(int *)arg = v;
		return 0;
	}
	rc = xs_real.ioctl(fd, request, arg);
	if (rc < 0)
		return -errno;
	/* The urgent mark is in the kernel's stream, after every byte that
	 * came over RDMA (xs_sock_send()): not there while one is unread. */
	if (request == SIOCATMARK && xs_sock_kind(s) == XS_KIND_RDMA &&
	    !sock_foreign(s) && *(int *)arg && !sock_at_kernel(s))
		*(int *)arg = 0;
	/* moved: the bytes taken over come before the kernel's */
	if (request == SIOCINQ && atomic_load(&s->moved) &&
	    atomic_load(&s->prefix_left)) {
		pthread_mutex_lock(&s->lock);
		*(int *)arg += (int)(s->prefix_len - s->prefix_off);
		pthread_mutex_unlock(&s->lock);
	}
	if (request == FIONBIO)
		xs_sock_set_nonblock(s, *(const int *)arg != 0);
	return rc;
}

/*
 * SO_LINGER as the kernel stored it, read back: l_linger seconds, where
 * the kernel's "forever" (sk_lingertime = MAX_SCHEDULE_TIMEOUT) reads back
 * truncated to an int, often negative; beyond 24 days is forever here.
 */
static void sock_linger_done(struct xs_sock *s, int fd)
{
	struct linger lg;
	socklen_t len = sizeof(lg);
	int ms;

	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len) < 0)
		return;
	if (!lg.l_onoff)
		ms = XS_LINGER_OFF;
	else if (lg.l_linger < 0 || lg.l_linger > INT32_MAX / 1000)
		ms = -1;
	else
		ms = lg.l_linger * 1000;
	atomic_store(&s->linger_ms, ms);
}

/*
 * SO_KEEPALIVE or TCP_KEEPIDLE changed: read both back from the kernel
 * (which validated them; TCP_KEEPIDLE defaults to net.ipv4.tcp_keepalive_time)
 * for the probe thread (core/sock.c).
 */
static void sock_keepalive_done(struct xs_sock *s, int fd)
{
	int on = 0, idle = 0;
	socklen_t len = sizeof(on);

	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) < 0)
		return;
	len = sizeof(idle);
	if (on &&
	    xs_real.getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &len) < 0)
		return;
	atomic_store(&s->keepidle_s, on && idle > 0 ? idle : 0);
}

/* SO_RCVLOWAT changed: what the kernel stored (0 reads back as 1) goes to
 * the stream, which polls and reads by it. A socket not yet RDMA reads it
 * from the kernel when its stream starts (xs_sock_attach()). */
int xs_sock_rcvlowat(int fd)
{
	int v = 1;
	socklen_t len = sizeof(v);

	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &len) < 0 ||
	    v < 1)
		v = 1;
	return v;
}

static void sock_rcvlowat_done(struct xs_sock *s, int fd)
{
	if (xs_sock_kind(s) != XS_KIND_RDMA || !xs_sock_mine(s) ||
	    atomic_load(&s->moved))
		return;
	XS_INSIDE(); /* a stream call, as every one */
	xs_stream_set_rcvlowat(s->stream, xs_sock_rcvlowat(fd));
}

void xs_sock_setsockopt_done(struct xs_sock *s, int fd, int level, int name)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	uint64_t ms;

	if (level == SOL_SOCKET && name == SO_LINGER) {
		sock_linger_done(s, fd);
		return;
	}
	if (level == SOL_SOCKET && name == SO_RCVLOWAT) {
		sock_rcvlowat_done(s, fd);
		return;
	}
	if ((level == SOL_SOCKET && name == SO_KEEPALIVE) ||
	    (level == IPPROTO_TCP && name == TCP_KEEPIDLE)) {
		sock_keepalive_done(s, fd);
		return;
	}
	if (level != SOL_SOCKET ||
	    (name != SO_RCVTIMEO && name != SO_SNDTIMEO
#ifdef SO_RCVTIMEO_NEW
	     && name != SO_RCVTIMEO_NEW && name != SO_SNDTIMEO_NEW
#endif
	     ))
		return;
#ifdef SO_RCVTIMEO_NEW
	if (name == SO_RCVTIMEO_NEW)
		name = SO_RCVTIMEO;
	if (name == SO_SNDTIMEO_NEW)
		name = SO_SNDTIMEO;
#endif
	/* Read back what the kernel stored: it normalises and clamps. */
	if (xs_real.getsockopt(fd, SOL_SOCKET, name, &tv, &len) < 0)
		return;
	ms = (uint64_t)tv.tv_sec * 1000u +
	     ((uint64_t)tv.tv_usec + 999u) / 1000u;
	if (ms > INT32_MAX)
		ms = 0; /* beyond 24 days: the kernel's MAX_SCHEDULE_TIMEOUT */
	atomic_store(name == SO_RCVTIMEO ? &s->rcvtimeo_ms : &s->sndtimeo_ms,
		     (int)ms);
}
