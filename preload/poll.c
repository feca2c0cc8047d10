/*
 * preload/poll.c - readiness waits: poll/ppoll, select/pselect, epoll_*.
 *
 * Kernel fds (kernel TCP sockets included) are waited on by the kernel
 * itself, so timeouts, EINTR and sigmask handling are the kernel's own.
 * RC QP streams join these waits through their completion-channel fds in
 * the hybrid polling backend (spin XSOCK_SPIN_US, then sleep).
 */
#include "preload.h"

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout_ms, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *sigmask, size_t fdslen);

XS_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	xs_enter();
	return XS_CALL(poll, fds, nfds, timeout_ms);
}

XS_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		    const struct timespec *timeout, const sigset_t *sigmask)
{
	xs_enter();
	return XS_CALL(ppoll, fds, nfds, timeout, sigmask);
}

XS_EXPORT int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		     struct timeval *timeout)
{
	xs_enter();
	return XS_CALL(select, nfds, rfds, wfds, efds, timeout);
}

XS_EXPORT int pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		      const struct timespec *timeout, const sigset_t *sigmask)
{
	xs_enter();
	return XS_CALL(pselect, nfds, rfds, wfds, efds, timeout, sigmask);
}

XS_EXPORT int epoll_create(int size)
{
	xs_enter();
	return XS_CALL(epoll_create, size);
}

XS_EXPORT int epoll_create1(int flags)
{
	xs_enter();
	return XS_CALL(epoll_create1, flags);
}

XS_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	xs_enter();
	return XS_CALL(epoll_ctl, epfd, op, fd, event);
}

XS_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
			 int timeout_ms)
{
	xs_enter();
	return XS_CALL(epoll_wait, epfd, events, maxevents, timeout_ms);
}

XS_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
			  int timeout_ms, const sigset_t *sigmask)
{
	xs_enter();
	return XS_CALL(epoll_pwait, epfd, events, maxevents, timeout_ms,
		       sigmask);
}

XS_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			   const struct timespec *timeout,
			   const sigset_t *sigmask)
{
	xs_enter();
	return XS_CALL(epoll_pwait2, epfd, events, maxevents, timeout, sigmask);
}

XS_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout_ms,
			 size_t fdslen)
{
	xs_enter();
	return XS_CALL(__poll_chk, fds, nfds, timeout_ms, fdslen);
}

XS_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			  const struct timespec *timeout,
			  const sigset_t *sigmask, size_t fdslen)
{
	xs_enter();
	return XS_CALL(__ppoll_chk, fds, nfds, timeout, sigmask, fdslen);
}
