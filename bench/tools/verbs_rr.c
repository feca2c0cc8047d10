/*
 * bench/tools/verbs_rr.c - the fabric's ceiling for small-message RPC:
 * request/response on raw verbs, a figure to set beside xsock's.
 *
 * rdma-core only: librdmacm sets the connections up, libibverbs moves the
 * data (RC QPs, SEND/RECV, inline where the message fits, every QP of the
 * process on one busy-polled CQ). See usage() and bench/README.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h> /* isfinite(), a macro: no libm */
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "args.h"
#include "samples.h"

#define VERBS_RR_MAGIC	      0x56525231u /* "VRR1", opens the client's hello */
#define VERBS_RR_MAX_SIZE     (1u << 20)  /* bytes of a request or response */
#define VERBS_RR_DEFAULT_SIZE 64
#define VERBS_RR_MAX_CONNS    4096
#define VERBS_RR_RQ_DEPTH     4	   /* receives posted per QP */
#define VERBS_RR_SQ_DEPTH     4	   /* sends per QP, every one signalled */
#define VERBS_RR_MAX_INLINE   256  /* inline bytes asked of each QP */
#define VERBS_RR_CQ_START     1024 /* the server's CQ, grown on demand */
#define VERBS_RR_POLL_BATCH   16
#define VERBS_RR_BACKLOG      1024
#define VERBS_RR_RESOLVE_MS   2000  /* address, route resolution */
#define VERBS_RR_CM_WAIT_MS   10000 /* client: any one CM event */
#define VERBS_RR_CM_EVERY     1024  /* server: CM events every N CQ polls */
#define VERBS_RR_IDLE_WAIT_MS 200   /* server without connections: nap */
#define VERBS_RR_WARMUP_NS    200000000ull
#define VERBS_RR_CHECK_NS     50000000ull    /* client: CM and stall checks */
#define VERBS_RR_STALL_NS     10000000000ull /* client: no completion */
#define VERBS_RR_REJ_CONSUMER 28 /* IB CM reject reason of rdma_reject() */

/* CQEs one QP can have in the CQ at once */
#define VERBS_RR_QP_CQES (VERBS_RR_RQ_DEPTH + VERBS_RR_SQ_DEPTH)

/*
 * The client's hello, the private data of its connect request: the size
 * of every request it will send, so that the server sizes its buffers.
 * Both fields big-endian.
 */
struct verbs_rr_hello {
	uint32_t magic;
	uint32_t size;
};

/*
 * Work request ids: the connection and buffer a completion belongs to.
 *
 *   63         32 31            8 7              1 0
 *  +-------------+---------------+----------------+------+
 *  | generation  | slot          | receive buffer | send |
 *  +-------------+---------------+----------------+------+
 *
 * The CQ is shared, and a destroyed QP's completions may still wait in
 * it (rxe leaves them): the slot's generation tells them from those of
 * the slot's next connection, and they are dropped.
 */
#define WRID_SEND	1ull
#define WRID_BUF_SHIFT	1
#define WRID_BUF_MASK	0x7full
#define WRID_SLOT_SHIFT 8
#define WRID_SLOT_MASK	0xffffffull
#define WRID_GEN_SHIFT	32

_Static_assert(VERBS_RR_RQ_DEPTH <= WRID_BUF_MASK + 1, "buffer index bits");

static uint64_t wrid_make(uint32_t gen, uint32_t slot, unsigned int buf,
			  int send)
{
	return (uint64_t)gen << WRID_GEN_SHIFT |
	       ((uint64_t)slot & WRID_SLOT_MASK) << WRID_SLOT_SHIFT |
	       ((uint64_t)buf & WRID_BUF_MASK) << WRID_BUF_SHIFT |
	       (send ? WRID_SEND : 0);
}

static uint32_t wrid_gen(uint64_t id)
{
	return (uint32_t)(id >> WRID_GEN_SHIFT);
}

static uint32_t wrid_slot(uint64_t id)
{
	return (uint32_t)(id >> WRID_SLOT_SHIFT & WRID_SLOT_MASK);
}

static unsigned int wrid_buf(uint64_t id)
{
	return (unsigned int)(id >> WRID_BUF_SHIFT & WRID_BUF_MASK);
}

/* One connection: its QP, and its buffers in one MR. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char *buf;	      /* the receive buffers, then the send one */
	size_t size;	      /* bytes of each buffer: the message size */
	uint32_t max_inline;  /* the QP's inline limit */
	uint32_t slot;	      /* index in struct fabric's conns */
	uint32_t gen;	      /* the slot's generation when this took it */
	unsigned int sq_used; /* sends not completed (cf. TCP packets_out) */
	unsigned int owed;    /* sends due while the send queue was full */
	uint32_t owed_len;    /* bytes of the send owed */
	uint64_t sent_ns;     /* client: when the request in flight went */
	int closing;	      /* server: going; its completions are dropped */
	char peer[INET6_ADDRSTRLEN + 8];
};

/* What every connection of the process shares. */
struct fabric {
	struct rdma_event_channel *ch;
	struct ibv_context *verbs; /* the device of every QP */
	struct ibv_pd *pd;
	struct ibv_cq *cq;   /* every QP's sends and receives */
	int max_cqe;	     /* the device's limit */
	struct conn **conns; /* by slot; NULL: free */
	uint32_t *gens;	     /* by slot: bumped at each new owner */
	uint32_t nr_slots;
	uint32_t nr_conns;
};

/* the signal that asked the server to stop (SIGTERM, SIGINT), 0 while none */
static volatile sig_atomic_t stop_signal;

static void __attribute__((noreturn)) usage(const char *why)
{
	if (why)
		fprintf(stderr, "verbs_rr: %s\n", why);
	fputs("usage: verbs_rr server ADDR PORT\n"
	      "       verbs_rr client ADDR PORT CONNS SECONDS [SIZE]\n"
	      "server: answers every request with a response of its size, on\n"
	      "  any number of connections; prints \"verbs_rr listening ADDR\n"
	      "  PORT\"; runs until SIGTERM or SIGINT\n"
	      "client: CONNS connections, one SIZE-byte request (default 64)\n"
	      "  outstanding on each, for SECONDS after a 0.2 s warm-up; "
	      "prints\n"
	      "  \"verbs_rr conns=N size=B seconds=S transactions=T rate=R\n"
	      "  p50_us=A p99_us=B\": R transactions/s over all connections,\n"
	      "  A and B one-way latency (round trip / 2, as perftest)\n"
	      "errors: a line on stderr, exit 1; bad usage exits 2\n",
	      stderr);
	exit(2);
}

/* ----------------------------------------------------------------------
 * Arguments, clock, samples
 */

/* One-way latency in us: the round trip's percentile @p, halved. */
static double samples_oneway_us(const struct samples *s, double p)
{
	return samples_pct_us(s, p) / 2;
}

/* ----------------------------------------------------------------------
 * Verbs: the shared PD and CQ, one QP and its buffers per connection
 */

/**
 * fabric_open() - the PD and the shared CQ, on the device of the first QP
 * @f:     fabric, its verbs still NULL
 * @verbs: the device context rdma_cm resolved
 * @cqe:   CQ entries wanted; at most the device's max_cqe
 *
 * Context: dies on failure; a CQ too small for @cqe is the caller's error.
 */
static void fabric_open(struct fabric *f, struct ibv_context *verbs, int cqe)
{
	struct ibv_device_attr attr;
	int rc;

	rc = ibv_query_device(verbs, &attr); /* verbs: +errno */
	if (rc)
		die_err(rc, "ibv_query_device");
	f->max_cqe = attr.max_cqe;
	if (cqe > f->max_cqe)
		die_err(0, "%d CQ entries needed, the device has at most %d",
			cqe, f->max_cqe);
	f->verbs = verbs;
	f->pd = ibv_alloc_pd(verbs);
	if (!f->pd)
		die_err(errno, "ibv_alloc_pd");
	f->cq = ibv_create_cq(verbs, cqe, NULL, NULL, 0);
	if (!f->cq)
		die_err(errno, "ibv_create_cq %d entries", cqe);
}

/* Tear down what fabric_open() made; no QP may use it any more. */
static void fabric_close(struct fabric *f)
{
	if (f->cq && ibv_destroy_cq(f->cq))
		fprintf(stderr, "verbs_rr: ibv_destroy_cq failed\n");
	if (f->pd && ibv_dealloc_pd(f->pd))
		fprintf(stderr, "verbs_rr: ibv_dealloc_pd failed\n");
	free(f->conns);
	free(f->gens);
}

/* A free slot of @f, the table grown when full; dies out of memory. */
static uint32_t fabric_slot(struct fabric *f)
{
	uint32_t i, nr;
	void *p;

	for (i = 0; i < f->nr_slots; i++)
		if (!f->conns[i])
			return i;
	nr = f->nr_slots ? 2 * f->nr_slots : 64;
	if (nr > WRID_SLOT_MASK + 1)
		die_err(0, "more than %llu connections", WRID_SLOT_MASK + 1);
	p = realloc(f->conns, nr * sizeof(*f->conns));
	if (!p)
		die_err(ENOMEM, "realloc");
	f->conns = p;
	p = realloc(f->gens, nr * sizeof(*f->gens));
	if (!p)
		die_err(ENOMEM, "realloc");
	f->gens = p;
	for (i = f->nr_slots; i < nr; i++) {
		f->conns[i] = NULL;
		f->gens[i] = 0;
	}
	i = f->nr_slots;
	f->nr_slots = nr;
	return i;
}

/*
 * The connection a completion belongs to, or NULL for one of a
 * connection already destroyed.
 */
static struct conn *fabric_lookup(const struct fabric *f, uint64_t wr_id)
{
	uint32_t slot = wrid_slot(wr_id);
	struct conn *c;

	if (slot >= f->nr_slots)
		return NULL;
	c = f->conns[slot];
	if (!c || c->gen != wrid_gen(wr_id))
		return NULL;
	return c;
}

/*
 * Post receive buffer @i of @c.
 * Return: 0, or a positive errno (libibverbs' convention, kept).
 */
static int conn_post_recv(struct conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->buf + (size_t)i * c->size),
		.length = (uint32_t)c->size,
		.lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = wrid_make(c->gen, c->slot, i, 0),
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

/*
 * Send @len bytes of @c's send buffer (never written after the start:
 * its bytes are the same for every send), inline when they fit.
 * Return: 0, or a positive errno (libibverbs' convention, kept).
 */
static int conn_post_send(struct conn *c, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->buf + VERBS_RR_RQ_DEPTH * c->size),
		.length = len,
		.lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wrid_make(c->gen, c->slot, 0, 1),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int rc;

	if (len <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	rc = ibv_post_send(c->id->qp, &wr, &bad);
	if (!rc)
		c->sq_used++;
	return rc;
}

/*
 * Send @len bytes now, or as soon as a send completes when the send
 * queue is full (every send is signalled: each frees its slot when its
 * completion is polled).
 * Return: 0, or a positive errno from ibv_post_send.
 */
static int conn_send_or_owe(struct conn *c, uint32_t len)
{
	if (c->sq_used < VERBS_RR_SQ_DEPTH)
		return conn_post_send(c, len);
	c->owed++;
	c->owed_len = len;
	return 0;
}

/* A send of @c completed: its queue slot is free for a send owed. */
static int conn_send_done(struct conn *c)
{
	c->sq_used--;
	if (!c->owed)
		return 0;
	c->owed--;
	return conn_post_send(c, c->owed_len);
}

/**
 * conn_create() - QP, buffers and posted receives for a new rdma_cm id
 * @f:    fabric, open on @id's device
 * @id:   resolved (client) or requested (server) id; its context is set
 * @size: bytes of each message on it
 * @call: set to what failed
 *
 * Return: the connection, or NULL with errno set (the id is left as it
 * was, for the caller to reject or destroy).
 */
static struct conn *conn_create(struct fabric *f, struct rdma_cm_id *id,
				size_t size, const char **call)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = f->cq,
		.recv_cq = f->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = VERBS_RR_SQ_DEPTH,
			.max_recv_wr = VERBS_RR_RQ_DEPTH,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	size_t len = (VERBS_RR_RQ_DEPTH + 1) * size;
	struct sockaddr *sa;
	struct conn *c;
	unsigned int i;
	int rc, err;

	*call = "calloc";
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->size = size;
	sa = rdma_get_peer_addr(id);
	if (sa->sa_family == AF_INET &&
	    inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer,
		      INET6_ADDRSTRLEN))
		snprintf(c->peer + strlen(c->peer), 8, ":%u",
			 ntohs(rdma_get_dst_port(id)));
	else
		snprintf(c->peer, sizeof(c->peer), "?");

	*call = "posix_memalign";
	rc = posix_memalign((void **)&c->buf, 4096, len);
	if (rc) {
		errno = rc;
		goto out_free_conn;
	}
	memset(c->buf, 'r', len);
	*call = "ibv_reg_mr";
	c->mr = ibv_reg_mr(f->pd, c->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		goto out_free_buf;

	/* inline where the device takes it; a QP without, where not */
	attr.cap.max_inline_data = size < VERBS_RR_MAX_INLINE
					   ? (uint32_t)size
					   : VERBS_RR_MAX_INLINE;
	*call = "rdma_create_qp";
	if (rdma_create_qp(id, f->pd, &attr)) { /* rdmacm: -1, errno */
		attr.cap.max_inline_data = 0;
		if (rdma_create_qp(id, f->pd, &attr))
			goto out_dereg_mr;
	}
	c->max_inline = attr.cap.max_inline_data;

	c->slot = fabric_slot(f);
	c->gen = ++f->gens[c->slot];
	for (i = 0; i < VERBS_RR_RQ_DEPTH; i++) {
		*call = "ibv_post_recv";
		rc = conn_post_recv(c, i); /* verbs: +errno */
		if (rc) {
			errno = rc;
			goto out_destroy_qp;
		}
	}
	f->conns[c->slot] = c;
	f->nr_conns++;
	id->context = c;
	return c;

out_destroy_qp:
	err = errno;
	rdma_destroy_qp(id);
	errno = err;
out_dereg_mr:
	err = errno;
	ibv_dereg_mr(c->mr);
	errno = err;
out_free_buf:
	free(c->buf);
out_free_conn:
	free(c);
	return NULL;
}

/*
 * Destroy @c's QP, its buffers and its rdma_cm id (whose events must all
 * be acknowledged). Completions of it still in the CQ are dropped by
 * fabric_lookup().
 */
static void conn_destroy(struct fabric *f, struct conn *c)
{
	f->conns[c->slot] = NULL;
	f->nr_conns--;
	rdma_destroy_qp(c->id);
	if (ibv_dereg_mr(c->mr))
		fprintf(stderr, "verbs_rr: ibv_dereg_mr failed\n");
	if (rdma_destroy_id(c->id))
		fprintf(stderr, "verbs_rr: rdma_destroy_id: %s\n",
			strerror(errno));
	free(c->buf);
	free(c);
}

/* Why a connection did not come up, or ended, in @ev: in words. */
static void cm_event_why(const struct rdma_cm_event *ev, char *buf, size_t len)
{
	int st = ev->status;

	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		snprintf(buf, len,
			 "connection refused (rejected, reason %d: %s)", st,
			 st == VERBS_RR_REJ_CONSUMER
				 ? "by the server"
				 : "no server on the port?");
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		snprintf(buf, len, "disconnected by the peer");
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		snprintf(buf, len, "peer unreachable (status %d%s%s)", st,
			 st < 0 ? ": " : "", st < 0 ? strerror(-st) : "");
		break;
	default:
		snprintf(buf, len, "%s (status %d%s%s)",
			 rdma_event_str(ev->event), st, st < 0 ? ": " : "",
			 st < 0 ? strerror(-st) : "");
		break;
	}
}

/* ----------------------------------------------------------------------
 * server: every request answered at once, one CQ for all
 */

static void on_stop(int sig)
{
	stop_signal = sig;
}

/* SIGTERM and SIGINT stop the server; no SA_RESTART: its nap sees EINTR */
static void signals_setup(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	if (sigemptyset(&sa.sa_mask) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGINT, &sa, NULL) < 0)
		die_err(errno, "sigaction");
}

/*
 * Make room in the shared CQ for one more connection, with as much again
 * to spare for the completions of destroyed QPs not polled yet.
 * Return: 0, or a positive errno (ENOSPC past the device's max_cqe).
 */
static int server_cq_room(struct fabric *f)
{
	int need = (int)(f->nr_conns + 1) * VERBS_RR_QP_CQES * 2;
	int cqe = f->cq->cqe;

	if (need <= cqe)
		return 0;
	if (need > f->max_cqe)
		return ENOSPC;
	cqe = 2 * cqe > f->max_cqe ? f->max_cqe : 2 * cqe;
	if (cqe < need)
		cqe = need;
	return ibv_resize_cq(f->cq, cqe); /* verbs: +errno */
}

/*
 * A connect request on @id: accept it with a new QP, or reject it with a
 * line on stderr saying why. @pdata is the client's hello.
 */
static void server_request(struct fabric *f, struct rdma_cm_id *id,
			   const void *pdata, uint8_t pdata_len)
{
	struct rdma_conn_param param = {
		.retry_count = 7,
		.rnr_retry_count = 7, /* RNR NAKs retried for ever */
	};
	struct verbs_rr_hello hello;
	const char *call = "hello";
	struct conn *c;
	uint32_t size;
	int rc;

	if (!pdata || pdata_len < sizeof(hello)) {
		errno = EPROTO;
		goto out_reject;
	}
	memcpy(&hello, pdata, sizeof(hello));
	size = ntohl(hello.size);
	if (ntohl(hello.magic) != VERBS_RR_MAGIC || !size ||
	    size > VERBS_RR_MAX_SIZE) {
		errno = EPROTO;
		goto out_reject;
	}
	if (!f->verbs)
		fabric_open(f, id->verbs, VERBS_RR_CQ_START);
	if (id->verbs != f->verbs) {
		call = "a second device (one CQ serves one)";
		errno = EXDEV;
		goto out_reject;
	}
	call = "ibv_resize_cq";
	rc = server_cq_room(f);
	if (rc) {
		errno = rc;
		goto out_reject;
	}
	c = conn_create(f, id, size, &call);
	if (!c)
		goto out_reject;
	if (rdma_accept(id, &param)) { /* rdmacm: -1, errno */
		fprintf(stderr, "verbs_rr: rdma_accept %s: %s\n", c->peer,
			strerror(errno));
		conn_destroy(f, c);
	}
	return;

out_reject:
	fprintf(stderr, "verbs_rr: connection refused: %s: %s\n", call,
		strerror(errno));
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
}

/*
 * Handle every CM event waiting on the (non-blocking) channel: connect
 * requests, and the ends of connections.
 */
static void server_cm_drain(struct fabric *f)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	struct rdma_cm_id *id;
	uint8_t pdata[64];
	uint8_t pdata_len;
	struct conn *c;

	while (!rdma_get_cm_event(f->ch, &ev)) {
		type = ev->event;
		id = ev->id;
		pdata_len = 0;
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    ev->param.conn.private_data) {
			pdata_len = ev->param.conn.private_data_len;
			if (pdata_len > sizeof(pdata))
				pdata_len = sizeof(pdata);
			memcpy(pdata, ev->param.conn.private_data, pdata_len);
		}
		/* before destroying the id: rdma_destroy_id() waits for it */
		rdma_ack_cm_event(ev);

		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			server_request(f, id, pdata_len ? pdata : NULL,
				       pdata_len);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			c = id->context;
			if (c)
				conn_destroy(f, c);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			die_err(0, "the RDMA device went away");
		default: /* ESTABLISHED, TIMEWAIT_EXIT, ADDR_CHANGE */
			break;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		die_err(errno, "rdma_get_cm_event");
}

/*
 * A completion on the server: a request is answered at once with as many
 * bytes, its buffer posted again; a send frees its queue slot. A failed
 * one ends its connection (one line on stderr), not the server.
 */
static void server_wc(struct fabric *f, const struct ibv_wc *wc)
{
	struct conn *c = fabric_lookup(f, wc->wr_id);
	const char *call = "ibv_post_send";
	int rc;

	if (!c || c->closing)
		return;
	if (wc->status == IBV_WC_WR_FLUSH_ERR)
		goto out_close; /* the QP is in error: the CM says why */
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "verbs_rr: %s: %s completion: %s\n", c->peer,
			wc->wr_id & WRID_SEND ? "send" : "receive",
			ibv_wc_status_str(wc->status));
		goto out_close;
	}
	if (wc->wr_id & WRID_SEND) {
		rc = conn_send_done(c); /* verbs: +errno */
	} else {
		/* a request of at most c->size bytes: a buffer of that much */
		rc = conn_send_or_owe(c, wc->byte_len);
		if (!rc) {
			call = "ibv_post_recv";
			rc = conn_post_recv(c, wrid_buf(wc->wr_id));
		}
	}
	if (!rc)
		return;
	fprintf(stderr, "verbs_rr: %s: %s: %s\n", c->peer, call, strerror(rc));
out_close:
	/* DISCONNECTED follows, and conn_destroy() */
	c->closing = 1;
	rdma_disconnect(c->id);
}

static int do_server(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_parse(ip, port);
	struct ibv_wc wcs[VERBS_RR_POLL_BATCH];
	struct fabric f = { 0 };
	struct rdma_cm_id *listen_id;
	struct pollfd pfd;
	unsigned int spins = 0;
	int i, n, flags;

	signals_setup();
	f.ch = rdma_create_event_channel();
	if (!f.ch)
		die_err(errno, "rdma_create_event_channel");
	flags = fcntl(f.ch->fd, F_GETFL);
	if (flags < 0 || fcntl(f.ch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		die_err(errno, "fcntl O_NONBLOCK");
	if (rdma_create_id(f.ch, &listen_id, NULL, RDMA_PS_TCP))
		die_err(errno, "rdma_create_id");
	if (rdma_bind_addr(listen_id, (struct sockaddr *)&sin))
		die_err(errno, "rdma_bind_addr %s:%s", ip, port);
	if (rdma_listen(listen_id, VERBS_RR_BACKLOG))
		die_err(errno, "rdma_listen %s:%s", ip, port);
	if (printf("verbs_rr listening %s %u\n", ip,
		   ntohs(rdma_get_src_port(listen_id))) < 0 ||
	    fflush(stdout) != 0)
		die_err(errno, "stdout");

	pfd.fd = f.ch->fd;
	pfd.events = POLLIN;
	while (!stop_signal) {
		if (!f.nr_conns) {
			/* nothing to poll: wait for a connect request */
			if (poll(&pfd, 1, VERBS_RR_IDLE_WAIT_MS) < 0 &&
			    errno != EINTR)
				die_err(errno, "poll");
			server_cm_drain(&f);
			continue;
		}
		n = ibv_poll_cq(f.cq, VERBS_RR_POLL_BATCH, wcs);
		if (n < 0)
			die_err(0, "ibv_poll_cq failed (%d)", n);
		for (i = 0; i < n; i++)
			server_wc(&f, &wcs[i]);
		if (++spins % VERBS_RR_CM_EVERY == 0)
			server_cm_drain(&f);
	}

	for (i = 0; (uint32_t)i < f.nr_slots; i++)
		if (f.conns[i]) {
			rdma_disconnect(f.conns[i]->id);
			conn_destroy(&f, f.conns[i]);
		}
	if (rdma_destroy_id(listen_id))
		die_err(errno, "rdma_destroy_id");
	fabric_close(&f);
	rdma_destroy_event_channel(f.ch);
	return 0;
}

/* ----------------------------------------------------------------------
 * client: CONNS connections, one request in flight on each
 */

struct client {
	struct fabric f;
	struct samples s;
	uint32_t size;
	uint64_t t_start, t_end; /* the measured window */
	uint64_t last_ns;	 /* the last completion */
	unsigned int nr_active;	 /* connections with a request in flight */
};

/*
 * Wait for the next CM event on @ch, which must be @want for @id; any
 * other, or none within VERBS_RR_CM_WAIT_MS, is fatal. @what names
 * the step for the message.
 */
static void cm_wait(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		    enum rdma_cm_event_type want, const char *what)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	char why[160];
	int n;

	do
		n = poll(&pfd, 1, VERBS_RR_CM_WAIT_MS);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die_err(errno, "%s: poll", what);
	if (n == 0)
		die_err(ETIMEDOUT, "%s: no %s within %d ms", what,
			rdma_event_str(want), VERBS_RR_CM_WAIT_MS);
	if (rdma_get_cm_event(ch, &ev))
		die_err(errno, "%s: rdma_get_cm_event", what);
	if (ev->event == want && ev->id == id && !ev->status) {
		rdma_ack_cm_event(ev);
		return;
	}
	cm_event_why(ev, why, sizeof(why));
	rdma_ack_cm_event(ev);
	die_err(0, "%s: %s", what, why);
}

/* Connection @i of @n to @dst: resolved, its QP made, established. */
static struct conn *
client_connect(struct client *cl, const struct sockaddr_in *dst, long i, long n)
{
	struct verbs_rr_hello hello = {
		.magic = htonl(VERBS_RR_MAGIC),
		.size = htonl(cl->size),
	};
	struct rdma_conn_param param = {
		.private_data = &hello,
		.private_data_len = sizeof(hello),
		.retry_count = 7,
		.rnr_retry_count = 7, /* RNR NAKs retried for ever */
	};
	struct fabric *f = &cl->f;
	struct rdma_cm_id *id;
	char what[96], ip[INET_ADDRSTRLEN];
	const char *call;
	struct conn *c;

	if (!inet_ntop(AF_INET, &dst->sin_addr, ip, sizeof(ip)))
		die_err(errno, "inet_ntop");
	snprintf(what, sizeof(what), "%s:%u (connection %ld of %ld)", ip,
		 ntohs(dst->sin_port), i + 1, n);
	if (rdma_create_id(f->ch, &id, NULL, RDMA_PS_TCP))
		die_err(errno, "%s: rdma_create_id", what);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)dst,
			      VERBS_RR_RESOLVE_MS))
		die_err(errno, "%s: rdma_resolve_addr", what);
	cm_wait(f->ch, id, RDMA_CM_EVENT_ADDR_RESOLVED, what);
	if (rdma_resolve_route(id, VERBS_RR_RESOLVE_MS))
		die_err(errno, "%s: rdma_resolve_route", what);
	cm_wait(f->ch, id, RDMA_CM_EVENT_ROUTE_RESOLVED, what);

	if (!f->verbs)
		fabric_open(f, id->verbs, (int)n * VERBS_RR_QP_CQES);
	if (id->verbs != f->verbs)
		die_err(0,
			"%s: resolved to a second device (one CQ serves one)",
			what);
	c = conn_create(f, id, cl->size, &call);
	if (!c)
		die_err(errno, "%s: %s", what, call);
	if (rdma_connect(id, &param))
		die_err(errno, "%s: rdma_connect", what);
	cm_wait(f->ch, id, RDMA_CM_EVENT_ESTABLISHED, what);
	return c;
}

/*
 * A completion on the client. A response: its round trip is a sample
 * when it came inside the window, and the next request goes at once
 * until the window ends. Any failure is fatal.
 */
static void client_wc(struct client *cl, const struct ibv_wc *wc)
{
	struct conn *c = fabric_lookup(&cl->f, wc->wr_id);
	uint64_t now;
	int rc;

	if (!c)
		die_err(0, "a completion of no connection (wr_id %#llx)",
			(unsigned long long)wc->wr_id);
	if (wc->status != IBV_WC_SUCCESS)
		die_err(0, "connection %u: %s completion: %s", c->slot + 1,
			wc->wr_id & WRID_SEND ? "send" : "receive",
			ibv_wc_status_str(wc->status));
	if (wc->wr_id & WRID_SEND) {
		if (c->owed)
			c->sent_ns = args_now_ns();
		rc = conn_send_done(c); /* verbs: +errno */
		if (rc)
			die_err(rc, "connection %u: ibv_post_send",
				c->slot + 1);
		return;
	}

	now = args_now_ns();
	cl->last_ns = now;
	if (wc->byte_len != cl->size)
		die_err(0, "connection %u: a response of %u bytes, not %u",
			c->slot + 1, wc->byte_len, cl->size);
	if (now >= cl->t_start && now < cl->t_end)
		if (samples_add(&cl->s, now - c->sent_ns))
			die_err(ENOMEM, "realloc %zu samples", cl->s.nr);
	rc = conn_post_recv(c, wrid_buf(wc->wr_id)); /* verbs: +errno */
	if (rc)
		die_err(rc, "connection %u: ibv_post_recv", c->slot + 1);
	if (now >= cl->t_end) {
		cl->nr_active--;
		return;
	}
	c->sent_ns = now;
	rc = conn_send_or_owe(c, cl->size);
	if (rc)
		die_err(rc, "connection %u: ibv_post_send", c->slot + 1);
}

/* Between polls: no completion for too long, or a CM event, is fatal. */
static void client_check(struct client *cl, uint64_t now)
{
	struct pollfd pfd = { .fd = cl->f.ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	char why[160];
	long slot = -1;

	if (now - cl->last_ns > VERBS_RR_STALL_NS)
		die_err(ETIMEDOUT, "no response for %llu s on %u connections",
			VERBS_RR_STALL_NS / 1000000000ull, cl->nr_active);
	if (poll(&pfd, 1, 0) <= 0)
		return;
	if (rdma_get_cm_event(cl->f.ch, &ev))
		die_err(errno, "rdma_get_cm_event");
	if (ev->id && ev->id->context)
		slot = ((struct conn *)ev->id->context)->slot;
	cm_event_why(ev, why, sizeof(why));
	rdma_ack_cm_event(ev);
	die_err(0, "connection %ld: %s during the run", slot + 1, why);
}

static int do_client(const char *ip, const char *port, const char *conns,
		     const char *secs, const char *size)
{
	struct sockaddr_in dst = addr_parse(ip, port);
	long nr = count_parse(conns, 1, VERBS_RR_MAX_CONNS,
			      "CONNS must be a count from 1 to 4096");
	struct ibv_wc wcs[VERBS_RR_POLL_BATCH];
	struct client cl = { 0 };
	uint64_t now, next_check;
	unsigned int idle = 0;
	double seconds;
	struct conn *c;
	char *tail;
	long i;
	int n, rc;

	errno = 0;
	seconds = strtod(secs, &tail);
	if (errno || tail == secs || *tail || !isfinite(seconds) ||
	    seconds <= 0 || seconds > 1e6)
		usage("SECONDS must be a number above 0");
	cl.size = size ? (uint32_t)count_parse(size, 1, VERBS_RR_MAX_SIZE,
					       "SIZE must be from 1 to 1048576")
		       : VERBS_RR_DEFAULT_SIZE;
	if (dst.sin_port == 0)
		usage("PORT must not be 0");

	cl.f.ch = rdma_create_event_channel();
	if (!cl.f.ch)
		die_err(errno, "rdma_create_event_channel");
	for (i = 0; i < nr; i++)
		client_connect(&cl, &dst, i, nr);

	/* every connection has its request in flight from here on */
	now = args_now_ns();
	cl.t_start = now + VERBS_RR_WARMUP_NS;
	cl.t_end = cl.t_start + (uint64_t)(seconds * 1e9);
	cl.last_ns = now;
	next_check = now + VERBS_RR_CHECK_NS;
	for (i = 0; (uint32_t)i < cl.f.nr_slots; i++) {
		c = cl.f.conns[i];
		if (!c)
			continue;
		c->sent_ns = args_now_ns();
		rc = conn_post_send(c, cl.size); /* verbs: +errno */
		if (rc)
			die_err(rc, "connection %ld: ibv_post_send", i + 1);
		cl.nr_active++;
	}
	while (cl.nr_active) {
		n = ibv_poll_cq(cl.f.cq, VERBS_RR_POLL_BATCH, wcs);
		if (n < 0)
			die_err(0, "ibv_poll_cq failed (%d)", n);
		for (i = 0; i < n; i++)
			client_wc(&cl, &wcs[i]);
		/* the clock and the CM only now and then while nothing comes */
		if (n == 0 && ++idle % 256)
			continue;
		now = args_now_ns();
		if (now >= next_check) {
			client_check(&cl, now);
			next_check = now + VERBS_RR_CHECK_NS;
		}
	}

	for (i = 0; (uint32_t)i < cl.f.nr_slots; i++) {
		c = cl.f.conns[i];
		if (!c)
			continue;
		rdma_disconnect(c->id);
		conn_destroy(&cl.f, c);
	}
	fabric_close(&cl.f);
	rdma_destroy_event_channel(cl.f.ch);

	if (!cl.s.nr)
		die_err(0, "no response came in the %.2f s measured", seconds);
	samples_sort(&cl.s);
	seconds = (double)(cl.t_end - cl.t_start) / 1e9;
	if (printf("verbs_rr conns=%ld size=%u seconds=%.2f transactions=%zu "
		   "rate=%.1f p50_us=%.2f p99_us=%.2f\n",
		   nr, cl.size, seconds, cl.s.nr, (double)cl.s.nr / seconds,
		   samples_oneway_us(&cl.s, 0.50),
		   samples_oneway_us(&cl.s, 0.99)) < 0 ||
	    fflush(stdout) != 0)
		die_err(errno, "stdout");
	free(cl.s.v);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return do_server(argv[2], argv[3]);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "client"))
		return do_client(argv[2], argv[3], argv[4], argv[5],
				 argc == 7 ? argv[6] : NULL);
	usage(NULL);
}
