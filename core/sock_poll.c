/*
 * core/sock_poll.c - readiness of sockets whose kernel fd cannot tell it.
 *
 * An RDMA socket's kernel fd is connected but idle (its bytes go over the
 * QP), and a socket negotiating its transport is not readable yet (but
 * writable: its send waits for the outcome), so poll/epoll/select ask
 * here: the events as tcp_poll() would compute them, the fds to sleep on
 * (the completion channel; for an epoll set inside another wait, the
 * stream's kick or the negotiation's eventfd too: see core/wake.c), and
 * arming before the sleep. The waits themselves (core/poll.c,
 * core/epoll.c) spin, arm, re-check and sleep in one real poll over these
 * fds, the application's kernel fds and their thread's own wake-up.
 * Context: any thread.
 */
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core_int.h"
#include "stream.h"

/* Whether @s's transport is undecided, or decided for TCP by a connect
 * that has not yet said so: the outcome answers for it (sock_decided()). */
static bool sock_deciding(struct xs_sock *s)
{
	enum xs_fd_kind kind = xs_sock_kind(s);

	return kind == XS_KIND_PENDING ||
	       (kind == XS_KIND_TCP && xs_sock_connecting(s));
}

bool xs_sock_polled(struct xs_sock *s)
{
	enum xs_fd_kind kind = xs_sock_kind(s);

	/* A non-blocking connect still deciding: not writable yet, which
	 * its unconnected kernel fd would claim to be. Decided for TCP, the
	 * connect not yet done saying so: the same, until it has (an epoll
	 * member then moves to the kernel's set: ep_settle()). */
	if (sock_deciding(s) && xs_sock_connecting(s))
		return true;
	if (kind == XS_KIND_RDMA && atomic_load(&s->moved))
		/* moved to its kernel TCP connection: the kernel fd's, once
		 * the bytes taken over are read (core/move.c) */
		return atomic_load(&s->prefix_left);
	if (kind == XS_KIND_RDMA)
		return xs_sock_mine(s);
	return false; /* listeners: every connection comes to the kernel's */
}

unsigned int xs_sock_poll_events(struct xs_sock *s, unsigned int how)
{
	unsigned int ev, out = 0, drain = 0;
	int k;

	if (xs_sock_kind(s) != XS_KIND_RDMA) {
		/* Negotiating over a connected kernel socket: writable, as
		 * that socket is; a send waits for the outcome
		 * (xs_sock_send_wait()). Connecting; or decided for TCP:
		 * the kernel's. */
		if (xs_sock_kind(s) == XS_KIND_PENDING &&
		    xs_sock_connecting(s) && xs_sock_negotiable(s))
			out = POLLOUT | POLLWRNORM;
		/* a connect that the parent process runs wakes no wait
		 * here: looked at again within 1 ms, as a starved stream */
		if ((how & XS_POLL_ARM) && xs_sock_poll_arm(s))
			out |= XS_POLL_STARVED;
		/* a nested set's: the eventfd seen readable while still
		 * connecting (an outcome written before a claim began anew)
		 * is drained; the outcome's own stays for the settle */
		if ((how & XS_POLL_KICK) && (how & XS_POLL_DRAIN_FD(0)) &&
		    sock_deciding(s) &&
		    (k = atomic_load(&s->connect_evfd)) >= 0) {
			eventfd_t v;

			if (eventfd_read(k, &v) == 0 && !xs_sock_connecting(s))
				(void)!eventfd_write(k, 1);
		}
		return out;
	}
	if (atomic_load(&s->moved))
		/* the bytes taken over are readable; writes go to the
		 * kernel's send buffer */
		return atomic_load(&s->prefix_left)
			       ? POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM
			       : XS_POLL_MOVED;
	if (!xs_sock_mine(s))
		return 0;
	/* xs_sock_poll_fds() gives a stream's fds in its own order */
	for (k = 0; k < XS_POLL_FDS; k++)
		if (how & XS_POLL_DRAIN_FD(k))
			drain |= XS_STREAM_DRAIN_FD(k);
	{
		XS_INSIDE(); /* the stream polls its CQ */

		ev = xs_stream_events(
			s->stream,
			drain | (how & XS_POLL_ARM ? XS_STREAM_ARM : 0) |
				(how & XS_POLL_SPIN ? XS_STREAM_SPIN : 0) |
				(how & XS_POLL_NOARM ? XS_STREAM_NOARM : 0) |
				(how & XS_POLL_KICK ? XS_STREAM_KICK : 0));
		out |= ev & XS_EV_STARVED ? XS_POLL_STARVED : 0;
		out |= ev & XS_EV_IN ? POLLIN | POLLRDNORM : 0;
		out |= ev & XS_EV_OUT ? POLLOUT | POLLWRNORM : 0;
		out |= ev & XS_EV_ERR ? POLLERR : 0;
		out |= ev & XS_EV_HUP ? POLLHUP : 0;
		out |= ev & XS_EV_RDHUP ? POLLRDHUP : 0;
		if (ev & XS_EV_MOVED) { /* the kernel fd's from here on */
			xs_sock_set_moved(s);
			out = XS_POLL_MOVED;
		}
	}
	return out;
}

int xs_sock_poll_fds(struct xs_sock *s, int fds[XS_POLL_FDS], bool kick)
{
	if (sock_deciding(s)) {
		/* readable once decided: only for a wait that the kernel
		 * alone wakes, as a stream's kick */
		fds[0] = kick ? xs_sock_connect_evfd(s) : -1;
		return fds[0] >= 0;
	}
	/* a moved socket's too: an epoll set takes them out by these */
	if (xs_sock_kind(s) == XS_KIND_RDMA && xs_sock_mine(s) && s->stream)
		return xs_stream_wait_fds(s->stream, fds, kick);
	return 0;
}

bool xs_sock_poll_arm(struct xs_sock *s)
{
	int rc;

	if (xs_sock_kind(s) != XS_KIND_RDMA)
		/* nothing to arm; a connect that the parent process runs is
		 * looked at again soon (its outcome wakes no wait here) */
		return xs_sock_connecting(s) && s->neg_gen != xs_fork_gen;

	if (atomic_load(&s->moved) || !xs_sock_mine(s))
		return false;
	XS_INSIDE(); /* arming is ibv_req_notify_cq() */
	rc = xs_stream_arm(s->stream);
	return rc == 1;
}

unsigned long xs_sock_poll_gen(struct xs_sock *s)
{
	if (xs_sock_kind(s) != XS_KIND_RDMA || !s->stream)
		return 0; /* an exec'd image's moved socket has none */
	return atomic_load_explicit(&s->stream->gen, memory_order_relaxed);
}

void xs_sock_note(struct xs_sock *s)
{
	xs_stream_note(s);
}

unsigned long xs_sock_notes_end(void)
{
	return xs_stream_notes_end();
}

int xs_sock_notes(unsigned long *pos, struct xs_sock *socks[], int max)
{
	const void **owners = (const void **)socks;

	return xs_stream_notes(pos, owners, max);
}

unsigned long xs_sock_news(void)
{
	return xs_stream_news();
}
