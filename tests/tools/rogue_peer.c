/*
 * tests/tools/rogue_peer.c - a hostile xsock client on raw verbs.
 *
 * Talks to an xsock server (an echo server under LD_PRELOAD=libxsock.so)
 * with librdmacm and libibverbs directly, never through the library: a
 * valid hello in the CM private data (core/proto.c's encoder), receive
 * buffers posted, then ONE attack on that connection, and it watches how
 * the server ends it. A failed RDMA operation puts the QP in error, so
 * each attack gets a fresh connection (a fresh process).
 *
 *   rogue_peer ADDR PORT ATTACK [BOUND_MS]
 *
 * Malformed messages (the server must reset the connection):
 *   bad-type       a message of type 9
 *   bad-flags      CREDIT with a flag bit no version defines
 *   bad-len        DATA whose header claims 200 bytes, 16 follow
 *   data-long      DATA one byte longer than the server's receive buffer
 *   data-empty     DATA with no payload
 *   rndv-zero      RNDV of 0 bytes
 *   rndv-huge      RNDV of the server's max_rndv + 1 bytes
 *   rndv-wrap      RNDV whose addr + len wraps the address space
 *   done-bogus     RNDV_DONE for an id the server never exposed
 *   credits-wrap   CREDIT returning 4096 credits (none were taken)
 *   credits-plus1  CREDIT returning 1 credit (none were taken)
 *   grow-past      CREDIT flagged XS_WIRE_F_GROW until the window would
 *                  pass the rogue's hello (32 buffers: three doublings
 *                  from 4 are honest and must not reset, the fourth lies)
 *   data-after-fin FIN, then DATA
 *   data-after-move MOVE (the rest on kernel TCP), then DATA
 *   move-twice     MOVE, then MOVE again
 *   credit-overrun DATA past the server's credits: the rogue returns no
 *                  credit for the echo, so the server's writer blocks and
 *                  stops reading; the server keeps up to 4 MiB unread and
 *                  then grants no more; the rogue goes on sending, to 16
 *                  MiB
 * Rendezvous regions of the rogue the server cannot READ (reset):
 *   rndv-badkey    RNDV with the rogue region's rkey, one key byte off
 *   rndv-badaddr   RNDV 16 MiB past the rogue's region
 * The server's own region: the rogue sends 64 KiB, the echo comes back as
 * RNDV {addr, rkey, len} of a region of the server's, then:
 *   read-in        READ it whole, as a peer should (must succeed, bytes
 *                  as sent: proves the set-up of the others)
 *   read-below     READ 64 bytes at addr - 4096
 *   read-above     READ 64 bytes at addr + len
 *   read-long      READ len + 1 bytes at addr
 *   read-after-done READ it, RNDV_DONE, a DATA round trip (the server
 *                  has invalidated the window by its echo), READ again
 *   done-twice     READ and release it, then RNDV_DONE for it again
 *                  (reset)
 *   read-past-partial READ and release it, send 40 KiB more, READ 64 bytes
 *                  past the 40 KiB region that comes back: refused, or
 *                  (a device that checks a window's MR, not the window:
 *                  rxe) served from the rest of that region, which may
 *                  hold only earlier bytes of this stream or zeros
 *   rkey-plus1     READ with rkey + 1 (another key byte)
 *   rkey-minus1    READ with rkey - 1
 *   rkey-index     READ with rkey + 0x100 (the next key index)
 *   write-in       RDMA WRITE 64 bytes into the region (read-only)
 *   read-other-qp  READ the region through a second connection
 *
 * Output, one line:
 *   attack NAME: reset after MS ms (HOW)
 *   attack NAME: refused STATUS; reset after MS ms (HOW)
 *   attack read-in: success, N bytes as sent
 *   attack read-past-partial: served past the window, inside its region:
 *                  zeros only | earlier bytes of this stream only
 *   attack NAME: ACCEPTED ...                 (the server took it)
 *   attack NAME: ... not reset within BOUND_MS ms
 * HOW is "disconnected" (RDMA_CM_EVENT_DISCONNECTED) or "RESET" (the
 * message); the rogue's own QP going to error is no evidence (a failed
 * RDMA op of its own does that). MS counts from the attack's post.
 * Diagnostics go to stderr.
 *
 * Exit status: 0 when the attack was refused (or, for read-in, served
 * correctly) and the server ended the connection within BOUND_MS
 * (default 10000); 1 when it was ACCEPTED, not ended in time, or read-in
 * read other bytes; 2 for usage or set-up errors.
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../../core/proto.h"

#define ROGUE_CREDITS 32
/* grow-past: honest doublings first, from a smaller start */
_Static_assert(ROGUE_CREDITS > 2 * XS_WIRE_START_CREDITS,
	       "grow-past needs a window that can double");
#define ROGUE_EAGER    4096u
#define ROGUE_MAX_RNDV (1u << 20)
#define ROGUE_TX_SLOTS 64
#define ROGUE_TX_SLOT  8192u  /* bytes: room for DATA past any eager size */
#define ROGUE_REGION   65536u /* the rogue's own exposed region, bytes */
#define ROGUE_SINK     (2u * ROGUE_REGION) /* READ target, bytes */
/* bytes of read-past-partial's second region: above the server's
 * XSOCK_RNDV_THRESHOLD (32 KiB), so that its echo comes back as a
 * region, and below XSOCK_RNDV_CHUNK (64 KiB), so that the region is
 * exposed in part */
#define ROGUE_PARTIAL 40960u
#define WR_SEND	      (1ull << 32)
#define WR_RDMA	      (1ull << 33)

struct rogue {
	int tcp; /* the connection's TCP half (core/neg.c), kept open */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	uint8_t *rx, *tx, *sink, *expo;
	struct ibv_mr *rx_mr, *tx_mr, *sink_mr, *expo_mr;
	unsigned int nr_rx, tx_next;
	struct xs_hello local, peer;
	unsigned int granted; /* credits the server's messages returned */
	/* received messages, in order, not yet taken */
	struct xs_msg q[64];
	unsigned int q_head, q_len;
	/* completions of our own WRs: wr_id -> status + 1 (0: pending) */
	int done_status[ROGUE_TX_SLOTS + 1];
	/* how and when the server ended the connection */
	const char *ended;
	double ended_ms;
	double flushed_ms; /* when our receives were first flushed */
};

static const char *attack;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "rogue_peer: %s: %s: %s\n", attack ? attack : "-", what,
		strerror(err));
	exit(2);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)((i * 131u + 17u) ^ (i >> 9));
}

static void ended(struct rogue *r, const char *how)
{
	if (!r->ended) {
		r->ended = how;
		r->ended_ms = now_ms();
	}
}

static void post_recv(struct rogue *r, unsigned int i)
{
	struct ibv_sge sge = { (uintptr_t)(r->rx + i * ROGUE_EAGER),
			       ROGUE_EAGER, r->rx_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 },
			   *bad;
	int rc = ibv_post_recv(r->id->qp, &wr, &bad);

	if (rc)
		die("ibv_post_recv", rc); /* verbs: +errno */
}

/* One look at the CQ and the CM channel, sleeping up to @timeout_ms. */
static void pump(struct rogue *r, int timeout_ms)
{
	struct pollfd pfd[2] = { { .fd = r->cc->fd, .events = POLLIN },
				 { .fd = r->ch->fd, .events = POLLIN } };
	struct rdma_cm_event *ev;
	struct ibv_wc wc[16];
	struct ibv_cq *cq;
	struct xs_msg m;
	void *ctx;
	int n, i, rc;

	if (ibv_req_notify_cq(r->cq, 0))
		die("ibv_req_notify_cq", errno);
	n = ibv_poll_cq(r->cq, 16, wc);
	if (n == 0 && timeout_ms > 0) {
		poll(pfd, 2, timeout_ms);
		if (ibv_get_cq_event(r->cc, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
		n = ibv_poll_cq(r->cq, 16, wc);
	}
	if (n < 0)
		die("ibv_poll_cq", EIO);
	for (i = 0; i < n; i++) {
		if (wc[i].wr_id & (WR_SEND | WR_RDMA)) {
			r->done_status[wc[i].wr_id & 0xffff] =
				(int)wc[i].status + 1;
			if (wc[i].status != IBV_WC_SUCCESS)
				fprintf(stderr, "rogue_peer: wr %#llx: %s\n",
					(unsigned long long)wc[i].wr_id,
					ibv_wc_status_str(wc[i].status));
			continue;
		}
		/* our own QP in error: after a failed RDMA op of ours
		 * that says nothing of the server */
		if (wc[i].status != IBV_WC_SUCCESS) {
			if (!r->flushed_ms)
				r->flushed_ms = now_ms();
			continue;
		}
		rc = xs_wire_msg_decode(r->rx + wc[i].wr_id * ROGUE_EAGER,
					wc[i].byte_len, ROGUE_EAGER,
					ROGUE_MAX_RNDV, &m);
		/* copied out: the buffer goes straight back */
		post_recv(r, (unsigned int)wc[i].wr_id);
		if (rc) {
			fprintf(stderr, "rogue_peer: the server sent a "
					"malformed message\n");
			continue;
		}
		r->granted += m.credits;
		if (m.type == XS_MSG_RESET)
			ended(r, "RESET");
		if (r->q_len < 64)
			r->q[(r->q_head + r->q_len++) % 64] = m;
	}
	while (rdma_get_cm_event(r->ch, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			ended(r, "disconnected");
		rdma_ack_cm_event(ev);
	}
}

/* The next received message of @type (others are dropped), or false
 * after @timeout_ms or once the connection ended. */
static bool wait_msg(struct rogue *r, enum xs_msg_type type, int timeout_ms,
		     struct xs_msg *out)
{
	double end = now_ms() + timeout_ms;

	while (now_ms() < end && !r->ended) {
		while (r->q_len) {
			*out = r->q[r->q_head];
			r->q_head = (r->q_head + 1) % 64;
			r->q_len--;
			if (out->type == type)
				return true;
		}
		pump(r, 50);
	}
	return false;
}

/* The completion status of WR @wr_id, or -1 after @timeout_ms. */
static int wait_done(struct rogue *r, uint64_t wr_id, int timeout_ms)
{
	double end = now_ms() + timeout_ms;
	int *st = &r->done_status[wr_id & 0xffff];

	while (!*st && now_ms() < end)
		pump(r, 50);
	return *st ? *st - 1 : -1;
}

/* Wait (up to @bound_ms from @t0) for the server to end the connection. */
static bool wait_ended(struct rogue *r, double t0, int bound_ms)
{
	while (!r->ended && now_ms() < t0 + bound_ms)
		pump(r, 50);
	return r->ended != NULL;
}

static struct ibv_mr *reg(struct rogue *r, uint8_t **buf, size_t len,
			  int access)
{
	struct ibv_mr *mr;

	*buf = aligned_alloc(4096, len);
	if (!*buf)
		die("aligned_alloc", ENOMEM);
	memset(*buf, 0, len);
	mr = ibv_reg_mr(r->pd, *buf, len, access);
	if (!mr)
		die("ibv_reg_mr", errno);
	return mr;
}

/* Wait for CM event @want on @r's channel (15 s at most). */
static void expect_event(struct rogue *r, enum rdma_cm_event_type want,
			 struct rdma_cm_event **out)
{
	struct pollfd pfd = { .fd = r->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	double end = now_ms() + 15000;

	for (;;) {
		if (rdma_get_cm_event(r->ch, &ev) == 0)
			break;
		if (errno != EAGAIN || now_ms() > end)
			die("rdma_get_cm_event", errno ? errno : ETIMEDOUT);
		poll(&pfd, 1, 100);
	}
	if (ev->event != want) {
		fprintf(stderr, "rogue_peer: expected %s, got %s (status %d)\n",
			rdma_event_str(want), rdma_event_str(ev->event),
			ev->status);
		rdma_ack_cm_event(ev);
		die("connect", ECONNREFUSED);
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
}

/* Read or write exactly @n bytes of TCP fd @fd. */
static void tcp_full(int fd, void *buf, size_t n, bool out)
{
	size_t off = 0;
	ssize_t k;

	while (off < n) {
		k = out ? write(fd, (char *)buf + off, n - off)
			: read(fd, (char *)buf + off, n - off);
		if (k <= 0)
			die(out ? "tcp write" : "tcp read", k ? errno : EPIPE);
		off += (size_t)k;
	}
}

/*
 * The TCP half of an xsock client (core/neg.c): connect to @dst, hello,
 * the server's reply. Return: the TCP fd; @rdv becomes the rendezvous
 * address, @token what the hello over rdma_cm must carry.
 */
static int tcp_rendezvous(const struct sockaddr_in *dst,
			  struct sockaddr_in *rdv, uint64_t *token)
{
	uint8_t buf[XS_TCP_MSG_LEN];
	struct xs_tcp_msg m = { .type = XS_TCP_HELLO };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)dst, sizeof(*dst)))
		die("tcp connect", errno);
	xs_wire_tcp_encode(&m, buf);
	tcp_full(fd, buf, sizeof(buf), true);
	tcp_full(fd, buf, sizeof(buf), false);
	if (xs_wire_tcp_decode(buf, sizeof(buf), XS_TCP_REPLY, &m) != 1 ||
	    !m.rdma)
		die("the server's reply", EPROTO);
	*rdv = *dst;
	rdv->sin_port = htons(m.port);
	*token = m.token;
	return fd;
}

/* Connect to @dst as an xsock client announcing @credits buffers. */
static void rogue_connect(struct rogue *r, const struct sockaddr_in *tcp_dst,
			  uint16_t credits)
{
	struct sockaddr_in rdv;
	const struct sockaddr_in *dst = &rdv;
	uint64_t token;
	int tcp = tcp_rendezvous(tcp_dst, &rdv, &token);

	struct ibv_qp_init_attr attr = { .qp_type = IBV_QPT_RC };
	uint8_t hello[XS_WIRE_HELLO_LEN];
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;
	double end = now_ms() + 15000;
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->tcp = tcp;
	r->ch = rdma_create_event_channel();
	if (!r->ch)
		die("rdma_create_event_channel", errno);
	if (fcntl(r->ch->fd, F_SETFL, O_NONBLOCK))
		die("fcntl", errno);
	if (rdma_create_id(r->ch, &r->id, r, RDMA_PS_TCP))
		die("rdma_create_id", errno);
	/* short resolution steps until the deadline, as core/conn.c does:
	 * a first resolution after boot may wait for its whole timeout */
	for (;;) {
		if (rdma_resolve_addr(r->id, NULL, (struct sockaddr *)dst, 500))
			die("rdma_resolve_addr", errno);
		{
			struct pollfd pfd = { .fd = r->ch->fd,
					      .events = POLLIN };

			while (rdma_get_cm_event(r->ch, &ev)) {
				if (now_ms() > end)
					die("address resolution", ETIMEDOUT);
				poll(&pfd, 1, 100);
			}
		}
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
			rdma_ack_cm_event(ev);
			break;
		}
		rdma_ack_cm_event(ev);
		if (now_ms() > end)
			die("address resolution", EHOSTUNREACH);
	}
	if (rdma_resolve_route(r->id, 5000))
		die("rdma_resolve_route", errno);
	expect_event(r, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cc = ibv_create_comp_channel(r->id->verbs);
	if (!r->pd || !r->cc)
		die("ibv_alloc_pd", errno);
	if (fcntl(r->cc->fd, F_SETFL, O_NONBLOCK))
		die("fcntl", errno);
	r->nr_rx = credits + XS_WIRE_CTRL_BUFS;
	r->cq = ibv_create_cq(r->id->verbs, r->nr_rx + ROGUE_TX_SLOTS + 16, r,
			      r->cc, 0);
	if (!r->cq)
		die("ibv_create_cq", errno);
	attr.send_cq = attr.recv_cq = r->cq;
	attr.cap.max_send_wr = ROGUE_TX_SLOTS;
	attr.cap.max_recv_wr = r->nr_rx;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	if (rdma_create_qp(r->id, r->pd, &attr))
		die("rdma_create_qp", errno);
	r->rx_mr = reg(r, &r->rx, (size_t)r->nr_rx * ROGUE_EAGER,
		       IBV_ACCESS_LOCAL_WRITE);
	r->tx_mr = reg(r, &r->tx, (size_t)ROGUE_TX_SLOTS * ROGUE_TX_SLOT,
		       IBV_ACCESS_LOCAL_WRITE);
	r->sink_mr = reg(r, &r->sink, ROGUE_SINK, IBV_ACCESS_LOCAL_WRITE);
	r->expo_mr = reg(r, &r->expo, ROGUE_REGION,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	for (i = 0; i < ROGUE_REGION; i++)
		r->expo[i] = pattern(i);
	for (i = 0; i < r->nr_rx; i++)
		post_recv(r, i);
	r->local = (struct xs_hello){
		.version = XS_WIRE_VERSION,
		.flags = XS_HELLO_F_RNDV,
		.credits = credits,
		.eager_size = ROGUE_EAGER,
		.max_rndv = ROGUE_MAX_RNDV,
		.conn_id = token,
	};
	xs_wire_hello_encode(&r->local, hello);
	param = (struct rdma_conn_param){
		.private_data = hello,
		.private_data_len = sizeof(hello),
		.responder_resources = 4,
		.initiator_depth = 4,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(r->id, &param))
		die("rdma_connect", errno);
	expect_event(r, RDMA_CM_EVENT_ESTABLISHED, &ev);
	i = (unsigned int)xs_wire_hello_decode(ev->param.conn.private_data,
					       ev->param.conn.private_data_len,
					       &r->peer);
	rdma_ack_cm_event(ev);
	if (i)
		die("the server's hello", EPROTO);
}

static void rogue_destroy(struct rogue *r)
{
	close(r->tcp);
	if (!r->ended)
		rdma_disconnect(r->id);
	rdma_destroy_qp(r->id);
	ibv_dereg_mr(r->rx_mr);
	ibv_dereg_mr(r->tx_mr);
	ibv_dereg_mr(r->sink_mr);
	ibv_dereg_mr(r->expo_mr);
	free(r->rx);
	free(r->tx);
	free(r->sink);
	free(r->expo);
	ibv_destroy_cq(r->cq);
	ibv_destroy_comp_channel(r->cc);
	ibv_dealloc_pd(r->pd);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
}

/* The next send slot (the caller fills r->tx + slot * ROGUE_TX_SLOT). */
static uint8_t *tx_slot(struct rogue *r, unsigned int *slot)
{
	*slot = r->tx_next++ % ROGUE_TX_SLOTS;
	r->done_status[*slot] = 0;
	return r->tx + (size_t)*slot * ROGUE_TX_SLOT;
}

/* SEND @len bytes of slot @slot, signaled. Return: its wr_id. */
static uint64_t post_slot(struct rogue *r, unsigned int slot, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)(r->tx +
					   (size_t)slot * ROGUE_TX_SLOT),
			       len, r->tx_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WR_SEND | slot,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int rc = ibv_post_send(r->id->qp, &wr, &bad);

	if (rc)
		die("ibv_post_send", rc); /* verbs: +errno */
	return wr.wr_id;
}

/* Encode @m (plus @payload bytes of pattern for DATA) and send it. */
static uint64_t send_msg(struct rogue *r, const struct xs_msg *m)
{
	unsigned int slot;
	uint8_t *p = tx_slot(r, &slot);
	size_t n = xs_wire_msg_encode(m, p);
	uint32_t i;

	if (m->type == XS_MSG_DATA)
		for (i = 0; i < m->len && n + i < ROGUE_TX_SLOT; i++)
			p[n + i] = pattern(i);
	return post_slot(r, slot,
			 (uint32_t)n + (m->type == XS_MSG_DATA ? m->len : 0));
}

/* One RDMA READ or WRITE of @len bytes at @raddr/@rkey on @r. */
static uint64_t post_rdma(struct rogue *r, enum ibv_wr_opcode op, uint32_t len,
			  uint64_t raddr, uint32_t rkey)
{
	unsigned int slot = ROGUE_TX_SLOTS; /* a status slot of its own */
	struct ibv_sge sge = { (uintptr_t)r->sink, len, r->sink_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = WR_RDMA | slot,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	int rc;

	r->done_status[slot] = 0;
	if (op == IBV_WR_RDMA_WRITE)
		memset(r->sink, 0xee, len);
	rc = ibv_post_send(r->id->qp, &wr, &bad);
	if (rc)
		die("ibv_post_send", rc); /* verbs: +errno */
	return wr.wr_id;
}

static int bound_ms = 10000;

/* Print the attack's verdict: "reset after" when the server ended it in
 * time. Return: the exit status. */
static int verdict(struct rogue *r, double t0, const char *refused)
{
	bool gone = wait_ended(r, t0, bound_ms);

	if (r->flushed_ms)
		fprintf(stderr,
			"rogue_peer: own receives flushed after %.0f ms\n",
			r->flushed_ms - t0);

	if (gone)
		printf("attack %s: %s%sreset after %.0f ms (%s)\n", attack,
		       refused ? refused : "", refused ? "; " : "",
		       r->ended_ms - t0, r->ended);
	else
		printf("attack %s: %s%snot reset within %d ms\n", attack,
		       refused ? refused : "", refused ? "; " : "", bound_ms);
	return gone ? 0 : 1;
}

/* One malformed message, built in a send slot and posted. */
static int attack_message(struct rogue *r)
{
	struct xs_msg m = { .type = XS_MSG_CREDIT };
	unsigned int slot;
	uint8_t *p = tx_slot(r, &slot);
	uint32_t len = XS_WIRE_MSG_LEN;
	double t0;

	if (!strcmp(attack, "bad-type")) {
		xs_wire_msg_encode(&m, p);
		p[0] = 9;
	} else if (!strcmp(attack, "bad-flags")) {
		xs_wire_msg_encode(&m, p);
		p[1] = 0x80;
	} else if (!strcmp(attack, "bad-len")) {
		m = (struct xs_msg){ .type = XS_MSG_DATA, .len = 200 };
		xs_wire_msg_encode(&m, p);
		len += 16; /* 200 claimed */
	} else if (!strcmp(attack, "data-long")) {
		m = (struct xs_msg){ .type = XS_MSG_DATA,
				     .len = r->peer.eager_size -
					    XS_WIRE_MSG_LEN + 1 };
		if (r->peer.eager_size >= ROGUE_TX_SLOT)
			die("the server's eager size is too large to exceed",
			    EINVAL);
		xs_wire_msg_encode(&m, p);
		len += m.len;
	} else if (!strcmp(attack, "data-empty")) {
		m = (struct xs_msg){ .type = XS_MSG_DATA, .len = 0 };
		xs_wire_msg_encode(&m, p);
	} else if (!strncmp(attack, "rndv-", 5)) {
		m = (struct xs_msg){
			.type = XS_MSG_RNDV,
			.rndv_addr = (uintptr_t)r->expo,
			.rndv_rkey = r->expo_mr->rkey,
			.rndv_len = 8192,
			.rndv_id = 1,
		};
		if (!strcmp(attack, "rndv-zero"))
			m.rndv_len = 0;
		else if (!strcmp(attack, "rndv-huge"))
			m.rndv_len = r->peer.max_rndv + 1;
		else if (!strcmp(attack, "rndv-wrap"))
			m.rndv_addr = UINT64_MAX - 4095;
		else if (!strcmp(attack, "rndv-badkey"))
			m.rndv_rkey ^= 0x5a; /* the key byte */
		else if (!strcmp(attack, "rndv-badaddr"))
			m.rndv_addr += 16u << 20;
		else
			return -1;
		len = (uint32_t)xs_wire_msg_encode(&m, p);
	} else if (!strcmp(attack, "done-bogus")) {
		m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE, .rndv_id = 77 };
		len = (uint32_t)xs_wire_msg_encode(&m, p);
	} else if (!strcmp(attack, "credits-wrap")) {
		m.credits = XS_WIRE_MAX_CREDITS;
		xs_wire_msg_encode(&m, p);
	} else if (!strcmp(attack, "credits-plus1")) {
		m.credits = 1;
		xs_wire_msg_encode(&m, p);
	} else if (!strcmp(attack, "grow-past")) {
		unsigned int w = xs_wire_start_credits(r->local.credits);

		m.flags = XS_WIRE_F_GROW;
		xs_wire_msg_encode(&m, p);
		post_slot(r, slot, len);
		for (w = xs_wire_grown(w, r->local.credits);
		     w < r->local.credits;
		     w = xs_wire_grown(w, r->local.credits))
			send_msg(r, &m);
		t0 = now_ms();
		if (wait_ended(r, t0, 500)) {
			printf("attack %s: honest grows RESET (%s)\n", attack,
			       r->ended);
			return 1;
		}
		send_msg(r, &m); /* one past the hello's credits */
		return verdict(r, t0, NULL);
	} else if (!strcmp(attack, "data-after-fin") ||
		   !strcmp(attack, "data-after-move") ||
		   !strcmp(attack, "move-twice")) {
		m = (struct xs_msg){ .type = !strcmp(attack, "data-after-fin")
						     ? XS_MSG_FIN
						     : XS_MSG_MOVE };
		xs_wire_msg_encode(&m, p);
		post_slot(r, slot, len);
		m = (struct xs_msg){
			.type = !strcmp(attack, "move-twice") ? XS_MSG_MOVE
							      : XS_MSG_DATA,
			.len = !strcmp(attack, "move-twice") ? 0 : 16
		};
		t0 = now_ms();
		send_msg(r, &m);
		return verdict(r, t0, NULL);
	} else {
		return -1;
	}
	t0 = now_ms();
	post_slot(r, slot, len);
	return verdict(r, t0, NULL);
}

/*
 * More DATA than the server's credits: the rogue announced 2 buffers and
 * returns none, so the server's echo blocks once it has sent two
 * messages, and stops reading. Its library still takes what arrives, up to
 * what it keeps unread (4 MiB, core/stream_rx.c), and grants credits for
 * it; then none. The rogue sends on regardless, up to four times that: the
 * server must reset it, and only once it sent more than it was granted.
 */
#define ROGUE_OVERRUN_MAX 4096u /* DATA messages of 4 KiB: 16 MiB */

static int attack_overrun(struct rogue *r)
{
	struct xs_msg m = { .type = XS_MSG_DATA,
			    .len = ROGUE_EAGER - XS_WIRE_MSG_LEN };
	double t0 = now_ms();
	unsigned int sent = 0;
	uint64_t wr;
	int st, rc;

	if (m.len > r->peer.eager_size - XS_WIRE_MSG_LEN)
		m.len = r->peer.eager_size - XS_WIRE_MSG_LEN;
	while (!r->ended && sent < ROGUE_OVERRUN_MAX) {
		wr = send_msg(r, &m);
		st = wait_done(r, wr, bound_ms);
		pump(r, 0);
		if (st != IBV_WC_SUCCESS)
			break;
		sent++;
	}
	fprintf(stderr,
		"rogue_peer: %u DATA sent; the server granted %u, then %u "
		"more\n",
		sent, xs_wire_start_credits(r->peer.credits), r->granted);
	if (!r->ended && sent >= ROGUE_OVERRUN_MAX) {
		printf("attack %s: ACCEPTED %u DATA messages against %u "
		       "credits\n",
		       attack, sent,
		       xs_wire_start_credits(r->peer.credits) + r->granted);
		return 1;
	}
	rc = verdict(r, t0, NULL);
	/* the server's grants reach us after it made them: a reset while
	 * we know of as many as we used would be one of an honest peer */
	if (rc == 0 &&
	    sent <= xs_wire_start_credits(r->peer.credits) + r->granted) {
		printf("attack %s: an honest sender RESET after %u DATA "
		       "against %u credits\n",
		       attack, sent,
		       xs_wire_start_credits(r->peer.credits) + r->granted);
		return 1;
	}
	return rc;
}

/* The rogue's region, then the server's echo of it as a RNDV. */
static bool get_exposed(struct rogue *r, struct xs_msg *rndv)
{
	struct xs_msg m = {
		.type = XS_MSG_RNDV,
		.rndv_addr = (uintptr_t)r->expo,
		.rndv_rkey = r->expo_mr->rkey,
		.rndv_len = ROGUE_REGION,
		.rndv_id = 1,
	};

	send_msg(r, &m);
	if (!wait_msg(r, XS_MSG_RNDV, bound_ms, rndv)) {
		fprintf(stderr, "rogue_peer: no RNDV from the server\n");
		return false;
	}
	fprintf(stderr,
		"rogue_peer: the server exposes %u bytes at %#llx rkey %#x "
		"id %u\n",
		rndv->rndv_len, (unsigned long long)rndv->rndv_addr,
		rndv->rndv_rkey, rndv->rndv_id);
	return true;
}

/* The status of one RDMA op on @r, "ACCEPTED" on success. */
static int rdma_try(struct rogue *r, enum ibv_wr_opcode op, uint32_t len,
		    uint64_t raddr, uint32_t rkey, double *t0)
{
	*t0 = now_ms();
	return wait_done(r, post_rdma(r, op, len, raddr, rkey), bound_ms);
}

/* The enum name of a completion status, as verbs.h spells it. */
static const char *wc_name(int st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return "IBV_WC_SUCCESS";
	case IBV_WC_LOC_LEN_ERR:
		return "IBV_WC_LOC_LEN_ERR";
	case IBV_WC_LOC_PROT_ERR:
		return "IBV_WC_LOC_PROT_ERR";
	case IBV_WC_WR_FLUSH_ERR:
		return "IBV_WC_WR_FLUSH_ERR";
	case IBV_WC_REM_INV_REQ_ERR:
		return "IBV_WC_REM_INV_REQ_ERR";
	case IBV_WC_REM_ACCESS_ERR:
		return "IBV_WC_REM_ACCESS_ERR";
	case IBV_WC_REM_OP_ERR:
		return "IBV_WC_REM_OP_ERR";
	case IBV_WC_RETRY_EXC_ERR:
		return "IBV_WC_RETRY_EXC_ERR";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "IBV_WC_RNR_RETRY_EXC_ERR";
	case -1:
		return "no completion";
	default:
		return ibv_wc_status_str((enum ibv_wc_status)st);
	}
}

static int report_rdma(struct rogue *r, int st, double t0)
{
	char why[96];

	if (st == IBV_WC_SUCCESS) {
		printf("attack %s: ACCEPTED (the operation completed)\n",
		       attack);
		return 1;
	}
	if (st < 0) {
		printf("attack %s: no completion within %d ms\n", attack,
		       bound_ms);
		return 1;
	}
	snprintf(why, sizeof(why), "refused %s", wc_name(st));
	return verdict(r, t0, why);
}

/*
 * READ region @x whole, as a peer should, release it (RNDV_DONE) and wait
 * for the echo of a DATA sent after: the server handles RNDV_DONE, and
 * posts the window's invalidation, before it reads that DATA, and its
 * echo goes out after. Return: 0, or 1 (printed why).
 */
static int release(struct rogue *r, const struct xs_msg *x)
{
	struct xs_msg m;
	double t0;
	int st;

	st = rdma_try(r, IBV_WR_RDMA_READ, x->rndv_len, x->rndv_addr,
		      x->rndv_rkey, &t0);
	if (st != IBV_WC_SUCCESS) {
		printf("attack %s: the in-bounds READ failed: %s\n", attack,
		       wc_name(st));
		return 1;
	}
	m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE, .rndv_id = x->rndv_id };
	send_msg(r, &m);
	m = (struct xs_msg){ .type = XS_MSG_DATA, .len = 16 };
	send_msg(r, &m);
	if (!wait_msg(r, XS_MSG_DATA, bound_ms, &m)) {
		printf("attack %s: no echo after RNDV_DONE\n", attack);
		return 1;
	}
	return 0;
}

/*
 * Past the window of a region exposed in part: after the 64 KiB region
 * @x is released, 40 KiB more come back as a region of 40 KiB, and the
 * rogue READs 64 bytes just past it. A device that checks windows
 * refuses; one that checks only the MR under them (rxe) serves the
 * region's stale bytes, which xsock keeps to earlier bytes of this same
 * stream (zeros before any): anything else there is a leak.
 */
static int attack_partial(struct rogue *r, const struct xs_msg *x)
{
	struct xs_msg m = {
		.type = XS_MSG_RNDV,
		.rndv_addr = (uintptr_t)r->expo,
		.rndv_rkey = r->expo_mr->rkey,
		.rndv_len = ROGUE_PARTIAL,
		.rndv_id = 2,
	};
	struct xs_msg y;
	uint32_t i, zero = 0, ours = 0;
	double t0;
	int st;

	if (release(r, x))
		return 1;
	send_msg(r, &m);
	if (!wait_msg(r, XS_MSG_RNDV, bound_ms, &y) ||
	    y.rndv_len != ROGUE_PARTIAL) {
		printf("attack %s: no RNDV of %u bytes from the server\n",
		       attack, ROGUE_PARTIAL);
		return 1;
	}
	st = rdma_try(r, IBV_WR_RDMA_READ, 64, y.rndv_addr + y.rndv_len,
		      y.rndv_rkey, &t0);
	if (st != IBV_WC_SUCCESS)
		return report_rdma(r, st, t0);
	for (i = 0; i < 64; i++) {
		zero += r->sink[i] == 0;
		ours += r->sink[i] == pattern(y.rndv_len + i);
	}
	if (zero == 64 || ours == 64) {
		printf("attack %s: served past the window, inside its region: "
		       "%s only\n",
		       attack,
		       zero == 64 ? "zeros" : "earlier bytes of this stream");
		return 0;
	}
	printf("attack %s: ACCEPTED, 64 bytes past the window that this "
	       "stream never carried\n",
	       attack);
	return 1;
}

static int attack_region(struct rogue *r, const struct sockaddr_in *dst)
{
	struct xs_msg x, m;
	struct rogue other;
	uint32_t i, bad = 0;
	double t0;
	int st, rc;

	if (!get_exposed(r, &x))
		return 1;
	if (!strcmp(attack, "read-in")) {
		st = rdma_try(r, IBV_WR_RDMA_READ, x.rndv_len, x.rndv_addr,
			      x.rndv_rkey, &t0);
		for (i = 0; i < x.rndv_len && i < ROGUE_SINK; i++)
			bad += r->sink[i] != pattern(i);
		printf("attack read-in: %s, %u bytes%s\n",
		       st == IBV_WC_SUCCESS ? "success" : wc_name(st),
		       x.rndv_len, bad ? " NOT as sent" : " as sent");
		return st == IBV_WC_SUCCESS && !bad &&
				       x.rndv_len == ROGUE_REGION
			       ? 0
			       : 1;
	}
	if (!strcmp(attack, "read-after-done")) {
		if (release(r, &x))
			return 1;
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr, x.rndv_rkey,
			      &t0);
		return report_rdma(r, st, t0);
	}
	if (!strcmp(attack, "done-twice")) {
		if (release(r, &x))
			return 1;
		m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE,
				     .rndv_id = x.rndv_id };
		t0 = now_ms();
		send_msg(r, &m);
		return verdict(r, t0, NULL);
	}
	if (!strcmp(attack, "read-past-partial"))
		return attack_partial(r, &x);
	if (!strcmp(attack, "read-other-qp")) {
		rogue_connect(&other, dst, ROGUE_CREDITS);
		st = rdma_try(&other, IBV_WR_RDMA_READ, 64, x.rndv_addr,
			      x.rndv_rkey, &t0);
		rc = report_rdma(&other, st, t0);
		rogue_destroy(&other);
		return rc;
	}
	if (!strcmp(attack, "read-below"))
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr - 4096,
			      x.rndv_rkey, &t0);
	else if (!strcmp(attack, "read-above"))
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr + x.rndv_len,
			      x.rndv_rkey, &t0);
	else if (!strcmp(attack, "read-long"))
		st = rdma_try(r, IBV_WR_RDMA_READ, x.rndv_len + 1, x.rndv_addr,
			      x.rndv_rkey, &t0);
	else if (!strcmp(attack, "rkey-plus1"))
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr,
			      x.rndv_rkey + 1, &t0);
	else if (!strcmp(attack, "rkey-minus1"))
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr,
			      x.rndv_rkey - 1, &t0);
	else if (!strcmp(attack, "rkey-index"))
		st = rdma_try(r, IBV_WR_RDMA_READ, 64, x.rndv_addr,
			      x.rndv_rkey + 0x100, &t0);
	else if (!strcmp(attack, "write-in"))
		st = rdma_try(r, IBV_WR_RDMA_WRITE, 64, x.rndv_addr,
			      x.rndv_rkey, &t0);
	else
		return -1;
	return report_rdma(r, st, t0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct rogue r;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: rogue_peer ADDR PORT ATTACK "
				"[BOUND_MS] (see tests/tools/rogue_peer.c)\n");
		return 2;
	}
	attack = argv[3];
	if (argc == 5)
		bound_ms = atoi(argv[4]);
	if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1)
		die("address", EINVAL);
	dst.sin_port = htons((uint16_t)atoi(argv[2]));
	rogue_connect(&r, &dst,
		      !strcmp(attack, "credit-overrun") ? 2 : ROGUE_CREDITS);
	if (!strcmp(attack, "credit-overrun"))
		rc = attack_overrun(&r);
	else if (!strncmp(attack, "read-", 5) || !strncmp(attack, "rkey-", 5) ||
		 !strcmp(attack, "write-in") || !strcmp(attack, "done-twice"))
		rc = attack_region(&r, &dst);
	else
		rc = attack_message(&r);
	if (rc < 0) {
		fprintf(stderr, "rogue_peer: unknown attack %s\n", attack);
		rc = 2;
	}
	rogue_destroy(&r);
	return rc;
}
