/*
 * preload/io.c - the data half of the socket surface.
 *
 * read/write, readv/writev, send/sendto/sendmsg, recv/recvfrom/recvmsg,
 * the mmsg batches, sendfile and the fortify entry points (__read_chk,
 * __recv_chk, __recvfrom_chk). Kernel TCP sockets and every other fd go
 * straight to libc after a lock-free look at the fd table, so their
 * behaviour is the kernel's bit for bit; sockets carried by an RC QP are
 * served by xs_sock_send()/xs_sock_recv(), with the argument checks the
 * kernel would make done here first.
 */
#include <limits.h>
#include <string.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "preload.h"

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
void __chk_fail(void) __attribute__((noreturn));

/* io_rdma()'s answers for a connect still deciding: non-blocking, or a
 * blocking wait a signal interrupted */
#define IO_AGAIN ((struct xs_sock *)1)
#define IO_INTR	 ((struct xs_sock *)2)
#define IO_RESET ((struct xs_sock *)3) /* core/handoff.c: foreign */
#define IO_BADF	 ((struct xs_sock *)4) /* closed while it waited */
#define IO_FAILED(s)                                                           \
	((uintptr_t)(s) >= (uintptr_t)IO_AGAIN &&                              \
	 (uintptr_t)(s) <= (uintptr_t)IO_BADF)

static int io_failed(const struct xs_sock *s)
{
	/* as tcp_sendmsg/tcp_recvmsg in SYN_SENT */
	errno = s == IO_INTR	? EINTR
		: s == IO_RESET ? ECONNRESET
		: s == IO_BADF	? EBADF
				: EAGAIN;
	return -1;
}

/* Whether @fd still names @s after a wait: another thread may have closed
 * it meanwhile, and the number may name a new file already, which the
 * call must never reach (the kernel's call holds its file instead: it
 * would go on; over TCP here it fails with EBADF, as a call made just
 * after the close would). */
static bool io_still(int fd, struct xs_sock *s)
{
	struct xs_sock *now = xs_fdtab_get(fd);

	if (now)
		xs_sock_put(now);
	return now == s;
}

/*
 * Look up @fd for the RDMA data path; NULL: pass through to libc. A
 * negotiable socket is claimed (this process does its I/O, core/neg.c);
 * a socket whose transport is still deciding is waited for when
 * blocking (then served by whichever transport it got), else IO_AGAIN.
 * @send: a send, which waits non-blocking too once the kernel's
 * connection is up (xs_sock_send_wait()). A read of a TCP socket first
 * strips the control messages that may still lead its stream.
 */
static inline struct xs_sock *io_rdma_how(int fd, bool send, int flags)
{
	struct xs_sock *s;
	bool nb;
	int rc, ms;

	if (!xs_enter())
		return NULL;
	s = xs_fdtab_get_data(fd);
	if (s && xs_sock_kind(s) == XS_KIND_RDMA) {
		/* another process's connection moves to its kernel TCP
		 * connection now (core/move.c); a moved one is the kernel
		 * fd's, by the very call the application made (a seccomp
		 * sandbox may allow read() and not recvmsg()) */
		xs_sock_take_over(s, fd);
		if (xs_sock_passes(s, send)) {
			xs_sock_put(s);
			return NULL;
		}
		return s;
	}
	if (s) {
		/* MSG_DONTWAIT: this call is non-blocking, as O_NONBLOCK; a
		 * blocking read waits for the transport no longer than
		 * SO_RCVTIMEO lets it wait for bytes (EAGAIN then) */
		nb = atomic_load(&s->nonblock) || (flags & MSG_DONTWAIT);
		ms = atomic_load(&s->rcvtimeo_ms);
		if (xs_sock_claim(s, fd) && send)
			rc = xs_sock_send_wait(s, nb);
		else /* non-blocking: no wait at all (EAGAIN) */
			rc = xs_sock_connect_wait(s, nb ? 0 : ms ? ms : -1);
		if (rc == 0 && xs_sock_kind(s) == XS_KIND_RDMA)
			return s; /* the stream's, closed or not (as a file) */
		if (rc == 0 && !io_still(fd, s))
			rc = -EBADF;
		if (rc == 0 && xs_sock_kind(s) == XS_KIND_TCP &&
		    (atomic_load(&s->strip) & XS_STRIP_FOREIGN))
			rc = -ECONNRESET;
		else if (rc == 0 && !send && xs_sock_kind(s) == XS_KIND_TCP &&
			 atomic_load(&s->strip))
			rc = xs_sock_strip(s, fd, nb);
		xs_sock_put(s);
		return rc == -EINTR	   ? IO_INTR
		       : rc == -EAGAIN	   ? IO_AGAIN
		       : rc == -ECONNRESET ? IO_RESET
		       : rc == -EBADF	   ? IO_BADF
					   : NULL;
	}
	return s;
}

static inline struct xs_sock *io_rdma(int fd)
{
	return io_rdma_how(fd, false, 0);
}

static inline struct xs_sock *io_rdma_send(int fd)
{
	return io_rdma_how(fd, true, 0);
}

/* io_rdma() and io_rdma_send() for a call with recv/send @flags */
static inline struct xs_sock *io_rdma_flags(int fd, int flags)
{
	return io_rdma_how(fd, false, flags);
}

static inline struct xs_sock *io_rdma_send_flags(int fd, int flags)
{
	return io_rdma_how(fd, true, flags);
}

/* iovec arrays as the kernel's import_iovec() checks them. */
static int io_check_iov(const struct iovec *iov, size_t iovcnt, int toomany)
{
	size_t total = 0, i;

	if (iovcnt > IOV_MAX)
		return toomany;
	if (iovcnt && !iov)
		return -EFAULT;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	return 0;
}

static ssize_t io_send(struct xs_sock *s, int fd, const struct iovec *iov,
		       int iovcnt, int flags)
{
	ssize_t rc = xs_sock_send(s, fd, iov, iovcnt, flags);

	xs_sock_put(s);
	return xs_sys_ret(rc);
}

static ssize_t io_recv(struct xs_sock *s, int fd, const struct iovec *iov,
		       int iovcnt, int flags)
{
	ssize_t rc = xs_sock_recv(s, fd, iov, iovcnt, flags);

	xs_sock_put(s);
	return xs_sys_ret(rc);
}

static ssize_t io_fail(struct xs_sock *s, int err)
{
	xs_sock_put(s);
	return xs_sys_ret(err);
}

ssize_t xs_io_read(int fd, void *buf, size_t len)
{
	struct xs_sock *s = io_rdma(fd);
	struct iovec v = { buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(read, fd, buf, len);
	return io_recv(s, fd, &v, 1, 0);
}

ssize_t xs_io_write(int fd, const void *buf, size_t len)
{
	struct xs_sock *s = io_rdma_send(fd);
	struct iovec v = { (void *)buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(write, fd, buf, len);
	return io_send(s, fd, &v, 1, 0);
}

XS_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	return xs_io_read(fd, buf, len);
}

XS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	return xs_io_write(fd, buf, len);
}

XS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct xs_sock *s = io_rdma(fd);
	int rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(readv, fd, iov, iovcnt);
	if (iovcnt < 0)
		return io_fail(s, -EINVAL);
	rc = io_check_iov(iov, (size_t)iovcnt, -EINVAL);
	if (rc)
		return io_fail(s, rc);
	return io_recv(s, fd, iov, iovcnt, 0);
}

XS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct xs_sock *s = io_rdma_send(fd);
	int rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(writev, fd, iov, iovcnt);
	if (iovcnt < 0)
		return io_fail(s, -EINVAL);
	rc = io_check_iov(iov, (size_t)iovcnt, -EINVAL);
	if (rc)
		return io_fail(s, rc);
	return io_send(s, fd, iov, iovcnt, 0);
}

XS_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct xs_sock *s = io_rdma_flags(fd, flags);
	struct iovec v = { buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(recv, fd, buf, len, flags);
	return io_recv(s, fd, &v, 1, flags);
}

/* recvfrom() and __recvfrom_chk() after its check: a wrapper never calls
 * another by its exported name, which may resolve to someone else's. */
static ssize_t recvfrom_common(int fd, void *buf, size_t len, int flags,
			       struct sockaddr *addr, socklen_t *alen)
{
	struct xs_sock *s = io_rdma_flags(fd, flags);
	struct iovec v = { buf, len };
	ssize_t rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(recvfrom, fd, buf, len, flags, addr, alen);
	rc = io_recv(s, fd, &v, 1, flags);
	/* TCP reports no source address: a length of 0 (inet_recvmsg) */
	if (rc >= 0 && addr && alen)
		*alen = 0;
	return rc;
}

XS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *addr, socklen_t *alen)
{
	return recvfrom_common(fd, buf, len, flags, addr, alen);
}

/* Call @fn with each fd an SCM_RIGHTS message of @msg carries. */
static void io_each_right(struct msghdr *msg, void (*fn)(int fd))
{
	struct cmsghdr *c;
	size_t i, n;
	int fd;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			fn(fd);
		}
	}
}

/* A socket that came with SCM_RIGHTS, whose transport state another
 * process recorded (core/handoff.c), joins the fd table with it. */
static void io_adopt_right(int fd)
{
	struct xs_sock *s = xs_sock_adopt(fd);

	if (s)
		xs_fdtab_insert(fd, s);
}

/* Whether @msg carries SCM_RIGHTS. */
static bool io_has_rights(struct msghdr *msg)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			return true;
	return false;
}

/* (a datagram's other control messages cost no look at the table) */
static void io_adopt_rights(struct msghdr *msg)
{
	if (io_has_rights(msg) && xs_handoff_any())
		io_each_right(msg, io_adopt_right);
}

/* recvmsg(), and each message of recvmmsg() */
static ssize_t recvmsg_common(int fd, struct msghdr *msg, int flags)
{
	struct xs_sock *s = io_rdma_flags(fd, flags);
	ssize_t rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s) {
		rc = XS_CALL(recvmsg, fd, msg, flags);
		if (rc >= 0 && msg && msg->msg_controllen)
			XS_SAVE_ERRNO(io_adopt_rights(msg));
		return rc;
	}
	if (!msg)
		return io_fail(s, -EFAULT);
	rc = io_check_iov(msg->msg_iov, msg->msg_iovlen, -EMSGSIZE);
	if (rc)
		return io_fail(s, rc);
	rc = io_recv(s, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (rc >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return rc;
}

XS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	return recvmsg_common(fd, msg, flags);
}

/* CLOCK_MONOTONIC in nanoseconds, for recvmmsg's timeout */
static int64_t io_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * A stream socket's recvmmsg(), as net/socket.c do_recvmmsg() loops:
 * each message one recvmsg (an end of stream a message of 0 bytes, and
 * the loop goes on); MSG_WAITFORONE makes those after the first
 * non-blocking; @timeout, checked after each message, gets the time left
 * written back and ends the loop when none is left (it never bounds a
 * wait: recvmmsg(2), BUGS). A reset met after the first message is
 * reported by the next call (the kernel keeps it in sk_err) and the
 * count returned, errno as it was.
 */
XS_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
		       int flags, struct timespec *timeout)
{
	int saved = errno;
	struct xs_sock *s = io_rdma_flags(fd, flags);
	struct timespec left;
	int64_t end = 0, now;
	unsigned int i;
	ssize_t rc = 0;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(recvmmsg, fd, vec, vlen, flags, timeout);
	if (timeout) {
		if (xs_copy_in(&left, timeout, sizeof(left)))
			return io_fail(s, -EFAULT);
		if (left.tv_sec < 0 || left.tv_nsec < 0 ||
		    left.tv_nsec >= 1000000000)
			return io_fail(s, -EINVAL);
		/* saturated, as timespec64_add_safe() */
		now = io_now_ns();
		end = left.tv_sec >= (INT64_MAX - now) / 1000000000 - 1
			      ? INT64_MAX
			      : now + left.tv_sec * 1000000000 + left.tv_nsec;
	}
	for (i = 0; i < vlen;) {
		rc = recvmsg_common(fd, &vec[i].msg_hdr,
				    flags & ~MSG_WAITFORONE);
		if (rc < 0)
			break;
		vec[i++].msg_len = (unsigned int)rc;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (timeout) {
			now = io_now_ns();
			now = end > now ? end - now : 0;
			timeout->tv_sec = (time_t)(now / 1000000000);
			timeout->tv_nsec = (long)(now % 1000000000);
			if (!now)
				break;
		}
	}
	if (rc < 0 && i == 0)
		return io_fail(s, -errno);
	if (rc < 0)
		XS_SAVE_ERRNO(xs_sock_keep_error(s, -errno));
	xs_sock_put(s);
	errno = saved; /* a success leaves errno as it was */
	return (int)i;
}

XS_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct xs_sock *s = io_rdma_send_flags(fd, flags);
	struct iovec v = { (void *)buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(send, fd, buf, len, flags);
	return io_send(s, fd, &v, 1, flags);
}

XS_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *addr, socklen_t alen)
{
	struct xs_sock *s = io_rdma_send_flags(fd, flags);
	struct iovec v = { (void *)buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(sendto, fd, buf, len, flags, addr, alen);
	/* A connected TCP socket ignores the address (tcp_sendmsg). */
	return io_send(s, fd, &v, 1, flags);
}

/* What io_pass_rights() handed over for one sendmsg(): the first
 * IO_PASS_MAX RDMA connections of a message (a further one cannot follow:
 * ECONNRESET in the receiver), on the caller's stack. */
#define IO_PASS_MAX 16
struct io_passed {
	struct xs_handed h[IO_PASS_MAX];
	size_t nr;
};

/*
 * The sockets @umsg passes with SCM_RIGHTS (read from copies, so that a
 * bad pointer is the kernel's EFAULT to report; the kernel takes at most
 * SCM_MAX_FD, 253, fds a message) go to another process: an RDMA
 * connection among them moves to its kernel TCP connection first, its
 * unread bytes handed over (xs_sock_hand()), into @p.
 */
static void io_pass_rights(const struct msghdr *umsg, struct io_passed *p)
{
	char ctl[CMSG_SPACE(sizeof(int) * 253)];
	struct msghdr m = { 0 };
	struct cmsghdr *c;
	struct xs_sock *s;
	size_t i, k, n;
	int fd;

	p->nr = 0;
	if (xs_copy_in(&m, umsg, sizeof(m)) || !m.msg_control ||
	    !m.msg_controllen)
		return;
	if (m.msg_controllen > sizeof(ctl))
		m.msg_controllen = sizeof(ctl);
	if (xs_copy_in(ctl, m.msg_control, m.msg_controllen))
		return;
	m.msg_control = ctl;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (!(s = xs_fdtab_get(fd)))
				continue;
			xs_sock_passed(s);
			for (k = 0; k < p->nr && p->h[k].sock != s; k++)
				;
			if (k == p->nr && p->nr < IO_PASS_MAX &&
			    xs_sock_kind(s) == XS_KIND_RDMA)
				(void)xs_sock_hand(s, fd, 0, &p->h[p->nr++]);
			xs_sock_put(s);
		}
	}
}

/* The sendmsg() that io_pass_rights() prepared @p for returned @rc. */
static void io_passed_done(struct io_passed *p, ssize_t rc)
{
	size_t i;

	for (i = 0; i < p->nr; i++)
		xs_sock_hand_done(&p->h[i], rc >= 0);
}

/* sendmsg(), and each message of sendmmsg() */
static ssize_t sendmsg_common(int fd, const struct msghdr *msg, int flags)
{
	struct xs_sock *s = io_rdma_send_flags(fd, flags);
	int rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s) {
		struct io_passed passed;
		ssize_t n;

		XS_SAVE_ERRNO(io_pass_rights(msg, &passed));
		n = XS_CALL(sendmsg, fd, msg, flags);
		XS_SAVE_ERRNO(io_passed_done(&passed, n));
		return n;
	}
	if (!msg)
		return io_fail(s, -EFAULT);
	rc = io_check_iov(msg->msg_iov, msg->msg_iovlen, -EMSGSIZE);
	if (rc)
		return io_fail(s, rc);
	return io_send(s, fd, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

XS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return sendmsg_common(fd, msg, flags);
}

XS_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
		       int flags)
{
	struct xs_sock *s = io_rdma_send_flags(fd, flags);
	unsigned int i;
	ssize_t rc;

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(sendmmsg, fd, vec, vlen, flags);
	xs_sock_put(s);
	for (i = 0; i < vlen; i++) {
		rc = sendmsg_common(fd, &vec[i].msg_hdr, flags);
		if (rc < 0)
			return i ? (int)i : -1;
		vec[i].msg_len = (unsigned int)rc;
	}
	return (int)vlen;
}

static ssize_t io_sendfile(struct xs_sock *s, int out_fd, int in_fd,
			   off_t *offset, size_t count)
{
	ssize_t rc = xs_sock_sendfile(s, out_fd, in_fd, offset, count);

	xs_sock_put(s);
	return xs_sys_ret(rc);
}

XS_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct xs_sock *s = io_rdma_send(out_fd);

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(sendfile, out_fd, in_fd, offset, count);
	return io_sendfile(s, out_fd, in_fd, offset, count);
}

XS_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			     size_t count)
{
	struct xs_sock *s = io_rdma_send(out_fd);

	if (s)
		return io_sendfile(s, out_fd, in_fd, (off_t *)offset, count);
	if (!xs_real.sendfile64)
		return XS_CALL(sendfile, out_fd, in_fd, (off_t *)offset, count);
	return XS_CALL(sendfile64, out_fd, in_fd, offset, count);
}

/*
 * Fortify entry points: glibc's own versions check the buffer length and
 * abort through __chk_fail(); forwarding to them keeps that contract, and
 * the RDMA path makes the same check.
 */
XS_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	struct xs_sock *s = io_rdma(fd);
	struct iovec v = { buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(__read_chk, fd, buf, len, buflen);
	if (len > buflen)
		__chk_fail();
	return io_recv(s, fd, &v, 1, 0);
}

XS_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			     int flags)
{
	struct xs_sock *s = io_rdma_flags(fd, flags);
	struct iovec v = { buf, len };

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(__recv_chk, fd, buf, len, buflen, flags);
	if (len > buflen)
		__chk_fail();
	return io_recv(s, fd, &v, 1, flags);
}

XS_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				 int flags, struct sockaddr *addr,
				 socklen_t *alen)
{
	struct xs_sock *s = io_rdma_flags(fd, flags);

	if (IO_FAILED(s))
		return io_failed(s);
	if (!s)
		return XS_CALL(__recvfrom_chk, fd, buf, len, buflen, flags,
			       addr, alen);
	xs_sock_put(s);
	if (len > buflen)
		__chk_fail();
	return recvfrom_common(fd, buf, len, flags, addr, alen);
}
