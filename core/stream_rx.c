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
 * the application on the rendezvous path (XS_RNDV_RX_HELD).
 * Context: any thread; s->lock guards every field (stream_int.h).
 */
#include <stdlib.h>
#include <string.h>

#include "stream_int.h"

/* Heap entries a stream may queue at once: with the receive buffers held
 * (at most the credits), the queue keeps within its nr_rx entries. */
#define STREAM_RX_HEAP_ENTRIES XS_WIRE_CTRL_BUFS

/* The first allocation of a heap entry, bytes. */
#define STREAM_RX_HEAP_MIN (16u << 10)

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
	if (want <= t->buf.size / 2 + 1 && t->off) {
		memmove(t->buf.addr, (uint8_t *)t->buf.addr + t->off, have);
		t->off = 0;
		t->end = (uint32_t)have;
		return true;
	}
	cap = t->buf.size * 2 > want ? t->buf.size * 2 : want;
	if (s->rx_heap_size - t->buf.size + cap > XS_RX_HEAP_MAX)
		cap = want;
	if (s->rx_heap_size - t->buf.size + cap > XS_RX_HEAP_MAX)
		return false;
	if (t->off) {
		memmove(t->buf.addr, (uint8_t *)t->buf.addr + t->off, have);
		t->off = 0;
		t->end = (uint32_t)have;
	}
	p = realloc(t->buf.addr, cap);
	if (!p)
		return false;
	s->rx_heap_size += cap - t->buf.size;
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
	if (cap < STREAM_RX_HEAP_MIN)
		cap = STREAM_RX_HEAP_MIN;
	if (s->rx_heap_size + cap > XS_RX_HEAP_MAX)
		cap = have + len;
	if (s->rx_heap_size + cap > XS_RX_HEAP_MAX)
		return false;
	p = malloc(cap);
	if (!p)
		return false;
	memcpy(p, (uint8_t *)s->c->rx[t->idx].addr + t->off, have);
	s->rx_data_held--;
	stream_repost(s, t->idx);
	*t = (struct xs_stream_rx){
		.end = (uint32_t)have,
		.state = XS_RX_HEAP,
		.buf = { .addr = p, .size = cap },
	};
	s->rx_heap_size += cap;
	s->rx_heap_entries++;
	return true;
}

bool stream_rx_pack(struct xs_stream *s, uint32_t idx, uint32_t len)
{
	struct xs_conn *c = s->c;
	const uint8_t *src = (const uint8_t *)c->rx[idx].addr + XS_WIRE_MSG_LEN;
	struct xs_stream_rx *t;
	uint8_t *dst;

	if (!s->rxq_len)
		return false;
	t = &s->rxq[(s->rxq_head + s->rxq_len - 1) % c->nr_rx];
	if (t->state != XS_RX_HEAP &&
	    s->rx_data_held < (c->local.credits + 3u) / 4u)
		return false;
	if (t->state == XS_RX_DATA && len <= c->local.eager_size - t->end) {
		dst = (uint8_t *)c->rx[t->idx].addr;
	} else if ((t->state == XS_RX_HEAP && stream_rx_heap_room(s, t, len)) ||
		   (t->state == XS_RX_DATA &&
		    s->rx_data_held >= (c->local.credits + 1u) / 2u &&
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
	free(e->buf.addr);
	s->rx_heap_size -= e->buf.size;
	s->rx_heap_entries--;
	e->buf = (struct xs_buf){ 0 };
}
