/*
 * core/stream_tx.c - the send side of the eager byte stream (stream.h):
 * the send slots that mirror the send queue, selective signaling and the
 * retiring of unsignaled sends, and the posting of messages (eager DATA
 * and the control messages) with their credits.
 * Context: any thread; s->lock guards every field (stream_int.h).
 */
#include <errno.h>
#include <string.h>

#include "stream_int.h"

/* Slot @slot's WR is done: its slot, and its pool buffer, are free. */
void stream_slot_free(struct xs_stream *s, struct xs_stream_slot *slot)
{
	if (stream_slot_awaited(slot))
		s->tx_awaited--;
	if (slot->unsignaled) {
		s->tx_unsig--;
		s->tx_unsig_bytes -= slot->len;
	}
	if (slot->buf.addr)
		xs_pool_free(&s->c->dev->pool, &slot->buf);
	*slot = (struct xs_stream_slot){ 0 };
	s->tx_inflight--;
}

/*
 * The unsignaled sends posted before the WR of @seq are done with it: an
 * RC send queue completes in order, so they completed before it. One of
 * them that failed had its own work completion, before this one (errors
 * always complete), and was freed then.
 */
void stream_unsignaled_done(struct xs_stream *s, uint32_t seq)
{
	uint32_t i;

	for (i = 0; i < s->tx_max && s->tx_unsig; i++) {
		struct xs_stream_slot *u = &s->tx[i];

		if (u->kind == STREAM_SLOT_SEND && u->unsignaled &&
		    (int32_t)(u->seq - seq) < 0) {
			s->tx_queued -= u->len;
			stream_slot_free(s, u);
		}
	}
}

/* A free send slot, or -1. */
int stream_slot(struct xs_stream *s)
{
	uint32_t i;

	if (s->tx_inflight >= s->tx_max)
		return -1;
	for (i = 0; i < s->tx_max; i++)
		if (s->tx[i].kind == STREAM_SLOT_FREE)
			return (int)i;
	return -1;
}

/*
 * Whether a send of @type may go unsignaled (STREAM_SIGNAL_EVERY): an
 * inline (@inline_send) DATA or CREDIT message, while fewer than
 * STREAM_SIGNAL_EVERY - 1 unsignaled ones follow the last signaled WR and
 * fewer than half the slots are taken. Everything else completes on its
 * own: a pool buffer goes back to the pool at its completion; a READ,
 * invalidation or probe is awaited; a FIN, MOVE or RESET ends the stream
 * (close and linger wait until every WR is done). Called with s->lock
 * held.
 */
bool stream_unsignaled_ok(const struct xs_stream *s, enum xs_msg_type type,
			  bool inline_send)
{
	/* after SHUT_WR no DATA follows to retire a CREDIT, and a close
	 * waits for every send to complete */
	return inline_send && !s->wr_shut &&
	       (type == XS_MSG_DATA || type == XS_MSG_CREDIT) &&
	       s->tx_unsig_run + 1u < STREAM_SIGNAL_EVERY &&
	       (s->tx_inflight + 1u) * 2u < s->tx_max;
}

/*
 * Have the unsignaled sends in flight retire now rather than with the
 * next signaled WR: when none is in flight behind them, post a probe (a
 * signaled zero-byte WRITE) for its completion. For the queries that
 * count bytes not known delivered (SIOCOUTQ): they fall to 0 within a
 * round trip once the peer has everything, as the kernel's do once its
 * ACKs are in. Called with s->lock held.
 */
void stream_retire_unsignaled(struct xs_stream *s)
{
	int i;

	if (!s->tx_unsig || s->tx_inflight > s->tx_unsig || s->error ||
	    (i = stream_slot(s)) < 0)
		return;
	stream_arm_widen(s);
	if (xs_conn_post_probe(s->c, STREAM_WR_SEND | (uint64_t)i)) {
		stream_reset(s, "cannot post a probe");
		return;
	}
	stream_slot_take(s, i, STREAM_SLOT_PROBE, 0, 0, NULL);
}

/* Take slot @i for a signaled WR just posted. */
void stream_slot_take(struct xs_stream *s, int i, uint8_t kind, uint32_t arg,
		      uint32_t len, const struct xs_buf *buf)
{
	struct xs_stream_slot *slot = &s->tx[i];

	slot->seq = s->tx_seq++;
	s->tx_unsig_run = 0;
	slot->kind = kind;
	slot->arg = arg;
	slot->len = len;
	slot->buf = buf ? *buf : (struct xs_buf){ 0 };
	s->tx_inflight++;
	if (stream_slot_awaited(slot))
		s->tx_awaited++;
	/* a completion that the arm may not announce can come now, and a
	 * waiter may need it: its next look arms again */
	if (s->cq_armed_sol) {
		s->cq_quiet = false;
		stream_note(s);
	}
}

/* A pool buffer of @len bytes, or -EAGAIN when the pool is exhausted. */
int stream_alloc(struct xs_stream *s, size_t len, struct xs_buf *b)
{
	int rc = xs_pool_alloc(&s->c->dev->pool, len, b);

	if (rc == -ENOBUFS) {
		s->pool_starved = true;
		stream_note(s);
		s->pub->c.pool_waits++;
		return -EAGAIN; /* backpressure */
	}
	if (rc == 0)
		s->pool_starved = false;
	return rc;
}

/*
 * The @len bytes at @cur when they lie in one iovec entry: taken (the
 * cursor moves past them), for an inline send's second SGE. NULL: they
 * span entries, and are copied instead.
 */
static const void *stream_iov_take(struct iov_cursor *cur, uint32_t len)
{
	const struct iovec *v;
	const uint8_t *p;

	if (!cur || cur->i >= cur->cnt)
		return NULL;
	v = &cur->iov[cur->i];
	if (v->iov_len - cur->off < len)
		return NULL;
	p = (const uint8_t *)v->iov_base + cur->off;
	stream_iov_step(cur, len);
	return p;
}

/* Payload bytes of the largest DATA message stream_build() posts inline
 * (no pool buffer), 0 when none fits. */
uint32_t stream_inline_data_max(const struct xs_stream *s)
{
	uint32_t max = s->c->max_inline < STREAM_INLINE_STACK
			       ? s->c->max_inline
			       : STREAM_INLINE_STACK;

	return max > XS_WIRE_MSG_LEN ? max - XS_WIRE_MSG_LEN : 0;
}

/*
 * Build message @m (header, descriptor, then @len payload bytes from
 * @cur) where it will be posted from: @stack when it fits the QP's inline
 * size, else a pool buffer (*@b). An inline message whose payload lies in
 * one iovec entry leaves it there: *@tail points at it, and the header
 * alone is built (two SGEs: xs_conn_post_send2()); *@tail is NULL when
 * the whole message was built. Return: bytes in all, or -EAGAIN.
 */
int stream_build(struct xs_stream *s, struct xs_msg *m, struct iov_cursor *cur,
		 uint32_t len, uint8_t *stack, struct xs_buf *b, void **dst,
		 const void **tail)
{
	uint32_t hdr = m->type == XS_MSG_RNDV	     ? XS_WIRE_RNDV_LEN
		       : m->type == XS_MSG_RNDV_DONE ? XS_WIRE_RNDV_DONE_LEN
						     : 0;
	uint32_t total = XS_WIRE_MSG_LEN + hdr + len;
	int rc;

	*b = (struct xs_buf){ 0 };
	*tail = NULL;
	if (total <= s->c->max_inline && total <= STREAM_INLINE_STACK) {
		*dst = stack;
		if (len && s->c->max_send_sge >= 2)
			*tail = stream_iov_take(cur, len);
	} else {
		rc = stream_alloc(s, total, b);
		if (rc)
			return rc;
		*dst = b->addr;
	}
	m->credits = (uint16_t)s->rx_unreturned;
	m->flags = s->rx_grow_unsent ? XS_WIRE_F_GROW : 0;
	if ((m->type == XS_MSG_DATA || m->type == XS_MSG_RNDV) &&
	    s->tx_credits == 1)
		m->flags |= XS_WIRE_F_LAST; /* the peer may grow its window */
	xs_wire_msg_encode(m, *dst);
	if (len && !*tail)
		stream_iov_copy(cur, (uint8_t *)*dst + XS_WIRE_MSG_LEN, len,
				false);
	return (int)total;
}

/* Bookkeeping after a message went out: its credit and the ones it
 * returned. */
void stream_sent(struct xs_stream *s, enum xs_msg_type type,
		 const struct xs_buf *b)
{
	if (type == XS_MSG_DATA || type == XS_MSG_RNDV)
		s->tx_credits--;
	s->rx_unreturned = 0;
	s->rx_grow_unsent = false;
	if (type != XS_MSG_DATA)
		return;
	if (b->addr)
		s->pub->c.msgs_eager++;
	else
		s->pub->c.msgs_inline++;
}

/*
 * Post one message now, its @len payload bytes taken from @cur, or
 * -EAGAIN when no credit, slot or pool buffer is free. DATA spends a
 * credit; control messages land in the peer's control buffers.
 */
int stream_post(struct xs_stream *s, struct xs_msg *m, struct iov_cursor *cur,
		uint32_t len)
{
	uint8_t stack[STREAM_INLINE_STACK];
	const void *tail;
	struct xs_buf b;
	int slot, total, rc;
	bool unsig;
	void *dst;

	m->len = len;
	if (m->type == XS_MSG_DATA && s->tx_credits == 0)
		return -EAGAIN;
	slot = stream_slot(s);
	if (slot < 0)
		return -EAGAIN;
	total = stream_build(s, m, cur, len, stack, &b, &dst, &tail);
	if (total < 0)
		return total;
	if (b.addr)
		stream_arm_widen(s); /* the pool buffer comes back with it */
	unsig = stream_unsignaled_ok(s, m->type, !b.addr);
	if (tail)
		rc = xs_conn_post_send2(s->c, dst, (uint32_t)total - len, tail,
					len, STREAM_WR_SEND | (uint64_t)slot,
					!unsig);
	else
		rc = xs_conn_post_send(s->c, dst, (uint32_t)total,
				       b.addr ? &b : NULL,
				       STREAM_WR_SEND | (uint64_t)slot, !unsig);
	if (rc) {
		if (b.addr)
			xs_pool_free(&s->c->dev->pool, &b);
		stream_reset(s, "ibv_post_send failed");
		return -ECONNRESET;
	}
	if (unsig) {
		/* no completion of its own: no arm needs widening, and its
		 * slot is freed by the next signaled WR's */
		s->tx[slot] = (struct xs_stream_slot){
			.kind = STREAM_SLOT_SEND,
			.unsignaled = true,
			.seq = s->tx_seq++,
			.len = len,
		};
		s->tx_inflight++;
		s->tx_unsig++;
		s->tx_unsig_run++;
		s->tx_unsig_bytes += len;
	} else {
		stream_slot_take(s, slot, STREAM_SLOT_SEND, 0, len, &b);
	}
	s->tx_queued += len;
	stream_sent(s, m->type, &b);
	return 0;
}

int stream_post_ctrl(struct xs_stream *s, enum xs_msg_type type)
{
	struct xs_msg m = { .type = type };

	return stream_post(s, &m, NULL, 0);
}

/*
 * Announce re-posted buffers once half the ring at its largest waits (cf.
 * TCP's window update), or once the peer has no credit left: every one of
 * the window is held unread here or re-posted unannounced
 * (core/stream_rx.c holds some back). A window still growing returns its
 * credits with our next message, as a request's are with its response,
 * unless the peer ran out: a CREDIT each time would cost a message. A
 * control message, never blocks.
 */
void stream_return_credits(struct xs_stream *s)
{
	uint32_t half = (s->c->local.credits + 1u) / 2u;

	stream_rx_grow(s, false); /* after a grow the pool refused */
	if (s->error || !s->rx_unreturned ||
	    (s->rx_unreturned < half && !stream_peer_dry(s)))
		return;
	if (stream_post_ctrl(s, XS_MSG_CREDIT) == 0)
		s->pub->c.credit_msgs++;
}
