/*
 * core/stream_rx.c - unread bytes, not unread messages, fill a stream's
 * receive window. Each DATA message lands in a receive buffer of its own
 * and holds it, one credit, until read; a reader that falls behind a peer
 * of short messages would stop it after XSOCK_RECV_BUFS messages, however
 * few their bytes, where a kernel's receive buffer counts bytes. So a
 * message that arrives while a quarter of the window is held is packed
 * behind the last one queued, in that one's buffer, and its own buffer is
 * posted again; past half the window, what the last buffer cannot take
 * moves to memory of our own (a heap entry, XS_RX_HEAP), up to
 * XS_RX_HEAP_MAX bytes a connection, the bytes a receiver READs ahead of
 * the application on the rendezvous path (XS_RNDV_RX_HELD), and
 * XS_RX_HEAP_PROCESS_MAX bytes a process. Heap entries are anonymous
 * mappings of their own (mmap(), grown by mremap()), not the
 * application's allocator: the probe thread, which takes arrivals in for
 * a reader that makes no call, may make one without leaving that
 * allocator per-thread state (a jemalloc arena, which redis's 10 Hz
 * memory statistics walk). While a heap
 * entry is queued, one credit stays unannounced: a peer that has every
 * credit back knows that every byte it sent was read (stream_peer_ended()).
 * Context: any thread; s->lock guards every field (stream_int.h).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stream_int.h"

/* Heap entries a stream may queue at once: with the receive buffers held
 * (at most the credits), the queue keeps within its nr_rx entries. */
#define STREAM_RX_HEAP_ENTRIES XS_WIRE_CTRL_BUFS

/* The first allocation of a heap entry, bytes. */
#define STREAM_RX_HEAP_MIN (16u << 10)

/* Bytes allocated to heap entries in this process, all streams' (a
 * bound, cf. tcp_mem; a forked child counts its own copies). */
static atomic_size_t stream_rx_heap_total;

/* @len rounded up to whole pages, as a heap entry's mapping is. */
static size_t stream_rx_heap_pages(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + page - 1) / page * page;
}

/* Whether a heap entry of @old bytes (0: a new one) may hold @cap. */
static bool stream_rx_heap_fits(const struct xs_stream *s, size_t old,
				size_t cap)
{
	size_t all = atomic_load_explicit(&stream_rx_heap_total,
					  memory_order_relaxed);

	return s->rx_heap_size - old + cap <= XS_RX_HEAP_MAX &&
	       all - old + cap <= XS_RX_HEAP_PROCESS_MAX;
}

/* Account heap entry bytes going from @old to @cap. */
static void stream_rx_heap_account(struct xs_stream *s, size_t old, size_t cap)
{
	s->rx_heap_size = s->rx_heap_size - old + cap;
	if (cap >= old)
		atomic_fetch_add_explicit(&stream_rx_heap_total, cap - old,
					  memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&stream_rx_heap_total, old - cap,
					  memory_order_relaxed);
}

/* Move heap entry @t's unread bytes to the front of its memory. */
static void stream_rx_heap_compact(struct xs_stream_rx *t)
{
	uint32_t have = t->end - t->off;

	memmove(t->buf.addr, (uint8_t *)t->buf.addr + t->off, have);
	t->off = 0;
	t->end = have;
}

/*
 * Room for @len more bytes behind heap entry @t: its bytes moved to the
 * front, or a larger allocation within XS_RX_HEAP_MAX. Return: whether
 * there is.
 */
static bool stream_rx_heap_room(struct xs_stream *s, struct xs_stream_rx *t,
				size_t len)
{
	size_t have = t->end - t->off, want = have + len, cap;
	uint8_t *p;

	if (t->end + len <= t->buf.size)
		return true;
	if (want <= t->buf.size / 2 + 1 && t->off) { /* no allocation */
		stream_rx_heap_compact(t);
		return true;
	}
	cap = t->buf.size * 2 > want ? t->buf.size * 2 : want;
	if (!stream_rx_heap_fits(s, t->buf.size, cap))
		cap = stream_rx_heap_pages(want);
	if (!stream_rx_heap_fits(s, t->buf.size, cap))
		return false;
	if (t->off)
		stream_rx_heap_compact(t);
	p = mremap(t->buf.addr, t->buf.size, cap, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return false;
	stream_rx_heap_account(s, t->buf.size, cap);
	t->buf.addr = p;
	t->buf.size = cap;
	return true;
}

/*
 * Move DATA entry @t, the last queued, into a heap entry with room for
 * @len more bytes, and post its receive buffer again. Return: whether it
 * moved.
 */
static bool stream_rx_to_heap(struct xs_stream *s, struct xs_stream_rx *t,
			      size_t len)
{
	size_t have = t->end - t->off, cap = 2 * (have + len);
	uint8_t *p;

	if (s->rx_heap_entries >= STREAM_RX_HEAP_ENTRIES)
		return false;
	cap = stream_rx_heap_pages(cap < STREAM_RX_HEAP_MIN ? STREAM_RX_HEAP_MIN
							    : cap);
	if (!stream_rx_heap_fits(s, 0, cap))
		cap = stream_rx_heap_pages(have + len);
	if (!stream_rx_heap_fits(s, 0, cap))
		return false;
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return false;
	memcpy(p, (uint8_t *)s->c->rx[t->idx].addr + t->off, have);
	if (s->rx_heap_entries) {
		s->rx_data_held--;
		stream_repost(s, t->idx);
	} else if (xs_conn_repost_recv(s->c, t->idx)) {
		/* its credit stays held until no heap entry is left */
		stream_reset(s, "cannot repost a receive buffer");
	}
	*t = (struct xs_stream_rx){
		.end = (uint32_t)have,
		.state = XS_RX_HEAP,
		.buf = { .addr = p, .size = cap },
	};
	stream_rx_heap_account(s, 0, cap);
	s->rx_heap_entries++;
	return true;
}

bool stream_rx_pack(struct xs_stream *s, uint32_t idx, uint32_t len)
{
	struct xs_conn *c = s->c;
	const uint8_t *src = (const uint8_t *)c->rx[idx].addr + XS_WIRE_MSG_LEN;
	/* a window that grows packs nothing below the largest one's
	 * thresholds: it grows instead, sparing the copies, unless the pool
	 * refused it the buffers */
	uint32_t w = s->rx_grow_refused ? s->rx_granted : c->local.credits;
	struct xs_stream_rx *t;
	uint8_t *dst;

	if (!s->rxq_len)
		return false;
	t = &s->rxq[(s->rxq_head + s->rxq_len - 1) % c->nr_rx];
	if (t->state != XS_RX_HEAP && s->rx_data_held < (w + 3u) / 4u)
		return false;
	if (t->state == XS_RX_DATA && len <= c->local.eager_size - t->end) {
		dst = (uint8_t *)c->rx[t->idx].addr;
	} else if ((t->state == XS_RX_HEAP && stream_rx_heap_room(s, t, len)) ||
		   (t->state == XS_RX_DATA &&
		    s->rx_data_held >= (w + 1u) / 2u &&
		    stream_rx_to_heap(s, t, len))) {
		dst = t->buf.addr;
	} else {
		return false;
	}
	memcpy(dst + t->end, src, len);
	t->end += len;
	stream_repost(s, idx);
	return true;
}

/*
 * The new buffers' credits go with the next message out, flagged
 * XS_WIRE_F_GROW; stream_return_credits() sends a CREDIT at once, the
 * peer having none left. One grow at a time: the next waits until that
 * message went. A pool that cannot give every new buffer leaves the
 * window as it was and packs as a full one would (stream_rx_pack());
 * stream_return_credits() tries again while the peer has no credit, at
 * most every STREAM_GROW_RETRY_US, and stream_lowat() meanwhile wants no
 * more than what came. A direction that ended grows no more.
 */
/* 10 ms: the probe thread's pace for a reader with arrivals waiting */
#define STREAM_GROW_RETRY_US 10000u

void stream_rx_grow(struct xs_stream *s, bool last)
{
	struct xs_conn *c = s->c;
	uint32_t to = xs_wire_grown(s->rx_granted, c->local.credits);
	unsigned int live = c->rx_live;

	if (s->error || s->peer_fin || s->peer_moved || s->rd_shut ||
	    s->rx_grow_unsent || to == s->rx_granted ||
	    (!last && !stream_peer_dry(s)))
		return;
	if (!last && s->rx_grow_refused && xs_now_us() < s->rx_grow_retry_us)
		return;
	if (xs_conn_grow_rx(c, to - s->rx_granted)) {
		if (c->rx_live != live) { /* taken, not posted */
			stream_reset(s, "cannot post a receive buffer");
			return;
		}
		if (!s->rx_grow_refused)
			xs_info("stream",
				"receive window %u: no pool buffers to grow "
				"to %u; packing",
				s->rx_granted, to);
		s->rx_grow_refused = true;
		s->rx_grow_retry_us = xs_now_us() + STREAM_GROW_RETRY_US;
		return;
	}
	s->rx_grow_refused = false;
	xs_info("stream", "receive window %u -> %u buffers", s->rx_granted, to);
	s->rx_unreturned += to - s->rx_granted;
	s->rx_granted = to;
	s->rx_grow_unsent = true;
}

bool stream_take_in(struct xs_stream *s)
{
	uint64_t before = s->rx_arrived, read = s->pub->c.bytes_received;
	bool idle = read == s->take_in_read; /* nothing read since */

	s->take_in_read = read;
	stream_poll_cq(s);
	stream_return_credits(s);
	s->take_in_more = idle && s->rx_arrived != before && s->rxq_len;
	return s->take_in_more;
}

bool xs_stream_take_in(struct xs_stream *s)
{
	bool more = false;

	pthread_mutex_lock(&s->lock);
	if (s->take_in_more && !s->error && !s->peer_gone && s->c) {
		more = stream_take_in(s);
		if (s->error || s->peer_gone)
			stream_wake(s); /* our own look found it */
	}
	pthread_mutex_unlock(&s->lock);
	return more;
}

void stream_rx_heap_drop(struct xs_stream *s, uint32_t nr_rx)
{
	uint32_t i;

	for (i = 0; i < s->rxq_len && s->rx_heap_entries; i++) {
		struct xs_stream_rx *e = &s->rxq[(s->rxq_head + i) % nr_rx];

		if (e->state == XS_RX_HEAP)
			stream_rx_heap_free(s, e);
	}
}

void stream_rx_heap_free(struct xs_stream *s, struct xs_stream_rx *e)
{
	munmap(e->buf.addr, e->buf.size);
	stream_rx_heap_account(s, e->buf.size, 0);
	e->buf = (struct xs_buf){ 0 };
	if (--s->rx_heap_entries == 0) { /* the credit held back goes */
		s->rx_data_held--;
		s->rx_unreturned++;
	}
}
