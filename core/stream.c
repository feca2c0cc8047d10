/*
 * core/stream.c - the eager byte stream over an RC connection (stream.h).
 *
 * Owns credits, the receive FIFO, staging buffers of in-flight sends and
 * the wait: spin on the CQ for XSOCK_SPIN_US, then arm it and sleep in
 * poll(2) on the completion channel and the CM channel together (the
 * latter reports a peer that went away without a FIN). Producer side cf.
 * SMC's smc_tx.c, consumer side smc_rx.c.
 * Context: one thread at a time per stream.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "stream.h"

#define STREAM_CQ_BATCH	    16
#define STREAM_INLINE_STACK 512 /* bytes: largest inline message built */
/*
 * wr_id layout: receives carry the ring index (below 2^32); sends carry
 * STREAM_WR_SEND | slot. An error completion's opcode is undefined, so the
 * wr_id alone tells a send from a receive.
 */
#define STREAM_WR_SEND (1ull << 32)

int xs_stream_init(struct xs_stream *s, struct xs_conn *c)
{
	uint32_t i;

	memset(s, 0, sizeof(*s));
	s->c = c;
	s->tx_credits = c->peer.credits;
	s->tx_max = c->local.credits + 16u; /* the QP's max_send_wr */
	s->tx_slot = calloc(s->tx_max, sizeof(*s->tx_slot));
	s->rxq = calloc(c->nr_rx, sizeof(*s->rxq));
	if (!s->tx_slot || !s->rxq) {
		free(s->tx_slot);
		free(s->rxq);
		return -ENOMEM;
	}
	for (i = 0; i < s->tx_max; i++)
		s->tx_slot[i].sb = UINT32_MAX; /* free */
	return 0;
}

static void stream_reset(struct xs_stream *s, const char *why)
{
	if (s->error)
		return;
	s->error = -ECONNRESET;
	xs_info("stream", "connection reset: %s", why);
}

static int stream_repost(struct xs_stream *s, uint32_t idx)
{
	int rc = xs_conn_repost_recv(s->c, idx);

	if (rc)
		stream_reset(s, "cannot repost a receive buffer");
	else
		s->rx_unreturned++;
	return rc;
}

/* One receive completion: validate, then queue data or apply control. */
static void stream_on_recv(struct xs_stream *s, const struct ibv_wc *wc)
{
	struct xs_conn *c = s->c;
	struct xs_msg m;
	uint32_t idx = (uint32_t)wc->wr_id;

	if (idx >= c->nr_rx || xs_wire_msg_decode(c->rx[idx].addr, wc->byte_len,
						  c->local.eager_size, 0, &m)) {
		stream_reset(s, "malformed message from the peer");
		return;
	}
	/* More credits than our ring holds: the peer is lying. */
	if ((uint64_t)s->tx_credits + m.credits > c->peer.credits) {
		stream_reset(s, "peer returned more credits than granted");
		return;
	}
	s->tx_credits += m.credits;
	switch (m.type) {
	case XS_MSG_DATA:
		if (s->peer_fin) {
			stream_reset(s, "data after FIN");
			return;
		}
		s->rxq[(s->rxq_head + s->rxq_len) % c->nr_rx] =
			(struct xs_stream_rx){ idx, XS_WIRE_MSG_LEN,
					       XS_WIRE_MSG_LEN + m.len };
		s->rxq_len++;
		s->bytes_received += m.len;
		return;
	case XS_MSG_FIN:
		s->peer_fin = true;
		break;
	case XS_MSG_RESET:
		stream_reset(s, "peer sent RESET");
		break;
	case XS_MSG_CREDIT:
		break;
	default: /* RNDV: never announced, so never legal */
		stream_reset(s, "unexpected rendezvous message");
		return;
	}
	stream_repost(s, idx);
}

static void stream_on_wc(struct xs_stream *s, const struct ibv_wc *wc)
{
	uint64_t slot = wc->wr_id & ~STREAM_WR_SEND;

	if (wc->status != IBV_WC_SUCCESS)
		stream_reset(s, ibv_wc_status_str(wc->status));
	if (!(wc->wr_id & STREAM_WR_SEND)) {
		if (wc->status == IBV_WC_SUCCESS)
			stream_on_recv(s, wc);
		return;
	}
	if (slot >= s->tx_max || s->tx_slot[slot].sb == UINT32_MAX)
		return;
	if (s->tx_slot[slot].addr)
		xs_pool_free(&s->c->dev->pool, &s->tx_slot[slot]);
	s->tx_slot[slot].sb = UINT32_MAX;
	s->tx_slot[slot].addr = NULL;
	s->tx_inflight--;
}

static int stream_poll_cq(struct xs_stream *s)
{
	struct ibv_wc wc[STREAM_CQ_BATCH];
	int n, i;

	n = ibv_poll_cq(s->c->cq, STREAM_CQ_BATCH, wc);
	if (n < 0) {
		stream_reset(s, "ibv_poll_cq failed");
		return 0;
	}
	for (i = 0; i < n; i++)
		stream_on_wc(s, &wc[i]);
	return n;
}

static void stream_return_credits(struct xs_stream *s);

/*
 * Make progress: reap completions; with @wait_ms != 0 and nothing done,
 * spin XSOCK_SPIN_US, then sleep on the completion and CM channels.
 * Return: completions handled, 0 on timeout, or -EINTR.
 */
static int stream_progress(struct xs_stream *s, int wait_ms)
{
	const struct xs_config *cfg = xs_core_cfg();
	uint64_t spin_until;
	struct pollfd pfd[2];
	struct rdma_cm_event *ev;
	struct ibv_cq *cq;
	void *ctx;
	int n;

	n = stream_poll_cq(s);
	if (n || wait_ms == 0)
		goto out;
	spin_until = xs_now_us() + (cfg ? cfg->spin_us : 0);
	while (xs_now_us() < spin_until)
		if ((n = stream_poll_cq(s)))
			goto out;
	if (ibv_req_notify_cq(s->c->cq, 0)) {
		stream_reset(s, "ibv_req_notify_cq failed");
		return 0;
	}
	n = stream_poll_cq(s); /* what completed before the arm */
	if (n)
		goto out;
	pfd[0] = (struct pollfd){ .fd = s->c->cc->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = s->c->ch->fd, .events = POLLIN };
	n = xs_real.poll(pfd, 2, wait_ms);
	if (n < 0)
		return errno == EINTR ? -EINTR : 0;
	if (pfd[0].revents && ibv_get_cq_event(s->c->cc, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	if (pfd[1].revents && rdma_get_cm_event(s->c->ch, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED && !s->peer_fin)
			stream_reset(s, "peer disconnected without FIN");
		rdma_ack_cm_event(ev);
	}
	n = stream_poll_cq(s);
out:
	stream_return_credits(s);
	return n;
}

/* A free send slot, or -1. */
static int stream_slot(struct xs_stream *s)
{
	uint32_t i;

	if (s->tx_inflight >= s->tx_max)
		return -1;
	for (i = 0; i < s->tx_max; i++)
		if (s->tx_slot[i].sb == UINT32_MAX)
			return (int)i;
	return -1;
}

/*
 * Post one message now, or -EAGAIN when no credit, slot or pool buffer is
 * free. @reserve: credits that must stay after it (1 for DATA, so credit
 * returns and FIN always find one).
 */
static int stream_post(struct xs_stream *s, enum xs_msg_type type,
		       const void *payload, uint32_t len, uint32_t reserve)
{
	struct xs_msg m = { .type = type, .len = len };
	uint8_t stack[STREAM_INLINE_STACK];
	uint32_t total = XS_WIRE_MSG_LEN + len;
	struct xs_buf b = { 0 };
	int slot, rc;
	void *dst;

	if (s->tx_credits <= reserve)
		return -EAGAIN;
	slot = stream_slot(s);
	if (slot < 0)
		return -EAGAIN;
	if (total <= s->c->max_inline && total <= sizeof(stack)) {
		dst = stack;
	} else {
		rc = xs_pool_alloc(&s->c->dev->pool, total, &b);
		if (rc)
			return rc == -ENOBUFS ? -EAGAIN : rc; /* backpressure */
		dst = b.addr;
	}
	m.credits = (uint16_t)s->rx_unreturned;
	xs_wire_msg_encode(&m, dst);
	if (len)
		memcpy((uint8_t *)dst + XS_WIRE_MSG_LEN, payload, len);
	rc = xs_conn_post_send(s->c, dst, total, b.addr ? &b : NULL,
			       STREAM_WR_SEND | (uint64_t)slot);
	if (rc) {
		if (b.addr)
			xs_pool_free(&s->c->dev->pool, &b);
		stream_reset(s, "ibv_post_send failed");
		return -ECONNRESET;
	}
	s->tx_slot[slot] = b;
	s->tx_slot[slot].sb = b.addr ? b.sb : 0; /* in use */
	s->tx_inflight++;
	s->tx_credits--;
	s->rx_unreturned = 0;
	if (b.addr)
		s->msgs_pool++;
	else
		s->msgs_inline++;
	return 0;
}

/* Announce re-posted buffers once half the ring waits (cf. TCP's window
 * update); uses the reserved credit, never blocks. */
static void stream_return_credits(struct xs_stream *s)
{
	if (s->error || s->rx_unreturned < (s->c->local.credits + 1u) / 2u)
		return;
	if (stream_post(s, XS_MSG_CREDIT, NULL, 0, 0) == 0)
		s->credit_msgs++;
}

ssize_t xs_stream_send(struct xs_stream *s, const void *buf, size_t len,
		       bool nonblock)
{
	uint32_t max = s->c->peer.eager_size - XS_WIRE_MSG_LEN;
	size_t sent = 0;
	int rc = 0;

	while (sent < len) {
		uint32_t chunk =
			len - sent < max ? (uint32_t)(len - sent) : max;

		if (s->error) {
			rc = s->error;
			break;
		}
		if (s->fin_sent) {
			rc = -EPIPE;
			break;
		}
		rc = stream_post(s, XS_MSG_DATA, (const uint8_t *)buf + sent,
				 chunk, 1);
		if (rc == 0) {
			sent += chunk;
			continue;
		}
		if (rc != -EAGAIN)
			break;
		s->credit_stalls++;
		if (nonblock)
			break;
		rc = stream_progress(s, -1);
		if (rc == -EINTR)
			break;
	}
	s->bytes_sent += sent;
	stream_progress(s, 0);
	return sent ? (ssize_t)sent : rc;
}

/* Copy up to @len queued bytes; consume them unless @peek. */
static size_t stream_copy(struct xs_stream *s, uint8_t *dst, size_t len,
			  bool peek)
{
	uint32_t nr = s->c->nr_rx, i = 0, off;
	size_t copied = 0;

	while (copied < len && i < s->rxq_len) {
		struct xs_stream_rx *r = &s->rxq[(s->rxq_head + i) % nr];
		size_t n = r->end - r->off;

		if (n > len - copied)
			n = len - copied;
		off = r->off;
		memcpy(dst + copied, (uint8_t *)s->c->rx[r->idx].addr + off, n);
		copied += n;
		if (peek) {
			i++;
			continue;
		}
		r->off += (uint32_t)n;
		if (r->off == r->end) {
			stream_repost(s, r->idx);
			s->rxq_head = (s->rxq_head + 1) % nr;
			s->rxq_len--;
		}
	}
	return copied;
}

ssize_t xs_stream_recv(struct xs_stream *s, void *buf, size_t len,
		       bool nonblock, bool peek, bool waitall)
{
	size_t copied = 0;
	int rc;

	if (len == 0)
		return 0;
	for (;;) {
		copied += stream_copy(s, (uint8_t *)buf + copied, len - copied,
				      peek);
		if (peek && copied)
			break;
		if (copied == len || (copied && !waitall))
			break;
		if (s->rxq_len == 0 && s->peer_fin)
			break; /* EOF */
		if (s->error)
			return copied ? (ssize_t)copied : s->error;
		if (nonblock) {
			stream_progress(s, 0);
			if (s->rxq_len || s->peer_fin || s->error)
				continue;
			return copied ? (ssize_t)copied : -EAGAIN;
		}
		rc = stream_progress(s, -1);
		if (rc == -EINTR)
			return copied ? (ssize_t)copied : -EINTR;
	}
	stream_return_credits(s);
	return (ssize_t)copied;
}

int xs_stream_shutdown_wr(struct xs_stream *s)
{
	int rc;

	while (!s->fin_sent) {
		if (s->error)
			return s->error;
		rc = stream_post(s, XS_MSG_FIN, NULL, 0, 0);
		if (rc == 0) {
			s->fin_sent = true;
			break;
		}
		if (rc != -EAGAIN)
			return rc;
		stream_progress(s, -1);
	}
	return 0;
}

void xs_stream_close(struct xs_stream *s, int timeout_ms)
{
	uint64_t deadline = xs_now_us() + (uint64_t)timeout_ms * 1000u;
	uint32_t i;

	if (!s->c)
		return;
	if (!s->error && !s->fin_sent)
		xs_stream_shutdown_wr(s);
	/* Graceful: every byte sent before close reaches the peer. */
	while (s->tx_inflight && !s->error && xs_now_us() < deadline)
		stream_progress(s, 10);
	for (i = 0; i < s->tx_max; i++)
		if (s->tx_slot[i].sb != UINT32_MAX && s->tx_slot[i].addr)
			xs_pool_free(&s->c->dev->pool, &s->tx_slot[i]);
	xs_conn_destroy(s->c);
	free(s->tx_slot);
	free(s->rxq);
	memset(s, 0, sizeof(*s));
}
