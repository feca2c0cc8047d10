/*
 * core/conn.c - RC connection setup over rdma_cm (see conn.h).
 *
 * Owns the client handshake (resolve address and route,
 * QP, connect with our hello, validate the peer's), and the listener (one
 * rdma_cm id per listening socket; requests whose hello does not validate
 * are rejected, the listener keeps serving). It does not own the stream
 * protocol. Context: any thread; a connection is used by one thread at a
 * time (the socket's locks); devices come from dev.c. Every wait
 * is a poll(2) on a non-blocking CM channel with a deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "conn.h"
#include "stream.h"
#include "core_int.h"

/* The lowest number a library fd takes: RLIMIT_NOFILE / 2, 64 at least
 * (read once; a limit raised later only leaves more room below). */
static int conn_fd_floor(void)
{
	static atomic_int floor;
	int f = atomic_load_explicit(&floor, memory_order_relaxed);
	struct rlimit rl;

	if (!f) {
		f = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
				    rl.rlim_cur != RLIM_INFINITY &&
				    rl.rlim_cur / 2 > 64
			    ? (int)(rl.rlim_cur / 2)
			    : 64;
		atomic_store_explicit(&floor, f, memory_order_relaxed);
	}
	return f;
}

int xs_fd_high(int fd)
{
	int nfd, err = errno;

	if (fd < 0 || fd >= conn_fd_floor())
		return fd;
	nfd = xs_real.fcntl(fd, F_DUPFD_CLOEXEC, conn_fd_floor());
	if (nfd < 0) {
		errno = err;
		return fd; /* none free up there: the one we have */
	}
	xs_real.close(fd);
	errno = err;
	return nfd;
}

int xs_fd_dup_high(int fd)
{
	int nfd = xs_real.fcntl(fd, F_DUPFD_CLOEXEC, conn_fd_floor());

	if (nfd < 0 && (errno == EMFILE || errno == EINVAL))
		nfd = xs_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return nfd;
}

static int conn_set_nonblock(int fd)
{
	int fl = xs_real.fcntl(fd, F_GETFL);

	if (fl < 0 || xs_real.fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int64_t conn_now_ms(void)
{
	return (int64_t)(xs_now_us() / 1000u);
}

/* Next CM event of @ch before @deadline_ms; -ETIMEDOUT when none came. */
static int conn_next_event(struct rdma_event_channel *ch, int64_t deadline_ms,
			   struct rdma_cm_event **ev)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	int64_t left;

	for (;;) {
		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno; /* librdmacm: -1 and errno */
		left = deadline_ms - conn_now_ms();
		if (left <= 0) {
			xs_dbg("conn", "no CM event before the deadline");
			return -ETIMEDOUT;
		}
		if (xs_real.poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
	}
}

/* The connect(2)-style errno for an unexpected CM event. */
static int conn_event_errno(enum rdma_cm_event_type type)
{
	switch (type) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNABORTED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -EPROTO;
	}
}

/* Wait for @want; any other event is the error it stands for. */
static int conn_expect(struct rdma_event_channel *ch,
		       enum rdma_cm_event_type want, int64_t deadline_ms,
		       struct rdma_cm_event **ev)
{
	int rc = conn_next_event(ch, deadline_ms, ev);

	if (rc)
		return rc;
	if ((*ev)->event == want)
		return 0;
	rc = conn_event_errno((*ev)->event);
	/* An xsock server that is out of resources says so: not a peer
	 * without xsock, and worth retrying soon (no negative caching). */
	if ((*ev)->event == RDMA_CM_EVENT_REJECTED &&
	    xs_wire_reject_is_busy((*ev)->param.conn.private_data,
				   (*ev)->param.conn.private_data_len))
		rc = -ENOBUFS;
	/* The negotiation the token was for ended on the server's side. */
	if ((*ev)->event == RDMA_CM_EVENT_REJECTED &&
	    xs_wire_reject_is_ended((*ev)->param.conn.private_data,
				    (*ev)->param.conn.private_data_len))
		rc = -ESTALE;
	xs_dbg("conn", "expected %s, got %s (status %d)", rdma_event_str(want),
	       rdma_event_str((*ev)->event), (*ev)->status);
	rdma_ack_cm_event(*ev);
	return rc;
}

/*
 * Address resolution waits for the neighbour (ARP) entry. The kernel
 * retries a pending resolution when a neighbour update arrives, or else
 * only when the request's timeout expires; on the veth topology of the
 * Soft-RoCE tier the update does not wake it (measured: a first connect
 * after boot stayed pending for the whole 20 s timeout although ARP had
 * completed). So resolve in short steps, each ending in ADDR_RESOLVED or
 * ADDR_ERROR, and try again until the caller's deadline.
 */
#define CONN_RESOLVE_STEP_MS 250

static int conn_resolve_addr(struct xs_conn *c, const struct sockaddr *dst,
			     int64_t deadline)
{
	struct rdma_cm_event *ev;
	int64_t left;
	int rc;

	for (;;) {
		left = deadline - conn_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)dst,
				      (int)(left < CONN_RESOLVE_STEP_MS
						    ? left
						    : CONN_RESOLVE_STEP_MS)))
			return -errno; /* librdmacm: -1 and errno */
		rc = conn_expect(c->ch, RDMA_CM_EVENT_ADDR_RESOLVED, deadline,
				 &ev);
		if (rc == 0) {
			rdma_ack_cm_event(ev);
			return 0;
		}
		if (rc != -EHOSTUNREACH)
			return rc;
	}
}

static void conn_fill_hello(struct xs_conn *c, const struct xs_conn_params *p)
{
	c->local.version = XS_WIRE_VERSION;
	/* F_RNDV: we may expose regions (the windows come with the first
	 * send that needs them: xs_conn_windows_alloc()); max_rndv: we READ
	 * regions */
	c->local.flags =
		(p->max_rndv ? XS_HELLO_F_RNDV : 0) | XS_HELLO_F_SOLICITED;
	c->local.credits = p->credits;
	c->local.eager_size = p->eager_size;
	c->local.max_rndv = p->max_rndv;
	c->local.conn_id =
		p->token ? p->token
			 : (uint64_t)(uintptr_t)c ^ (uint64_t)conn_now_ms();
}

/* XS_ACK_TIMEOUT for the QP that @id connects. */
static void conn_ack_timeout(struct rdma_cm_id *id)
{
	uint8_t ack_timeout = XS_ACK_TIMEOUT;

	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			    &ack_timeout, sizeof(ack_timeout)))
		xs_log_once(XS_LOG_INFO, "conn",
			    "cannot set the ACK timeout (%s): the fabric's "
			    "default applies",
			    strerror(errno));
}

/* CQ, completion channel, QP and the receive ring on c->id. */
static int conn_setup_qp(struct xs_conn *c, const struct xs_conn_params *p)
{
	struct ibv_context *verbs = c->id->verbs;
	struct ibv_qp_init_attr attr;
	uint32_t inline_max = p->inline_max;
	uint32_t send_sge = 2;
	unsigned int nr_rx;
	int rc = 0;

	c->dev = xs_dev_open(verbs, p->pool_bytes, &rc);
	if (!c->dev)
		return rc;
	c->cc = ibv_create_comp_channel(verbs);
	if (!c->cc)
		return -errno;
	c->cc->fd = xs_fd_high(c->cc->fd);
	rc = conn_set_nonblock(c->cc->fd);
	if (rc)
		return rc;
	nr_rx = p->credits + XS_WIRE_CTRL_BUFS;
	c->cq = ibv_create_cq(verbs, p->credits + nr_rx + 16, c, c->cc, 0);
	if (!c->cq)
		return -errno;
	/* Ask for the inline size we want; devices refuse what they lack. */
	for (;;) {
		memset(&attr, 0, sizeof(attr));
		attr.send_cq = c->cq;
		attr.recv_cq = c->cq;
		attr.qp_type = IBV_QPT_RC;
		/* the stream's signaled slots, plus one unsignaled
		 * memory-window bind per rendezvous region */
		attr.cap.max_send_wr = p->credits + 16u + XS_RNDV_REGIONS;
		attr.cap.max_recv_wr = nr_rx;
		/* an inline message's header and payload as two SGEs:
		 * the payload goes from the caller's buffer into the WQE
		 * with no staging copy (xs_conn_post_send2()) */
		attr.cap.max_send_sge = send_sge;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = inline_max;
		if (rdma_create_qp(c->id, c->dev->pd, &attr) == 0)
			break;
		if (inline_max == 0 && send_sge == 1)
			return -errno;
		if (inline_max == 0) { /* a device with one SGE: as before */
			send_sge = 1;
			inline_max = p->inline_max;
			continue;
		}
		inline_max /= 2;
	}
	c->max_inline = attr.cap.max_inline_data;
	c->max_send_sge = attr.cap.max_send_sge;
	conn_ack_timeout(c->id);
	c->rx = calloc(nr_rx, sizeof(*c->rx));
	if (!c->rx)
		return -ENOMEM;
	c->nr_rx = nr_rx;
	c->local.eager_size = p->eager_size; /* the size each buffer takes */
	/* the window the peer starts with (XS_WIRE_START_CREDITS), and the
	 * control buffers but those of RNDV_DONE (xs_conn_windows_alloc()) */
	rc = xs_conn_grow_rx(c, xs_wire_start_credits(p->credits) +
					XS_WIRE_CTRL_BUFS -
					XS_WIRE_CTRL_RNDV_BUFS);
	if (rc)
		return rc;
	if (p->max_rndv)
		return xs_pool_alloc(&c->dev->pool, p->eager_size,
				     &c->rx_spare);
	return 0;
}

static uint8_t conn_min8(unsigned int a, unsigned int b)
{
	return (uint8_t)(a < b ? a : b);
}

/*
 * Connection parameters. READ depths: XS_RNDV_RD_DEPTH within what the
 * device allows and, when accepting, what the request offered (@req; NULL
 * when connecting): our responder resources never exceed the peer's
 * initiator depth, nor our initiator depth its responder resources.
 */
static void conn_param(struct rdma_conn_param *param, const void *hello,
		       const struct xs_dev *dev,
		       const struct rdma_conn_param *req)
{
	memset(param, 0, sizeof(*param));
	param->private_data = hello;
	param->private_data_len = XS_WIRE_HELLO_LEN;
	param->responder_resources =
		conn_min8(XS_RNDV_RD_DEPTH, dev->max_rd_atom);
	param->initiator_depth =
		conn_min8(XS_RNDV_RD_DEPTH, dev->max_init_rd_atom);
	if (req) {
		param->responder_resources = conn_min8(
			param->responder_resources, req->initiator_depth);
		param->initiator_depth = conn_min8(param->initiator_depth,
						   req->responder_resources);
	}
	param->retry_count = XS_RETRY_COUNT;
	param->rnr_retry_count = 7; /* credits prevent RNR; 7 = retry forever */
}

/* @c's CM event channel (unless it has one) and cm_id. Return: 0 or a
 * negative errno. */
static int conn_open(struct xs_conn *c)
{
	if (!c->ch)
		c->ch = xs_cm_channel_create();
	if (!c->ch)
		return -errno;
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP))
		return -errno;
	return 0;
}

/* conn_route()'s steps on @c (its cm_id made here unless it has one, bound
 * by xs_conn_prepare()): the caller destroys it when they fail. */
static int conn_route_steps(struct xs_conn *c, const struct sockaddr *dst,
			    int64_t deadline, int timeout_ms)
{
	struct rdma_cm_event *ev;
	int rc;

	if (!c->id) {
		rc = conn_open(c);
		if (rc)
			return rc;
	}
	rc = conn_resolve_addr(c, dst, deadline);
	if (rc)
		return rc;
	/* iWARP's rdma_cm connects through the kernel's TCP port space: the
	 * port belongs to the peer's kernel listener, which would take our
	 * MPA request for a plain TCP connection. TCP only there. */
	if (c->id->verbs &&
	    c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
		return -EPROTONOSUPPORT;
	xs_dbg("conn", "address resolved");
	if (rdma_resolve_route(c->id, timeout_ms))
		return -errno; /* ENODEV at once for loopback */
	rc = conn_expect(c->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, &ev);
	if (rc)
		return rc;
	rdma_ack_cm_event(ev);
	xs_dbg("conn", "route resolved");
	return 0;
}

/*
 * The steps a connect and a probe share: a new connection with its event
 * channel and cm_id, the address (an iWARP device: -EPROTONOSUPPORT, TCP
 * only there) and the route to @dst, within @deadline (ms, conn_now_ms())
 * and @timeout_ms. Its setup_us is when it began.
 * Return: 0 and the connection in *@out, or a negative errno.
 */
static int conn_route(struct xs_conn **out, const struct sockaddr *dst,
		      int64_t deadline, int timeout_ms)
{
	struct xs_conn *c;
	int rc;

	xs_dev_note_rdma_cm();
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->setup_us = xs_now_us();
	rc = conn_route_steps(c, dst, deadline, timeout_ms);
	if (rc) {
		xs_conn_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

int xs_conn_prepare(struct xs_conn **out, const struct sockaddr *src,
		    const struct xs_conn_params *p)
{
	struct sockaddr_storage local;
	struct xs_conn *c;
	int rc;

	if (src->sa_family == AF_INET) {
		memcpy(&local, src, sizeof(struct sockaddr_in));
		((struct sockaddr_in *)&local)->sin_port = 0;
	} else if (src->sa_family == AF_INET6) {
		memcpy(&local, src, sizeof(struct sockaddr_in6));
		((struct sockaddr_in6 *)&local)->sin6_port = 0;
	} else {
		return -EAFNOSUPPORT;
	}
	xs_dev_note_rdma_cm();
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = conn_open(c); /* setup_us: from the connect on */
	if (!rc && rdma_bind_addr(c->id, (struct sockaddr *)&local))
		rc = -errno;
	/* an address of no RDMA device binds none; iWARP: as conn_route */
	if (!rc && !c->id->verbs)
		rc = -EADDRNOTAVAIL;
	if (!rc && c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
		rc = -EPROTONOSUPPORT;
	if (!rc)
		rc = conn_setup_qp(c, p);
	if (rc) {
		xs_conn_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

/*
 * Give @c's QP, which xs_conn_prepare() made on a cm_id bound to this
 * device, to @cid (a server's request, a client's routed cm_id):
 * rdma_accept(), or the client's answer to the REP, then takes it from
 * INIT on (its attributes again from @cid, then RTR and RTS) exactly as a
 * QP that rdma_create_qp() made on @cid; the bound cm_id goes. Return:
 * false, nothing changed, when @cid is on another device.
 */
static bool conn_adopt(struct xs_conn *c, struct rdma_cm_id *cid)
{
	struct rdma_cm_id *bound = c->id;

	if (bound->verbs != cid->verbs)
		return false;
	cid->qp = bound->qp;
	cid->pd = bound->pd;
	bound->qp = NULL;
	rdma_destroy_id(bound);
	c->id = cid;
	cid->context = c;
	conn_ack_timeout(cid);
	return true;
}

/* The REQ of @c, routed, and its answer within @deadline, its QP made
 * here unless it has one: the rest of xs_conn_connect(). The caller
 * destroys @c when it fails. */
static int conn_connect_routed(struct xs_conn *c,
			       const struct xs_conn_params *p, int64_t deadline)
{
	uint8_t hello[XS_WIRE_HELLO_LEN];
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;
	int rc;

	if (!c->id->qp) {
		rc = conn_setup_qp(c, p);
		if (rc)
			return rc;
	}
	conn_fill_hello(c, p);
	xs_wire_hello_encode(&c->local, hello);
	conn_param(&param, hello, c->dev, NULL);
	if (rdma_connect(c->id, &param))
		return -errno;
	xs_dbg("conn", "connect request sent");
	rc = conn_expect(c->ch, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev);
	if (rc)
		return rc;
	rc = xs_wire_hello_decode(ev->param.conn.private_data,
				  ev->param.conn.private_data_len, &c->peer);
	rdma_ack_cm_event(ev);
	if (rc)
		return -EPROTO; /* an rdma_cm server that is not xsock */
	c->setup_us = xs_now_us() - c->setup_us;
	/* its events from now on: the process's channel, if it takes it
	 * (its own stays otherwise: 0) */
	return xs_cm_settle(c);
}

int xs_conn_connect(struct xs_conn **out, const struct sockaddr *dst,
		    const struct xs_conn_params *p)
{
	int64_t deadline = conn_now_ms() + p->timeout_ms;
	struct xs_conn *c;
	int rc;

	rc = conn_route(&c, dst, deadline, p->timeout_ms);
	if (rc)
		return rc;
	rc = conn_connect_routed(c, p, deadline);
	if (rc) {
		xs_conn_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

int xs_conn_connect_prepared(struct xs_conn **io, const struct sockaddr *dst,
			     const struct xs_conn_params *p)
{
	int64_t deadline = conn_now_ms() + p->timeout_ms;
	struct xs_conn *c = *io, route = { .ch = c->ch };
	uint64_t t0 = xs_now_us();
	int rc;

	*io = NULL;
	/* The route a fresh connection's would take, on a cm_id of its own
	 * on @c's channel: the kernel's routing table chooses the device,
	 * not the address @c's cm_id is bound to. */
	rc = conn_route_steps(&route, dst, deadline, p->timeout_ms);
	if (rc == 0 && conn_adopt(c, route.id)) {
		c->setup_us = t0; /* the QP's own setup overlapped the reply */
		rc = conn_connect_routed(c, p, deadline);
		if (rc) {
			xs_conn_destroy(c);
			return rc;
		}
		*io = c;
		return 0;
	}
	if (route.id)
		rdma_destroy_id(route.id);
	xs_conn_destroy(c);
	if (rc)
		return rc; /* as a fresh connection's route would */
	return xs_conn_connect(io, dst, p); /* its QP on that device */
}

static uint32_t conn_probe_qpn(void)
{
	static atomic_uint seq;
	uint32_t n =
		(uint32_t)getpid() * 2654435761u + atomic_fetch_add(&seq, 1);

	n &= 0xffffffu;
	return n ? n : 1;
}

int xs_conn_probe_route(struct xs_conn **out, const struct sockaddr *dst,
			int timeout_ms)
{
	return conn_route(out, dst, conn_now_ms() + timeout_ms, timeout_ms);
}

/* The probe's REQ on @c, routed, and its answer within @deadline; @c
 * goes. Return: as xs_conn_probe(). */
static int conn_probe_on(struct xs_conn *c, uint16_t tcp_port, int64_t deadline)
{
	uint8_t hello[XS_WIRE_HELLO_LEN];
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;
	int rc;

	memset(&c->local, 0, sizeof(c->local));
	c->local.version = XS_WIRE_VERSION;
	c->local.flags = XS_HELLO_F_PROBE;
	c->local.tcp_port = tcp_port;
	c->local.credits = XS_WIRE_MIN_CREDITS;
	c->local.eager_size = XS_WIRE_MIN_EAGER;
	xs_wire_hello_encode(&c->local, hello);
	memset(&param, 0, sizeof(param));
	param.private_data = hello;
	param.private_data_len = XS_WIRE_HELLO_LEN;
	/* No QP: the request is answered by a reject. The number must
	 * differ between probes in flight all the same: the peer's CM
	 * rejects a second REQ from one (GID, QPN) as a stale connection. */
	param.qp_num = conn_probe_qpn();
	param.retry_count = XS_RETRY_COUNT;
	if (rdma_connect(c->id, &param)) {
		rc = -errno;
		goto out;
	}
	rc = conn_next_event(c->ch, deadline, &ev);
	if (rc)
		goto out;
	if (ev->event == RDMA_CM_EVENT_REJECTED &&
	    xs_wire_reject_is_xsock(ev->param.conn.private_data,
				    ev->param.conn.private_data_len)) {
		rc = 0;
	} else if (ev->event == RDMA_CM_EVENT_REJECTED) {
		/* ev->status: the CM's reason (8: no listener there) */
		xs_dbg("conn", "probe rejected, reason %d", ev->status);
		rc = -ECONNREFUSED;
	} else {
		rc = ev->event == RDMA_CM_EVENT_ESTABLISHED
			     ? -EPROTO
			     : conn_event_errno(ev->event);
	}
	rdma_ack_cm_event(ev);
out:
	xs_conn_destroy(c);
	return rc;
}

int xs_conn_probe_on(struct xs_conn *c, uint16_t tcp_port, int timeout_ms)
{
	return conn_probe_on(c, tcp_port, conn_now_ms() + timeout_ms);
}

int xs_conn_probe(const struct sockaddr *dst, uint16_t tcp_port, int timeout_ms)
{
	int64_t deadline = conn_now_ms() + timeout_ms;
	struct xs_conn *c;
	int rc;

	rc = conn_route(&c, dst, deadline, timeout_ms);
	if (rc)
		return rc;
	return conn_probe_on(c, tcp_port, deadline);
}

int xs_conn_windows_alloc(struct xs_conn *c)
{
	int rc;

	if (c->nr_mw)
		return 0;
	while (c->nr_mw < XS_RNDV_REGIONS) {
		c->mw[c->nr_mw] = ibv_alloc_mw(c->dev->pd, IBV_MW_TYPE_2);
		if (!c->mw[c->nr_mw]) {
			rc = errno ? -errno : -ENOMEM; /* verbs: NULL, errno */
			while (c->nr_mw)
				ibv_dealloc_mw(c->mw[--c->nr_mw]);
			xs_log_once(XS_LOG_INFO, "conn",
				    "no type-2 memory windows (%s): large "
				    "sends go eagerly",
				    strerror(-rc));
			return rc;
		}
		c->nr_mw++;
	}
	return 0;
}

void xs_conn_destroy(struct xs_conn *c)
{
	unsigned int i;

	if (!c)
		return;
	if (c->id && c->id->qp)
		rdma_disconnect(c->id); /* the QP errors: no more binds */
	/* Windows before the QP: deallocating one invalidates it, and a
	 * bound type-2 window holds a reference on its QP (rxe). */
	while (c->nr_mw)
		ibv_dealloc_mw(c->mw[--c->nr_mw]);
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	for (i = 0; i < c->rx_live; i++)
		xs_pool_free(&c->dev->pool, &c->rx[i]);
	if (c->rx_spare.addr)
		xs_pool_free(&c->dev->pool, &c->rx_spare);
	free(c->rx);
	if (c->id && rdma_destroy_id(c->id))
		xs_cm_forget(c->id); /* still on its channel (core/cm.c) */
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c);
}

int xs_listener_create(struct xs_listener **out, const struct sockaddr *local,
		       int backlog, const struct xs_conn_params *p)
{
	struct xs_listener *l;
	int rc;

	xs_dev_note_rdma_cm();

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->params = *p;
	l->backlog = backlog < 1      ? 1
		     : backlog > 4096 ? 4096
				      : (unsigned)backlog;
	l->ch = xs_cm_channel_create();
	if (!l->ch) {
		rc = -errno;
		goto out_destroy;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP) ||
	    (local->sa_family == AF_INET6 &&
	     rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
			     &l->params.afonly, sizeof(l->params.afonly))) ||
	    rdma_bind_addr(l->id, (struct sockaddr *)local)) {
		rc = -errno;
		goto out_destroy;
	}
	/* An iWARP device's port is the kernel listener's (see above). */
	if (l->id->verbs &&
	    l->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		rc = -EPROTONOSUPPORT;
		goto out_destroy;
	}
	if (rdma_listen(l->id, backlog)) {
		rc = -errno;
		goto out_destroy;
	}
	*out = l;
	return 0;

out_destroy:
	xs_listener_destroy(l);
	return rc;
}

int xs_listener_fd(const struct xs_listener *l)
{
	return l->ch->fd;
}

/* A connection request: validate, set up (on the QP made ahead for it,
 * l->prepared, when there is one) and accept, or reject. */
static void listener_request(struct xs_listener *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *cid = ev->id;
	uint8_t hello[XS_WIRE_HELLO_LEN], busy[XS_WIRE_REJECT_LEN];
	struct rdma_conn_param param, req = ev->param.conn;
	struct xs_hello peer;
	struct xs_conn *c;
	int rc;

	rc = xs_wire_hello_decode(ev->param.conn.private_data,
				  ev->param.conn.private_data_len, &peer);
	req.private_data = NULL; /* freed with the event */
	rdma_ack_cm_event(ev);
	if (rc) {
		l->nr_rejected++;
		xs_log_once(XS_LOG_INFO, "conn",
			    "rejected an rdma_cm request without a valid xsock "
			    "hello (%s)",
			    rc == -ENOPROTOOPT ? "not xsock" : "malformed");
		rdma_reject(cid, NULL, 0);
		rdma_destroy_id(cid);
		return;
	}
	/* A probe learns that xsock listens here and nothing more; a
	 * probe-only listener (a service port: connections themselves go
	 * to a rendezvous listener, core/neg.c) takes nothing else. */
	if ((peer.flags & XS_HELLO_F_PROBE) || l->params.probe_only) {
		uint8_t ack[XS_WIRE_REJECT_LEN];

		if (peer.flags & XS_HELLO_F_PROBE) {
			l->nr_probes++;
			xs_handoff_note_probe(rdma_get_peer_addr(cid),
					      peer.tcp_port,
					      ntohs(rdma_get_src_port(l->id)));
			xs_wire_reject_xsock_encode(ack);
			rdma_reject(cid, ack, sizeof(ack));
		} else {
			l->nr_rejected++;
			rdma_reject(cid, NULL, 0);
		}
		rdma_destroy_id(cid);
		return;
	}
	/* Each request costs a QP and a receive ring before accept(): the
	 * backlog bounds them, as the kernel bounds its accept queue. */
	c = NULL;
	rc = -ENOBUFS;
	if (l->nr_pending + l->nr_ready >= l->backlog)
		goto out_reject;
	if (l->prepared &&
	    (rc = l->prepared(peer.conn_id, rdma_get_peer_addr(cid), &c))) {
		l->nr_rejected++;
		xs_info("conn", "rejected a request that no negotiation here "
				"awaits from that host");
		/* none awaits the token at all: the client need not tell
		 * our side of the stream that it falls back */
		xs_wire_reject_ended_encode(busy);
		rdma_reject(cid, rc == -ENOENT ? busy : NULL,
			    rc == -ENOENT ? sizeof(busy) : 0);
		rdma_destroy_id(cid);
		return;
	}
	if (c && !conn_adopt(c, cid)) {
		xs_conn_destroy(c);
		c = NULL;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		rc = -ENOMEM;
		if (!c)
			goto out_reject;
		c->id = cid;
		cid->context = c;
		rc = conn_setup_qp(c, &l->params);
		if (rc)
			goto out_reject;
		/* The channel its events go to once established, now: an
		 * fd that is not there (RLIMIT_NOFILE) is a reject the client
		 * falls back from, never a connection it thinks is up and the
		 * server drops. The process's, or else its own. (A prepared
		 * one has its own already.) */
		if (!xs_cm_ready()) {
			c->ch = xs_cm_channel_create();
			rc = -errno;
			if (!c->ch)
				goto out_reject;
		}
	}
	c->peer = peer;
	c->setup_us = xs_now_us();
	conn_fill_hello(c, &l->params);
	xs_wire_hello_encode(&c->local, hello);
	conn_param(&param, hello, c->dev, &req);
	if (rdma_accept(cid, &param) == 0) {
		l->nr_pending++;
		return; /* ESTABLISHED comes on the listener's channel */
	}
	rc = -errno;
out_reject:
	xs_wire_reject_busy_encode(busy);
	rdma_reject(cid, busy, sizeof(busy));
	xs_log_once(XS_LOG_WARN, "conn",
		    "rejected an xsock connection: %s (pool or backlog full)",
		    strerror(-rc));
	if (c) {
		c->id = NULL;
		if (cid->qp)
			rdma_destroy_qp(cid);
		xs_conn_destroy(c);
	}
	rdma_destroy_id(cid);
}

/* Apply one CM event of the listener; an established connection joins
 * the ready queue. Called with the reentrancy depth raised. */
static void listener_event(struct xs_listener *l, struct rdma_cm_event *ev)
{
	struct xs_conn *c;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		listener_request(l, ev);
		return;
	}
	if (ev->id == l->id) {
		rdma_ack_cm_event(ev); /* listener-level event */
		return;
	}
	c = ev->id->context;
	if (l->nr_pending)
		l->nr_pending--;
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		/* a pending connection failed before it was ours */
		rdma_ack_cm_event(ev);
		xs_conn_destroy(c);
		return;
	}
	rdma_ack_cm_event(ev);
	c->setup_us = xs_now_us() - c->setup_us;
	/* From now on its events go to the process's channel, or its own */
	if (xs_cm_settle(c)) {
		xs_conn_destroy(c);
		return;
	}
	c->next = NULL;
	if (l->ready_tail)
		l->ready_tail->next = c;
	else
		l->ready = c;
	l->ready_tail = c;
	l->nr_ready++;
}

int xs_listener_poll(struct xs_listener *l, bool drain)
{
	struct rdma_cm_event *ev;

	while (drain && rdma_get_cm_event(l->ch, &ev) == 0)
		listener_event(l, ev);
	return (int)l->nr_ready;
}

int xs_listener_accept(struct xs_listener *l, struct xs_conn **out,
		       int timeout_ms)
{
	int64_t deadline = conn_now_ms() + timeout_ms;
	struct rdma_cm_event *ev;
	int rc = 0;

	xs_stream_news_bump(); /* what is left queued stays readable */
	while (!l->ready) {
		rc = conn_next_event(l->ch, deadline, &ev);
		if (rc == -ETIMEDOUT)
			rc = -EAGAIN;
		if (rc)
			break;
		listener_event(l, ev);
	}
	if (l->ready) {
		*out = l->ready;
		l->ready = l->ready->next;
		if (!l->ready)
			l->ready_tail = NULL;
		l->nr_ready--;
		rc = 0;
	}
	return rc;
}

void xs_listener_requeue(struct xs_listener *l, struct xs_conn *c)
{
	c->next = l->ready;
	l->ready = c;
	if (!l->ready_tail)
		l->ready_tail = c;
	l->nr_ready++;
	xs_stream_news_bump(); /* readable again */
}

void xs_listener_destroy(struct xs_listener *l)
{
	struct xs_conn *c;

	if (!l)
		return;
	while ((c = l->ready)) {
		l->ready = c->next;
		xs_conn_destroy(c);
	}
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
}

/* One SEND of the @n pieces at @sge, @len bytes in all: inline when they
 * fit max_inline, else from registered memory (@registered) or -EINVAL. */
static int conn_post_sges(struct xs_conn *c, struct ibv_sge *sge, int n,
			  uint32_t len, bool registered, uint64_t wr_id,
			  bool signaled)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = sge,
		.num_sge = n,
		.opcode = IBV_WR_SEND,
		.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) |
			      IBV_SEND_SOLICITED,
	}, *bad;

	if (len <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	else if (!registered)
		return -EINVAL;
	return -ibv_post_send(c->id->qp, &wr, &bad); /* verbs: +errno */
}

int xs_conn_post_send2(struct xs_conn *c, const void *head, uint32_t head_len,
		       const void *tail, uint32_t tail_len, uint64_t wr_id,
		       bool signaled)
{
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)head, .length = head_len },
		{ .addr = (uintptr_t)tail, .length = tail_len },
	};

	if (c->max_send_sge < 2)
		return -EINVAL;
	return conn_post_sges(c, sge, 2, head_len + tail_len, false, wr_id,
			      signaled);
}

int xs_conn_post_send(struct xs_conn *c, const void *buf, uint32_t len,
		      const struct xs_buf *b, uint64_t wr_id, bool signaled)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf,
		.length = len,
		.lkey = b ? b->lkey : 0,
	};

	return conn_post_sges(c, &sge, 1, len, b != NULL, wr_id, signaled);
}

int xs_conn_post_rndv(struct xs_conn *c, unsigned int w, uint32_t rkey,
		      const struct xs_buf *region, uint32_t len,
		      const void *msg, uint32_t msg_len,
		      const struct xs_buf *msg_buf, uint64_t bind_wr_id,
		      uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)msg,
		.length = msg_len,
		.lkey = msg_buf ? msg_buf->lkey : 0,
	};
	struct ibv_send_wr send = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
	};
	struct ibv_send_wr bind = {
		.wr_id = bind_wr_id,
		.next = &send,
		.opcode = IBV_WR_BIND_MW,
		.bind_mw = {
			.mw = c->mw[w],
			.rkey = rkey,
			.bind_info = {
				.mr = region->mr,
				.addr = (uintptr_t)region->addr,
				.length = len,
				.mw_access_flags = IBV_ACCESS_REMOTE_READ,
			},
		},
	}, *bad;
	int rc;

	if (w >= c->nr_mw || len > region->size)
		return -EINVAL;
	if (msg_len <= c->max_inline)
		send.send_flags |= IBV_SEND_INLINE;
	else if (!msg_buf)
		return -EINVAL;
	rc = ibv_post_send(c->id->qp, &bind, &bad);
	if (rc)
		return -rc; /* verbs: +errno */
	/* The bind names the window by its current rkey (rxe checks it):
	 * from now on that is @rkey. */
	c->mw[w]->rkey = rkey;
	return 0;
}

int xs_conn_post_read(struct xs_conn *c, const struct xs_buf *dst, uint32_t len,
		      uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)dst->addr,
		.length = len,
		.lkey = dst->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	if (len > dst->size)
		return -EINVAL;
	return -ibv_post_send(c->id->qp, &wr, &bad); /* verbs: +errno */
}

int xs_conn_post_inv(struct xs_conn *c, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.opcode = IBV_WR_LOCAL_INV,
		.send_flags = IBV_SEND_SIGNALED,
		.invalidate_rkey = rkey,
	}, *bad;

	return -ibv_post_send(c->id->qp, &wr, &bad); /* verbs: +errno */
}

int xs_conn_post_probe(struct xs_conn *c, uint64_t wr_id)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad; /* no SGE: zero bytes, no address, no rkey */

	return -ibv_post_send(c->id->qp, &wr, &bad); /* verbs: +errno */
}

int xs_conn_grow_rx(struct xs_conn *c, unsigned int n)
{
	unsigned int i, from = c->rx_live;
	int rc = 0;

	if (n > c->nr_rx - from)
		return -EINVAL;
	for (i = from; i < from + n; i++) {
		rc = xs_pool_alloc(&c->dev->pool, c->local.eager_size,
				   &c->rx[i]);
		if (rc)
			break;
	}
	if (rc) { /* all or none: the window grows by n or not at all */
		while (i-- > from) /* the ones before the failed one */
			xs_pool_free(&c->dev->pool, &c->rx[i]);
		return rc;
	}
	c->rx_live = from + n;
	for (i = from; i < from + n && rc == 0; i++)
		rc = xs_conn_repost_recv(c, i);
	return rc;
}

int xs_conn_repost_recv(struct xs_conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)c->rx[i].addr,
		.length = (uint32_t)c->rx[i].size,
		.lkey = c->rx[i].lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = i,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad); /* verbs: +errno */
}
