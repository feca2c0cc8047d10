/*
 * core/stream.h - a TCP-like byte stream over one RC connection.
 *
 * Eager path of core/proto.h: the stream is cut into DATA messages of at
 * most eager_size - XS_WIRE_MSG_LEN bytes, each SENT into a receive buffer
 * the peer posted (IBV_SEND_INLINE when it fits the QP's max_inline_data,
 * else from a pool buffer). Credits (cf. TCP snd_wnd/rcv_wnd) bound what is
 * in flight to the peer's posted buffers, so the receive ring never
 * overflows and RNR never happens; credit returns and FIN travel on
 * separate control buffers (XS_WIRE_CTRL_BUFS), so two full windows can
 * never deadlock. Rendezvous for
 * large messages is not used yet: everything travels eagerly.
 *
 * Waiting (leader/follower, cf. libevent's and Proactor's): one thread at a
 * time spins on the CQ, arms it and sleeps in poll(2) on the completion and
 * CM channels; the others wait on a condition variable for its news. So a
 * reader and a writer thread can block on one stream at once.
 *
 * Timeouts: 0 never waits, -1 waits forever, n > 0 waits n ms (SO_RCVTIMEO,
 * SO_SNDTIMEO); a wait that ends empty-handed is -EAGAIN, as in the kernel.
 *
 * Return convention: bytes moved if any, else a negative errno (rsocket's
 * rsend, SMC's send_done ?: -ECONNRESET). A peer whose message fails
 * validation resets this stream (-ECONNRESET) and nothing else.
 * Context: any thread; every call takes the stream's lock.
 */
#ifndef XS_CORE_STREAM_H
#define XS_CORE_STREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"

/* One received DATA message waiting to be read. */
struct xs_stream_rx {
	uint32_t idx; /* receive ring index */
	uint32_t off; /* next byte to read, from the buffer's start */
	uint32_t end; /* one past the payload's last byte */
};

/* xs_stream_recv() flags */
#define XS_RECV_PEEK	1 /* MSG_PEEK: copy without consuming */
#define XS_RECV_WAITALL 2 /* MSG_WAITALL: wait for every byte asked */

/* xs_stream_events() bits (the poll(2) ones, as the kernel's tcp_poll) */
#define XS_EV_IN    0x001
#define XS_EV_OUT   0x004
#define XS_EV_ERR   0x008
#define XS_EV_HUP   0x010
#define XS_EV_RDHUP 0x2000

struct xs_stream {
	struct xs_conn *c;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the polling thread's news, for the others */
	bool polling;	     /* a thread spins or sleeps on the channels */
	/* send side */
	uint32_t tx_credits;	/* peer buffers we may fill (cf. snd_wnd) */
	uint32_t tx_inflight;	/* sends posted, not yet completed */
	uint32_t tx_max;	/* send queue depth */
	struct xs_buf *tx_slot; /* staging buffer per in-flight send, or 0 */
	uint64_t tx_queued;	/* payload bytes of in-flight sends */
	uint32_t *tx_len;	/* payload bytes per slot */
	/* receive side */
	struct xs_stream_rx *rxq; /* FIFO of received DATA, nr_rx entries */
	uint32_t rxq_head, rxq_len;
	uint64_t rxq_bytes;	/* unread payload bytes in the FIFO */
	uint32_t rx_unreturned; /* buffers re-posted, not yet announced */
	uint32_t rx_data_held;	/* DATA buffers not yet read */
	bool peer_fin;		/* FIN received: EOF after the queue */
	bool peer_gone;		/* DISCONNECTED: the peer's QP is gone */
	bool wr_shut;	  /* shutdown(SHUT_WR) or close: FIN after the data */
	bool fin_sent;	  /* the FIN is posted */
	bool rd_shut;	  /* shutdown(SHUT_RD): reads see EOF */
	int error;	  /* sticky negative errno (reset) */
	atomic_ulong gen; /* bumped by every completion and state change:
			   * the edges of EPOLLET */
	/* counters */
	uint64_t bytes_sent, bytes_received;
	uint64_t msgs_inline, msgs_pool, credit_msgs, credit_stalls;
};

/**
 * xs_stream_init() - start a stream on an established connection
 * @s: stream
 * @c: connection (ownership moves to the stream, also on failure)
 * Return: 0, or -ENOMEM.
 */
int xs_stream_init(struct xs_stream *s, struct xs_conn *c);

/**
 * xs_stream_send() - send bytes, as sendmsg(2) on a TCP socket
 * @s:          stream
 * @iov:        the bytes; zero-length entries are skipped
 * @iovcnt:     entries in @iov (validated by the caller)
 * @timeout_ms: 0 never waits, -1 forever, else at most that long
 *
 * Returns once the bytes are in the QP's send queue (staged in the pool
 * or inline), as TCP returns once they are in the socket buffer; with a
 * timeout it returns what fit.
 * Return: bytes queued (> 0), 0 for nothing to send, or -EAGAIN, -EINTR,
 *         -EPIPE after shutdown, -ECONNRESET.
 */
ssize_t xs_stream_send(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int timeout_ms);

/**
 * xs_stream_recv() - receive bytes, as recvmsg(2) on a TCP socket
 * @s:          stream
 * @iov:        room for the bytes
 * @iovcnt:     entries in @iov
 * @flags:      XS_RECV_PEEK, XS_RECV_WAITALL
 * @timeout_ms: 0 never waits, -1 forever, else at most that long
 * Return: bytes copied, 0 at EOF (peer's FIN after all data, or after
 *         shutdown(SHUT_RD)) or for zero room, or -EAGAIN, -EINTR,
 *         -ECONNRESET.
 */
ssize_t xs_stream_recv(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int flags, int timeout_ms);

/**
 * xs_stream_shutdown() - shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR
 * @s:   stream
 * @how: as for shutdown(2), already validated
 *
 * SHUT_WR queues FIN after every byte sent; it goes out at once or with
 * the peer's next credit return, never blocking, as the kernel's FIN.
 * Return: 0, or -ECONNRESET.
 */
int xs_stream_shutdown(struct xs_stream *s, int how);

/**
 * xs_stream_inq() - unread bytes (FIONREAD / SIOCINQ)
 * xs_stream_outq() - bytes posted and not yet completed (SIOCOUTQ)
 * @s: stream
 */
size_t xs_stream_inq(struct xs_stream *s);
size_t xs_stream_outq(struct xs_stream *s);

/**
 * xs_stream_events() - readiness as poll(2) would report it, after
 *                      draining the channels and reaping completions
 *                      without waiting
 * @s: stream
 * Return: XS_EV_* bits.
 */
unsigned int xs_stream_events(struct xs_stream *s);

/**
 * xs_stream_arm() - ask for a completion event on the next completion
 * @s: stream
 *
 * For waits outside the stream (poll, epoll): arm, check
 * xs_stream_events() again, and only then sleep on xs_stream_wait_fds().
 * Return: 0, or -EIO.
 */
int xs_stream_arm(struct xs_stream *s);

/**
 * xs_stream_wait_fds() - the fds that become readable when the stream
 *                        may have news: completion and CM channels
 * @s:   stream
 * @fds: receives two fds (non-blocking; drained by xs_stream_events())
 * Return: 2.
 */
int xs_stream_wait_fds(struct xs_stream *s, int fds[2]);

/**
 * xs_stream_drained() - whether a stream after SHUT_WR has nothing left
 *                       to deliver: FIN posted and every send completed
 *                       (or the connection is reset or the peer gone)
 * @s: stream; reaps completions without waiting
 */
bool xs_stream_drained(struct xs_stream *s);

/**
 * xs_stream_close() - FIN if not sent, wait (bounded) for the sends to
 *                     complete, then release the connection
 * @s:          stream
 * @timeout_ms: how long queued bytes may take to drain
 */
void xs_stream_close(struct xs_stream *s, int timeout_ms);

/**
 * xs_stream_abandon() - free @s's memory without touching its verbs or
 *                       rdma_cm objects (a forked child's inherited stream)
 * @s: stream
 */
void xs_stream_abandon(struct xs_stream *s);

#endif /* XS_CORE_STREAM_H */
