/*
 * core/stream.c - the eager byte stream over an RC connection (stream.h).
 *
 * Owns credits, the receive FIFO, staging buffers of in-flight sends and
 * the wait: one thread at a time spins on the CQ for XSOCK_SPIN_US, then
 * arms it and sleeps in poll(2) on the completion channel and the CM
 * channel together (the latter reports a peer that went away without a
 * FIN); other threads wait on the stream's condition variable. Producer
 * side cf. SMC's smc_tx.c, consumer side smc_rx.c.
 * Context: any thread; s->lock guards every field.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core_int.h"
#include "stream.h"

#define STREAM_CQ_BATCH	    16
#define STREAM_INLINE_STACK 512 /* bytes: largest inline message built */
#define STREAM_FOREVER	    UINT64_MAX
/*
 * wr_id layout: receives carry the ring index (below 2^32); sends carry
 * STREAM_WR_SEND | slot. An error completion's opcode is undefined, so the
 * wr_id alone tells a send from a receive.
 */
#define STREAM_WR_SEND (1ull << 32)

/* Where a copy stands in an iovec array. */
struct iov_cursor {
	const struct iovec *iov;
	int cnt;
	int i;
	size_t off;
};

/* Copy @n bytes between @buf and the iovecs (@to_iov: into them). */
static void iov_copy(struct iov_cursor *cur, void *buf, size_t n, bool to_iov)
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
		cur->off += k;
		if (cur->off == v->iov_len) {
			cur->i++;
			cur->off = 0;
		}
	}
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	return total;
}

static uint64_t stream_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return STREAM_FOREVER;
	return xs_now_us() + (uint64_t)timeout_ms * 1000u;
}

int xs_stream_init(struct xs_stream *s, struct xs_conn *c)
{
	pthread_condattr_t ca;
	uint32_t i;

	memset(s, 0, sizeof(*s));
	s->c = c;
	s->tx_credits = c->peer.credits;
	s->tx_max = c->local.credits + 16u; /* the QP's max_send_wr */
	s->tx_slot = calloc(s->tx_max, sizeof(*s->tx_slot));
	s->tx_len = calloc(s->tx_max, sizeof(*s->tx_len));
	s->rxq = calloc(c->nr_rx, sizeof(*s->rxq));
	if (!s->tx_slot || !s->tx_len || !s->rxq) {
		free(s->tx_slot);
		free(s->tx_len);
		free(s->rxq);
		xs_conn_destroy(c);
		memset(s, 0, sizeof(*s));
		return -ENOMEM;
	}
	for (i = 0; i < s->tx_max; i++)
		s->tx_slot[i].sb = UINT32_MAX; /* free */
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

static void stream_reset(struct xs_stream *s, const char *why)
{
	if (s->error)
		return;
	atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
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
		if (s->rx_data_held >= c->local.credits) {
			stream_reset(s, "peer overran its data credits");
			return;
		}
		s->rx_data_held++;
		s->rxq[(s->rxq_head + s->rxq_len) % c->nr_rx] =
			(struct xs_stream_rx){ idx, XS_WIRE_MSG_LEN,
					       XS_WIRE_MSG_LEN + m.len };
		s->rxq_len++;
		s->rxq_bytes += m.len;
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
	/* A control buffer: straight back to the QP. */
	if (xs_conn_repost_recv(c, idx))
		stream_reset(s, "cannot repost a receive buffer");
}

static void stream_on_wc(struct xs_stream *s, const struct ibv_wc *wc)
{
	uint64_t slot = wc->wr_id & ~STREAM_WR_SEND;

	atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
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
	s->tx_queued -= s->tx_len[slot];
	s->tx_inflight--;
}

static void stream_send_fin(struct xs_stream *s);
static void stream_return_credits(struct xs_stream *s);

/*
 * Reap completions without waiting, then send a FIN that shutdown() left
 * waiting for a credit. Called with s->lock held.
 */
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
	if (s->wr_shut && !s->fin_sent)
		stream_send_fin(s);
	if (n)
		pthread_cond_broadcast(&s->cond); /* a follower's news too */
	return n;
}

/* Drain the CM channel: a DISCONNECTED before FIN is a reset; after FIN,
 * the peer is gone. */
static void stream_cm_events(struct xs_stream *s)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(s->c->ch, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
			/* The peer's last messages (its FIN) completed
			 * before it disconnected: reap them first. */
			while (stream_poll_cq(s) > 0)
				;
			if (!s->peer_fin)
				stream_reset(s,
					     "peer disconnected without FIN");
			/* Its QP is gone: what we still send is never
			 * acknowledged, so close() must not wait for it. */
			s->peer_gone = true;
			atomic_fetch_add_explicit(&s->gen, 1,
						  memory_order_relaxed);
		}
		rdma_ack_cm_event(ev);
	}
}

/*
 * The polling thread's wait: spin, arm, sleep, reap. Called and returns
 * with s->lock held; drops it while it spins and sleeps.
 * Return: 0 (conditions may have changed), or -EINTR.
 */
static int stream_sleep(struct xs_stream *s, uint64_t deadline)
{
	const struct xs_config *cfg = xs_core_cfg();
	/* Completions reaped by another thread while we spin or arm change
	 * our caller's condition without waking us: the counter tells. */
	unsigned long gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	uint64_t now = xs_now_us(), spin_until;
	struct pollfd pfd[2];
	struct ibv_cq *cq;
	int n, err, wait_ms;
	void *ctx;

	spin_until = now + (cfg ? cfg->spin_us : 0);
	if (spin_until > deadline)
		spin_until = deadline;
	while (xs_now_us() < spin_until) {
		if (stream_poll_cq(s) || atomic_load(&s->gen) != gen)
			return 0;
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_lock(&s->lock);
	}
	if (ibv_req_notify_cq(s->c->cq, 0)) {
		stream_reset(s, "ibv_req_notify_cq failed");
		return 0;
	}
	/* what completed before the arm, here or in another thread */
	if (stream_poll_cq(s) || atomic_load(&s->gen) != gen)
		return 0;
	if (deadline == STREAM_FOREVER) {
		wait_ms = -1;
	} else {
		now = xs_now_us();
		if (now >= deadline)
			return 0;
		wait_ms = (int)((deadline - now + 999u) / 1000u);
	}
	pfd[0] = (struct pollfd){ .fd = s->c->cc->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = s->c->ch->fd, .events = POLLIN };
	pthread_mutex_unlock(&s->lock);
	n = xs_real.poll(pfd, 2, wait_ms);
	err = errno;
	pthread_mutex_lock(&s->lock);
	if (n < 0)
		return err == EINTR ? -EINTR : 0;
	if (pfd[0].revents && ibv_get_cq_event(s->c->cc, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	if (pfd[1].revents)
		stream_cm_events(s);
	stream_poll_cq(s);
	return 0;
}

/*
 * Wait for news until @deadline: become the polling thread, or wait for
 * the one there is. Called and returns with s->lock held.
 * Return: 0 (re-check your condition), -EAGAIN past the deadline, -EINTR.
 */
static int stream_wait(struct xs_stream *s, uint64_t deadline)
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
	xs_tls_depth++;
	rc = stream_sleep(s, deadline);
	stream_return_credits(s);
	xs_tls_depth--;
	s->polling = false;
	pthread_cond_broadcast(&s->cond);
	return rc;
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
 * Post one message now, its @len payload bytes taken from @cur, or
 * -EAGAIN when no credit, slot or pool buffer is free. DATA spends a
 * credit; control messages land in the peer's control buffers.
 */
static int stream_post(struct xs_stream *s, enum xs_msg_type type,
		       struct iov_cursor *cur, uint32_t len)
{
	struct xs_msg m = { .type = type, .len = len };
	uint8_t stack[STREAM_INLINE_STACK];
	uint32_t total = XS_WIRE_MSG_LEN + len;
	struct xs_buf b = { 0 };
	int slot, rc;
	void *dst;

	if (type == XS_MSG_DATA && s->tx_credits == 0)
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
		iov_copy(cur, (uint8_t *)dst + XS_WIRE_MSG_LEN, len, false);
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
	s->tx_len[slot] = len;
	s->tx_queued += len;
	s->tx_inflight++;
	if (type == XS_MSG_DATA)
		s->tx_credits--;
	s->rx_unreturned = 0;
	if (b.addr)
		s->msgs_pool++;
	else
		s->msgs_inline++;
	return 0;
}

/*
 * Announce re-posted buffers once half the ring waits (cf. TCP's window
 * update); a control message, never blocks.
 */
static void stream_return_credits(struct xs_stream *s)
{
	if (s->error || s->rx_unreturned < (s->c->local.credits + 1u) / 2u)
		return;
	if (stream_post(s, XS_MSG_CREDIT, NULL, 0) == 0)
		s->credit_msgs++;
}

/*
 * FIN after every queued byte, as a control message; when no send slot
 * is free it goes out from the next stream_poll_cq(), so shutdown() and
 * close() never block on the peer.
 */
static void stream_send_fin(struct xs_stream *s)
{
	if (!s->error && stream_post(s, XS_MSG_FIN, NULL, 0) == 0)
		s->fin_sent = true;
}

ssize_t xs_stream_send(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int timeout_ms)
{
	struct iov_cursor cur = { iov, iovcnt, 0, 0 };
	uint64_t deadline = stream_deadline(timeout_ms);
	size_t total = iov_total(iov, iovcnt), sent = 0;
	uint32_t max, chunk;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	max = s->c->peer.eager_size - XS_WIRE_MSG_LEN;
	if (total == 0 && !s->error && (s->wr_shut || s->peer_gone))
		rc = -EPIPE; /* tcp_sendmsg: even 0 bytes after shutdown */
	while (sent < total) {
		if (s->error) {
			rc = s->error;
			break;
		}
		/* our SHUT_WR, or a peer whose QP is gone (the kernel
		 * would have an RST by now) */
		if (s->wr_shut || s->peer_gone) {
			rc = -EPIPE;
			break;
		}
		chunk = total - sent < max ? (uint32_t)(total - sent) : max;
		rc = stream_post(s, XS_MSG_DATA, &cur, chunk);
		if (rc == 0) {
			sent += chunk;
			continue;
		}
		if (rc != -EAGAIN)
			break;
		s->credit_stalls++;
		if (stream_poll_cq(s))
			continue;
		if (timeout_ms == 0)
			break;
		rc = stream_wait(s, deadline);
		if (rc)
			break;
	}
	s->bytes_sent += sent;
	stream_poll_cq(s);
	stream_return_credits(s);
	pthread_mutex_unlock(&s->lock);
	return sent ? (ssize_t)sent : rc;
}

/* Copy up to @len queued bytes into @cur; consume them unless @peek. */
static size_t stream_copy(struct xs_stream *s, struct iov_cursor *cur,
			  size_t len, bool peek)
{
	uint32_t nr = s->c->nr_rx, i = 0;
	size_t copied = 0;

	while (copied < len && i < s->rxq_len) {
		struct xs_stream_rx *r = &s->rxq[(s->rxq_head + i) % nr];
		size_t n = r->end - r->off;

		if (n > len - copied)
			n = len - copied;
		iov_copy(cur, (uint8_t *)s->c->rx[r->idx].addr + r->off, n,
			 true);
		copied += n;
		if (peek) {
			i++;
			continue;
		}
		r->off += (uint32_t)n;
		s->rxq_bytes -= n;
		if (r->off == r->end) {
			s->rx_data_held--;
			stream_repost(s, r->idx);
			s->rxq_head = (s->rxq_head + 1) % nr;
			s->rxq_len--;
		}
	}
	return copied;
}

ssize_t xs_stream_recv(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int flags, int timeout_ms)
{
	struct iov_cursor cur = { iov, iovcnt, 0, 0 };
	uint64_t deadline = stream_deadline(timeout_ms);
	size_t total = iov_total(iov, iovcnt), copied = 0;
	bool peek = flags & XS_RECV_PEEK;
	int rc = 0;

	if (total == 0)
		return 0;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (peek)
			cur = (struct iov_cursor){ iov, iovcnt, 0, 0 };
		copied += stream_copy(s, &cur, total - copied, peek);
		if (copied == total ||
		    (copied && (peek || !(flags & XS_RECV_WAITALL))))
			break;
		if (peek)
			copied = 0;
		if (s->rd_shut || (s->rxq_len == 0 && s->peer_fin))
			break; /* EOF */
		if (s->error) {
			rc = s->error;
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
	pthread_mutex_unlock(&s->lock);
	return copied ? (ssize_t)copied : rc;
}

int xs_stream_shutdown(struct xs_stream *s, int how)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	if (how == SHUT_RD || how == SHUT_RDWR)
		s->rd_shut = true;
	if (how == SHUT_WR || how == SHUT_RDWR)
		s->wr_shut = true;
	atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
	pthread_cond_broadcast(&s->cond);
	stream_poll_cq(s); /* posts the FIN when a credit is free */
	rc = s->error;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Bytes waiting to be read (@out false) or in flight (@out true). */
static size_t stream_queued(struct xs_stream *s, bool out)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	stream_poll_cq(s);
	n = out ? s->tx_queued : s->rd_shut ? 0 : s->rxq_bytes;
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

/* Take the completion channel's events and the CM channel's without
 * blocking (both fds are non-blocking). Called with s->lock held. */
static void stream_drain_channels(struct xs_stream *s)
{
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(s->c->cc, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	stream_cm_events(s);
}

int xs_stream_arm(struct xs_stream *s)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = ibv_req_notify_cq(s->c->cq, 0) ? -EIO : 0;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int xs_stream_wait_fds(struct xs_stream *s, int fds[2])
{
	fds[0] = s->c->cc->fd;
	fds[1] = s->c->ch->fd;
	return 2;
}

unsigned int xs_stream_events(struct xs_stream *s)
{
	unsigned int ev = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->polling)
		stream_drain_channels(s);
	stream_poll_cq(s);
	stream_return_credits(s);
	if (s->rxq_len || s->peer_fin || s->rd_shut)
		ev |= XS_EV_IN;
	if (s->peer_fin || s->rd_shut)
		ev |= XS_EV_RDHUP;
	/* After SHUT_WR, writes fail at once: writable (tcp_poll). */
	if (s->wr_shut || (s->tx_credits && stream_slot(s) >= 0))
		ev |= XS_EV_OUT;
	if (s->error)
		ev |= XS_EV_ERR | XS_EV_HUP | XS_EV_IN | XS_EV_OUT;
	if (s->peer_gone) /* sends fail at once */
		ev |= XS_EV_OUT | XS_EV_HUP;
	if (s->wr_shut && s->peer_fin)
		ev |= XS_EV_HUP;
	pthread_mutex_unlock(&s->lock);
	return ev;
}

static void stream_free(struct xs_stream *s)
{
	free(s->tx_slot);
	free(s->tx_len);
	free(s->rxq);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}

bool xs_stream_drained(struct xs_stream *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	if (!s->polling)
		stream_drain_channels(s);
	stream_poll_cq(s);
	done = (s->fin_sent && !s->tx_inflight) || s->error || s->peer_gone;
	pthread_mutex_unlock(&s->lock);
	return done;
}

void xs_stream_close(struct xs_stream *s, int timeout_ms)
{
	uint64_t deadline = stream_deadline(timeout_ms);
	uint32_t i;

	if (!s->c)
		return;
	xs_stream_shutdown(s, SHUT_WR);
	pthread_mutex_lock(&s->lock);
	/* Graceful: every byte sent before close reaches the peer. */
	while ((s->tx_inflight || !s->fin_sent) && !s->error && !s->peer_gone)
		if (stream_wait(s, deadline) == -EAGAIN)
			break;
	for (i = 0; i < s->tx_max; i++)
		if (s->tx_slot[i].sb != UINT32_MAX && s->tx_slot[i].addr)
			xs_pool_free(&s->c->dev->pool, &s->tx_slot[i]);
	pthread_mutex_unlock(&s->lock);
	xs_conn_destroy(s->c);
	stream_free(s);
}

void xs_stream_abandon(struct xs_stream *s)
{
	if (!s->c)
		return;
	free(s->c->rx);
	free(s->c);
	stream_free(s);
}
