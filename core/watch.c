/*
 * core/watch.c - the kernel TCP connections under this process's RDMA
 * streams, watched for the peer's FIN or RST.
 *
 * Every RDMA stream rides on a kernel TCP connection that carries nothing
 * while the stream lives (core/neg.c). When the peer's process ends, its
 * kernel destroys its QP and rdma_cm id, which sends one DREQ, and closes
 * its TCP socket, which sends FIN and retransmits it until acknowledged
 * (tcp_orphan_retries). A DREQ lost in a link outage is never sent again:
 * a stream with nothing in flight would then never learn that its peer
 * has gone, where a TCP socket learns as soon as the retransmitted FIN
 * gets through. So the probe thread looks here once a second, and a
 * stream whose kernel connection ended asks its peer's QP
 * (xs_stream_kernel_ended()).
 *
 * One epoll set per process, made at the first RDMA connection, holds
 * each such connection's kernel socket, edge-triggered on EPOLLRDHUP
 * (EPOLLHUP and EPOLLERR come anyway), keyed by its SO_COOKIE. An entry
 * lives as long as its open file (the kernel drops it at the last
 * close), so it follows the connection through dup() and the close of
 * the fd it was added by. A forked child starts an empty set of its own.
 * Context: any thread; watch_lock guards the set's fd.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core_int.h"
#include "log.h"

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static int watch_epfd = -1; /* watch_lock */

void xs_watch_add(int fd, uint64_t cookie)
{
	struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLET,
				  .data.u64 = cookie };

	int saved = errno;

	if (fd < 0 || !cookie)
		return;
	pthread_mutex_lock(&watch_lock);
	if (watch_epfd < 0) {
		watch_epfd = xs_fd_high(xs_real.epoll_create1(EPOLL_CLOEXEC));
		if (watch_epfd < 0)
			xs_log_once(XS_LOG_WARN, "watch",
				    "epoll_create1: %s: an idle connection "
				    "whose peer ended unheard waits for it",
				    strerror(errno));
	}
	if (watch_epfd >= 0 &&
	    xs_real.epoll_ctl(watch_epfd, EPOLL_CTL_ADD, fd, &ev) < 0 &&
	    errno != EEXIST)
		xs_dbg("watch", "epoll_ctl(fd %d): %s", fd, strerror(errno));
	pthread_mutex_unlock(&watch_lock);
	errno = saved; /* the application's call succeeded */
}

size_t xs_watch_ended(uint64_t *cookies, size_t max)
{
	struct epoll_event ev[64];
	size_t nr = 0;
	int n, i;

	pthread_mutex_lock(&watch_lock);
	while (watch_epfd >= 0 && nr < max) {
		n = xs_real.epoll_wait(watch_epfd, ev,
				       max - nr < 64 ? (int)(max - nr) : 64, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EBADF) /* closed under us */
			watch_epfd = -1;
		if (n <= 0)
			break;
		for (i = 0; i < n; i++)
			cookies[nr++] = ev[i].data.u64;
		if (n < 64)
			break;
	}
	pthread_mutex_unlock(&watch_lock);
	return nr;
}

void xs_watch_fork_child(void)
{
	/* the parent's set, and its entries: not the child's streams */
	if (watch_epfd >= 0)
		xs_real.close(watch_epfd);
	watch_epfd = -1;
	pthread_mutex_init(&watch_lock, NULL);
}
