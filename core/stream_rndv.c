/*
 * core/stream_rndv.c - the READ rendezvous of large sends: the staging
 * regions a sender exposes through memory windows, the RNDV message that
 * announces one, and the receiver's READs, DONE and the sender's
 * invalidation that retire it.
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

/*
 * The connection's staging area: XS_RNDV_REGIONS regions of @chunk bytes,
 * each registered on its own for this connection alone (local write and
 * window binds, no remote access of its own). The windows are bound over
 * these MRs, not the shared pool's, and one MR per region: a device that
 * checks a window's access against its MR's bounds but not its own (rxe
 * does: check_rkey() calls mr_check_range() on the underlying MR) then
 * lets a peer read nothing outside the region it was given, not even the
 * neighbouring regions of its own connection (at worst, past the bytes
 * exposed, stale bytes of this region: earlier bytes of this same stream).
 * Set up, with the connection's windows, at the first send beyond
 * XSOCK_RNDV_THRESHOLD, so connections that never send one register and
 * allocate nothing for it. First the XS_WIRE_CTRL_RNDV_BUFS control
 * buffers the regions' releases land in are posted, once.
 * Return: 0; -EAGAIN when the pool has no buffer for those now (this
 * send goes eagerly, a later one tries again); another negative errno
 * (the stream then sends everything eagerly).
 */
int stream_stage_init(struct xs_stream *s, uint32_t chunk)
{
	size_t size = (size_t)chunk * XS_RNDV_REGIONS;
	unsigned int live = s->c->rx_live;
	uint8_t *base;
	uint32_t i;
	int rc;

	if (!s->c->rx_ctrl_rndv) {
		rc = xs_conn_grow_rx(s->c, XS_WIRE_CTRL_RNDV_BUFS);
		if (rc && s->c->rx_live != live) { /* taken, not posted */
			stream_reset(s, "cannot post a receive buffer");
			return rc;
		}
		if (rc)
			return -EAGAIN;
		s->c->rx_ctrl_rndv = true;
	}
	if (!s->c->nr_mw) {
		rc = xs_conn_windows_alloc(s->c);
		if (rc)
			return rc;
		for (i = 0; i < s->c->nr_mw; i++)
			s->rndv[i].rkey = s->c->mw[i]->rkey;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -ENOMEM;
	for (i = 0; i < XS_RNDV_REGIONS; i++) {
		s->stage_mr[i] = ibv_reg_mr(
			s->c->dev->pd, base + (size_t)i * chunk, chunk,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
		if (!s->stage_mr[i]) {
			rc = errno ? -errno : -ENOMEM;
			goto out_dereg;
		}
	}
	xs_stats_registered((long)size);
	s->stage = base;
	s->stage_chunk = chunk;
	for (i = 0; i < XS_RNDV_REGIONS; i++)
		s->rndv[i].buf = (struct xs_buf){
			.addr = base + (size_t)i * chunk,
			.size = chunk,
			.lkey = s->stage_mr[i]->lkey,
			.sb = UINT32_MAX, /* not the pool's */
			.mr = s->stage_mr[i],
		};
	return 0;

out_dereg:
	while (i--) {
		ibv_dereg_mr(s->stage_mr[i]);
		s->stage_mr[i] = NULL;
	}
	munmap(base, size);
	return rc;
}

void stream_stage_fini(struct xs_stream *s, bool dereg)
{
	uint32_t i, nr = 0;

	if (!s->stage)
		return;
	for (i = 0; i < XS_RNDV_REGIONS; i++) {
		if (dereg && ibv_dereg_mr(s->stage_mr[i]) == 0)
			nr++;
		s->stage_mr[i] = NULL;
	}
	if (nr)
		xs_stats_registered(-(long)((size_t)s->stage_chunk * nr));
	munmap(s->stage, (size_t)s->stage_chunk * XS_RNDV_REGIONS);
	s->stage = NULL;
}

bool stream_region_free(const struct xs_stream *s)
{
	uint32_t i;

	for (i = 0; i < s->c->nr_mw; i++)
		if (s->rndv[i].state == STREAM_REGION_FREE)
			return true;
	return false;
}

/*
 * Rendezvous: stage @len bytes (at most stage_chunk) from @cur in a free
 * region of the staging area, expose it read-only to this connection
 * through the region's memory window and announce it (one credit).
 * -EAGAIN when no credit, region or slot is free.
 */
int stream_post_rndv(struct xs_stream *s, struct iov_cursor *cur, uint32_t len)
{
	uint8_t stack[STREAM_INLINE_STACK];
	struct xs_stream_region *r = NULL;
	struct xs_msg m = { .type = XS_MSG_RNDV };
	const void *tail;
	struct xs_buf b;
	uint32_t i, rkey;
	int slot, total, rc;
	void *dst;

	if (s->tx_credits == 0)
		return -EAGAIN;
	for (i = 0; i < s->c->nr_mw && !r; i++)
		if (s->rndv[i].state == STREAM_REGION_FREE)
			r = &s->rndv[i];
	slot = stream_slot(s);
	if (!r || slot < 0)
		return -EAGAIN;
	i = (uint32_t)(r - s->rndv);
	rkey = ibv_inc_rkey(r->rkey);
	m.rndv_addr = (uintptr_t)r->buf.addr;
	m.rndv_rkey = rkey;
	m.rndv_len = len;
	m.rndv_id = ++s->rndv_seq * XS_RNDV_REGIONS + i;
	total = stream_build(s, &m, NULL, 0, stack, &b, &dst, &tail);
	if (total < 0)
		return total; /* @cur untouched: nothing was taken */
	stream_iov_copy(cur, r->buf.addr, len, false);
	stream_arm_widen(s); /* its window's invalidation follows */
	rc = xs_conn_post_rndv(s->c, i, rkey, &r->buf, len, dst,
			       (uint32_t)total, b.addr ? &b : NULL,
			       STREAM_WR_BIND | i,
			       STREAM_WR_SEND | (uint64_t)slot);
	if (rc) {
		if (b.addr)
			xs_pool_free(&s->c->dev->pool, &b);
		stream_reset(s, "cannot post a rendezvous");
		return -ECONNRESET;
	}
	xs_dbg("stream", "expose region %u id %u rkey %#x->%#x len %u", i,
	       m.rndv_id, r->rkey, rkey, len);
	r->state = STREAM_REGION_EXPOSED;
	r->rkey = rkey;
	r->id = m.rndv_id;
	r->len = len;
	stream_slot_take(s, slot, STREAM_SLOT_SEND, 0, 0, &b);
	s->rndv_tx_bytes += len;
	s->pub->c.rndv_sent++;
	stream_sent(s, XS_MSG_RNDV, &b);
	return 0;
}

/*
 * A buffer to READ (the rest of) a region of @want bytes into: one that
 * holds it all from the pool, else the connection's spare (one ring
 * buffer's size: the region then comes in pieces). The pool may be all
 * receive rings - its superblocks each serve one size class, and a tiny
 * XSOCK_POOL_MB is one superblock - and nothing of that frees itself:
 * without the spare a region could wait forever. Return: 0 or -EAGAIN.
 */
static int stream_rndv_buf(struct xs_stream *s, uint32_t want, struct xs_buf *b)
{
	if (stream_alloc(s, want, b) == 0)
		return 0;
	if (s->rx_spare_busy || !s->c->rx_spare.addr)
		return -EAGAIN;
	*b = s->c->rx_spare;
	s->rx_spare_busy = true;
	return 0;
}

/* Give back the buffer a region's piece was READ into. */
void stream_rx_free(struct xs_stream *s, struct xs_stream_rx *e)
{
	if (e->buf.addr == s->c->rx_spare.addr)
		s->rx_spare_busy = false;
	else
		xs_pool_free(&s->c->dev->pool, &e->buf);
	e->buf = (struct xs_buf){ 0 };
}

/*
 * Rendezvous work that waits for a slot, a pool buffer or the READ budget:
 * invalidate released regions, READ announced ones in stream order, and
 * answer RNDV_DONE for those READ. Called with s->lock held, after
 * completions; never blocks.
 */
void stream_rndv_progress(struct xs_stream *s)
{
	struct xs_conn *c = s->c;
	struct xs_stream_region *r;
	struct xs_stream_rx *e;
	uint32_t i, pos, want;
	int slot;

	if (s->error)
		return;
	for (i = 0; i < c->nr_mw && s->rndv_released; i++) {
		r = &s->rndv[i];
		if (r->state != STREAM_REGION_RELEASED)
			continue;
		slot = stream_slot(s);
		if (slot < 0)
			return;
		xs_dbg("stream", "invalidate region %u rkey %#x", i, r->rkey);
		stream_arm_widen(s);
		if (xs_conn_post_inv(c, r->rkey,
				     STREAM_WR_SEND | (uint64_t)slot)) {
			stream_reset(s, "cannot invalidate a window");
			return;
		}
		/* the slot frees the region's bytes once the window is
		 * invalid */
		stream_slot_take(s, slot, STREAM_SLOT_INV, i, 0, NULL);
		r->state = STREAM_REGION_INVALIDATING;
		s->rndv_released--;
	}
	while (s->done_q_len) {
		struct xs_msg m = { .type = XS_MSG_RNDV_DONE,
				    .rndv_id = s->done_q[s->done_q_head] };

		if (stream_post(s, &m, NULL, 0))
			return;
		s->done_q_head = (s->done_q_head + 1) % c->nr_rx;
		s->done_q_len--;
	}
	for (i = 0; i < s->rxq_len && s->rndv_rx_wait; i++) {
		pos = (s->rxq_head + i) % c->nr_rx;
		e = &s->rxq[pos];
		if (e->state != XS_RX_RNDV_WAIT)
			continue;
		/* READ ahead of the reader within the budget (and always
		 * the first region, whatever its size); every region once
		 * either side moves to TCP: the peer's may go with its
		 * program image (an exec, core/move.c) */
		want = e->rlen - e->roff;
		if (s->rndv_rx_held && !s->move_pull && !s->peer_moved &&
		    s->rndv_rx_held + want > XS_RNDV_RX_HELD)
			return;
		slot = stream_slot(s);
		if (slot < 0 || stream_rndv_buf(s, want, &e->buf))
			return;
		e->off = 0;
		e->end = want < e->buf.size ? want : (uint32_t)e->buf.size;
		stream_arm_widen(s);
		int rc = xs_conn_post_read(c, &e->buf, e->end,
					   e->raddr + e->roff, e->rkey,
					   STREAM_WR_SEND | (uint64_t)slot);

		if (rc) {
			xs_info("stream", "RDMA READ not posted: %s",
				strerror(-rc));
			stream_rx_free(s, e);
			stream_reset(s, "cannot post an RDMA READ");
			return;
		}
		stream_slot_take(s, slot, STREAM_SLOT_READ, pos, 0, NULL);
		e->state = XS_RX_RNDV_READING;
		s->rndv_rx_held += e->end;
		s->rndv_rx_wait--;
	}
}
