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
 * never deadlock.
 *
 * Rendezvous: what is left of a send() beyond XSOCK_EAGER_LIMIT bytes is
 * staged in regions of up to XSOCK_RNDV_CHUNK bytes of the connection's
 * own staging area, each region registered on its own and exposed
 * read-only to this connection alone by a type-2 memory window over
 * exactly the bytes staged, and announced by a RNDV message (one
 * credit). The receiver pulls the region
 * with RDMA READ into a pool buffer of its own, answers RNDV_DONE, and the
 * sender invalidates the window before the buffer returns to the pool, so
 * a peer never reads memory that is no longer its connection's. The
 * receiver keeps at most XS_RNDV_RX_HELD bytes READ ahead of the
 * application.
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
 * Context: any thread; every call takes the stream's lock, and is made with
 * the reentrancy depth raised by the core/ entry point above it
 * (XS_INSIDE(), core/xs_core.h).
 */
#ifndef XS_CORE_STREAM_H
#define XS_CORE_STREAM_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"
#include "xs_core.h"
#include "xs_shm.h"

/* Where a received message stands (struct xs_stream_rx.state). */
enum xs_stream_rx_state {
	XS_RX_DATA,	    /* eager bytes, readable in the receive ring */
	XS_RX_RNDV_WAIT,    /* a region announced, READ not posted yet */
	XS_RX_RNDV_READING, /* READ posted into buf */
	XS_RX_RNDV_READY,   /* READ completed: readable in buf */
	XS_RX_HEAP,	    /* eager bytes moved to buf.addr, malloc()ed
			     * (core/stream_rx.c) */
};

/* One received DATA or RNDV message waiting to be read, in stream order. */
struct xs_stream_rx {
	uint32_t idx;	   /* receive ring index holding the message */
	uint32_t off;	   /* next byte to read */
	uint32_t end;	   /* one past the last byte (rendezvous: of the
			    * piece READ into buf) */
	uint32_t roff;	   /* rendezvous: region bytes consumed before */
	uint32_t rlen;	   /* rendezvous: the region's length */
	uint8_t state;	   /* enum xs_stream_rx_state */
	struct xs_buf buf; /* rendezvous: the pool buffer READ into */
	uint64_t raddr;	   /* rendezvous: the peer's region */
	uint32_t rkey, rid;
};

/* One send-queue entry in flight (struct xs_stream.tx). */
struct xs_stream_slot {
	uint8_t kind;	   /* STREAM_SLOT_*, 0 when free (stream.c) */
	bool unsignaled;   /* SEND posted without IBV_SEND_SIGNALED */
	uint32_t seq;	   /* post order (xs_stream.tx_seq) */
	uint32_t arg;	   /* READ: receive FIFO position; INV: region */
	uint32_t len;	   /* SEND: payload bytes */
	struct xs_buf buf; /* pool buffer released on completion, or none */
};

/* A send region exposed to the peer for RDMA READ (rendezvous). */
struct xs_stream_region {
	uint8_t state;	   /* STREAM_REGION_*, 0 when free (stream.c) */
	uint32_t rkey;	   /* the window's current rkey */
	uint32_t id;	   /* the id the peer echoes in RNDV_DONE */
	uint32_t len;	   /* bytes exposed */
	struct xs_buf buf; /* its slice of the staging area */
};

/*
 * What xs_stream_send() and xs_stream_recv() answer for a direction that
 * moved to the kernel TCP connection: the caller goes on with the
 * socket's kernel fd (core/move.c).
 */
#define XS_STREAM_MOVED (-EXDEV)

/* xs_stream_recv() flags */
#define XS_RECV_PEEK	1 /* MSG_PEEK: copy without consuming */
#define XS_RECV_WAITALL 2 /* MSG_WAITALL: wait for every byte asked */
#define XS_RECV_DISCARD 4 /* MSG_TRUNC: drop the bytes, copy nothing */

/* xs_stream_events() bits (the poll(2) ones, as the kernel's tcp_poll) */
#define XS_EV_IN    0x001
#define XS_EV_OUT   0x004
#define XS_EV_ERR   0x008
#define XS_EV_HUP   0x010
#define XS_EV_RDHUP 0x2000
/* beside them: both directions moved to the kernel TCP connection and
 * nothing of the RDMA stream is left to read; the kernel fd tells the rest */
#define XS_EV_MOVED 0x20000

/*
 * Silence after which a peer that owes this side something is probed
 * (xs_stream_probe), µs. TCP's persist timer starts at the RTO (200 ms and
 * up); 2 s keeps probes rare on a healthy but slow peer, and adds little
 * to the RC retry budget a dead peer is found by.
 */
#define XS_PERSIST_US 2000000u

/*
 * A probe neither answered nor failed this long after it went (µs) finds a
 * transport that never will: two retry budgets (XS_ACK_TIMEOUT,
 * XS_RETRY_COUNT: about 7.5 s each).
 */
#define XS_PROBE_DEADLINE_US 15000000u

/* Bytes a receiver READs ahead of the application, per connection. */
#define XS_RNDV_RX_HELD (4u << 20)

/* Bytes of eager messages a receiver keeps unread in memory of its own
 * beyond its receive buffers, per connection (core/stream_rx.c): as many
 * as the rendezvous path READs ahead. */
#define XS_RX_HEAP_MAX XS_RNDV_RX_HELD

/* The same, all connections of a process together: 64 connections at
 * their most. The kernel bounds its TCP buffers system-wide (tcp_mem);
 * past this, a reader that falls behind stops its peer after a window. */
#define XS_RX_HEAP_PROCESS_MAX (64u * XS_RX_HEAP_MAX)

struct xs_stream {
	struct xs_conn *c;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the polling thread's news, for the others */
	bool polling;	     /* a thread spins or sleeps on the channels */
	struct xs_spin spin; /* the blocking calls' spin window */
	bool pool_starved;   /* a pool buffer was refused: retry soon */
	bool cq_armed;	   /* a CQ event was asked for and not read yet: arming
			* again is a no-op, and only then can the completion
			* channel hold an event (saves a system call each) */
	bool cq_armed_sol; /* that arm asked for solicited completions
			    * only: the peer's SENDs (and errors of our
			    * receives), not our own sends' completions */
	bool cq_quiet;	   /* armed, then polled empty: every completion since
			* that matters raised a channel event, so a look that
			* saw the channel fd quiet need not poll the CQ */
	/* send side */
	uint32_t tx_credits;	   /* peer buffers we may fill (snd_wnd) */
	uint32_t tx_granted;	   /* the peer's window: what tx_credits is
				    * when every message of ours was read
				    * (XS_WIRE_START_CREDITS, grown) */
	uint32_t tx_inflight;	   /* WRs posted, not completed */
	uint32_t tx_unsig;	   /* of those, unsignaled sends: done when
				    * a later signaled WR completes */
	uint32_t tx_unsig_run;	   /* unsignaled sends since the last
				    * signaled WR was posted */
	uint64_t tx_unsig_bytes;   /* payload bytes of the unsignaled ones */
	uint32_t tx_seq;	   /* WRs posted, for slot.seq */
	uint32_t tx_awaited;	   /* of those, the ones whose completion
				    * frees more than a slot: READ, INV and
				    * probe WRs, sends from a pool buffer */
	uint32_t tx_max;	   /* WRs the send queue holds (slots) */
	struct xs_stream_slot *tx; /* tx_max slots */
	uint64_t tx_queued;	   /* payload bytes of in-flight sends */
	struct xs_stream_region rndv[XS_RNDV_REGIONS];
	uint8_t *stage; /* staging area of the regions, or NULL */
	/* the regions' registrations, one each, this connection's */
	struct ibv_mr *stage_mr[XS_RNDV_REGIONS];
	uint32_t stage_chunk;	/* bytes per region */
	bool rndv_off;		/* no staging area: everything eager */
	uint32_t rndv_seq;	/* for region ids */
	uint64_t rndv_tx_bytes; /* bytes in exposed regions */
	uint32_t rndv_released; /* regions released, not invalidated */
	/* receive side */
	struct xs_stream_rx *rxq; /* FIFO of received DATA and RNDV */
	uint32_t rxq_head, rxq_len;
	uint32_t rndv_rx_wait; /* RNDV entries not READ yet */
	uint32_t *done_q;      /* region ids READ, RNDV_DONE not posted: */
	uint32_t done_q_head, done_q_len; /* a FIFO of nr_rx entries */
	uint64_t rndv_rx_held;	   /* bytes READ or being READ, not consumed */
	uint32_t rx_unreturned;	   /* buffers re-posted, not yet announced */
	uint32_t rx_granted;	   /* our window: data buffers posted for the
				   * peer (c->rx_live less the control
				   * buffers) */
	bool rx_grow_unsent;	   /* rx_unreturned holds a grow's credits:
				   * the next message carries XS_WIRE_F_GROW */
	bool rx_grow_refused;	   /* the pool refused the last grow: pack
				   * as a full window would */
	uint64_t rx_grow_retry_us; /* then, no new try before (xs_now_us) */
	uint32_t rx_data_held;	   /* DATA and RNDV buffers not yet read */
	bool rx_spare_busy;	   /* c->rx_spare holds a piece of a region */
	size_t rx_heap_size;	   /* bytes allocated to XS_RX_HEAP entries */
	uint32_t rx_heap_entries;  /* XS_RX_HEAP entries queued */
	bool peer_fin;		   /* FIN received: EOF after the queue */
	bool peer_gone;		   /* DISCONNECTED: the peer's QP is gone */
	int rcvlowat; /* SO_RCVLOWAT: bytes a read waits for and poll wants */
	bool tx_after_fin; /* bytes went after the peer's FIN: once its QP is
			    * gone they drew its RST (stream_peer_lost()) */
	bool kernel_ended; /* the kernel TCP connection below got the peer's
			    * FIN or RST: its QP is asked whether it lives */
	bool wr_shut;	   /* shutdown(SHUT_WR) or close: FIN after the data */
	bool fin_sent;	   /* the FIN is posted */
	bool rst_sent;	   /* xs_stream_abort() posted a RESET (cf. RST) */
	bool rd_shut;	   /* shutdown(SHUT_RD): reads see EOF */
	/* The move to the kernel TCP connection (core/move.c): each side
	 * sends MOVE after its last byte over RDMA, the second in answer to
	 * the first; each direction goes on over TCP after its MOVE. */
	bool move_want;	      /* our MOVE is due (posted when a slot is free) */
	bool move_sent;	      /* posted: our sends go to the kernel from here */
	atomic_bool moved_tx; /* move_sent, read without the lock */
	bool peer_moved;      /* the peer's MOVE came: after the queue, reads go
			  * to the kernel */
	bool move_pull; /* xs_stream_move_out(): READ every region announced,
			  * whatever XS_RNDV_RX_HELD */
	/* News that no completion announces - a shutdown() by another
	 * thread, the peer's DISCONNECTED that the process's CM thread
	 * reads (core/cm.c) - wakes every waiter (cf. sk_state_change(),
	 * stream_wake_waiters()): the thread asleep in stream_sleep()
	 * through its own eventfd, which it leaves here while it sleeps
	 * (-1 otherwise); emulated poll and epoll waits through a note of
	 * the socket and their threads' own wake-ups (core/wake.c); and a
	 * wait that only the kernel wakes - an epoll set inside another
	 * wait - through the kick, an eventfd of the stream's in that
	 * set's inner set (xs_stream_wait_fds()): made when such a set
	 * first asks, -1 before, -2 when none could be made */
	atomic_int sleeper_fd;
	atomic_int kick_fd;
	int error;	    /* sticky negative errno (reset) */
	bool error_pending; /* not reported to a call yet (sk_err) */
	atomic_ulong gen;   /* bumped by every completion and state change:
			   * the edges of EPOLLET */
	/* the socket this stream serves, named in its notes (NULL before
	 * it has one; a key, never dereferenced here) */
	const void *owner;
	/* counters, as xsock-stat shows them: the socket's published slot
	 * (core/xs_shm.h) while it has one, else pub_own; written under lock */
	struct xs_shm_slot *pub;
	struct xs_shm_slot pub_own;
	uint64_t rx_arrived;   /* payload bytes received, read or not */
	uint64_t take_in_read; /* bytes the reader had read at the probe
				* thread's last look (stream_take_in()) */
	bool take_in_more;     /* that look's answer: look again soon */
	/* probes of a silent peer (xs_stream_probe); times in µs */
	uint64_t wc_seen;    /* completions handled */
	uint64_t probe_seen; /* msgs_received + wc_seen at the last look */
	uint64_t probe_quiet_since; /* when that last changed, 0 not yet */
	uint64_t probe_posted;	    /* when the probe in flight went, or 0 */
};

/**
 * xs_stream_init() - start a stream on an established connection
 * @s: stream
 * @c: connection (ownership moves to the stream, also on failure)
 * Return: 0, or -ENOMEM.
 */
int xs_stream_init(struct xs_stream *s, struct xs_conn *c);

/**
 * xs_stream_publish() - keep @s's counters in @slot from now on (the
 *                       counters so far move there)
 * @s:    stream
 * @slot: the socket's slot (core/xs_shm.h)
 */
void xs_stream_publish(struct xs_stream *s, struct xs_shm_slot *slot);

/**
 * xs_stream_unpublish() - stop writing the socket's slot (its last fd is
 *                         closed; the stream may linger): counters go on in
 *                         a copy of the stream's own
 * @s: stream
 */
void xs_stream_unpublish(struct xs_stream *s);

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
 *         -EPIPE after shutdown, -ECONNRESET once after a reset (then
 *         -EPIPE).
 */
ssize_t xs_stream_send(struct xs_stream *s, const struct iovec *iov, int iovcnt,
		       int timeout_ms);

/**
 * xs_stream_recv() - receive bytes, as recvmsg(2) on a TCP socket
 * @s:          stream
 * @iov:        room for the bytes
 * @iovcnt:     entries in @iov
 * @flags:      XS_RECV_PEEK, XS_RECV_WAITALL, XS_RECV_DISCARD
 * @timeout_ms: 0 never waits, -1 forever, else at most that long
 * Return: bytes copied, 0 at EOF (peer's FIN after all data, or after
 *         shutdown(SHUT_RD)) or for zero room, or -EAGAIN, -EINTR,
 *         -ECONNRESET once after a reset (then 0).
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
 * Return: 0, -ECONNRESET, or XS_STREAM_MOVED: our MOVE went before it,
 *         so the kernel socket's shutdown(2) ends our side.
 */
int xs_stream_shutdown(struct xs_stream *s, int how);

/**
 * xs_stream_inq() - unread bytes (FIONREAD / SIOCINQ)
 * xs_stream_outq() - bytes posted and not yet completed (SIOCOUTQ)
 * @s: stream
 */
size_t xs_stream_inq(struct xs_stream *s);
size_t xs_stream_outq(struct xs_stream *s);

/* xs_stream_events() @how bits */
/* drain one of the fds xs_stream_wait_fds() gives (@k its index: the
 * completion channel, a CM channel of its own, the kick): a read each */
#define XS_STREAM_DRAIN_FD(k) (0x10u << (k))
#define XS_STREAM_DRAIN	      0x70u /* all of them */
/* the wait took the kick (xs_stream_wait_fds()): its XS_STREAM_DRAIN_FD
 * bit drains it; a wait that did not leaves it to the ones that did */
#define XS_STREAM_KICK 0x80u
#define XS_STREAM_ARM  0x2 /* arm the CQ before looking */
#define XS_STREAM_SPIN 0x4 /* poll the CQ even when quiet (a spin's look) */
/* with XS_STREAM_DRAIN_FD(0): the completion event is read without an
 * arm, or left to another thread's wait (xs_wake_others()) */
#define XS_STREAM_NOARM 0x8
/* xs_stream_events() result bit beside the XS_EV_* ones */
#define XS_EV_STARVED 0x10000 /* with XS_STREAM_ARM: see xs_stream_arm() */

/**
 * xs_stream_events() - readiness as poll(2) would report it, after
 *                      reaping completions without waiting
 * @s:   stream
 * @how: XS_STREAM_DRAIN: also drain the channel fds; XS_STREAM_DRAIN_FD(k)
 *       only the one at index k of xs_stream_wait_fds() (the caller saw
 *       it readable). A caller that knows they are not readable (its
 *       epoll set of them said so a moment ago) leaves them out: one
 *       left readable only wakes its next sleep, and a CQ that is armed
 *       and was polled empty since is not polled again (any completion
 *       since raised a channel event).
 *       XS_STREAM_ARM: arm the CQ first, as xs_stream_arm(), so that news
 *       after this look makes a channel fd readable: the look before a
 *       sleep, in one lock. XS_STREAM_SPIN: poll the CQ even when it is
 *       quiet: a spinning waiter's look, no system call.
 *       XS_STREAM_NOARM: a busy waiter's look, which arms before it
 *       sleeps: an event it drains costs no arm now, and the completion
 *       channel stays quiet until it arms (the verbs idiom arms again at
 *       once); while another thread waits, the event is left to it.
 *       XS_STREAM_KICK: the caller's fds include the kick.
 * Return: XS_EV_* bits; XS_EV_STARVED with XS_STREAM_ARM when the stream
 *         waits for pool memory (sleep at most 1 ms).
 */
unsigned int xs_stream_events(struct xs_stream *s, unsigned int how);

/**
 * xs_stream_arm() - ask for a completion event on the next completion
 * @s: stream
 *
 * For waits outside the stream (poll, epoll): arm, check
 * xs_stream_events() again, and only then sleep on xs_stream_wait_fds().
 * Arming a CQ that is still armed costs nothing (no system call).
 * Return: 0; 1 when the stream waits for pool memory, which another
 * connection's free wakes nobody for: sleep at most 1 ms; or -EIO.
 */
int xs_stream_arm(struct xs_stream *s);

/* Fds a wait on one stream sleeps on: see xs_stream_wait_fds(). */
#define XS_STREAM_WAIT_FDS 3

/**
 * xs_stream_wait_fds() - the fds that become readable when the stream
 *                        may have news: the completion channel, the
 *                        connection's own CM channel where it kept one
 *                        (core/cm.c), and, when @kick, the eventfd that
 *                        a shutdown() and the peer's end write (struct
 *                        xs_stream.kick_fd)
 * @s:    stream
 * @fds:  receives XS_STREAM_WAIT_FDS fds at most, in that order
 *        (non-blocking; drained by xs_stream_events())
 * @kick: for a wait that nothing but these fds wakes (the inner set of an
 *        epoll set inside another wait); an emulated wait of a thread
 *        registered with xs_wake_enter() is woken through its own
 *        eventfd and a note of the socket instead, and needs no fd more
 *
 * Context: takes s->lock when @kick; makes the eventfd then, at the first
 * call that asks.
 * Return: how many were written: 1, one more with a CM channel of its
 *         own, one more with the kick (none when no eventfd could be
 *         made: logged).
 */
int xs_stream_wait_fds(struct xs_stream *s, int fds[XS_STREAM_WAIT_FDS],
		       bool kick);

/**
 * xs_stream_cm_wake() - wake every waiter on @s after the process's CM
 *                       thread marked the peer's end (xs_conn.cm_down):
 *                       see struct xs_stream.sleeper_fd
 * Context: the CM thread, between reading the connection's event and its
 * ack (the stream lives until then); lock-free, a write(2) per sleeper.
 */
void xs_stream_cm_wake(struct xs_stream *s);

/**
 * xs_stream_news() - a process-wide counter that moves whenever any
 *                    stream's state may have changed: completions or CM
 *                    events reaped, a reset, a call on a stream (send,
 *                    recv, shutdown, close...). A wait whose last look found
 *                    nothing ready, with every CQ armed, need not look
 *                    again while it stays put: news since would have made a
 *                    channel fd readable.
 */
unsigned long xs_stream_news(void);

/* xs_stream_news_bump() - move that counter (a listener's accept too) */
void xs_stream_news_bump(void);

/**
 * xs_stream_note() - note that the stream of @owner (struct
 *                    xs_stream.owner) may have news: its readiness may
 *                    have changed, or its CQ's arm may no longer announce
 *                    what a waiter needs. Every such change is noted, after
 *                    it is made, so a waiter that found a stream with
 *                    nothing to report, armed, and reads no note of it
 *                    since, with its channel fds quiet, knows it still has
 *                    nothing (an O(ready) epoll: core/epoll_wait.c)
 * @owner: the stream's owner; NULL: unknown (readers look at everything)
 * Context: any thread, any lock; lock-free.
 */
void xs_stream_note(const void *owner);

/**
 * xs_stream_notes_end() - the number the next note will get: where a new
 *                         reader of xs_stream_notes() starts
 */
unsigned long xs_stream_notes_end(void);

/**
 * xs_stream_notes() - the owners named by the notes from number @pos on
 * @pos:    the reader's place; moved past every note there is
 * @owners: receives them, in order, repeats included
 * @max:    room in @owners
 * Return: how many were written; -1 when some are lost (more than @max or
 *         than the ring's 256 came since @pos, one is still being
 *         written, or one names no owner): the reader must then look at
 *         every stream.
 * Context: any thread, any lock; lock-free, no system call.
 */
int xs_stream_notes(unsigned long *pos, const void *owners[], int max);

/**
 * xs_stream_unread() - whether the peer's data waits unread (DATA or a
 *                      region announced): close(2) then resets, as
 *                      tcp_close() sends RST for data_was_unread
 * @s: stream; reaps completions first
 */
bool xs_stream_unread(struct xs_stream *s);

/**
 * xs_stream_failed() - whether the stream was reset or failed (a WR that
 *                      never completed, the peer's RESET)
 * @s: stream. Context: takes s->lock.
 */
bool xs_stream_failed(struct xs_stream *s);

/**
 * xs_stream_set_rcvlowat() - SO_RCVLOWAT of the socket, as the kernel
 *                            stored it (1 and up)
 * @s: stream. Context: takes s->lock.
 *
 * Poll shows the stream readable from @bytes on (or at its end, or a
 * reset), capped at half its receive ring as the kernel caps it at half
 * the receive buffer; a blocking read waits for up to @bytes of what it
 * asked for, as tcp_recvmsg()'s target. A non-blocking read takes what
 * is there.
 */
void xs_stream_set_rcvlowat(struct xs_stream *s, int bytes);

/* xs_stream_moved() bits */
#define XS_MOVED_TX   0x1 /* our MOVE is posted: sends go to the kernel */
#define XS_MOVED_RX   0x2 /* the peer's MOVE came and its RDMA bytes are read */
#define XS_MOVED_PEER 0x4 /* the peer's MOVE came: its sends are the kernel's */

/**
 * xs_stream_moved() - how far the stream moved to its kernel TCP
 *                     connection
 * @s: stream; reaps nothing
 * Return: XS_MOVED_* bits.
 */
unsigned int xs_stream_moved(struct xs_stream *s);

/**
 * xs_stream_move_out() - move the stream to its kernel TCP connection and
 *                        take what the peer sent over RDMA and nobody read
 * @s:          stream
 * @timeout_ms: -1 forever, else the most to wait for the peer's MOVE
 * @bytes:      receives a malloc'ed copy of the unread bytes (NULL when
 *              none); the caller frees it
 * @len:        receives their count
 * @ended:      receives XS_MOVE_* bits: how the directions already ended
 *
 * Posts MOVE after our last RDMA byte, then waits for the peer's MOVE
 * (which it sends after its last) or FIN, READing every region it announced
 * before, and consumes everything queued: from then on both directions
 * are the kernel's, and the bytes returned come before the first byte
 * the kernel socket delivers.
 * Context: blocks; takes s->lock.
 * Return: 0; -ECONNRESET when the stream is reset or its peer gone without
 *         FIN (nothing moved); -EAGAIN past the timeout, -ENOMEM
 *         (our MOVE may have gone: the stream cannot be used over RDMA
 *         again).
 */
int xs_stream_move_out(struct xs_stream *s, int timeout_ms, uint8_t **bytes,
		       size_t *len, unsigned int *ended);

/* xs_stream_move_out() *@ended bits: XS_MOVE_EOF, reads end after the
 * bytes (the peer's FIN came over RDMA, or our SHUT_RD); XS_MOVE_SHUT_WR,
 * our FIN went over RDMA: no more sends */
#define XS_MOVE_EOF	0x1
#define XS_MOVE_SHUT_WR 0x2

/**
 * xs_stream_take_error() - getsockopt(SO_ERROR): the reset not yet
 *                          reported by a call, which it clears
 * @s: stream
 * Return: -ECONNRESET once after a reset (-EPIPE when the peer's FIN came
 *         first, as tcp_reset() in CLOSE_WAIT), else 0.
 */
int xs_stream_take_error(struct xs_stream *s);

/**
 * xs_stream_keep_error() - report the reset a call just took once more,
 *                          to the next call (recvmmsg, whose count went
 *                          out instead: net/socket.c keeps it in sk_err)
 * @s:   stream
 * @err: the negative errno the call met; anything but the stream's reset
 *       is ignored
 */
void xs_stream_keep_error(struct xs_stream *s, int err);

/**
 * xs_stream_drained() - whether a stream after SHUT_WR has nothing left
 *                       to deliver: FIN posted and every send completed
 *                       (or the connection is reset or the peer gone);
 *                       after xs_stream_abort(): the RESET completed
 * @s: stream; reaps completions without waiting
 */
bool xs_stream_drained(struct xs_stream *s);

/**
 * xs_stream_linger() - wait until xs_stream_drained() holds: close(2)
 *                      with SO_LINGER {1, N} (cf. sk_stream_wait_close)
 * @s:          stream, after SHUT_WR
 * @timeout_ms: -1 forever, else at most that long
 * Return: 0 once drained, -EAGAIN past the timeout, -EINTR for a signal
 *         (the wait ends, as the kernel's does).
 */
int xs_stream_linger(struct xs_stream *s, int timeout_ms);

/**
 * xs_stream_abort() - close(2) with SO_LINGER {1, 0}: reset the
 *                     connection instead of closing it (cf. TCP's RST)
 * @s: stream
 *
 * Posts one RESET control message (no credit needed) after whatever the
 * send queue holds, and from then on sends nothing else: no FIN, credit
 * or rendezvous work; regions the peer has not pulled yet are lost, as
 * the bytes of an RST'd TCP socket are. Best effort: with no send slot
 * free, or a connection already reset or gone, nothing is posted, and
 * the disconnect without FIN that xs_stream_close() makes tells the peer
 * the same (it resets on that too). xs_stream_drained() then holds once
 * the RESET has left; release the stream with xs_stream_close().
 */
void xs_stream_abort(struct xs_stream *s);

/**
 * xs_stream_probe() - TCP's persist and keepalive timers, and a watchdog
 *                     over the transport: probe a peer that has been
 *                     silent too long
 * @s:           stream
 * @now:         xs_now_us()
 * @keepidle_us: SO_KEEPALIVE's TCP_KEEPIDLE in µs, 0 with keepalive off
 *
 * Silent means no DATA or RNDV received and no completion since the last
 * look. The probe is a zero-length RDMA WRITE (xs_conn_post_probe): the
 * peer's HCA answers it without its process, as a TCP peer's kernel
 * answers a probe. It goes after XS_PERSIST_US of silence when
 *  - the peer owes this side something: regions exposed to it and not
 *    pulled yet, or a send window it has not reopened (TCP's persist timer
 *    probes a zero window likewise);
 *  - WRs are in flight and none completes: the probe's ACK, past their
 *    PSNs, makes the requester retry what it lacks (IB's implied NAK of a
 *    missing READ response). rxe was seen to leave READs whose responses
 *    a 2 s outage of the link lost neither retried nor failed, for good;
 * and, with keepalive on, after @keepidle_us of any silence; and at the
 * first look after the kernel TCP connection below ended
 * (xs_stream_kernel_ended()) while no FIN came over RDMA.
 * Answered, the silence starts again. Unanswered, the QP's retry budget
 * runs out and the stream fails with ETIMEDOUT, as a TCP socket whose
 * probes went unanswered: the RC transport's retransmission plays the part
 * of TCP_KEEPINTVL x TCP_KEEPCNT (and of tcp_retries2). A probe neither
 * answered nor failed after XS_PROBE_DEADLINE_US means a transport that
 * will never complete it: the stream fails with ETIMEDOUT too, as it does
 * when every send slot holds such a WR and no probe fits.
 * A stream quiet since the last look also returns the buffers its reader
 * emptied (one CREDIT, cf. TCP's delayed ACK), so that the peer knows
 * what was read, which decides its answer should this side end without a
 * word (EOF or reset: stream_peer_ended()).
 * Context: the probe thread (core/sock.c), about once a second.
 * Return: as xs_stream_take_in(), for what this look took in.
 */
bool xs_stream_probe(struct xs_stream *s, uint64_t now, uint64_t keepidle_us);

/**
 * xs_stream_take_in() - take in what arrived for a reader that makes no
 *                       call on @s: reap its CQ, keep what came (packed
 *                       into the receive buffers and heap entries, up to
 *                       XS_RX_HEAP_MAX), and return the buffers emptied,
 *                       so that its peer goes on sending, as a kernel
 *                       takes segments in for a process that sleeps
 * @s: stream
 *
 * Context: the probe thread (core/sock.c), between its looks of
 * xs_stream_probe() while one of them says there is more to take in; a
 * stream whose last look said no is left alone. Takes s->lock.
 * Return: whether messages came, some are still unread, and the reader
 * read nothing since the look before.
 */
bool xs_stream_take_in(struct xs_stream *s);

/**
 * xs_stream_kernel_ended() - the kernel TCP connection under @s got the
 *                            peer's FIN or RST (core/watch.c)
 * @s: stream
 *
 * Before the peer's MOVE or FIN over RDMA, that end means the peer's
 * socket is closed: a program that closed it while its stream still
 * drains (its FIN comes later over RDMA), or a process that ended and
 * whose DREQ was lost (a link outage). The next xs_stream_probe() asks the
 * peer's QP: answered, nothing changes; unanswered (the retry budget),
 * the peer is gone and the stream ends as after a DISCONNECTED without
 * FIN: EOF when nothing was lost, else a reset (stream_peer_ended()).
 * After a MOVE or FIN it means nothing here: the kernel fd tells it.
 * Context: the probe thread; takes s->lock.
 */
void xs_stream_kernel_ended(struct xs_stream *s);

/**
 * xs_stream_close() - FIN if not sent (unless aborted), wait (bounded)
 *                     for the sends to complete, then release the
 *                     connection
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
