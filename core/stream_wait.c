/*
 * core/stream_wait.c - a stream's waits: the CM channel's events, arming
 * the CQ, the wake-ups of news that no completion announces, and the one
 * thread that sleeps in poll(2) on the completion channel while the
 * others wait on the stream's condition variable.
 * Context: any thread; s->lock guards every field (stream_int.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "stats.h"
#include "stream_int.h"

/* The peer's QP gone (a DISCONNECTED): its last messages, its FIN among
 * them, completed before it disconnected, so they are reaped first.
 * Called with s->lock held. */
static void stream_cm_down(struct xs_stream *s)
{
	stream_news();
	while (stream_poll_cq(s) > 0)
		;
	stream_peer_lost(s, "peer disconnected without FIN");
}

/* Take the mark of the process's CM thread (core/cm.c): no system call
 * when there is none. Return: whether there was one. Called with s->lock
 * held. */
bool stream_cm_check(struct xs_stream *s)
{
	atomic_bool *down = &s->c->cm_down;

	/* seq_cst: after the store of the sleeper's eventfd in
	 * stream_sleep() (or the kick's in stream_kick_fd()), as the CM
	 * thread loads them after its store of the mark */
	if (!atomic_load(down) || !atomic_exchange(down, false))
		return false;
	stream_cm_down(s);
	return true;
}

/* The CM events of a connection that kept its own channel, then the
 * mark of the process's CM thread. Called with s->lock held. */
void stream_cm_events(struct xs_stream *s)
{
	struct rdma_cm_event *ev;
	bool down = false;

	while (s->c->ch && rdma_get_cm_event(s->c->ch, &ev) == 0) {
		stream_news();
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			down = true;
		rdma_ack_cm_event(ev);
	}
	if (down)
		stream_cm_down(s);
	stream_cm_check(s);
}

/*
 * Whether an arm for solicited completions only will do: what a waiter
 * here waits for comes from the peer, as a SEND (data, credits, FIN,
 * RESET, a region released) or the end of its QP (our receives flushed
 * in error, which are solicited too). Our own sends' completions then
 * only free their slots: a request/response server's reply no longer
 * wakes it a second time. Not while a completion of ours is waited for:
 * a READ, an invalidation or a probe; a send from a pool buffer (the
 * buffer is shared by every connection); slots running short; the end
 * of the stream (close and linger wait for every send to complete).
 * A send's error completion is not solicited either (rxe); the probe
 * thread's look once a second (xs_stream_probe()) reaps what no event
 * announced. Called with s->lock held.
 */
static bool stream_arm_solicited(const struct xs_stream *s)
{
	return (s->c->peer.flags & XS_HELLO_F_SOLICITED) && !s->tx_awaited &&
	       s->tx_inflight * 2u < s->tx_max && !s->pool_starved &&
	       !s->wr_shut && !s->fin_sent && !s->move_want && !s->move_sent &&
	       !s->rst_sent && !s->error;
}

/* Arm the CQ for its next completion (or its next solicited one, when
 * that will do), unless still armed for it. Return: 0, or
 * ibv_req_notify_cq()'s error. Called with s->lock held. */
int stream_arm(struct xs_stream *s)
{
	bool sol = stream_arm_solicited(s);

	if (s->cq_armed && (sol || !s->cq_armed_sol))
		return 0;
	if (ibv_req_notify_cq(s->c->cq, sol))
		return -1;
	s->cq_armed = true;
	s->cq_armed_sol = sol;
	s->cq_quiet = false; /* what came before the arm raised no event */
	return 0;
}

/*
 * Before posting a WR whose completion a waiter here needs (a READ, an
 * invalidation, a probe, a send from a pool buffer): a CQ armed for
 * solicited completions only is armed for every completion first. So the
 * completion raises an event however soon it comes, even when the post
 * follows a waiter's arm and last look (a READ posted by the look's own
 * progress). Called with s->lock held.
 */
void stream_arm_widen(struct xs_stream *s)
{
	if (!s->cq_armed || !s->cq_armed_sol)
		return;
	if (ibv_req_notify_cq(s->c->cq, 0) == 0) {
		s->cq_armed_sol = false;
		s->cq_quiet = false;
	}
}

/*
 * The kick (see struct xs_stream.kick_fd), made now if there is none: an
 * epoll set inside another wait takes it before its members' last look,
 * under the lock, so a shutdown() that comes after that look finds it.
 * Return: the fd, or -1 (no fd left: logged once). Called with s->lock
 * held.
 */
int stream_kick_fd(struct xs_stream *s)
{
	int fd = atomic_load_explicit(&s->kick_fd, memory_order_relaxed);

	if (fd == -1) {
		fd = xs_fd_high(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
		if (fd < 0)
			xs_log_once(XS_LOG_WARN, "stream",
				    "eventfd: %s: a shutdown() by another "
				    "thread, or the peer's end, wakes no "
				    "waiter of a nested epoll set",
				    strerror(errno));
		/* before the look at the CM thread's mark (core/cm.c); -2:
		 * none, for good, so that the fds the stream's waits were
		 * given keep their order (xs_stream_wait_fds()) */
		atomic_store(&s->kick_fd, fd >= 0 ? fd : -2);
	}
	return fd >= 0 ? fd : -1;
}

/*
 * Wake every thread asleep on @s without its lock (see struct
 * xs_stream.sleeper_fd): the one in stream_sleep(), the emulated waits
 * (a note, so that an epoll set looks at the socket again, then each
 * registered thread's own eventfd), and the kernel's waits on a nested
 * epoll set (the kick). The news the caller stored comes first.
 */
static void stream_wake_waiters(struct xs_stream *s)
{
	int fd;

	xs_stream_note(__atomic_load_n(&s->owner, __ATOMIC_RELAXED));
	xs_stream_news_bump();
	xs_wake_write_begin(); /* the sleeper's eventfd stays open till then */
	fd = atomic_load(&s->sleeper_fd);
	if (fd >= 0)
		(void)!eventfd_write(fd, 1);
	xs_wake_write_end();
	fd = atomic_load(&s->kick_fd);
	if (fd >= 0)
		(void)!eventfd_write(fd, 1);
	xs_wake_all();
}

void xs_stream_cm_wake(struct xs_stream *s)
{
	stream_wake_waiters(s);
}

/*
 * Wake every thread waiting on @s - on its condition variable, or asleep
 * in poll(2) on its fds, its own or an emulated epoll's - when nothing
 * arriving on those fds will: a shutdown(), a failure the probe thread
 * found. Called with s->lock held.
 */
void stream_wake(struct xs_stream *s)
{
	pthread_cond_broadcast(&s->cond);
	stream_wake_waiters(s);
}

/* Take the kick, so that it wakes nobody twice. Called with s->lock held. */
void stream_unkick(struct xs_stream *s)
{
	eventfd_t v;

	if (s->kick_fd >= 0)
		(void)!eventfd_read(s->kick_fd, &v);
}

/*
 * Read and ack the completion channel's event, if there is one, and arm
 * the CQ again at once (@rearm), as the verbs idiom goes (get, ack,
 * notify, then poll): the caller polls the CQ next. A CQ left unarmed
 * after its event was read would let a wait that looks, finds nothing
 * new (a send completion, a credit) and sleeps miss the next completion
 * for good; so !@rearm only for a caller that arms before it sleeps,
 * when no other wait may sleep on it (stream_drain_channels(),
 * ep_wait_events()). Called with s->lock held.
 */
void stream_cq_event(struct xs_stream *s, bool rearm)
{
	struct ibv_cq *cq;
	bool got = false;
	void *ctx;

	/* One read: an armed CQ raises one event, and it is armed again
	 * only after its event is read (s->cq_armed); the fd, were it still
	 * readable, would only end the next sleep at once. */
	if (ibv_get_cq_event(s->c->cc, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		got = true;
	}
	if (!got)
		return;
	s->cq_armed = false;
	s->cq_quiet = false;
	if (!rearm) {
		/* a wait that left it idle, relying on the arm, looks at it
		 * again (and arms it) before it sleeps */
		stream_news();
		stream_note(s);
	} else if (stream_arm(s)) {
		stream_reset(s, "ibv_req_notify_cq failed");
	}
}

/*
 * The polling thread's wait: spin, arm, sleep, reap. Called and returns
 * with s->lock held; drops it while it spins and sleeps.
 * Return: 0 (conditions may have changed), or -EINTR.
 */
static int stream_sleep(struct xs_stream *s, uint64_t deadline)
{
	/* Completions reaped by another thread while we spin or arm change
	 * our caller's condition without waking us: the counter tells. */
	unsigned long gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	struct pollfd pfd[XS_STREAM_WAIT_FDS];
	struct xs_spin_run run;
	int n, nfds, err, wait_ms, wake;
	uint64_t now;

	/* buffers the reaping re-posted go back before we wait: the peer
	 * may be waiting for them (stream_rx_pack()) */
	stream_return_credits(s);
	if (deadline == STREAM_FOREVER) {
		xs_spin_begin(&run, &s->spin, UINT64_MAX);
	} else {
		now = xs_now_us();
		xs_spin_begin(&run, &s->spin,
			      deadline > now ? deadline - now : 0);
	}
	while (xs_spin_more(&run)) {
		if (stream_poll_cq(s) || atomic_load(&s->gen) != gen) {
			xs_spin_end(&run, true);
			return 0;
		}
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_lock(&s->lock);
	}
	xs_spin_stop(&run);
	if (stream_arm(s)) {
		stream_reset(s, "ibv_req_notify_cq failed");
		return 0;
	}
	/* what completed before the arm, here or in another thread */
	if (stream_poll_cq(s) || atomic_load(&s->gen) != gen) {
		xs_spin_end(&run, true);
		return 0;
	}
	if (deadline == STREAM_FOREVER) {
		wait_ms = -1;
	} else {
		now = xs_now_us();
		if (now >= deadline)
			return 0;
		wait_ms = (int)((deadline - now + 999u) / 1000u);
	}
	/* A pool buffer freed by another connection wakes nobody here:
	 * look again soon (backpressure, cf. sk_stream_wait_memory). */
	if (s->pool_starved && (wait_ms < 0 || wait_ms > 1))
		wait_ms = 1;
	/* this thread's own eventfd, which a shutdown() by another thread
	 * and the peer's end that the CM thread marked write while it sleeps
	 * (stream_wake_waiters()); without one, they wake no one here */
	wake = xs_wake_hold();
	if (wake < 0 && (wait_ms < 0 || wait_ms > 100))
		wait_ms = 100;
	/* a poll(2) entry of fd -1 is ignored */
	pfd[0] = (struct pollfd){ .fd = s->c->cc->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = wake, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = s->c->ch ? s->c->ch->fd : -1,
				  .events = POLLIN };
	nfds = s->c->ch ? 3 : 2;
	atomic_store(&s->sleeper_fd, wake);
	/* the peer's end marked before the eventfd was left: no one wrote
	 * it (core/cm.c) */
	if (stream_cm_check(s)) {
		atomic_store(&s->sleeper_fd, -1);
		xs_wake_unhold();
		xs_spin_end(&run, true);
		return 0;
	}
	s->pub->c.sleeps++;
	pthread_mutex_unlock(&s->lock);
	n = xs_real.poll(pfd, (nfds_t)nfds, wait_ms);
	err = errno;
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->sleeper_fd, -1);
	if (n > 0 && pfd[1].revents)
		xs_wake_drain(wake);
	xs_wake_unhold();
	/* a handler with SA_RESTART: the kernel's call would go on, unless
	 * it has a timeout (signal(7)) */
	if (n < 0)
		return err == EINTR && (deadline != STREAM_FOREVER ||
					!xs_sig_restarts())
			       ? -EINTR
			       : 0;
	if (pfd[0].revents)
		stream_cq_event(s, true);
	if (nfds == 3 && pfd[2].revents)
		stream_cm_events(s);
	else
		stream_cm_check(s);
	stream_poll_cq(s);
	/* how long the news took, to size the next spin */
	xs_spin_end(&run, n > 0);
	return 0;
}

/*
 * Wait for news until @deadline: become the polling thread, or wait for
 * the one there is. Called and returns with s->lock held.
 * Return: 0 (re-check your condition), -EAGAIN past the deadline, -EINTR.
 */
int stream_wait(struct xs_stream *s, uint64_t deadline)
{
	struct timespec ts;
	int rc;

	if (deadline != STREAM_FOREVER && xs_now_us() >= deadline)
		return -EAGAIN;
	if (s->polling) {
		if (deadline == STREAM_FOREVER) {
			pthread_cond_wait(&s->cond, &s->lock);
		} else {
			ts.tv_sec = (time_t)(deadline / 1000000u);
			ts.tv_nsec = (long)(deadline % 1000000u) * 1000;
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
		}
		return 0;
	}
	s->polling = true;
	rc = stream_sleep(s, deadline);
	stream_return_credits(s);
	s->polling = false;
	pthread_cond_broadcast(&s->cond);
	return rc;
}
