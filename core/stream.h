/*
 * core/stream.h - a TCP-like byte stream over one RC connection.
 *
 * Eager path of core/proto.h: the stream is cut into DATA messages of at
 * most eager_size - XS_WIRE_MSG_LEN bytes, each SENT into a receive buffer
 * the peer posted (IBV_SEND_INLINE when it fits the QP's max_inline_data,
 * else from a pool buffer). Credits (cf. TCP snd_wnd/rcv_wnd) bound what is
 * in flight to the peer's posted buffers, so the receive ring never
 * overflows and RNR never happens; one credit is kept back for credit
 * returns and FIN so two full windows can never deadlock. Rendezvous for
 * large messages is not used yet: everything travels eagerly.
 *
 * Return convention: bytes moved if any, else a negative errno (rsocket's
 * rsend, SMC's send_done ?: -ECONNRESET). A peer whose message fails
 * validation resets this stream (-ECONNRESET) and nothing else.
 * Context: one thread at a time per stream (the socket's locks).
 */
#ifndef XS_CORE_STREAM_H
#define XS_CORE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"

/* One received DATA message waiting to be read. */
struct xs_stream_rx {
	uint32_t idx; /* receive ring index */
	uint32_t off; /* next byte to read, from the buffer's start */
	uint32_t end; /* one past the payload's last byte */
};

struct xs_stream {
	struct xs_conn *c;
	/* send side */
	uint32_t tx_credits;	/* peer buffers we may fill (cf. snd_wnd) */
	uint32_t tx_inflight;	/* sends posted, not yet completed */
	uint32_t tx_max;	/* send queue depth */
	struct xs_buf *tx_slot; /* staging buffer per in-flight send, or 0 */
	/* receive side */
	struct xs_stream_rx *rxq; /* FIFO of received DATA, nr_rx entries */
	uint32_t rxq_head, rxq_len;
	uint32_t rx_unreturned; /* buffers re-posted, not yet announced */
	bool peer_fin;		/* FIN received: EOF after the queue */
	bool fin_sent;
	int error; /* sticky negative errno (reset) */
	/* counters */
	uint64_t bytes_sent, bytes_received;
	uint64_t msgs_inline, msgs_pool, credit_msgs, credit_stalls;
};

/**
 * xs_stream_init() - start a stream on an established connection
 * @s: stream
 * @c: connection (ownership moves to the stream)
 * Return: 0, or -ENOMEM.
 */
int xs_stream_init(struct xs_stream *s, struct xs_conn *c);

/**
 * xs_stream_send() - send bytes, as send(2) on a TCP socket
 * @s:        stream
 * @buf:      @len bytes
 * @len:      bytes to send
 * @nonblock: true: return what fits now (or -EAGAIN)
 *
 * Returns once the bytes are in the QP's send queue (staged in the pool
 * or inline), as TCP returns once they are in the socket buffer.
 * Return: bytes queued (> 0), or -EAGAIN, -EPIPE after shutdown,
 *         -ECONNRESET, -ETIMEDOUT.
 */
ssize_t xs_stream_send(struct xs_stream *s, const void *buf, size_t len,
		       bool nonblock);

/**
 * xs_stream_recv() - receive bytes, as recv(2) on a TCP socket
 * @s:        stream
 * @buf:      room for @len bytes
 * @len:      bytes wanted
 * @nonblock: true: never wait
 * @peek:     MSG_PEEK: copy without consuming
 * @waitall:  MSG_WAITALL: wait for @len bytes, EOF or an error
 * Return: bytes copied, 0 at EOF (peer's FIN after all data), or -EAGAIN,
 *         -ECONNRESET, -ETIMEDOUT.
 */
ssize_t xs_stream_recv(struct xs_stream *s, void *buf, size_t len,
		       bool nonblock, bool peek, bool waitall);

/**
 * xs_stream_shutdown_wr() - send FIN after every queued byte
 * @s: stream
 * Return: 0, or -ECONNRESET, -ETIMEDOUT.
 */
int xs_stream_shutdown_wr(struct xs_stream *s);

/**
 * xs_stream_close() - FIN if not sent, wait (bounded) for the sends to
 *                     complete, then release the connection
 * @s:          stream
 * @timeout_ms: how long queued bytes may take to drain
 */
void xs_stream_close(struct xs_stream *s, int timeout_ms);

#endif /* XS_CORE_STREAM_H */
