/*
 * core/conn.h - RC connections: rdma_cm setup with the xsock handshake.
 *
 * A connection is one RC QP with its own CQ and completion channel (the
 * channel's fd is what waits sleep on), a ring of receive buffers from the
 * device's registered pool, and the two hellos exchanged in the CM private
 * data (core/proto.h). Setup only: the stream protocol (eager, rendezvous,
 * credits) drives these objects from the transport.
 *
 * Context: every call is made with the reentrancy depth raised by the
 * core/ entry point above it (XS_INSIDE(), core/xs_core.h), so that
 * rdma-core's own read/write/close/poll reach libc untouched.
 *
 * Errors follow the kernel's connect(2)/accept(2) vocabulary, so a caller
 * can fall back to kernel TCP with a reason:
 *   -ENODEV        no RDMA device serves the address (loopback, no route)
 *   -ECONNREFUSED  the peer rejected (no rdma_cm listener: not xsock)
 *   -ENOBUFS       an xsock server out of resources rejected ("busy")
 *   -ESTALE        a rendezvous listener awaits no negotiation of the
 *                  token ("ended"): the server's side of that negotiation
 *                  is over (its socket closed, or it decided TCP)
 *   -ETIMEDOUT     resolution or handshake took longer than the timeout
 *   -EHOSTUNREACH  RDMA_CM_EVENT_UNREACHABLE / ADDR_ERROR
 *   -EPROTO        the peer's hello failed validation
 *   -EPROTONOSUPPORT the device is iWARP, whose rdma_cm shares the
 *                  kernel's TCP ports: xsock uses TCP there
 */
#ifndef XS_CORE_CONN_H
#define XS_CORE_CONN_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool.h"
#include "proto.h"

struct xs_stream;

/*
 * Rendezvous resources of one connection (cf. XRDMA's large-message path):
 * it exposes at most XS_RNDV_REGIONS send regions at once, each through its
 * own type-2 memory window (bound to this QP only, read-only), each of
 * XSOCK_RNDV_CHUNK bytes at most; it accepts regions of up to
 * XS_RNDV_MAX_REGION bytes (the pool's largest buffer) from its peer.
 * XS_RNDV_RD_DEPTH RDMA READs may be outstanding per QP
 * (responder_resources / initiator_depth; rxe allows 128, ConnectX 16).
 */
#define XS_RNDV_REGIONS	   4
#define XS_RNDV_MAX_REGION XS_POOL_SUPERBLOCK /* bytes */
#define XS_RNDV_RD_DEPTH   4

/*
 * RC retransmission, which finds a peer that stopped answering: the local
 * ACK timeout (4.096 us x 2^XS_ACK_TIMEOUT = 1.07 s, set on each QP with
 * RDMA_OPTION_ID_ACK_TIMEOUT) and XS_RETRY_COUNT retries give up after
 * about 7 x 1.07 = 7.5 s of silence, with IBV_WC_RETRY_EXC_ERR (ETIMEDOUT
 * to the application). An outage of a few seconds (a link flap) is
 * survived, every byte intact. 6, not the IB maximum of 7: rxe reads 7
 * as "retry forever" (rxe_comp.c, as rnr_retry), and a stream to a
 * vanished peer then waited forever: a 33 s blackhole of the data link
 * left it without a completion, the peer's QP long destroyed.
 */
#define XS_ACK_TIMEOUT 18
#define XS_RETRY_COUNT 6

/* What one side offers in its hello. */
struct xs_conn_params {
	uint16_t credits;    /* receive buffers posted, XS_WIRE_*_CREDITS */
	uint32_t eager_size; /* bytes per receive buffer */
	uint32_t inline_max; /* requested max_inline_data, bytes */
	uint32_t max_rndv;   /* largest region accepted; 0: no rendezvous */
	int timeout_ms;	     /* resolution and handshake budget */
	size_t pool_bytes;   /* pool limit when the device is first opened */
	int afonly;	     /* listener on an AF_INET6 address: IPV6_V6ONLY */
	uint64_t token;	     /* client: the hello's conn_id (core/neg.c) */
	bool probe_only;     /* listener: answer probes, take no connection */
};

/* One opened device: verbs context, PD and registered pool. */
struct xs_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct xs_pool pool;
	uint8_t max_rd_atom;	  /* device: READs a QP may serve at once */
	uint8_t max_init_rd_atom; /* device: READs a QP may issue at once */
	struct xs_dev *next;
};

struct xs_conn {
	/* this connection's own CM channel: while it sets up, and after
	 * only when the process's could not take it (xs_cm_settle()) */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	/* set by the process's CM thread at a DISCONNECTED (core/cm.c),
	 * taken by the stream's next look */
	atomic_bool cm_down;
	/* whose waiters that thread wakes after the mark
	 * (xs_stream_cm_wake()): the stream, once it has the connection;
	 * NULL before */
	_Atomic(struct xs_stream *) cm_stream;
	struct xs_dev *dev;
	struct ibv_comp_channel *cc; /* completion channel: fd to sleep on */
	struct ibv_cq *cq;
	/* receive ring, wr_id = index: room for nr_rx buffers (the hello's
	 * credits plus XS_WIRE_CTRL_BUFS), of which the first rx_live are
	 * allocated and posted; xs_conn_grow_rx() adds more */
	struct xs_buf *rx;
	unsigned int nr_rx, rx_live;
	bool rx_ctrl_rndv; /* the XS_WIRE_CTRL_RNDV_BUFS are posted */
	/* one more buffer of the ring's size that a rendezvous READ lands
	 * in when the pool has nothing else: a region then comes in pieces,
	 * but it comes (core/stream.c); none when p->max_rndv is 0 */
	struct xs_buf rx_spare;
	uint32_t max_inline;   /* what the QP really granted */
	uint32_t max_send_sge; /* likewise: 2 (1 on a device with one) */
	/* type-2 memory windows for rendezvous regions, allocated by the
	 * first send that needs them; nr_mw 0 until then, and when the
	 * device has none (the connection then sends everything eagerly) */
	struct ibv_mw *mw[XS_RNDV_REGIONS];
	unsigned int nr_mw;
	struct xs_hello local; /* what we announced */
	struct xs_hello peer;  /* what the peer announced (validated) */
	struct xs_conn *next;  /* a listener's ready queue */
	uint64_t setup_us;     /* connect, or request to ESTABLISHED: us (while
			    * setting up, the start time) */
};

struct xs_listener {
	struct rdma_event_channel *ch; /* its fd is readable on a request */
	struct rdma_cm_id *id;
	struct xs_conn_params params;
	uint64_t nr_rejected; /* requests whose hello failed validation */
	uint64_t nr_probes;   /* probes answered "xsock listens here" */
	struct xs_conn *ready, *ready_tail; /* established, not accepted */
	unsigned int nr_ready;
	unsigned int nr_pending; /* accepted requests not yet established */
	unsigned int backlog;	 /* nr_pending + nr_ready stay below it */
	/* The owner's: whether to take the request whose hello carries
	 * @conn_id from @peer (0; a negative errno rejects it), and the
	 * connection xs_conn_prepare() made ahead for it in *@out (taken:
	 * the request's from then on), or NULL; called in
	 * xs_listener_poll() and xs_listener_accept(). NULL: every request
	 * is taken and makes its own. */
	int (*prepared)(uint64_t conn_id, const struct sockaddr *peer,
			struct xs_conn **out);
};

/**
 * xs_conn_connect() - open an RC connection to @dst with the xsock hello
 * @out: the established connection, on success
 * @dst: AF_INET or AF_INET6 destination
 * @p:   what to offer; p->timeout_ms bounds the whole setup
 *
 * Context: blocks (in poll(2) on the CM channel) up to p->timeout_ms.
 * Return: 0 or a negative errno from the list in this header.
 */
int xs_conn_connect(struct xs_conn **out, const struct sockaddr *dst,
		    const struct xs_conn_params *p);

/**
 * xs_conn_prepare() - the part of a connection that needs no destination:
 * CM channel, a cm_id bound to @src's address (port 0: an ephemeral one),
 * and on that device the CQ, the QP and its posted receive ring
 * @out: the connection, not connected, on success
 * @src: AF_INET or AF_INET6 local address of an RDMA device: the one the
 *       route to the destination leaves from (a client's kernel TCP
 *       connection's own address); its port is ignored
 * @p:   what the connection will offer, as for xs_conn_connect() (its
 *       token may still change: it only goes in the REQ)
 *
 * A client makes it while it waits for what names the destination (the
 * server's XS_TCP_REPLY), so that the QP's setup overlaps that wait.
 * Context: blocks on rdma-core calls only (no network round trip).
 * Return: 0; -EADDRNOTAVAIL when no RDMA device has @src; -EPROTONOSUPPORT
 *         on iWARP; or an errno of the list above. Give the connection to
 *         xs_conn_connect_prepared() or xs_conn_destroy().
 */
int xs_conn_prepare(struct xs_conn **out, const struct sockaddr *src,
		    const struct xs_conn_params *p);

/**
 * xs_conn_connect_prepared() - xs_conn_connect() with the QP of a
 * connection from xs_conn_prepare()
 * @io:  in: the prepared connection (taken); out: the established one,
 *       on success
 * @dst: as for xs_conn_connect(); the route is resolved as there (not
 *       from the prepared connection's bound address), and where it
 *       leaves from another device the QP is made anew there
 * @p:   as for xs_conn_connect(); p->token goes in the REQ's hello
 *
 * Context: blocks as xs_conn_connect(). Return: as xs_conn_connect().
 */
int xs_conn_connect_prepared(struct xs_conn **io, const struct sockaddr *dst,
			     const struct xs_conn_params *p);

/**
 * xs_conn_probe() - ask whether an xsock listener serves @dst's port
 * @dst:        AF_INET or AF_INET6 address of the TCP service
 * @tcp_port:   the port of the client's TCP socket (bound already): the
 *              listener notes it, so that the process accepting the TCP
 *              connection expects the hello (core/handoff.c)
 * @timeout_ms: budget for resolution and the answer
 *
 * A CM REQ without a QP, carrying a hello with XS_HELLO_F_PROBE; an
 * xsock listener rejects it with the "xsock" private data and keeps
 * nothing. Costs one resolution and one REQ/REJ round trip.
 * Context: blocks (in poll(2) on its own CM channel) up to @timeout_ms.
 * Return: 0 xsock listens there; -ECONNREFUSED a reject without it (no
 *         rdma_cm listener, not xsock); or an errno of the list above.
 */
int xs_conn_probe(const struct sockaddr *dst, uint16_t tcp_port,
		  int timeout_ms);

/**
 * xs_conn_probe_route() - the first half of xs_conn_probe(): a connection
 * with no QP, its address and route to @dst resolved, for a later
 * xs_conn_probe_on() (the helper makes the next probe's ahead)
 * @out:        the routed connection, on success
 * @dst:        as for xs_conn_probe()
 * @timeout_ms: budget for the resolution
 *
 * Context: blocks (in poll(2) on its own CM channel) up to @timeout_ms.
 * Return: 0, or an errno of the list above.
 */
int xs_conn_probe_route(struct xs_conn **out, const struct sockaddr *dst,
			int timeout_ms);

/**
 * xs_conn_probe_on() - the second half of xs_conn_probe(): the REQ on @c,
 * from xs_conn_probe_route(), and its answer
 * @c:          the routed connection; destroyed before the return
 * @tcp_port:   as for xs_conn_probe()
 * @timeout_ms: budget for the answer
 *
 * Context: blocks up to @timeout_ms. Return: as xs_conn_probe().
 */
int xs_conn_probe_on(struct xs_conn *c, uint16_t tcp_port, int timeout_ms);

/**
 * xs_conn_destroy() - disconnect and release everything of @c
 * @c: connection; NULL is ignored
 */
void xs_conn_destroy(struct xs_conn *c);

/**
 * xs_cm_channel_create() - a CM event channel, its fd moved high
 *                          (xs_fd_high()) and non-blocking
 *
 * Return: the channel, or NULL with errno set.
 */
struct rdma_event_channel *xs_cm_channel_create(void);

/**
 * xs_cm_ready() - whether the process has its CM channel for established
 *                 connections, made with its thread on the first call
 *
 * Context: any thread; takes the module's lock. Return: false when no fd
 * or thread could be had (logged once; a later call tries again).
 */
bool xs_cm_ready(void);

/**
 * xs_cm_settle() - give an established connection's CM events to the
 *                  process's channel, read by the library's thread; its
 *                  own channel, if any, goes (one fd fewer). Where the
 *                  process's cannot take it, the connection's own
 *                  channel (made here if it has none) does.
 * @c: connection, established; its id on any channel
 *
 * Context: any thread; one system call (rdma_migrate_id()), more where
 * the process's channel is made or refuses.
 * Return: 0, or a negative errno: no channel could take its events.
 */
int xs_cm_settle(struct xs_conn *c);

/**
 * xs_cm_forget() - have the events of @id name no connection: its
 *                  rdma_destroy_id() failed, so it stays on its channel
 *                  while its connection goes
 * @id: the connection's id
 *
 * Context: any thread; waits for an event of the CM thread in progress.
 */
void xs_cm_forget(struct rdma_cm_id *id);

/**
 * xs_cm_fork_child() - forget the parent's CM channel and thread in a
 *                      forked child: the child makes its own
 *
 * Context: the child, right after fork(), single-threaded.
 */
void xs_cm_fork_child(void);

/**
 * xs_conn_windows_alloc() - the connection's XS_RNDV_REGIONS type-2 memory
 * windows, for rendezvous regions; does nothing when it has them
 * @c: connection
 *
 * Context: the stream's lock held; calls rdma-core (ibv_alloc_mw, a
 * system call each). Return: 0, or the -errno of ibv_alloc_mw (no window
 * is kept then: large sends go eagerly).
 */
int xs_conn_windows_alloc(struct xs_conn *c);

/**
 * xs_listener_create() - listen with rdma_cm on @local (RDMA_PS_TCP)
 * @out:     the listener
 * @local:   address and port, as bound by the kernel TCP listener
 * @backlog: as for listen(2)
 * @p:       what accepted connections offer
 * Return: 0, -ENODEV when no RDMA device serves @local, -EADDRINUSE, or
 *         another negative errno of rdma_bind_addr/rdma_listen.
 */
int xs_listener_create(struct xs_listener **out, const struct sockaddr *local,
		       int backlog, const struct xs_conn_params *p);

/**
 * xs_listener_fd() - the fd that becomes readable when a CM event waits
 * @l: listener
 * Return: the event channel's fd (non-blocking).
 */
int xs_listener_fd(const struct xs_listener *l);

/**
 * xs_listener_accept() - the next established connection, handling the
 *                        listener's CM events as needed
 * @l:          listener
 * @out:        an established connection, when one completes
 * @timeout_ms: how long to wait for events; 0 never blocks
 *
 * A request whose hello fails validation is rejected (and counted in
 * l->nr_rejected); the listener goes on serving others.
 *
 * Return: 0 with *@out set; -EAGAIN when nothing completed in time; or a
 *         negative errno of the listener itself.
 */
int xs_listener_accept(struct xs_listener *l, struct xs_conn **out,
		       int timeout_ms);

/**
 * xs_listener_requeue() - put back a connection xs_listener_accept() gave,
 *                         first in line, when accept() cannot complete it
 *                         (no fd left): the kernel likewise leaves the
 *                         connection queued when accept(2) fails with EMFILE
 * @l: listener
 * @c: the connection, untouched since xs_listener_accept()
 */
void xs_listener_requeue(struct xs_listener *l, struct xs_conn *c);

/**
 * xs_listener_poll() - handle pending CM events without waiting
 * @l:     listener
 * @drain: read the CM channel (a system call); false when the caller saw
 *         its fd not readable a moment ago
 *
 * Established connections wait in the listener's ready queue for
 * xs_listener_accept(); this is what readiness (poll, epoll) asks.
 * Return: connections ready to be accepted.
 */
int xs_listener_poll(struct xs_listener *l, bool drain);

/**
 * xs_listener_destroy() - stop listening; pending requests are rejected
 * @l: listener; NULL is ignored
 */
void xs_listener_destroy(struct xs_listener *l);

/**
 * xs_conn_post_send2() - post one inline message of two pieces, header
 *                        and payload, each copied into the WQE from where
 *                        it lies (two SGEs; the peer receives them as one)
 * @c:        connection
 * @head:     the message's first bytes, @head_len of them
 * @tail:     the rest, @tail_len bytes; neither needs to be registered
 * @wr_id:    returned in the completion
 * @signaled: as xs_conn_post_send()
 * Context: the caller's buffers may be reused as soon as this returns.
 * Return: 0; -EINVAL when the QP has one send SGE or the message does not
 *         fit max_inline (the caller builds it in one piece instead); or
 *         the negative errno of ibv_post_send.
 */
int xs_conn_post_send2(struct xs_conn *c, const void *head, uint32_t head_len,
		       const void *tail, uint32_t tail_len, uint64_t wr_id,
		       bool signaled);

/**
 * xs_conn_post_send() - post one message from a pool buffer or inline
 * @c:    connection
 * @buf:  message bytes (header + payload); when it fits max_inline it is
 *        copied into the WQE (IBV_SEND_INLINE), else it must lie in @b
 * @len:  bytes
 * @b:    the pool buffer holding @buf, or NULL for an inline send
 * @wr_id: returned in the completion
 * @signaled: whether it completes with a work completion; an unsignaled
 *        one is done when a signaled WR posted after it completes (an RC
 *        send queue completes in order), or fails with its own
 * Return: 0, or the negative errno of ibv_post_send.
 */
int xs_conn_post_send(struct xs_conn *c, const void *buf, uint32_t len,
		      const struct xs_buf *b, uint64_t wr_id, bool signaled);

/**
 * xs_conn_post_rndv() - expose a region and announce it: bind memory
 *                       window @w over @region (IBV_ACCESS_REMOTE_READ
 *                       only, this QP only) then send @msg, one doorbell
 * @c:       connection
 * @w:       window index, below c->nr_mw
 * @rkey:    the window's new rkey (ibv_inc_rkey of its last one)
 * @region:  pool buffer holding the bytes; [region->addr, +@len) is bound
 * @len:     bytes exposed
 * @msg:     the RNDV message; inline when it fits max_inline, else it
 *           must lie in @msg_buf
 * @msg_len: its bytes
 * @msg_buf: the pool buffer holding @msg, or NULL
 * @bind_wr_id: wr_id of the (unsignaled) bind; seen only if it fails
 * @wr_id:   wr_id of the send
 * Return: 0, or the negative errno of ibv_post_send.
 */
int xs_conn_post_rndv(struct xs_conn *c, unsigned int w, uint32_t rkey,
		      const struct xs_buf *region, uint32_t len,
		      const void *msg, uint32_t msg_len,
		      const struct xs_buf *msg_buf, uint64_t bind_wr_id,
		      uint64_t wr_id);

/**
 * xs_conn_post_read() - RDMA READ a peer's region into a pool buffer
 * @c:     connection
 * @dst:   pool buffer of at least @len bytes
 * @len:   bytes
 * @raddr: the peer's region address, as its RNDV gave it
 * @rkey:  the peer's window rkey
 * @wr_id: returned in the completion
 * Return: 0, or the negative errno of ibv_post_send.
 */
int xs_conn_post_read(struct xs_conn *c, const struct xs_buf *dst, uint32_t len,
		      uint64_t raddr, uint32_t rkey, uint64_t wr_id);

/**
 * xs_conn_post_inv() - invalidate a memory window (IBV_WR_LOCAL_INV):
 *                      once it completes the peer can no longer READ
 *                      through @rkey and the region may be reused
 * @c:     connection
 * @rkey:  the window's current rkey
 * @wr_id: returned in the completion
 * Return: 0, or the negative errno of ibv_post_send.
 */
int xs_conn_post_inv(struct xs_conn *c, uint32_t rkey, uint64_t wr_id);

/**
 * xs_conn_post_probe() - post a keepalive probe: a zero-length RDMA WRITE,
 *                        which the peer's HCA acknowledges without
 *                        touching memory or consuming a receive buffer
 * @c:     connection
 * @wr_id: returned in the completion
 *
 * Source: InfiniBand Architecture Specification vol. 1, C9-88: a
 * zero-length RDMA operation need not carry a valid R_Key, and the
 * responder validates none. A peer that is gone fails it as any WR, after
 * the QP's retry budget (IBV_WC_RETRY_EXC_ERR).
 * Return: 0, or the negative errno of ibv_post_send.
 */
int xs_conn_post_probe(struct xs_conn *c, uint64_t wr_id);

/**
 * xs_conn_grow_rx() - post @n more receive buffers from the pool
 * @c: connection; c->rx_live + @n must stay within c->nr_rx
 * @n: buffers of c->local.eager_size bytes, at ring indices c->rx_live on
 *
 * All or none: when the pool cannot give @n buffers, none is taken.
 * Context: the stream's lock (or a connection no one else sees yet).
 * Return: 0; -EINVAL past the ring's room; the pool's -ENOMEM or
 * -ENOBUFS (nothing taken); a negative errno of ibv_post_recv (the
 * buffers stay the connection's, freed with it).
 */
int xs_conn_grow_rx(struct xs_conn *c, unsigned int n);

/**
 * xs_conn_repost_recv() - give receive buffer @i back to the QP
 * @c: connection
 * @i: ring index (a receive completion's wr_id)
 * Return: 0, or the negative errno of ibv_post_recv.
 */
int xs_conn_repost_recv(struct xs_conn *c, unsigned int i);

#endif /* XS_CORE_CONN_H */
