/*
 * preload/io.c - the data half of the socket surface.
 *
 * read/write, readv/writev, send/sendto/sendmsg, recv/recvfrom/recvmsg,
 * the mmsg batches, sendfile and the
 * fortify entry points (__read_chk, __recv_chk, __recvfrom_chk). Kernel TCP
 * sockets and every other fd go straight to libc, so their behaviour is the
 * kernel's bit for bit; RC QP streams are served by core/ once a socket is
 * of kind XS_KIND_RDMA (the stream transport).
 */
#include <sys/sendfile.h>
#include <unistd.h>

#include "preload.h"

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);

XS_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	xs_enter();
	return XS_CALL(read, fd, buf, len);
}

XS_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	xs_enter();
	return XS_CALL(write, fd, buf, len);
}

XS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	xs_enter();
	return XS_CALL(readv, fd, iov, iovcnt);
}

XS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	xs_enter();
	return XS_CALL(writev, fd, iov, iovcnt);
}

XS_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	xs_enter();
	return XS_CALL(recv, fd, buf, len, flags);
}

XS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *addr, socklen_t *alen)
{
	xs_enter();
	return XS_CALL(recvfrom, fd, buf, len, flags, addr, alen);
}

XS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	xs_enter();
	return XS_CALL(recvmsg, fd, msg, flags);
}

XS_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
		       int flags, struct timespec *timeout)
{
	xs_enter();
	return XS_CALL(recvmmsg, fd, vec, vlen, flags, timeout);
}

XS_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	xs_enter();
	return XS_CALL(send, fd, buf, len, flags);
}

XS_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *addr, socklen_t alen)
{
	xs_enter();
	return XS_CALL(sendto, fd, buf, len, flags, addr, alen);
}

XS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	xs_enter();
	return XS_CALL(sendmsg, fd, msg, flags);
}

XS_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
		       int flags)
{
	xs_enter();
	return XS_CALL(sendmmsg, fd, vec, vlen, flags);
}

XS_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	xs_enter();
	return XS_CALL(sendfile, out_fd, in_fd, offset, count);
}

XS_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			     size_t count)
{
	xs_enter();
	if (!xs_real.sendfile64)
		return XS_CALL(sendfile, out_fd, in_fd, (off_t *)offset, count);
	return XS_CALL(sendfile64, out_fd, in_fd, offset, count);
}

/*
 * Fortify entry points: glibc's own versions check the buffer length and
 * abort through __chk_fail(); forwarding to them keeps that contract.
 */
XS_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	xs_enter();
	return XS_CALL(__read_chk, fd, buf, len, buflen);
}

XS_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			     int flags)
{
	xs_enter();
	return XS_CALL(__recv_chk, fd, buf, len, buflen, flags);
}

XS_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				 int flags, struct sockaddr *addr,
				 socklen_t *alen)
{
	xs_enter();
	return XS_CALL(__recvfrom_chk, fd, buf, len, buflen, flags, addr, alen);
}
