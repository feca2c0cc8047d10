/*
 * core/stream_end.c - the end of a stream's life: its bytes moved out to
 * the kernel TCP connection, errors kept for the application, linger,
 * abort and close, and the keepalive probe of a quiet peer.
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

int xs_stream_move_out(struct xs_stream *s, int timeout_ms, uint8_t **bytes,
		       size_t *len, unsigned int *ended)
{
	uint64_t deadline = stream_deadline(timeout_ms);
	uint8_t *buf = NULL, *nb;
	size_t have = 0, cap = 0, n;
	struct iov_cursor cur;
	struct iovec v;
	int rc = 0;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	stream_poll_cq(s);
	/* a peer gone without its FIN: a reset, unless its end moved both
	 * directions to the kernel connection (stream_peer_ended()) */
	if (s->error || (s->peer_gone && !s->peer_fin &&
			 !(s->peer_moved && s->move_sent))) {
		pthread_mutex_unlock(&s->lock);
		return -ECONNRESET;
	}
	s->move_want = true;
	s->move_pull = true;
	stream_progress(s); /* our MOVE, now or at the next completion */
	stream_gen_bump(s);
	pthread_cond_broadcast(&s->cond);
	stream_wake(s); /* a thread asleep in send goes on over TCP */
	for (;;) {
		n = stream_readable(s);
		if (n) {
			if (have + n > cap) {
				cap = (have + n) * 2;
				nb = realloc(buf, cap);
				if (!nb) {
					rc = -ENOMEM;
					break;
				}
				buf = nb;
			}
			v = (struct iovec){ buf + have, n };
			cur = (struct iov_cursor){ &v, 1, 0, 0 };
			have += stream_copy(s, &cur, n, false, false);
			continue;
		}
		/* the peer's last byte over RDMA: before its MOVE, or its
		 * FIN (then nothing follows on TCP: its end is EOF) */
		if (!s->rxq_len && s->move_sent &&
		    (s->peer_moved || s->peer_fin))
			break;
		if (s->error) {
			rc = -ECONNRESET;
			break;
		}
		if (stream_poll_cq(s))
			continue;
		rc = stream_wait(s, deadline);
		if (rc)
			break;
	}
	s->move_pull = false;
	/* Our MOVE may have gone, and bytes left the queue: the stream
	 * cannot go on as if nothing happened. A reset says so to both
	 * sides (and disconnects: see stream_fail()). */
	if (rc)
		stream_reset(s, "the move to TCP did not complete");
	if (have) {
		s->pub->c.bytes_received += have;
		stream_pub_queues(s);
	}
	*ended = (s->peer_fin || s->rd_shut ? XS_MOVE_EOF : 0) |
		 (s->wr_shut ? XS_MOVE_SHUT_WR : 0);
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		free(buf);
		return rc;
	}
	*bytes = buf;
	*len = have;
	return 0;
}

static void stream_free(struct xs_stream *s)
{
	/* drained first: a forked child's copy may keep it, readable, in
	 * the inner set of a nested epoll set of ours */
	if (s->kick_fd >= 0) {
		stream_unkick(s);
		xs_real.close(s->kick_fd);
	}
	free(s->tx);
	free(s->rxq);
	free(s->done_q);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}

void xs_stream_keep_error(struct xs_stream *s, int err)
{
	pthread_mutex_lock(&s->lock);
	if (err && s->error == err)
		s->error_pending = true;
	pthread_mutex_unlock(&s->lock);
}

int xs_stream_take_error(struct xs_stream *s)
{
	int rc = 0;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	if (s->error_pending) {
		s->error_pending = false;
		rc = s->error;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/*
 * Nothing left to deliver: FIN posted and every send completed (so every
 * byte acknowledged, cf. leaving FIN_WAIT1), every region pulled; or the
 * connection reset or the peer gone. After a RESET: the RESET, last on the
 * send queue, completed. Called with s->lock held.
 */
static bool stream_done(const struct xs_stream *s)
{
	if (s->peer_gone)
		return true;
	if (s->rst_sent)
		return !s->tx_inflight;
	/* after our MOVE, our FIN is the kernel socket's */
	return ((s->fin_sent || s->move_sent) && !s->tx_inflight &&
		!s->rndv_tx_bytes) ||
	       s->error;
}

bool xs_stream_drained(struct xs_stream *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	if (!s->polling)
		stream_drain_channels(s, XS_STREAM_DRAIN);
	/* closed, or the process ends: an epoll set that held the socket
	 * drops it without taking its kick out of the inner set (closed
	 * members: ep_settle()); left readable, it would wake that set's
	 * waiters again and again */
	stream_unkick(s);
	stream_poll_cq(s);
	done = stream_done(s);
	pthread_mutex_unlock(&s->lock);
	return done;
}

int xs_stream_linger(struct xs_stream *s, int timeout_ms)
{
	uint64_t deadline = stream_deadline(timeout_ms);
	int rc = 0;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	stream_poll_cq(s);
	while (!stream_done(s) && rc == 0)
		rc = stream_wait(s, deadline);
	rc = stream_done(s) ? 0 : rc;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void xs_stream_abort(struct xs_stream *s)
{
	bool live;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	live = !s->error && !s->peer_gone && !s->rst_sent;
	/* From here on nothing but the RESET goes out: a FIN that waits
	 * for a slot, credits and RNDV_DONEs all look at the error first.
	 * Nobody is left to report it to (the last fd is closed). */
	if (!s->error)
		s->error = -ECONNRESET;
	s->error_pending = false;
	stream_poll_cq(s); /* completions free the slot the RESET needs */
	if (live && stream_post_ctrl(s, XS_MSG_RESET) == 0) {
		s->rst_sent = true;
		xs_dbg("stream", "RESET sent");
	} else if (live) {
		xs_info("stream", "no RESET sent: the disconnect says it");
	}
	stream_gen_bump(s);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

bool xs_stream_probe(struct xs_stream *s, uint64_t now, uint64_t keepidle_us)
{
	uint64_t seen, after;
	bool more = false;
	int i, rc;

	pthread_mutex_lock(&s->lock);
	if (s->error || s->peer_gone || !s->c)
		goto out;
	/* What came meanwhile counts, the probe's own completion too, even
	 * while the application looks at other sockets for long; the peer's
	 * end too, where no eventfd could wake a sleeper for it */
	stream_cm_check(s);
	more = stream_take_in(s);
	if (s->error || s->peer_gone) {
		stream_wake(s); /* our own look found it: no one else will */
		goto out;
	}
	if (s->probe_posted) {
		/* Answered or failed within the retry budget on a working
		 * transport; neither, and it never will be. */
		if (now - s->probe_posted > XS_PROBE_DEADLINE_US) {
			stream_fail(s, -ETIMEDOUT, "probe unanswered");
			stream_wake(s);
		}
		goto out;
	}
	/* Silence: nothing received, nothing completed since the last look */
	seen = s->pub->c.msgs_received + s->wc_seen;
	if (seen != s->probe_seen || !s->probe_quiet_since) {
		s->probe_seen = seen;
		s->probe_quiet_since = now;
		goto out;
	}
	/* Quiet: what the reader emptied goes back now (its completion
	 * starts the silence again; the next look probes, if due) */
	if (s->rx_unreturned && !s->move_sent && !s->rst_sent &&
	    stream_post_ctrl(s, XS_MSG_CREDIT) == 0) {
		s->pub->c.credit_msgs++;
		goto out;
	}
	if (s->kernel_ended && !s->peer_fin && !s->peer_moved)
		after = 0; /* its process may be gone: ask its QP now */
	else if (s->tx_inflight > s->tx_unsig || s->rndv_tx_bytes ||
		 !s->tx_credits)
		after = XS_PERSIST_US; /* stalled, or the peer owes us */
	else if (keepidle_us)
		after = keepidle_us;
	else
		goto out;
	if (now - s->probe_quiet_since < after)
		goto out;
	if ((i = stream_slot(s)) < 0) {
		/* Every slot holds a WR that neither completes nor fails:
		 * no room for a probe, and the same deadline. */
		if (now - s->probe_quiet_since > after + XS_PROBE_DEADLINE_US) {
			stream_fail(s, -ETIMEDOUT, "no completion");
			stream_wake(s);
		}
		goto out;
	}
	stream_arm_widen(s);
	rc = xs_conn_post_probe(s->c, STREAM_WR_SEND | (uint64_t)i);
	if (rc) {
		stream_reset(s, "cannot post a probe");
		stream_wake(s);
		goto out;
	}
	stream_slot_take(s, i, STREAM_SLOT_PROBE, 0, 0, NULL);
	s->probe_posted = now;
	xs_dbg("stream", "probe after %llu ms of silence, %u WRs in flight",
	       (unsigned long long)(now - s->probe_quiet_since) / 1000u,
	       s->tx_inflight - 1);
out:
	pthread_mutex_unlock(&s->lock);
	return more;
}

void xs_stream_kernel_ended(struct xs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->kernel_ended && s->c && !s->peer_fin && !s->peer_moved &&
	    !s->peer_gone && !s->error) {
		s->kernel_ended = true;
		xs_dbg("stream", "the kernel TCP connection ended before the "
				 "stream: the peer's QP is asked");
	}
	pthread_mutex_unlock(&s->lock);
}

void xs_stream_close(struct xs_stream *s, int timeout_ms)
{
	uint64_t deadline = stream_deadline(timeout_ms);
	struct xs_dev *dev;
	uint32_t i, nr_rx;
	void *spare;

	stream_news(); /* a call: readiness may change */
	if (!s->c)
		return;
	dev = s->c->dev;
	nr_rx = s->c->nr_rx;
	xs_stream_shutdown(s, SHUT_WR);
	pthread_mutex_lock(&s->lock);
	/* Graceful: every byte sent before close reaches the peer, and
	 * the peer has pulled every region (aborted: the RESET left). */
	while (!stream_done(s))
		if (stream_wait(s, deadline) == -EAGAIN)
			break;
	while (stream_poll_cq(s) > 0) /* what a reset left: errors logged */
		;
	pthread_mutex_unlock(&s->lock);
	/* QP and windows first: no READ or send may touch a buffer once
	 * the pool hands it to another connection. */
	spare = s->c->rx_spare.addr; /* freed with the connection */
	xs_conn_destroy(s->c);
	for (i = 0; i < s->tx_max; i++)
		if (s->tx[i].kind != STREAM_SLOT_FREE && s->tx[i].buf.addr)
			xs_pool_free(&dev->pool, &s->tx[i].buf);
	stream_stage_fini(s, true);
	stream_rx_heap_drop(s, nr_rx);
	for (i = 0; i < s->rxq_len; i++) {
		struct xs_stream_rx *r = &s->rxq[(s->rxq_head + i) % nr_rx];

		if ((r->state == XS_RX_RNDV_READING ||
		     r->state == XS_RX_RNDV_READY) &&
		    r->buf.addr != spare)
			xs_pool_free(&dev->pool, &r->buf);
	}
	stream_free(s);
}

void xs_stream_abandon(struct xs_stream *s)
{
	stream_news(); /* a call: readiness may change */
	if (!s->c)
		return;
	stream_rx_heap_drop(s, s->c->nr_rx);
	free(s->c->rx);
	free(s->c);
	stream_stage_fini(s, false); /* the parent's MR is not ours */
	stream_free(s);
}
