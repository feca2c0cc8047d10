/*
 * core/stream.c - the eager byte stream over an RC connection (stream.h).
 *
 * Owns the receive FIFO and the completions: receives, eager sends, and
 * the state every other part of the stream reads. Its send slots and the
 * posting of messages are core/stream_tx.c's; the waits
 * core/stream_wait.c's (one thread at a time spins on the CQ, then arms
 * it and sleeps in poll(2) on the completion and CM channels; the others
 * wait on the stream's condition variable), large sends
 * core/stream_rndv.c's, a stream's end core/stream_end.c's.
 * Producer side cf. SMC's smc_tx.c, consumer side smc_rx.c.
 * Context: any thread; s->lock guards every field.
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

/* Copy @n bytes between @buf and the iovecs (@to_iov: into them). */
void stream_iov_copy(struct iov_cursor *cur, void *buf, size_t n, bool to_iov)
{
	uint8_t *p = buf;

	while (n && cur->i < cur->cnt) {
		const struct iovec *v = &cur->iov[cur->i];
		size_t k = v->iov_len - cur->off;

		if (k > n)
			k = n;
		if (k && to_iov) /* empty entries may have a NULL base */
			memcpy((uint8_t *)v->iov_base + cur->off, p, k);
		else if (k)
			memcpy(p, (const uint8_t *)v->iov_base + cur->off, k);
		p += k;
		n -= k;
		stream_iov_step(cur, k);
	}
}

size_t xs_iov_total(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	return total;
}

/* The absolute deadline of a call that may wait @timeout_ms (-1: none;
 * 0: none at all, a deadline already past, with no clock read: a
 * non-blocking socket's every call). */
uint64_t stream_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return STREAM_FOREVER;
	if (timeout_ms == 0)
		return 0;
	return xs_now_us() + (uint64_t)timeout_ms * 1000u;
}

/* Moves whenever some stream's state may have changed other than by a
 * look that found nothing: see xs_stream_news(). */
static atomic_ulong stream_news_ctr;

void xs_stream_news_bump(void)
{
	atomic_fetch_add_explicit(&stream_news_ctr, 1, memory_order_relaxed);
}

unsigned long xs_stream_news(void)
{
	return atomic_load_explicit(&stream_news_ctr, memory_order_relaxed);
}

/* The notes of which streams had news (xs_stream_note()): a ring whose
 * every slot is a seqlock, its sequence the note's number + 1 (0 while
 * written). 256 notes outrun a reader only when that many came between
 * two of its looks; it then looks at everything, as it would anyway. */
#define STREAM_NOTES 256u

static struct {
	atomic_ulong seq;
	_Atomic(const void *) owner;
} stream_notes[STREAM_NOTES];
static atomic_ulong stream_notes_end;

void xs_stream_note(const void *owner)
{
	unsigned long i = atomic_fetch_add_explicit(&stream_notes_end, 1,
						    memory_order_acq_rel);
	__typeof__(stream_notes[0]) *slot = &stream_notes[i % STREAM_NOTES];

	atomic_store_explicit(&slot->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&slot->owner, owner, memory_order_relaxed);
	atomic_store_explicit(&slot->seq, i + 1, memory_order_release);
}

unsigned long xs_stream_notes_end(void)
{
	return atomic_load_explicit(&stream_notes_end, memory_order_acquire);
}

int xs_stream_notes(unsigned long *pos, const void *owners[], int max)
{
	unsigned long end = xs_stream_notes_end(), i = *pos;
	int n = 0;

	*pos = end;
	if (end - i > (unsigned long)max || end - i > STREAM_NOTES)
		return -1;
	for (; i != end; i++) {
		__typeof__(stream_notes[0]) *slot =
			&stream_notes[i % STREAM_NOTES];

		if (atomic_load_explicit(&slot->seq, memory_order_acquire) !=
		    i + 1)
			return -1; /* being written, or written over */
		owners[n] = atomic_load_explicit(&slot->owner,
						 memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		/* not written over while read: a writer of the slot's next
		 * turn took its number before it wrote */
		if (atomic_load_explicit(&slot->seq, memory_order_relaxed) !=
			    i + 1 ||
		    xs_stream_notes_end() - i > STREAM_NOTES)
			return -1;
		if (!owners[n])
			return -1; /* a stream with no owner: unknown */
		n++;
	}
	return n;
}

int xs_stream_init(struct xs_stream *s, struct xs_conn *c)
{
	pthread_condattr_t ca;

	xs_stream_news_bump(); /* a new stream: readiness may change */
	memset(s, 0, sizeof(*s));
	s->c = c;
	atomic_init(&s->sleeper_fd, -1);
	atomic_init(&s->kick_fd, -1);
	s->pub = &s->pub_own;
	s->tx_granted = xs_wire_start_credits(c->peer.credits);
	s->tx_credits = s->tx_granted;
	s->rx_granted = xs_wire_start_credits(c->local.credits);
	/* the QP's max_send_wr less the unsignaled binds */
	s->tx_max = c->local.credits + 16u;
	s->tx = calloc(s->tx_max, sizeof(*s->tx));
	s->rxq = calloc(c->nr_rx, sizeof(*s->rxq));
	s->done_q = calloc(c->nr_rx, sizeof(*s->done_q));
	if (!s->tx || !s->rxq || !s->done_q) {
		free(s->tx);
		free(s->rxq);
		free(s->done_q);
		xs_conn_destroy(c);
		memset(s, 0, sizeof(*s));
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* the peer's end wakes our sleepers (core/cm.c) */
	atomic_store(&c->cm_stream, s);
	return 0;
}

/* The published queue sizes (SIOCINQ, SIOCOUTQ as xsock-stat shows
 * them). Called with s->lock held. */
void stream_pub_queues(struct xs_stream *s)
{
	s->pub->send_q = s->tx_queued + s->rndv_tx_bytes;
	s->pub->recv_q = s->rx_arrived - s->pub->c.bytes_received;
}

void xs_stream_publish(struct xs_stream *s, struct xs_shm_slot *slot)
{
	pthread_mutex_lock(&s->lock);
	slot->c = s->pub->c;
	slot->flags = s->pub->flags;
	s->pub = slot;
	pthread_mutex_unlock(&s->lock);
}

void xs_stream_unpublish(struct xs_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->pub_own = *s->pub;
	s->pub = &s->pub_own;
	pthread_mutex_unlock(&s->lock);
}

/* The connection is dead: calls report @err once (sk_err), then EOF or
 * EPIPE. */
void stream_fail(struct xs_stream *s, int err, const char *why)
{
	stream_news();
	if (s->error)
		return;
	/* Both directions on the kernel TCP connection and the peer's QP
	 * gone: the RDMA side carries nothing more, and its WRs still in
	 * flight (a credit return) fail with no one to tell. */
	if (s->peer_gone && s->move_sent && s->peer_moved)
		return;
	stream_gen_bump(s);
	s->error = err;
	s->error_pending = true;
	s->pub->flags |= XS_SHM_F_RESET;
	xs_info("stream", "connection reset: %s", why);
	/* Moving to the kernel TCP connection, a direction's calls may not
	 * look at the stream again: the peer learns of the reset from its
	 * QP now, not when the socket closes. The TCP connection goes on. */
	if (s->move_sent || s->peer_moved)
		rdma_disconnect(s->c->id);
}

void stream_reset(struct xs_stream *s, const char *why)
{
	stream_fail(s, -ECONNRESET, why);
}

/*
 * The reset as a call reports it, cf. sock_error(): the first call after
 * it that moved no byte (@done is 0) gets -ECONNRESET (-EPIPE for a RESET
 * after the peer's FIN) and clears it, as SO_ERROR does; later reads see
 * EOF and later writes -EPIPE, as on a TCP socket closed by an RST. A
 * call that moved bytes returns them and leaves the error for the next
 * (tcp_sendmsg() and tcp_recvmsg() with copied > 0), so a writer whose
 * send the reset cut short gets ECONNRESET next, not EPIPE and SIGPIPE.
 */
static int stream_error(struct xs_stream *s, bool writing, size_t done)
{
	if (done)
		return 0;
	if (s->error_pending) {
		s->error_pending = false;
		return s->error;
	}
	return writing ? -EPIPE : 0;
}

int stream_repost(struct xs_stream *s, uint32_t idx)
{
	int rc = xs_conn_repost_recv(s->c, idx);

	if (rc)
		stream_reset(s, "cannot repost a receive buffer");
	else
		s->rx_unreturned++;
	return rc;
}

/* The peer released region @id (RNDV_DONE): invalidate, then reuse. */
static void stream_on_rndv_done(struct xs_stream *s, uint32_t id)
{
	uint32_t i = id % XS_RNDV_REGIONS;
	struct xs_stream_region *r = &s->rndv[i];

	xs_dbg("stream", "released region %u id %u", i, id);
	if (r->state != STREAM_REGION_EXPOSED || r->id != id) {
		stream_reset(s, "peer released a region it was not given");
		return;
	}
	r->state = STREAM_REGION_RELEASED;
	s->rndv_released++;
}

/* One receive completion: validate, then queue data or apply control. */
static void stream_on_recv(struct xs_stream *s, const struct ibv_wc *wc)
{
	struct xs_conn *c = s->c;
	struct xs_stream_rx *e;
	struct xs_msg m;
	uint32_t idx = (uint32_t)wc->wr_id;
	int was;

	if (idx >= c->rx_live ||
	    xs_wire_msg_decode(c->rx[idx].addr, wc->byte_len,
			       c->local.eager_size, c->local.max_rndv, &m)) {
		stream_reset(s, "malformed message from the peer");
		return;
	}
	/* The peer's window doubled (at most to its hello's credits), its
	 * new buffers' credits in this message: XS_WIRE_START_CREDITS. */
	if (m.flags & XS_WIRE_F_GROW) {
		if (s->tx_granted >= c->peer.credits) {
			stream_reset(s, "peer grew its window past its hello");
			return;
		}
		s->tx_granted = xs_wire_grown(s->tx_granted, c->peer.credits);
	}
	/* More credits than its window holds: the peer is lying. */
	if ((uint64_t)s->tx_credits + m.credits > s->tx_granted) {
		stream_reset(s, "peer returned more credits than granted");
		return;
	}
	s->tx_credits += m.credits;
	switch (m.type) {
	case XS_MSG_DATA:
	case XS_MSG_RNDV:
		if (s->peer_fin || s->peer_moved) {
			stream_reset(s, s->peer_fin ? "data after FIN"
						    : "data after MOVE");
			return;
		}
		/* what the peer may fill: the window, less what we hold
		 * and what we re-posted without saying so yet */
		if (stream_peer_dry(s)) { /* and yet it sent */
			stream_reset(s, "peer overran its data credits");
			return;
		}
		if (m.type == XS_MSG_DATA && stream_rx_pack(s, idx, m.len)) {
			s->rx_arrived += m.len;
			s->pub->c.msgs_received++;
			stream_pub_queues(s);
			stream_rx_grow(s, m.flags & XS_WIRE_F_LAST);
			return;
		}
		s->rx_data_held++;
		e = &s->rxq[(s->rxq_head + s->rxq_len) % c->nr_rx];
		s->rxq_len++;
		if (m.type == XS_MSG_DATA) {
			*e = (struct xs_stream_rx){
				.idx = idx,
				.off = XS_WIRE_MSG_LEN,
				.end = XS_WIRE_MSG_LEN + m.len,
				.state = XS_RX_DATA,
			};
			s->rx_arrived += m.len;
			s->pub->c.msgs_received++;
			stream_pub_queues(s);
			stream_rx_grow(s, m.flags & XS_WIRE_F_LAST);
			return;
		}
		/* The descriptor is copied out; its buffer is held (one
		 * credit) until the region's bytes are read. */
		*e = (struct xs_stream_rx){
			.idx = idx,
			.rlen = m.rndv_len,
			.state = XS_RX_RNDV_WAIT,
			.raddr = m.rndv_addr,
			.rkey = m.rndv_rkey,
			.rid = m.rndv_id,
		};
		s->rndv_rx_wait++;
		s->pub->c.msgs_received++;
		stream_rx_grow(s, m.flags & XS_WIRE_F_LAST);
		return;
	case XS_MSG_RNDV_DONE:
		stream_on_rndv_done(s, m.rndv_id);
		break;
	case XS_MSG_FIN:
		/* after its MOVE, the peer's end comes on the kernel TCP
		 * connection: this only closes its RDMA side */
		if (s->peer_moved)
			break;
		s->peer_fin = true;
		s->pub->flags |= XS_SHM_F_PEER_FIN;
		break;
	case XS_MSG_MOVE:
		if (s->peer_moved) {
			stream_reset(s, "MOVE after MOVE");
			return;
		}
		/* every byte the peer sent over RDMA is in the queue now (a
		 * FIN before it still ends that direction); ours end with
		 * our own MOVE, in answer, after a FIN of ours too */
		s->peer_moved = true;
		s->move_want = true;
		stream_gen_bump(s);
		xs_dbg("stream", "the peer moved to TCP");
		break;
	case XS_MSG_RESET:
		if (s->peer_moved && s->move_sent)
			break; /* the RDMA side of a moved stream: no data */
		was = s->error;
		stream_reset(s, "peer sent RESET");
		if (!was && s->peer_fin)
			s->error = -EPIPE; /* tcp_reset() in CLOSE_WAIT */
		break;
	case XS_MSG_CREDIT:
		break;
	}
	/* A control buffer: straight back to the QP. */
	if (xs_conn_repost_recv(c, idx))
		stream_reset(s, "cannot repost a receive buffer");
}

static void stream_on_wc(struct xs_stream *s, const struct ibv_wc *wc)
{
	uint64_t i = wc->wr_id & ~STREAM_WR_SEND;
	struct xs_stream_slot *slot;
	struct xs_stream_region *r;
	struct xs_stream_rx *e;

	stream_gen_bump(s);
	s->wc_seen++;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_RNR_RETRY_EXC_ERR)
			s->pub->c.rnr_errors++;
		else if (wc->status == IBV_WC_RETRY_EXC_ERR)
			s->pub->c.retry_errors++;
		else if (wc->status != IBV_WC_WR_FLUSH_ERR)
			s->pub->c.wc_errors++;
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			xs_info("stream", "%s completion: %s (vendor error %u)",
				(wc->wr_id & STREAM_WR_BIND)	? "bind"
				: !(wc->wr_id & STREAM_WR_SEND) ? "receive"
				: i < s->tx_max && s->tx[i].kind ==
							   STREAM_SLOT_READ
					? "read"
				: i < s->tx_max &&
						s->tx[i].kind == STREAM_SLOT_INV
					? "invalidate"
					: "send",
				ibv_wc_status_str(wc->status), wc->vendor_err);
		/* The peer stopped acknowledging: the retransmission timeout
		 * of TCP (tcp_write_err), ETIMEDOUT; unless its kernel TCP
		 * connection had ended before: then its process did, and its
		 * DISCONNECTED was lost (xs_stream_kernel_ended()). */
		if (s->kernel_ended && wc->status == IBV_WC_RETRY_EXC_ERR &&
		    !s->error && !s->peer_gone)
			stream_peer_lost(s, "peer's QP gone after the end of "
					    "its TCP connection");
		else
			stream_fail(s,
				    wc->status == IBV_WC_RETRY_EXC_ERR
					    ? -ETIMEDOUT
					    : -ECONNRESET,
				    ibv_wc_status_str(wc->status));
	}
	if (wc->wr_id & STREAM_WR_BIND)
		return; /* a failed bind; the reset above says it all */
	if (!(wc->wr_id & STREAM_WR_SEND)) {
		if (wc->status == IBV_WC_SUCCESS)
			stream_on_recv(s, wc);
		return;
	}
	if (i >= s->tx_max || s->tx[i].kind == STREAM_SLOT_FREE)
		return;
	slot = &s->tx[i];
	if (s->tx_unsig)
		stream_unsignaled_done(s, slot->seq);
	switch (slot->kind) {
	case STREAM_SLOT_SEND:
		s->tx_queued -= slot->len;
		break;
	case STREAM_SLOT_READ:
		e = &s->rxq[slot->arg];
		if (wc->status == IBV_WC_SUCCESS &&
		    e->state == XS_RX_RNDV_READING) {
			e->state = XS_RX_RNDV_READY;
			s->rx_arrived += e->end;
			stream_pub_queues(s);
			if (e->roff + e->end < e->rlen)
				break; /* more pieces to come */
			s->pub->c.rndv_read++;
			/* its RNDV_DONE: queued, as no slot may be free */
			s->done_q[(s->done_q_head + s->done_q_len) %
				  s->c->nr_rx] = e->rid;
			s->done_q_len++;
		}
		break;
	case STREAM_SLOT_INV:
		/* The window is invalid: the region may be filled again. */
		r = &s->rndv[slot->arg];
		xs_dbg("stream", "region %u invalid (%s)", slot->arg,
		       ibv_wc_status_str(wc->status));
		s->rndv_tx_bytes -= r->len;
		r->state = STREAM_REGION_FREE;
		break;
	case STREAM_SLOT_PROBE:
		s->probe_posted = 0; /* answered: the silence starts again */
		break;
	}
	stream_slot_free(s, slot);
}

static void stream_send_fin(struct xs_stream *s);
static void stream_send_move(struct xs_stream *s);

/* What waits on state rather than on a completion: regions to READ or
 * release, a FIN that shutdown() left waiting for a credit, a MOVE that
 * waits for a send slot. Called with s->lock held. */
void stream_progress(struct xs_stream *s)
{
	if (s->rndv_rx_wait || s->done_q_len || s->rndv_released)
		stream_rndv_progress(s);
	/* a FIN asked for goes first: after our MOVE the peer would take
	 * it for the end of our RDMA side only */
	if (s->wr_shut && !s->fin_sent && !s->move_sent)
		stream_send_fin(s);
	if (s->move_want && !s->move_sent && (!s->wr_shut || s->fin_sent))
		stream_send_move(s);
}

/*
 * Reap completions without waiting, then send a FIN that shutdown() left
 * waiting for a credit. Called with s->lock held.
 */
int stream_poll_cq(struct xs_stream *s)
{
	struct ibv_wc wc[STREAM_CQ_BATCH];
	bool armed = s->cq_armed;
	int n, i;

	n = ibv_poll_cq(s->c->cq, STREAM_CQ_BATCH, wc);
	if (n < 0) {
		stream_reset(s, "ibv_poll_cq failed");
		return 0;
	}
	/* armed before this poll, and the CQ is empty now: for every
	 * completion, or for the solicited ones while none of ours is in
	 * flight (a post clears it: stream_slot_take()) */
	s->cq_quiet = armed && n < STREAM_CQ_BATCH &&
		      (!s->cq_armed_sol || s->tx_inflight == s->tx_unsig);
	if (n) {
		stream_news();
		s->pub->c.cq_polls_work++;
	} else {
		s->pub->c.cq_polls_empty++;
	}
	for (i = 0; i < n; i++)
		stream_on_wc(s, &wc[i]);
	stream_progress(s);
	if (n)
		stream_pub_queues(s);
	if (n)
		pthread_cond_broadcast(&s->cond); /* a follower's news too */
	return n;
}

/*
 * A DISCONNECTED without the peer's FIN: its process ended without a word
 * (SIGKILL, a crash, abort()), and its kernel destroyed the QP and the
 * rdma_cm id. That kernel closed the process's TCP socket too, as it
 * closes every socket of a process that dies: a FIN, since nothing of
 * ours ever went there. So the connection goes on where its kernel
 * left it, on the kernel TCP connection: both directions move there,
 * locally, as after a MOVE each way (reads after what came over RDMA see
 * that FIN, or what another holder of the socket sends; sends get the
 * kernel's answer, its RST). Only when nothing shows a loss:
 *  - every region the peer announced is READ whole (its memory is gone:
 *    a region not READ is lost, and a reset says so);
 *  - nothing of ours is in flight, and every buffer we filled came back
 *    as a credit (the dead program read it all: a kernel with unread
 *    data would have sent RST). Credits come back in batches, so a
 *    peer that read everything may still look unread here: a reset,
 *    where the kernel would say EOF.
 * What no one can see: eager messages the dying process had posted and
 * its HCA had not yet sent when its kernel destroyed the QP; they are
 * lost, as no receiver learns of them (rxe sends within the post's
 * system call; an HCA within microseconds of the doorbell, well before a
 * killed process's files are closed).
 * Called with s->lock held. Return: whether it moved.
 */
bool stream_peer_ended(struct xs_stream *s)
{
	const struct xs_stream_rx *e;
	uint32_t i;

	/* (bytes of unsignaled sends, not known done, are known read: the
	 * credits of every DATA came back) */
	if (s->error || s->move_want || s->move_sent || s->peer_moved ||
	    s->tx_queued > s->tx_unsig_bytes || s->rndv_tx_bytes ||
	    s->rst_sent || s->tx_credits != s->tx_granted)
		return false;
	for (i = 0; i < s->rxq_len; i++) {
		e = &s->rxq[(s->rxq_head + i) % s->c->nr_rx];
		if (e->state != XS_RX_DATA && e->state != XS_RX_HEAP &&
		    (e->state != XS_RX_RNDV_READY ||
		     e->roff + e->end < e->rlen))
			return false;
	}
	if (s->wr_shut) {
		/* our FIN went over RDMA, and the kernel socket's sends were
		 * never shut: its FIN is the peer's last word here, and
		 * sends fail (EPIPE) as after shutdown(SHUT_WR) */
		s->peer_fin = true;
		s->pub->flags |= XS_SHM_F_PEER_FIN;
	} else {
		s->peer_moved = true;
		s->move_sent = true;
		atomic_store(&s->moved_tx, true);
	}
	stream_gen_bump(s);
	pthread_cond_broadcast(&s->cond);
	xs_info("stream", "the peer ended without a FIN, nothing lost: %s",
		s->wr_shut ? "end of stream"
			   : "the rest on its kernel TCP connection");
	return true;
}

/* Bytes went to a peer that had closed after its FIN: TCP's RST in
 * CLOSE_WAIT (tcp_reset(): EPIPE from then on). Called with s->lock. */
static void stream_closed_rst(struct xs_stream *s)
{
	if (s->error || s->move_sent)
		return;
	stream_reset(s, "bytes sent after the peer closed");
	s->error = -EPIPE;
}

/* The peer's QP is gone (@why: how we know): before its FIN, its end
 * (stream_peer_ended()) or a reset. What we still send is never
 * acknowledged, so close() must not wait for it. Called with s->lock
 * held. */
void stream_peer_lost(struct xs_stream *s, const char *why)
{
	if (!s->peer_fin && !(s->peer_moved && s->move_sent) &&
	    !stream_peer_ended(s))
		stream_reset(s, why);
	s->peer_gone = true;
	if (s->tx_after_fin)
		stream_closed_rst(s);
	stream_gen_bump(s);
}

/*
 * FIN after every queued byte, as a control message; when no send slot
 * is free it goes out from the next stream_poll_cq(), so shutdown() and
 * close() never block on the peer.
 */
static void stream_send_fin(struct xs_stream *s)
{
	if (!s->error && stream_post_ctrl(s, XS_MSG_FIN) == 0)
		s->fin_sent = true;
}

/*
 * MOVE after every byte sent over RDMA (each send posts its messages
 * before it returns, and none is posted after this); a control message,
 * never blocks: without a free slot it goes out from the next
 * stream_poll_cq().
 */
static void stream_send_move(struct xs_stream *s)
{
	if (s->error || stream_post_ctrl(s, XS_MSG_MOVE))
		return;
	s->move_sent = true;
	atomic_store(&s->moved_tx, true);
	stream_gen_bump(s);
	pthread_cond_broadcast(&s->cond); /* a sender goes on over TCP */
	xs_dbg("stream", "MOVE sent");
}

ssize_t xs_stream_send(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int timeout_ms)
{
	struct iov_cursor cur = { iov, iovcnt, 0, 0 };
	uint64_t deadline = stream_deadline(timeout_ms);
	size_t total = xs_iov_total(iov, iovcnt), sent = 0, dropped = 0, room;
	const struct xs_config *cfg = xs_core_cfg();
	struct xs_conn *c = s->c;
	uint32_t max, rndv_max, chunk, inline_max;
	bool rndv, taken, after_fin = false;
	struct xs_msg m;
	int rc = 0;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	/* CLOSE_WAIT: the peer's end may wait on the CM channel, which no
	 * other call reads while nobody polls; a send learns of it, as a
	 * TCP send there draws the RST that fails the next one */
	if (s->peer_fin && !s->peer_gone && !s->polling)
		stream_cm_events(s);
	max = c->peer.eager_size - XS_WIRE_MSG_LEN;
	/* Rendezvous when we can expose regions and the peer READs them */
	rndv_max = (c->local.flags & XS_HELLO_F_RNDV) ? c->peer.max_rndv : 0;
	chunk = cfg ? (uint32_t)cfg->rndv_chunk : 65536u;
	if (rndv_max > chunk)
		rndv_max = chunk;
	/* A call of up to XSOCK_RNDV_THRESHOLD bytes goes as eager
	 * messages: under it, the rendezvous's extra round trips (RNDV,
	 * READ, DONE) cost more than the credits the messages take. */
	rndv = total > c->local.eager_size &&
	       total > (cfg ? cfg->rndv_threshold : 32768u);
	if (rndv_max && rndv && !s->stage && !s->rndv_off &&
	    (rc = stream_stage_init(s, rndv_max)) && rc != -EAGAIN) {
		if (!s->error)
			xs_log_once(XS_LOG_INFO, "stream",
				    "cannot set up rendezvous (windows, "
				    "staging area): large sends go eagerly");
		s->rndv_off = true;
	}
	rc = 0; /* without a staging area, this call goes eagerly */
	rndv_max = s->stage ? s->stage_chunk : 0;
	if (total == 0 && s->error) /* tcp_sendmsg: even 0 bytes, after */
		rc = stream_error(s, true, 0); /* an RST or a shutdown */
	else if (total == 0 && s->wr_shut)
		rc = -EPIPE;
	if (total == 0 && !s->error && !s->wr_shut && s->move_sent)
		rc = XS_STREAM_MOVED;
	while (sent < total) {
		if (s->error) {
			rc = stream_error(s, true, sent);
			break;
		}
		if (s->wr_shut) {
			rc = -EPIPE;
			break;
		}
		/* The peer closed after its FIN (a peer gone without one
		 * reset the stream): over TCP, CLOSE_WAIT, where the first
		 * send is taken, as much as the send buffer holds (here:
		 * what the peer's credits would), and draws the RST that
		 * fails the next one with EPIPE (tcp_reset()); a send
		 * under way ends with what went. */
		if (s->peer_gone && !s->move_sent) {
			taken = !sent && !s->tx_after_fin;
			room = (size_t)max * s->tx_granted;
			if (taken)
				dropped = total < room ? total : room;
			stream_closed_rst(s);
			rc = taken ? -EPIPE : stream_error(s, true, sent);
			break;
		}
		if (s->move_sent) { /* the rest goes on over TCP */
			rc = XS_STREAM_MOVED;
			break;
		}
		if (rndv_max && rndv && total - sent > c->local.eager_size) {
			/* a call beyond XSOCK_RNDV_THRESHOLD: rendezvous
			 * regions until XSOCK_EAGER_LIMIT bytes or fewer
			 * are left */
			chunk = total - sent < rndv_max
					? (uint32_t)(total - sent)
					: rndv_max;
			rc = stream_post_rndv(s, &cur, chunk);
		} else {
			chunk = total - sent < max ? (uint32_t)(total - sent)
						   : max;
			m = (struct xs_msg){ .type = XS_MSG_DATA };
			rc = stream_post(s, &m, &cur, chunk);
			/* The pool is exhausted (a size class without a
			 * superblock may stay so): what one inline message
			 * holds needs none, and goes, as poll called the
			 * stream writable and a kernel's send takes what its
			 * buffer has room for. */
			if (rc == -EAGAIN && s->pool_starved &&
			    (inline_max = stream_inline_data_max(s)) &&
			    chunk > inline_max) {
				chunk = inline_max;
				m = (struct xs_msg){ .type = XS_MSG_DATA };
				rc = stream_post(s, &m, &cur, chunk);
			}
		}
		if (rc == 0) {
			/* after the FIN as far as this stream knew then: a
			 * FIN that the polls below reap crossed these bytes,
			 * whose peer read them before its close (else its
			 * close answered them with a RESET) */
			after_fin |= s->peer_fin;
			sent += chunk;
			continue;
		}
		if (rc != -EAGAIN)
			break;
		if (!s->tx_credits)
			s->pub->c.credit_stalls++;
		if (stream_poll_cq(s))
			continue;
		if (timeout_ms == 0)
			break;
		rc = stream_wait(s, deadline);
		if (rc)
			break;
	}
	s->pub->c.bytes_sent += sent;
	stream_poll_cq(s);
	if (after_fin) {
		s->tx_after_fin = true;
		if (s->peer_gone)
			stream_closed_rst(s);
	}
	stream_pub_queues(s);
	stream_return_credits(s);
	pthread_mutex_unlock(&s->lock);
	return sent + dropped ? (ssize_t)(sent + dropped) : rc;
}

static bool stream_rx_ready(const struct xs_stream_rx *e)
{
	return e->state == XS_RX_DATA || e->state == XS_RX_RNDV_READY ||
	       e->state == XS_RX_HEAP;
}

/* Where entry @e's bytes are: the receive ring, or its READ buffer. */
static uint8_t *stream_rx_bytes(struct xs_stream *s,
				const struct xs_stream_rx *e)
{
	return e->state == XS_RX_DATA ? s->c->rx[e->idx].addr : e->buf.addr;
}

/*
 * The head entry's bytes are consumed: give its buffers back. A region
 * READ in pieces goes back to waiting for its next piece instead, and
 * stays the head.
 */
static void stream_rx_pop(struct xs_stream *s, struct xs_stream_rx *e)
{
	if (e->state == XS_RX_RNDV_READY) {
		stream_rx_free(s, e);
		s->rndv_rx_held -= e->end;
		e->roff += e->end;
		if (e->roff < e->rlen) {
			e->off = e->end = 0;
			e->state = XS_RX_RNDV_WAIT;
			s->rndv_rx_wait++;
			return;
		}
	}
	if (e->state == XS_RX_HEAP) {
		stream_rx_heap_free(s, e);
	} else {
		s->rx_data_held--;
		stream_repost(s, e->idx);
	}
	s->rxq_head = (s->rxq_head + 1) % s->c->nr_rx;
	s->rxq_len--;
}

/*
 * Copy up to @len readable bytes into @cur, in stream order up to the
 * first region not READ yet; consume them unless @peek.
 */
size_t stream_copy(struct xs_stream *s, struct iov_cursor *cur, size_t len,
		   bool peek, bool discard)
{
	uint32_t nr = s->c->nr_rx, i = 0;
	size_t copied = 0;
	bool popped = false;

	while (copied < len && i < s->rxq_len) {
		struct xs_stream_rx *r = &s->rxq[(s->rxq_head + i) % nr];
		size_t n = r->end - r->off;

		if (!stream_rx_ready(r))
			break;
		if (n > len - copied)
			n = len - copied;
		if (!discard) /* MSG_TRUNC: count, never copy */
			stream_iov_copy(cur, stream_rx_bytes(s, r) + r->off, n,
					true);
		copied += n;
		if (peek) {
			i++;
			continue;
		}
		r->off += (uint32_t)n;
		if (r->off == r->end) {
			stream_rx_pop(s, r); /* or back to waiting: stop */
			popped = true;
		}
	}
	if (popped && s->rndv_rx_wait)
		stream_rndv_progress(s); /* READ the next regions */
	return copied;
}

/* Whether every queued byte is readable (no region waits for its READ). */
static bool stream_rx_all_ready(const struct xs_stream *s)
{
	uint32_t i;

	for (i = 0; i < s->rxq_len; i++)
		if (!stream_rx_ready(&s->rxq[(s->rxq_head + i) % s->c->nr_rx]))
			return false;
	return true;
}

/* Bytes readable now, in stream order (FIONREAD). */
size_t stream_readable(struct xs_stream *s)
{
	uint32_t i;
	size_t n = 0;

	for (i = 0; i < s->rxq_len; i++) {
		const struct xs_stream_rx *r =
			&s->rxq[(s->rxq_head + i) % s->c->nr_rx];

		if (!stream_rx_ready(r))
			break;
		n += r->end - r->off;
	}
	return n;
}

ssize_t xs_stream_recv(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int flags, int timeout_ms)
{
	struct iov_cursor cur = { iov, iovcnt, 0, 0 };
	uint64_t deadline = stream_deadline(timeout_ms);
	size_t total = xs_iov_total(iov, iovcnt), copied = 0, target,
	       peeked = 0;
	bool peek = flags & XS_RECV_PEEK;
	int rc = 0;

	stream_news(); /* a call: readiness may change */
	if (total == 0)
		return 0;
	pthread_mutex_lock(&s->lock);
	/* tcp_recvmsg()'s target: everything with MSG_WAITALL, else
	 * SO_RCVLOWAT bytes (1 by default) or what was asked for */
	target = (flags & XS_RECV_WAITALL)     ? total
		 : (size_t)s->rcvlowat < total ? (size_t)s->rcvlowat
					       : total;
	if (target < 1)
		target = 1;
	for (;;) {
		if (peek)
			cur = (struct iov_cursor){ iov, iovcnt, 0, 0 };
		copied += stream_copy(s, &cur, total - copied, peek,
				      flags & XS_RECV_DISCARD);
		if (copied >= target)
			break;
		if (peek) { /* looked at again from the start */
			peeked = copied;
			copied = 0;
		}
		if (s->rd_shut || (s->rxq_len == 0 && s->peer_fin))
			break; /* EOF */
		/* a peek short of MSG_WAITALL's target after the peer's last
		 * byte here: what there is (tcp_recvmsg() at RCV_SHUTDOWN) */
		if (peek && (s->peer_fin || s->peer_moved) &&
		    stream_rx_all_ready(s))
			break;
		if (s->rxq_len == 0 && s->peer_moved) {
			if (!copied) /* the rest comes over TCP */
				rc = XS_STREAM_MOVED;
			break;
		}
		/* a reset loses what was never READ; what was, is read */
		if (s->error) {
			rc = stream_error(s, false, copied);
			break;
		}
		if (stream_poll_cq(s))
			continue;
		if (timeout_ms == 0) {
			rc = -EAGAIN;
			break;
		}
		rc = stream_wait(s, deadline);
		if (rc)
			break;
	}
	stream_return_credits(s);
	if (copied && !peek) {
		s->pub->c.bytes_received += copied;
		stream_pub_queues(s);
	}
	pthread_mutex_unlock(&s->lock);
	/* short of SO_RCVLOWAT at the end, a reset, EAGAIN or the timeout:
	 * what is there, as tcp_recvmsg() returns what it copied */
	if (!copied && peeked)
		return (ssize_t)peeked;
	return copied ? (ssize_t)copied : rc;
}

int xs_stream_shutdown(struct xs_stream *s, int how)
{
	bool moved;
	int rc;

	stream_news(); /* a call: readiness may change */
	pthread_mutex_lock(&s->lock);
	if (how == SHUT_RD || how == SHUT_RDWR)
		s->rd_shut = true;
	/* after our MOVE, our end is the kernel socket's to send */
	moved = s->move_sent && how != SHUT_RD;
	if (how == SHUT_WR || how == SHUT_RDWR) {
		s->wr_shut = true;
		s->pub->flags |= XS_SHM_F_WR_SHUT;
	}
	stream_gen_bump(s);
	/* nothing arrives for a thread asleep to see (tcp_shutdown() ->
	 * sk_state_change() wakes the kernel's) */
	stream_wake(s);
	stream_poll_cq(s); /* posts the FIN when a credit is free */
	stream_return_credits(s);
	rc = moved ? XS_STREAM_MOVED : s->error;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Bytes waiting to be read (@out false) or in flight (@out true). */
static size_t stream_queued(struct xs_stream *s, bool out)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	stream_poll_cq(s);
	stream_return_credits(s);
	if (out)
		stream_retire_unsignaled(s);
	n = out		 ? s->tx_queued + s->rndv_tx_bytes
	    : s->rd_shut ? 0
			 : stream_readable(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t xs_stream_inq(struct xs_stream *s)
{
	return stream_queued(s, false);
}

size_t xs_stream_outq(struct xs_stream *s)
{
	return stream_queued(s, true);
}

/* Drain, without blocking, the fds @which names (XS_STREAM_DRAIN_FD bits
 * of xs_stream_wait_fds()'s order). Called with s->lock held. */
void stream_drain_channels(struct xs_stream *s, unsigned int which)
{
	/* an unarmed CQ queues no event: no read() to find that out; one
	 * that another thread's wait may sleep on is its to read (it would
	 * wake, find the fd quiet and sleep on: the CQ is polled anyway) */
	if ((which & XS_STREAM_DRAIN_FD(0)) && s->cq_armed &&
	    !((which & XS_STREAM_NOARM) && xs_wake_others()))
		stream_cq_event(s, !(which & XS_STREAM_NOARM));
	/* the order of xs_stream_wait_fds(): a CM channel of its own, if
	 * there is one (then the kick, which stream_take_kick() drains) */
	if (s->c->ch && (which & XS_STREAM_DRAIN_FD(1)))
		stream_cm_events(s);
	else
		stream_cm_check(s);
}

/* Drain the kick for a caller that took it (XS_STREAM_KICK) and saw it
 * readable: also while another thread sleeps in stream_sleep(), which
 * does not, so that it never stays readable in a nested epoll set. Called
 * with s->lock held. */
static void stream_take_kick(struct xs_stream *s, unsigned int which)
{
	if (s->kick_fd >= 0 && (which & XS_STREAM_KICK) &&
	    (which & XS_STREAM_DRAIN_FD(s->c->ch ? 2 : 1)))
		stream_unkick(s);
}

int xs_stream_arm(struct xs_stream *s)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = stream_arm(s) ? -EIO : s->pool_starved;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int xs_stream_wait_fds(struct xs_stream *s, int fds[XS_STREAM_WAIT_FDS],
		       bool kick)
{
	int n = 0;

	fds[n++] = s->c->cc->fd;
	if (s->c->ch)
		fds[n++] = s->c->ch->fd;
	if (kick) {
		pthread_mutex_lock(&s->lock);
		fds[n] = stream_kick_fd(s);
		pthread_mutex_unlock(&s->lock);
		n += fds[n] >= 0;
	}
	return n;
}

/* The peer's MOVE came and its RDMA bytes are read: its bytes come on the
 * kernel socket (after its FIN its end stays ours to report: EOF). Called
 * with s->lock held. */
static bool stream_rx_moved(const struct xs_stream *s)
{
	return s->peer_moved && !s->peer_fin && !s->rxq_len;
}

/* Bytes the stream must hold to poll readable: SO_RCVLOWAT, at most half
 * what its receive ring holds (tcp_set_rcvlowat(): half the buffer), so
 * that a peer out of credits never leaves it unreadable. With s->lock. */
static size_t stream_lowat(const struct xs_stream *s)
{
	size_t half = (size_t)s->c->nr_rx * s->c->local.eager_size / 2;

	/* a window that could not grow, with no credit left to the peer:
	 * nothing more comes until the reader reads */
	if (s->rx_granted < s->c->local.credits && !s->rx_grow_unsent &&
	    stream_peer_dry(s))
		return 1;
	return (size_t)s->rcvlowat < half ? (size_t)s->rcvlowat : half;
}

void xs_stream_set_rcvlowat(struct xs_stream *s, int bytes)
{
	pthread_mutex_lock(&s->lock);
	s->rcvlowat = bytes > 1 ? bytes : 1;
	stream_gen_bump(s); /* readiness may change */
	stream_wake(s);	    /* a poll asleep looks again (tcp_set_rcvlowat()) */
	pthread_mutex_unlock(&s->lock);
}

unsigned int xs_stream_events(struct xs_stream *s, unsigned int how)
{
	unsigned int ev = 0;

	pthread_mutex_lock(&s->lock);
	if ((how & XS_STREAM_DRAIN) && !s->polling)
		stream_drain_channels(
			s, how & (XS_STREAM_DRAIN | XS_STREAM_NOARM));
	else
		stream_cm_check(s);
	stream_take_kick(s, how);
	if ((how & XS_STREAM_ARM) && stream_arm(s))
		stream_reset(s, "ibv_req_notify_cq failed");
	/* An idle connection's look costs no CQ poll: what completed since
	 * its last empty poll raised an event, and its channel fd, quiet a
	 * moment ago, wakes the caller's sleep if it did just now. */
	if (!(how & (XS_STREAM_DRAIN | XS_STREAM_SPIN)) && s->cq_quiet)
		stream_progress(s);
	else
		stream_poll_cq(s);
	stream_return_credits(s);
	if ((how & XS_STREAM_ARM) && s->pool_starved)
		ev |= XS_EV_STARVED;
	if ((s->rxq_len && stream_rx_ready(&s->rxq[s->rxq_head]) &&
	     (s->rcvlowat <= 1 || stream_readable(s) >= stream_lowat(s))) ||
	    s->peer_fin || s->rd_shut)
		ev |= XS_EV_IN;
	if (s->peer_fin || s->rd_shut)
		ev |= XS_EV_RDHUP;
	/* After SHUT_WR, writes fail at once: writable (tcp_poll). Once
	 * large sends were made, writable also needs a free region, or a
	 * level-triggered writer would spin on EAGAIN (cf. the kernel's
	 * sk_stream_is_writeable() on a full send buffer). */
	if (s->wr_shut || (s->tx_credits && stream_slot(s) >= 0 &&
			   (!s->stage || stream_region_free(s))))
		ev |= XS_EV_OUT;
	if (s->error) /* tcp_poll() of a socket closed by an RST */
		ev |= (s->error_pending ? XS_EV_ERR : 0) | XS_EV_HUP |
		      XS_EV_IN | XS_EV_RDHUP | XS_EV_OUT;
	if (s->peer_gone && !s->move_sent) /* CLOSE_WAIT: a send is taken */
		ev |= XS_EV_OUT;
	if (s->wr_shut && s->peer_fin)
		ev |= XS_EV_HUP;
	if (s->move_sent) /* our sends go to the kernel's buffer */
		ev |= XS_EV_OUT;
	if (s->move_sent && stream_rx_moved(s))
		ev |= XS_EV_MOVED;
	pthread_mutex_unlock(&s->lock);
	return ev;
}

bool xs_stream_failed(struct xs_stream *s)
{
	bool failed;

	pthread_mutex_lock(&s->lock);
	failed = s->error != 0;
	pthread_mutex_unlock(&s->lock);
	return failed;
}

bool xs_stream_unread(struct xs_stream *s)
{
	bool unread;

	pthread_mutex_lock(&s->lock);
	stream_poll_cq(s); /* what arrived is unread too */
	unread = s->rxq_len != 0;
	pthread_mutex_unlock(&s->lock);
	return unread;
}

unsigned int xs_stream_moved(struct xs_stream *s)
{
	unsigned int how = 0;

	pthread_mutex_lock(&s->lock);
	if (s->move_sent)
		how |= XS_MOVED_TX;
	if (stream_rx_moved(s))
		how |= XS_MOVED_RX;
	if (s->peer_moved)
		how |= XS_MOVED_PEER;
	pthread_mutex_unlock(&s->lock);
	return how;
}
