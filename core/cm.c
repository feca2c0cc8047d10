/*
 * core/cm.c - CM event channels: the one of the process that every
 * established connection's events go to, and the thread that reads it.
 *
 * Once a connection is established, the one CM event that matters is
 * DISCONNECTED: the peer's QP went, at its close or at its process's end.
 * A channel per connection for that one event would cost every connection
 * an fd. Instead, an established connection's rdma_cm id moves to the
 * process's channel (rdma_migrate_id()), and one thread of ours reads it:
 * it marks the connection (xs_conn.cm_down) and wakes whoever waits on the
 * connection's stream (xs_stream_cm_wake()). The
 * stream takes the mark at its next look (stream_cm_events()). Setup
 * keeps a channel per connection (its waits are its own, with their
 * deadlines), and so does a connection when the process has no channel
 * to give it: no fd or thread left, or a change of credentials since the
 * channel was made (the kernel then refuses it, EACCES).
 *
 * The thread touches a connection only between rdma_get_cm_event() and
 * rdma_ack_cm_event(), and rdma_destroy_id() returns only after every
 * event it reported was acked: a connection, and its stream, freed
 * after xs_conn_destroy() destroyed the id is never touched again.
 * An id whose destruction failed (the kernel refuses a thread whose
 * credentials changed since the channel was made, EACCES) stays on the
 * channel: xs_conn_destroy() has it name no connection first
 * (xs_cm_forget()).
 * The thread is not xsock-cm, the negotiation thread (core/neg.c): that
 * one makes QPs and steps handshakes, and a peer's end must not wait
 * behind them; this one sleeps in poll(2) until an event comes.
 * Context: any thread; cm_lock guards the making of the channel.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "conn.h"
#include "core_int.h"
#include "stream.h"

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
/* held by the thread around each event, and by xs_cm_forget() */
static pthread_mutex_t cm_event_lock = PTHREAD_MUTEX_INITIALIZER;
/* the process's channel, read by its thread; NULL until the first
 * established connection asks, and in a forked child until its own */
static struct rdma_event_channel *cm_ch;

struct rdma_event_channel *xs_cm_channel_create(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int fl, err;

	if (!ch)
		return NULL;
	ch->fd = xs_fd_high(ch->fd);
	fl = xs_real.fcntl(ch->fd, F_GETFL);
	if (fl < 0 || xs_real.fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		err = errno;
		rdma_destroy_event_channel(ch);
		errno = err;
		return NULL;
	}
	return ch;
}

/* One event of an established connection: DISCONNECTED marks it and
 * wakes its stream's sleepers; the others change nothing (as on a
 * connection's own channel, stream_cm_events()). */
static void cm_event(const struct rdma_cm_event *ev)
{
	struct xs_stream *s;
	struct xs_conn *c;

	if (ev->event != RDMA_CM_EVENT_DISCONNECTED)
		return;
	pthread_mutex_lock(&cm_event_lock);
	c = ev->id->context; /* NULL: forgotten (xs_cm_forget()) */
	if (c) {
		atomic_store(&c->cm_down, true);
		/* after the mark: a sleeper leaves its eventfd, then looks
		 * at the mark (stream_sleep()), so one sees the other */
		s = atomic_load(&c->cm_stream);
		if (s)
			xs_stream_cm_wake(s); /* the news bumped too */
		else
			xs_stream_news_bump();
	}
	pthread_mutex_unlock(&cm_event_lock);
}

static void *cm_main(void *arg)
{
	struct rdma_event_channel *ch = arg;
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	XS_INSIDE(); /* a thread of ours: rdma_cm throughout */

	for (;;) {
		while (rdma_get_cm_event(ch, &ev) == 0) {
			cm_event(ev);
			rdma_ack_cm_event(ev);
		}
		/* an error (ENOMEM) may pass: the connections here have no
		 * other reader, so the thread goes on, a little later */
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			xs_log_once(XS_LOG_WARN, "cm",
				    "rdma_get_cm_event: %s: a peer's end may "
				    "be seen late",
				    strerror(errno));
			(void)xs_real.poll(NULL, 0, 100);
			continue;
		}
		(void)xs_real.poll(&pfd, 1, -1);
	}
	return NULL; /* not reached */
}

/* The process's channel, made with its thread on the first call. Return:
 * the channel, or NULL (no fd or thread: logged once; a later call tries
 * again). */
static struct rdma_event_channel *cm_channel(void)
{
	struct rdma_event_channel *ch;
	int rc;

	pthread_mutex_lock(&cm_lock);
	if (!cm_ch) {
		ch = xs_cm_channel_create();
		rc = ch ? xs_thread_start(cm_main, ch, 0, "xsock-cm-events")
			: -errno;
		if (rc) {
			if (ch)
				rdma_destroy_event_channel(ch);
			xs_log_once(XS_LOG_INFO, "cm",
				    "no CM channel for the process (%s): each "
				    "connection keeps its own",
				    strerror(-rc));
		} else {
			cm_ch = ch;
		}
	}
	ch = cm_ch;
	pthread_mutex_unlock(&cm_lock);
	return ch;
}

bool xs_cm_ready(void)
{
	return cm_channel() != NULL;
}

int xs_cm_settle(struct xs_conn *c)
{
	struct rdma_event_channel *ch = cm_channel();

	if (ch && rdma_migrate_id(c->id, ch) == 0) {
		if (c->ch)
			rdma_destroy_event_channel(c->ch);
		c->ch = NULL;
		return 0;
	}
	if (ch)
		xs_log_once(XS_LOG_INFO, "cm",
			    "rdma_migrate_id: %s: connections keep CM "
			    "channels of their own",
			    strerror(errno));
	/* a channel of its own: the one it has, or a new one */
	if (!c->ch)
		c->ch = xs_cm_channel_create();
	if (!c->ch)
		return -errno;
	if (c->id->channel != c->ch && rdma_migrate_id(c->id, c->ch))
		return -errno;
	return 0;
}

void xs_cm_forget(struct rdma_cm_id *id)
{
	pthread_mutex_lock(&cm_event_lock);
	id->context = NULL;
	pthread_mutex_unlock(&cm_event_lock);
}

void xs_cm_fork_child(void)
{
	/* The parent's channel and thread: its ids' events are the
	 * parent's to read, and the channel (an fd of the parent's kernel
	 * file, closed at exec) stays as it is, for the parent's ids that
	 * this image still holds. The child makes its own when it asks. */
	pthread_mutex_init(&cm_lock, NULL);
	pthread_mutex_init(&cm_event_lock, NULL);
	cm_ch = NULL;
}
