/*
 * core/stream_int.h - what the files of the byte stream share: stream.c
 * (state, completions, eager sends and receives), stream_wait.c (arming,
 * kicks and sleeps), stream_rndv.c (READ rendezvous) and stream_end.c
 * (move out, linger, close, the keepalive probe). Each function's
 * comment is at its definition; s->lock is held around every one unless
 * that comment says otherwise.
 */
#ifndef XS_CORE_STREAM_INT_H
#define XS_CORE_STREAM_INT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core_int.h"
#include "proto.h"
#include "stream.h"

#define STREAM_CQ_BATCH	    16
#define STREAM_INLINE_STACK 512 /* bytes: largest inline message built */
#define STREAM_FOREVER	    UINT64_MAX
/*
 * Selective signaling: an inline DATA or CREDIT send goes unsignaled
 * (no work completion, one CQE fewer per message) unless this many
 * unsignaled sends precede it since the last signaled WR, or half the
 * slots are taken: a signaled WR is then always in flight behind them
 * to free their slots before the slots run out. 16: a third of the
 * default ring's 48 slots (XSOCK_RECV_BUFS 32 + 16), so a signaled WR
 * goes out long before half of them are taken, and a CQE for every 16
 * messages of a stream that sends without pause (perftest's bandwidth
 * tests moderate completions the same way, --cq-mod).
 */
#define STREAM_SIGNAL_EVERY 16
/*
 * wr_id layout: receives carry the ring index (below 2^32); send-queue
 * WRs carry STREAM_WR_SEND | slot; the unsignaled window binds
 * STREAM_WR_BIND (seen only when one fails). An error completion's opcode
 * is undefined, so the wr_id alone tells them apart.
 */
#define STREAM_WR_SEND (1ull << 32)
#define STREAM_WR_BIND (1ull << 33)

/* struct xs_stream_slot.kind */
enum {
	STREAM_SLOT_FREE,
	STREAM_SLOT_SEND,  /* a message; buf (if any) freed on completion */
	STREAM_SLOT_READ,  /* an RDMA READ for rxq position arg */
	STREAM_SLOT_INV,   /* invalidation of region arg; buf is its bytes */
	STREAM_SLOT_PROBE, /* a probe of the peer (xs_stream_probe) */
};

/* struct xs_stream_region.state */
enum {
	STREAM_REGION_FREE,
	STREAM_REGION_EXPOSED,	    /* bound and announced */
	STREAM_REGION_RELEASED,	    /* RNDV_DONE received, INV not posted */
	STREAM_REGION_INVALIDATING, /* INV posted */
};

/* Where a copy stands in an iovec array. */
struct iov_cursor {
	const struct iovec *iov;
	int cnt;
	int i;
	size_t off;
};

/* Move @cur past @k bytes of its current entry (at most what is left). */
static inline void stream_iov_step(struct iov_cursor *cur, size_t k)
{
	cur->off += k;
	if (cur->off == cur->iov[cur->i].iov_len) {
		cur->i++;
		cur->off = 0;
	}
}

#define stream_news() xs_stream_news_bump()

/* A note that @s's readiness may have changed, or its CQ's arm may fall
 * short of what a waiter needs (a post while armed for solicited
 * completions only, a pool buffer refused): epoll sets look at its
 * members again (xs_stream_notes()). */
static inline void stream_note(struct xs_stream *s)
{
	xs_stream_note(s->owner);
}

/* @s's state changed: an edge for EPOLLET (struct xs_stream.gen), and a
 * note */
static inline void stream_gen_bump(struct xs_stream *s)
{
	atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
	stream_note(s);
}

/* Whether a waiter may need @slot's completion, not only its slot back
 * (struct xs_stream.tx_awaited): a READ, an invalidation or a probe, or a
 * send from a pool buffer. */
static inline bool stream_slot_awaited(const struct xs_stream_slot *slot)
{
	return slot->kind != STREAM_SLOT_SEND || slot->buf.addr;
}

/* core/stream.c */
void stream_iov_copy(struct iov_cursor *cur, void *buf, size_t n, bool to_iov);
uint64_t stream_deadline(int timeout_ms);
void stream_pub_queues(struct xs_stream *s);
void stream_fail(struct xs_stream *s, int err, const char *why);
void stream_reset(struct xs_stream *s, const char *why);
void stream_progress(struct xs_stream *s);
int stream_poll_cq(struct xs_stream *s);
bool stream_peer_ended(struct xs_stream *s);
void stream_peer_lost(struct xs_stream *s, const char *why);

/* core/stream_tx.c */
int stream_slot(struct xs_stream *s);
void stream_slot_free(struct xs_stream *s, struct xs_stream_slot *slot);
void stream_unsignaled_done(struct xs_stream *s, uint32_t seq);
bool stream_unsignaled_ok(const struct xs_stream *s, enum xs_msg_type type,
			  bool inline_send);
void stream_retire_unsignaled(struct xs_stream *s);
void stream_slot_take(struct xs_stream *s, int i, uint8_t kind, uint32_t arg,
		      uint32_t len, const struct xs_buf *buf);
int stream_alloc(struct xs_stream *s, size_t len, struct xs_buf *b);
uint32_t stream_inline_data_max(const struct xs_stream *s);
int stream_build(struct xs_stream *s, struct xs_msg *m, struct iov_cursor *cur,
		 uint32_t len, uint8_t *stack, struct xs_buf *b, void **dst,
		 const void **tail);
void stream_sent(struct xs_stream *s, enum xs_msg_type type,
		 const struct xs_buf *b);
int stream_post(struct xs_stream *s, struct xs_msg *m, struct iov_cursor *cur,
		uint32_t len);
int stream_post_ctrl(struct xs_stream *s, enum xs_msg_type type);
void stream_return_credits(struct xs_stream *s);

/* core/stream.c */
int stream_repost(struct xs_stream *s, uint32_t idx);
size_t stream_copy(struct xs_stream *s, struct iov_cursor *cur, size_t len,
		   bool peek, bool discard);
size_t stream_readable(struct xs_stream *s);
void stream_drain_channels(struct xs_stream *s, unsigned int which);

/* core/stream_rx.c */

/*
 * Queue DATA message @idx (@len payload bytes, its header read) behind the
 * last entry queued, in that one's receive buffer or in a heap entry, and
 * post its receive buffer again (a credit, returned with the others):
 * when a quarter of the hello's credits (what the window may grow to) is
 * held unread, and for the heap past half of them; a window smaller than
 * that grows instead, sparing the copies. Called with s->lock held. Return: whether it was queued so;
 * false leaves it to take an entry of its own.
 */
bool stream_rx_pack(struct xs_stream *s, uint32_t idx, uint32_t len);

/* Whether the peer has no credit left: every buffer of our window is held
 * unread or re-posted unannounced. With s->lock. */
static inline bool stream_peer_dry(const struct xs_stream *s)
{
	return s->rx_data_held + s->rx_unreturned >= s->rx_granted;
}

/* After a DATA or RNDV message was taken, @last when it says it spent
 * its sender's last credit (XS_WIRE_F_LAST), and from
 * stream_return_credits(): when the peer has no credit left, double our
 * window (XS_WIRE_START_CREDITS), at most to our hello's credits. With
 * s->lock. */
void stream_rx_grow(struct xs_stream *s, bool last);

/*
 * Take in what arrived for a reader that makes no call (the probe
 * thread): reap the CQ, packing what came, and return the buffers
 * emptied. Called with s->lock held. Return: whether messages came, some
 * are still unread and the reader read nothing since the last look: a
 * reader that makes no call, whose peer a look again soon lets go on
 * (xs_stream_take_in()); one that reads takes its arrivals in itself.
 */
bool stream_take_in(struct xs_stream *s);

/* Free heap entry @e's memory (read, or its stream ends). */
void stream_rx_heap_free(struct xs_stream *s, struct xs_stream_rx *e);

/* Free every heap entry's memory, the queue holding @nr_rx entries (the
 * stream ends: the connection may be gone). */
void stream_rx_heap_drop(struct xs_stream *s, uint32_t nr_rx);

/* core/stream_wait.c */
bool stream_cm_check(struct xs_stream *s);
void stream_cm_events(struct xs_stream *s);
int stream_arm(struct xs_stream *s);
void stream_arm_widen(struct xs_stream *s);
int stream_kick_fd(struct xs_stream *s);
void stream_wake(struct xs_stream *s);
void stream_unkick(struct xs_stream *s);
void stream_cq_event(struct xs_stream *s, bool rearm);
int stream_wait(struct xs_stream *s, uint64_t deadline);

/* core/stream_rndv.c */
int stream_stage_init(struct xs_stream *s, uint32_t chunk);
void stream_stage_fini(struct xs_stream *s, bool dereg);
bool stream_region_free(const struct xs_stream *s);
int stream_post_rndv(struct xs_stream *s, struct iov_cursor *cur, uint32_t len);
void stream_rx_free(struct xs_stream *s, struct xs_stream_rx *e);
void stream_rndv_progress(struct xs_stream *s);

#endif /* XS_CORE_STREAM_INT_H */
