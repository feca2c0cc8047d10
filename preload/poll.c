/*
 * preload/poll.c - readiness waits: poll/ppoll, select/pselect, epoll_*.
 *
 * The wrappers only: the hybrid backend behind them (spin, arm the CQs,
 * sleep on the channels with the application's kernel fds) is
 * core/poll.c's, the epoll sets with xsock members core/epoll.c's.
 */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "preload.h"

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout_ms, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *sigmask, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

/* poll() and __poll_chk() after its check (never through the exported
 * name, which may resolve to another library's poll first) */
static int poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	if (!xs_enter())
		return XS_CALL(poll, fds, nfds, timeout_ms);
	return xs_poll_ms(fds, nfds, timeout_ms);
}

/* ppoll() and __ppoll_chk() after its check */
static int poll_ts(struct pollfd *fds, nfds_t nfds,
		   const struct timespec *timeout, const sigset_t *sigmask)
{
	if (!xs_enter())
		return XS_CALL(ppoll, fds, nfds, timeout, sigmask);
	return xs_poll_ts(fds, nfds, timeout, sigmask);
}

XS_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	return poll_ms(fds, nfds, timeout_ms);
}

XS_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		    const struct timespec *timeout, const sigset_t *sigmask)
{
	return poll_ts(fds, nfds, timeout, sigmask);
}

XS_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout_ms,
			 size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll_ms(fds, nfds, timeout_ms);
}

XS_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			  const struct timespec *timeout,
			  const sigset_t *sigmask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll_ts(fds, nfds, timeout, sigmask);
}

XS_EXPORT int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		     struct timeval *timeout)
{
	if (!xs_enter())
		return XS_CALL(select, nfds, rfds, wfds, efds, timeout);
	return xs_select(nfds, rfds, wfds, efds, timeout);
}

XS_EXPORT int pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		      const struct timespec *timeout, const sigset_t *sigmask)
{
	if (!xs_enter())
		return XS_CALL(pselect, nfds, rfds, wfds, efds, timeout,
			       sigmask);
	return xs_pselect(nfds, rfds, wfds, efds, timeout, sigmask);
}

/* A new epoll fd @fd (or -1) recorded (xs_epoll_created()); errno kept. */
static int poll_epoll_created(int fd)
{
	XS_SAVE_ERRNO(xs_epoll_created(fd));
	return fd;
}

XS_EXPORT int epoll_create(int size)
{
	if (!xs_enter())
		return XS_CALL(epoll_create, size);
	return poll_epoll_created(XS_CALL(epoll_create, size));
}

XS_EXPORT int epoll_create1(int flags)
{
	if (!xs_enter())
		return XS_CALL(epoll_create1, flags);
	return poll_epoll_created(XS_CALL(epoll_create1, flags));
}

XS_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	if (!xs_enter())
		return XS_CALL(epoll_ctl, epfd, op, fd, event);
	return xs_epoll_ctl(epfd, op, fd, event);
}

XS_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
			 int timeout_ms)
{
	if (!xs_enter())
		return XS_CALL(epoll_wait, epfd, events, maxevents, timeout_ms);
	return xs_epoll_wait(epfd, events, maxevents, timeout_ms);
}

XS_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
			  int timeout_ms, const sigset_t *sigmask)
{
	if (!xs_enter())
		return XS_CALL(epoll_pwait, epfd, events, maxevents, timeout_ms,
			       sigmask);
	return xs_epoll_pwait(epfd, events, maxevents, timeout_ms, sigmask);
}

XS_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
			   const struct timespec *timeout,
			   const sigset_t *sigmask)
{
	if (!xs_enter())
		return XS_CALL(epoll_pwait2, epfd, events, maxevents, timeout,
			       sigmask);
	return xs_epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
}
