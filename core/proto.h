/*
 * core/proto.h - the xsock wire format, version 2.
 *
 * Two things cross the wire: the handshake, carried in rdma_cm private data
 * (REQ from the client, REP from the server), and messages, each one SEND
 * into a receive buffer the peer posted for this connection. Everything is
 * big-endian (network order) on the wire; the structs below are the decoded,
 * host-order forms, and xs_wire_*_encode/decode are the only code that
 * touches wire bytes. Every field from a peer is validated by the decoder:
 * a message that fails validation resets that connection and nothing else.
 *
 * Eager and rendezvous (after Alibaba's XRDMA split, 4 KiB by default):
 *   - DATA carries up to eager_size - XS_WIRE_MSG_LEN payload bytes inline
 *     in the message (posted with IBV_SEND_INLINE when it fits).
 *   - RNDV carries a descriptor {addr, len, rkey, id} of a read-only region
 *     (a memory window bound for this connection only); the receiver pulls
 *     it with RDMA READ and answers RNDV_DONE {id} so the sender can release
 *     it. No region of the pool is ever remote-writable.
 * Credits (cf. TCP rcv_wnd): each side may have at most as many messages in
 * flight as the peer has receive buffers posted. The handshake announces the
 * initial count; every message's credits field returns buffers the sender
 * has re-posted since its last message (a CREDIT message when there is no
 * data to piggyback on), so a receive ring never overflows and RNR never
 * happens in steady state.
 */
#ifndef XS_CORE_PROTO_H
#define XS_CORE_PROTO_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define XS_WIRE_MAGIC	0x58534b31u /* "XSK1" */
#define XS_WIRE_VERSION 3

/*
 * rdma_cm private data: an IB/RoCE CM REQ carries 92 bytes, of which the
 * RDMA_PS_TCP header takes 36, leaving 56 (REP: 196). The hello fits the
 * smaller. A peer may receive more bytes than were sent (the transport pads),
 * so the decoder accepts a longer buffer whose extra bytes are zero.
 */
#define XS_WIRE_PRIVATE_DATA_MAX 56
#define XS_WIRE_HELLO_LEN	 32

/* Bounds a hello must respect (the decoder rejects anything outside). */
#define XS_WIRE_MIN_CREDITS 1
#define XS_WIRE_MAX_CREDITS 4096
#define XS_WIRE_MIN_EAGER   64 /* bytes per receive buffer */
#define XS_WIRE_MAX_EAGER   (1u << 20)
#define XS_WIRE_MAX_RNDV    (1u << 30) /* bytes per rendezvous region */

/*
 * A receive ring starts small and grows with use (cf. TCP's receive
 * window autotuning, tcp_rcv_space_adjust()): each side starts with
 * xs_wire_start_credits() of the buffers its hello announces posted and
 * granted, and doubles them, up to the hello's credits, when a DATA or
 * RNDV message spent its sender's last credit (XS_WIRE_F_LAST, set by the
 * sender, which alone knows: credits returned may still be on their way
 * to it), as the window held less than a round trip's worth. The message
 * that returns
 * the new buffers' credits carries XS_WIRE_F_GROW: "the window doubled
 * (to at most the hello's credits) before these credits". Four hold a
 * request or response of up to 16 KiB at a 4 KiB eager size; an idle
 * connection keeps them and XS_WIRE_CTRL_BUFS - XS_WIRE_CTRL_RNDV_BUFS
 * control buffers.
 */
#define XS_WIRE_START_CREDITS 4

static inline uint16_t xs_wire_start_credits(uint16_t credits)
{
	return credits < XS_WIRE_START_CREDITS ? credits
					       : XS_WIRE_START_CREDITS;
}

/* The window after an XS_WIRE_F_GROW: doubled, at most @credits. */
static inline uint32_t xs_wire_grown(uint32_t window, uint16_t credits)
{
	return 2u * window < credits ? 2u * window : credits;
}

/* hello flags */
#define XS_HELLO_F_RNDV	 0x01u /* sender can serve RDMA READ rendezvous */
#define XS_HELLO_F_PROBE 0x02u /* a probe: "does xsock listen here?" */
/* every SEND of the sender carries the solicited-event bit: its receiver
 * may arm its CQ for solicited completions only (core/stream_wait.c) */
#define XS_HELLO_F_SOLICITED 0x04u
#define XS_HELLO_F_KNOWN                                                       \
	(XS_HELLO_F_RNDV | XS_HELLO_F_PROBE | XS_HELLO_F_SOLICITED)

/* Handshake, decoded. Wire layout (32 bytes, big-endian):
 *   0  u32 magic          XS_WIRE_MAGIC
 *   4  u8  version        XS_WIRE_VERSION
 *   5  u8  flags          XS_HELLO_F_*; unknown bits are rejected
 *   6  u16 credits        most data receive buffers this side grants
 *   8  u32 eager_size     bytes per receive buffer
 *  12  u32 max_rndv       largest rendezvous region accepted, bytes
 *  16  u16 tcp_port       sender's port, as getsockname() shows it
 *  18  u16 reserved       zero
 *  20  u64 conn_id        client: the token of the server's TCP reply
 *                         (core/neg.c); server: its own cookie
 *  28  u32 reserved2      zero
 */
struct xs_hello {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint32_t eager_size;
	uint32_t max_rndv;
	uint16_t tcp_port;
	uint64_t conn_id;
};

enum xs_msg_type {
	XS_MSG_DATA = 1,      /* stream bytes follow the header */
	XS_MSG_CREDIT = 2,    /* credits only (window update) */
	XS_MSG_RNDV = 3,      /* rendezvous descriptor follows */
	XS_MSG_RNDV_DONE = 4, /* rendezvous region may be released */
	XS_MSG_FIN = 5,	      /* no more data from the sender (cf. TCP FIN) */
	XS_MSG_RESET = 6,     /* connection aborted (cf. TCP RST) */
	XS_MSG_MOVE = 7,      /* no more data from the sender over RDMA: what
			       * follows comes on the kernel TCP connection
			       * (core/move.c) */
};

/*
 * Control buffers: besides the `credits` buffers its hello announces for
 * DATA and RNDV, each side posts XS_WIRE_CTRL_BUFS more that control
 * messages (CREDIT, RNDV_DONE, FIN, RESET, MOVE) land in; the receiver
 * re-posts a control buffer as soon as it reaps the message. Control messages spend
 * no credit, so a window update or a region release can always be sent even
 * when both data windows are full (the classic credit deadlock). A side
 * sends CREDIT only after reading half its largest window of the peer's
 * DATA, when the peer has no credit left (after a grow, too), or once
 * after a second of quiet with buffers read and unannounced (the next one
 * waits for more DATA read, which the peer reaps with), and at
 * most one RNDV_DONE per region the peer exposed (at most 4 at once), so
 * control messages never outrun the re-posting: 4 for CREDIT, FIN and
 * RESET, 4 for RNDV_DONE (at worst the HCA's RNR retry, set to infinite,
 * paces them). The 4 for RNDV_DONE are posted with the first region a
 * side exposes, before its RNDV goes: a connection that never sends one
 * keeps 4 (XS_WIRE_CTRL_RNDV_BUFS fewer).
 */
#define XS_WIRE_CTRL_BUFS      8
#define XS_WIRE_CTRL_RNDV_BUFS 4

/* Message header, 8 bytes on the wire:
 *   0  u8  type           enum xs_msg_type
 *   1  u8  flags          XS_WIRE_F_*; unknown bits are rejected
 *   2  u16 credits        data receive buffers returned (or, after a
 *                         grow, granted) to the peer
 *   4  u32 len            bytes after the header
 * DATA: len = payload bytes, 1..eager_size - 8.
 * RNDV: len = 24, followed by u64 addr, u32 rkey, u32 rlen, u32 id, u32 0.
 * RNDV_DONE: len = 8, followed by u32 id, u32 0.
 * CREDIT, FIN, RESET, MOVE: len = 0.
 */
#define XS_WIRE_MSG_LEN	      8
#define XS_WIRE_F_GROW	      0x01u /* see XS_WIRE_START_CREDITS */
#define XS_WIRE_F_LAST	      0x02u /* DATA or RNDV: my last credit */
#define XS_WIRE_RNDV_LEN      24
#define XS_WIRE_RNDV_DONE_LEN 8

struct xs_msg {
	enum xs_msg_type type;
	uint8_t flags; /* XS_WIRE_F_* */
	uint16_t credits;
	uint32_t len; /* DATA: payload bytes */
	/* RNDV */
	uint64_t rndv_addr;
	uint32_t rndv_rkey;
	uint32_t rndv_len;
	/* RNDV and RNDV_DONE */
	uint32_t rndv_id;
};

/**
 * xs_wire_hello_encode() - write a hello into private data
 * @h:   hello to send (its version is ignored: XS_WIRE_VERSION is written)
 * @buf: at least XS_WIRE_HELLO_LEN bytes
 * Return: XS_WIRE_HELLO_LEN.
 */
size_t xs_wire_hello_encode(const struct xs_hello *h, void *buf);

/**
 * xs_wire_hello_decode() - validate and decode a peer's private data
 * @buf: private data as received; NULL is rejected
 * @len: its length in bytes (may exceed XS_WIRE_HELLO_LEN; the excess must
 *       be zero)
 * @h:   decoded hello, written only on success
 *
 * Source: this header's layout; bounds XS_WIRE_MIN/MAX_*.
 * Return: 0; -ENOPROTOOPT when it is no xsock hello (wrong magic or too
 *         short: the peer is a plain rdma_cm client); -EPROTO when it is an
 *         xsock hello with a bad version, flag, bound or reserved field.
 */
int xs_wire_hello_decode(const void *buf, size_t len, struct xs_hello *h);

/*
 * Reject private data of an xsock server that cannot take a connection now
 * (pool, QP or CQ exhausted): u32 magic XS_WIRE_MAGIC, u8 version, u8 1
 * ("busy"), u16 zero. A client falls back to kernel TCP for this one
 * connection and tries RDMA again on the next.
 */
#define XS_WIRE_REJECT_LEN 8

/**
 * xs_wire_reject_busy_encode() - write the "busy" reject into @buf
 * @buf: XS_WIRE_REJECT_LEN bytes
 */
void xs_wire_reject_busy_encode(void *buf);

/**
 * xs_wire_reject_is_busy() - whether reject private data says "busy"
 * @buf: private data of RDMA_CM_EVENT_REJECTED (may be NULL)
 * @len: its length
 * Return: true for an xsock "busy" reject, false for anything else.
 */
bool xs_wire_reject_is_busy(const void *buf, size_t len);

/*
 * Reject private data with which an xsock listener answers a probe
 * (XS_HELLO_F_PROBE): the same 8 bytes with u8 2 ("xsock listens on this
 * port") in place of "busy".
 */
void xs_wire_reject_xsock_encode(void *buf);
bool xs_wire_reject_is_xsock(const void *buf, size_t len);

/*
 * Reject private data of a rendezvous listener whose process awaits no
 * negotiation of the request's token (core/neg.c): u8 3 ("ended") in
 * place of "busy". The server's side of that connection decided kernel
 * TCP, or closed its socket, so nothing there waits for the client's
 * fallback.
 */
void xs_wire_reject_ended_encode(void *buf);
bool xs_wire_reject_is_ended(const void *buf, size_t len);

/*
 * Control messages on a connection's own kernel TCP stream (core/neg.c).
 * Once both ends know the other runs xsock, each direction of the TCP
 * stream starts with control messages before any application byte. Fixed
 * 24 bytes, big-endian:
 *   0  u32 magic   XS_TCP_MAGIC (first byte 0xf5: no text protocol's)
 *   4  u8  version XS_WIRE_VERSION
 *   5  u8  type    XS_TCP_HELLO (client: "I run xsock"), XS_TCP_REPLY
 *                  (server: rdma 1 and the rendezvous port and token, or
 *                  rdma 0: stay on TCP), XS_TCP_FALLBACK (client: the
 *                  RDMA connection did not come about, TCP from here)
 *   6  u8  rdma    REPLY only: 1 or 0
 *   7  u8  zero
 *   8  u16 port    REPLY with rdma 1: the rendezvous listener's port
 *  10  u16 zero
 *  12  u32 zero
 *  16  u64 token   REPLY with rdma 1: what the client's hello must carry
 */
#define XS_TCP_MAGIC   0xf558534bu
#define XS_TCP_MSG_LEN 24

enum xs_tcp_type {
	XS_TCP_HELLO = 1,
	XS_TCP_REPLY = 2,
	XS_TCP_FALLBACK = 3,
};

struct xs_tcp_msg {
	enum xs_tcp_type type;
	uint8_t rdma;
	uint16_t port;
	uint64_t token;
};

/**
 * xs_wire_tcp_encode() - write @m into @buf
 * @m:   message
 * @buf: XS_TCP_MSG_LEN bytes
 * Return: XS_TCP_MSG_LEN.
 */
size_t xs_wire_tcp_encode(const struct xs_tcp_msg *m, void *buf);

/**
 * xs_wire_tcp_decode() - classify the first bytes of a TCP stream
 * @buf:  bytes at the head of the stream (may be NULL when @len is 0)
 * @len:  how many there are
 * @type: the one type expected here (XS_TCP_HELLO, ...), or 0 for any
 * @m:    the message, on 1
 * Return: 1 a valid message of @type is there, @m filled; 0 @buf is a
 *         strict prefix of one (more bytes needed); -1 it is not one:
 *         application bytes.
 */
int xs_wire_tcp_decode(const void *buf, size_t len, int type,
		       struct xs_tcp_msg *m);

/**
 * xs_wire_msg_encode() - write a message header (and descriptor) to @buf
 * @m:   message; for DATA, m->len payload bytes must follow in the buffer
 * @buf: at least XS_WIRE_MSG_LEN + XS_WIRE_RNDV_LEN bytes
 * Return: bytes written (header plus descriptor, payload excluded).
 */
size_t xs_wire_msg_encode(const struct xs_msg *m, void *buf);

/**
 * xs_wire_msg_decode() - validate and decode one received message
 * @buf:        the receive buffer
 * @len:        bytes the completion reported (wc.byte_len)
 * @eager_size: size of the receive buffers this side posted
 * @max_rndv:   largest rendezvous region this side accepts (from its hello)
 * @m:          decoded message, written only on success
 *
 * Checks the type, the zero flags and padding, that len matches the bytes
 * received exactly, that DATA is 1..eager_size - header bytes, that a RNDV
 * region is 1..max_rndv bytes and does not wrap the address space.
 *
 * Return: 0, or -EPROTO for anything malformed.
 */
int xs_wire_msg_decode(const void *buf, size_t len, uint32_t eager_size,
		       uint32_t max_rndv, struct xs_msg *m);

#endif /* XS_CORE_PROTO_H */
