/*
 * tests/rdma/conn_probe.c - core/conn.c on real verbs (Soft-RoCE tier).
 *
 *   conn_probe server ADDR PORT N     accept N xsock connections; echo one
 *                                     DATA message on each; print what was
 *                                     accepted and how many were rejected
 *   conn_probe client ADDR PORT [SIZE] connect, send one DATA message of
 *                                     SIZE bytes, check the echo
 *   conn_probe hostile ADDR PORT KIND raw rdma_cm connect with a bad hello
 *                                     (KIND: none, garbage, version,
 *                                     credits, eager, tail); expect a reject
 *   conn_probe refused ADDR PORT      connect where nothing listens
 *   conn_probe rogue ADDR PORT KIND   the handshake of an xsock client (TCP
 *                                     hello, the server's reply, a QP to
 *                                     its rendezvous port with its token),
 *                                     then misbehave (KIND:
 *                                     length: a DATA header whose length
 *                                     lies; credits: returns 4000 credits;
 *                                     write/read: RDMA
 *                                     WRITE/READ with guessed rkeys;
 *                                     rndv-bad: a region that is not
 *                                     there; rndv-huge: a region above the
 *                                     4 MiB a receiver takes; done-bogus:
 *                                     releases a region never exposed);
 *                                     print how the attempt ended and
 *                                     whether the server dropped the
 *                                     connection
 *   conn_probe rogue-rx ADDR PORT KIND listen as an xsock server does
 *                                     (probes answered, the TCP hello
 *                                     replied to), accept one xsock client
 *                                     (xsnet sizes with 65536 or more),
 *                                     wait for its first rendezvous region
 *                                     and abuse it (KIND: in: READ it, as
 *                                     a peer should; out: READ 16 MiB past
 *                                     it; before: READ 16 MiB before it;
 *                                     write: RDMA WRITE into it; after:
 *                                     READ it again after RNDV_DONE);
 *                                     print how the attempt ended
 *
 * Prints one line per fact, "key=value" where tests compare values. Exit
 * status 0 when every expectation held.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/conn.h"
#include "../../core/xs_core.h"

static struct xs_conn_params params = {
	.credits = 32,
	.eager_size = 4096,
	.inline_max = 256,
	.max_rndv = 1u << 20,
	.timeout_ms = 20000,
	.pool_bytes = 16u << 20,
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what, int rc)
{
	printf("error: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
		die("bad address", EINVAL);
	sin.sin_port = htons((uint16_t)atoi(port));
	return sin;
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
 * An xsock client's TCP half (core/neg.c): connect to @sin, say hello,
 * read the server's reply; @sin's port becomes the rendezvous port and
 * params.token the token. Return: the TCP fd, to keep open.
 */
static int tcp_rendezvous(struct sockaddr_in *sin)
{
	uint8_t buf[XS_TCP_MSG_LEN];
	struct xs_tcp_msg m = { .type = XS_TCP_HELLO };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)sin, sizeof(*sin)) < 0)
		die("tcp connect", errno);
	xs_wire_tcp_encode(&m, buf);
	tcp_full(fd, buf, sizeof(buf), true);
	tcp_full(fd, buf, sizeof(buf), false);
	if (xs_wire_tcp_decode(buf, sizeof(buf), XS_TCP_REPLY, &m) != 1 ||
	    !m.rdma)
		die("the server's reply", EPROTO);
	sin->sin_port = htons(m.port);
	params.token = m.token;
	return fd;
}

/*
 * An xsock server's TCP half, for one client: answer probes on @l until
 * the client connects to @lfd, read its hello, reply with @l's own port.
 * Return: the TCP fd, to keep open.
 */
static int tcp_serve_one(int lfd, struct xs_listener *l, uint16_t port)
{
	uint8_t buf[XS_TCP_MSG_LEN];
	struct xs_tcp_msg m = { .type = XS_TCP_REPLY, .rdma = 1 };
	struct pollfd p[2] = {
		{ .fd = lfd, .events = POLLIN },
		{ .fd = xs_listener_fd(l), .events = POLLIN },
	};
	int fd;

	while (!(p[0].revents & POLLIN)) {
		if (poll(p, 2, 60000) <= 0)
			die("no client", ETIMEDOUT);
		if (p[1].revents)
			xs_listener_poll(l, true);
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("tcp accept", errno);
	tcp_full(fd, buf, sizeof(buf), false);
	if (xs_wire_tcp_decode(buf, sizeof(buf), XS_TCP_HELLO, &m) != 1)
		die("the client's hello", EPROTO);
	m = (struct xs_tcp_msg){
		.type = XS_TCP_REPLY, .rdma = 1, .port = port, .token = 1
	};
	xs_wire_tcp_encode(&m, buf);
	tcp_full(fd, buf, sizeof(buf), true);
	return fd;
}

/* Wait for one completion of @c (sleeping on its completion channel). */
static int wait_wc(struct xs_conn *c, struct ibv_wc *wc, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->cc->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;
	int n;

	for (;;) {
		n = ibv_poll_cq(c->cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n == 1)
			return wc->status == IBV_WC_SUCCESS ? 0 : -EIO;
		if (ibv_req_notify_cq(c->cq, 0))
			return -EIO;
		n = ibv_poll_cq(c->cq, 1, wc); /* no wakeup lost in between */
		if (n == 1)
			return wc->status == IBV_WC_SUCCESS ? 0 : -EIO;
		if (poll(&pfd, 1, timeout_ms) <= 0)
			return -ETIMEDOUT;
		if (ibv_get_cq_event(c->cc, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
}

/* Receive one message; returns its ring index, decoded into @m. */
static int recv_msg(struct xs_conn *c, struct xs_msg *m)
{
	struct ibv_wc wc;
	int rc;

	do {
		rc = wait_wc(c, &wc, 10000);
		if (rc)
			return rc;
	} while (wc.opcode != IBV_WC_RECV);
	rc = xs_wire_msg_decode(c->rx[wc.wr_id].addr, wc.byte_len,
				c->local.eager_size, c->local.max_rndv, m);
	return rc ? rc : (int)wc.wr_id;
}

/* Send DATA carrying @len bytes of @payload from a pool buffer. */
static int send_data(struct xs_conn *c, const void *payload, uint32_t len)
{
	struct xs_msg m = { .type = XS_MSG_DATA, .len = len };
	struct xs_buf b;
	struct ibv_wc wc;
	int rc;

	rc = xs_pool_alloc(&c->dev->pool, XS_WIRE_MSG_LEN + len, &b);
	if (rc)
		return rc;
	xs_wire_msg_encode(&m, b.addr);
	memcpy((char *)b.addr + XS_WIRE_MSG_LEN, payload, len);
	rc = xs_conn_post_send(c, b.addr, XS_WIRE_MSG_LEN + len, &b, 1, true);
	while (rc == 0) {
		rc = wait_wc(c, &wc, 10000);
		if (rc == 0 && wc.opcode == IBV_WC_SEND)
			break;
	}
	xs_pool_free(&c->dev->pool, &b);
	return rc;
}

static int do_server(const char *ip, const char *port, int n)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_listener *l;
	int rc, served = 0;

	rc = xs_listener_create(&l, (struct sockaddr *)&sin, 16, &params);
	if (rc)
		die("listen", rc);
	printf("listening\n");
	fflush(stdout);
	while (served < n) {
		struct xs_conn *c;
		struct xs_msg m;
		int i;

		rc = xs_listener_accept(l, &c, 30000);
		if (rc)
			die("accept", rc);
		printf("accepted peer_credits=%u peer_eager=%u peer_rndv=%u "
		       "inline=%u\n",
		       c->peer.credits, c->peer.eager_size, c->peer.max_rndv,
		       c->max_inline);
		i = recv_msg(c, &m);
		if (i < 0)
			die("recv", i);
		rc = send_data(c, (char *)c->rx[i].addr + XS_WIRE_MSG_LEN,
			       m.len);
		if (rc)
			die("echo", rc);
		xs_conn_repost_recv(c, (unsigned int)i);
		printf("echoed bytes=%u\n", m.len);
		fflush(stdout);
		/* wait for the client to go before tearing down */
		recv_msg(c, &m);
		xs_conn_destroy(c);
		served++;
	}
	printf("rejected=%llu\n", (unsigned long long)l->nr_rejected);
	xs_listener_destroy(l);
	return 0;
}

static int do_client(const char *ip, const char *port, uint32_t size)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_conn *c;
	struct xs_msg m;
	char *payload;
	double t0;
	uint32_t k;
	int rc, i;

	payload = malloc(size);
	for (k = 0; k < size; k++)
		payload[k] = (char)(k * 7 + 3);
	t0 = now_us();
	rc = xs_conn_connect(&c, (struct sockaddr *)&sin, &params);
	if (rc)
		die("connect", rc);
	printf("connected peer_credits=%u peer_eager=%u setup_ms=%.1f\n",
	       c->peer.credits, c->peer.eager_size, (now_us() - t0) / 1e3);
	t0 = now_us();
	rc = send_data(c, payload, size);
	if (rc)
		die("send", rc);
	i = recv_msg(c, &m);
	if (i < 0)
		die("recv", i);
	printf("echo bytes=%u match=%s rtt_us=%.0f\n", m.len,
	       m.len == size && memcmp((char *)c->rx[i].addr + XS_WIRE_MSG_LEN,
				       payload, size) == 0
		       ? "yes"
		       : "no",
	       now_us() - t0);
	m = (struct xs_msg){ .type = XS_MSG_FIN };
	{
		uint8_t fin[XS_WIRE_MSG_LEN];
		struct ibv_wc wc;

		xs_wire_msg_encode(&m, fin);
		if (xs_conn_post_send(c, fin, sizeof(fin), NULL, 2, true) == 0)
			wait_wc(c, &wc, 5000);
	}
	xs_conn_destroy(c);
	free(payload);
	return 0;
}

static int do_refused(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_conn *c;
	double t0 = now_us();
	int rc;

	rc = xs_conn_connect(&c, (struct sockaddr *)&sin, &params);
	printf("connect=%s ms=%.0f\n", rc == 0 ? "ok" : strerrorname_np(-rc),
	       (now_us() - t0) / 1e3);
	if (rc == 0)
		xs_conn_destroy(c);
	return 0;
}

/* A plain rdma_cm client with a bad (or no) hello. */
static int do_hostile(const char *ip, const char *port, const char *kind)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_hello h = { .credits = 8, .eager_size = 4096 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { .retry_count = 7 };
	struct ibv_qp_init_attr attr = { .qp_type = IBV_QPT_RC };
	uint8_t pd[XS_WIRE_PRIVATE_DATA_MAX] = { 0 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;

	xs_wire_hello_encode(&h, pd);
	param.private_data = pd;
	param.private_data_len = XS_WIRE_HELLO_LEN;
	if (strcmp(kind, "none") == 0)
		param.private_data_len = 0;
	else if (strcmp(kind, "garbage") == 0)
		memset(pd, 0xa5, sizeof(pd));
	else if (strcmp(kind, "version") == 0)
		pd[4] = 99;
	else if (strcmp(kind, "credits") == 0)
		pd[6] = 0xff;
	else if (strcmp(kind, "eager") == 0)
		pd[8] = 0xff;
	else if (strcmp(kind, "tail") == 0) {
		pd[50] = 1;
		param.private_data_len = sizeof(pd);
	} else {
		die("unknown hostile kind", EINVAL);
	}
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 5000) ||
	    rdma_get_cm_event(ch, &ev) || rdma_ack_cm_event(ev) ||
	    rdma_resolve_route(id, 5000) || rdma_get_cm_event(ch, &ev) ||
	    rdma_ack_cm_event(ev))
		die("resolve", errno);
	cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	attr.send_cq = attr.recv_cq = cq;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	if (!cq || rdma_create_qp(id, NULL, &attr) ||
	    rdma_connect(id, &param) || rdma_get_cm_event(ch, &ev))
		die("connect", errno);
	printf("hostile %s: %s\n", kind, rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Whether the server drops @c (DISCONNECTED) within @ms: the process's
 * CM thread marks it (core/cm.c), or, where it kept a channel of its own,
 * the event comes there. */
static bool dropped_within(struct xs_conn *c, int ms)
{
	struct pollfd pfd = { .fd = c->ch ? c->ch->fd : -1, .events = POLLIN };
	struct rdma_cm_event *ev;
	double end = now_us() + ms * 1e3;
	bool gone = false;

	while (!gone && now_us() < end) {
		gone = atomic_load(&c->cm_down);
		if (gone || poll(&pfd, 1, 10) <= 0 || !c->ch)
			continue;
		if (rdma_get_cm_event(c->ch, &ev) == 0) {
			gone = ev->event == RDMA_CM_EVENT_DISCONNECTED;
			rdma_ack_cm_event(ev);
		}
	}
	return gone;
}

static int do_rogue(const char *ip, const char *port, const char *kind)
{
	struct sockaddr_in sin = addr_of(ip, port);
	uint8_t msg[64] = { 0 };
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct xs_conn *c;
	struct ibv_wc wc;
	struct xs_msg m;
	uint32_t i, n = 1, len; /* messages to send, bytes each */
	int rc, tcp = tcp_rendezvous(&sin);

	rc = xs_conn_connect(&c, (struct sockaddr *)&sin, &params);
	if (rc)
		die("connect", rc);
	m = (struct xs_msg){ .type = XS_MSG_DATA, .len = 16 };
	len = (uint32_t)xs_wire_msg_encode(&m, msg) + 16;
	if (strcmp(kind, "rndv-bad") == 0 || strcmp(kind, "rndv-huge") == 0) {
		m = (struct xs_msg){
			.type = XS_MSG_RNDV,
			.rndv_addr = 0x10000,
			.rndv_rkey = 0x12345678,
			.rndv_len = kind[5] == 'b' ? 8192 : (4u << 20) + 1,
			.rndv_id = 1,
		};
		len = (uint32_t)xs_wire_msg_encode(&m, msg);
	} else if (strcmp(kind, "done-bogus") == 0) {
		m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE, .rndv_id = 77 };
		len = (uint32_t)xs_wire_msg_encode(&m, msg);
	} else if (strcmp(kind, "length") == 0) {
		msg[7] = 200; /* claims 200 bytes, 16 follow */
	} else if (strcmp(kind, "credits") == 0) {
		m = (struct xs_msg){ .type = XS_MSG_CREDIT, .credits = 4000 };
		xs_wire_msg_encode(&m, msg);
	} else if (strcmp(kind, "write") == 0 || strcmp(kind, "read") == 0) {
		/* Guess: the server's pool sits where ours does, with a key
		 * near ours (rxe hands keys out in sequence). */
		sge = (struct ibv_sge){ (uintptr_t)c->rx[0].addr, 64,
					c->rx[0].lkey };
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode =
			kind[0] == 'w' ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)c->rx[0].addr;
		wr.wr.rdma.rkey = c->rx[0].lkey + 0x100;
		if (ibv_post_send(c->id->qp, &wr, &bad))
			die("post", errno);
		rc = wait_wc(c, &wc, 10000);
		printf("rogue %s: %s\n", kind,
		       rc == -ETIMEDOUT ? "no completion"
					: ibv_wc_status_str(wc.status));
		printf("server dropped the connection: %s\n",
		       dropped_within(c, 10000) ? "yes" : "no");
		xs_conn_destroy(c);
		return 0;
	} else {
		die("unknown rogue kind", EINVAL);
	}
	for (i = 0; i < n; i++) {
		rc = xs_conn_post_send(c, msg, len, NULL, 7, true);
		if (rc)
			die("post", rc);
		rc = wait_wc(c, &wc, 10000);
		if (rc)
			break;
	}
	printf("rogue %s: sent %u\n", kind, i);
	printf("server dropped the connection: %s\n",
	       dropped_within(c, 10000) ? "yes" : "no");
	xs_conn_destroy(c);
	close(tcp);
	return 0;
}

/* xsnet's pattern (tests/tools/xsnet.c fill()) */
static unsigned char pattern(size_t i, unsigned int seed)
{
	return (unsigned char)((i * 131u + seed) ^ (i >> 9));
}

/* One RDMA READ or WRITE of @len bytes at @raddr/@rkey; its status. */
static const char *rogue_rdma(struct xs_conn *c, enum ibv_wr_opcode op,
			      struct xs_buf *b, uint32_t len, uint64_t raddr,
			      uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)b->addr, len, b->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 9,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	struct ibv_wc wc;
	int rc;

	if (ibv_post_send(c->id->qp, &wr, &bad))
		die("post", errno);
	do {
		rc = wait_wc(c, &wc, 10000);
		if (rc == -ETIMEDOUT)
			return "no completion";
	} while (wc.status == IBV_WC_SUCCESS && wc.wr_id != 9);
	return ibv_wc_status_str(wc.status);
}

static int do_rogue_rx(const char *ip, const char *port, const char *kind)
{
	struct sockaddr_in sin = addr_of(ip, port);
	struct xs_listener *l;
	struct xs_conn *c;
	struct xs_msg m;
	struct xs_buf b;
	const char *st;
	uint32_t i, bad = 0;
	uint8_t done[16];
	int rc, one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);

	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 4))
		die("tcp listen", errno);
	rc = xs_listener_create(&l, (struct sockaddr *)&sin, 4, &params);
	if (rc)
		die("listen", rc);
	(void)tcp_serve_one(lfd, l, ntohs(sin.sin_port));
	rc = xs_listener_accept(l, &c, 60000);
	if (rc)
		die("accept", rc);
	do {
		rc = recv_msg(c, &m);
		if (rc < 0)
			die("receive", rc);
	} while (m.type != XS_MSG_RNDV);
	printf("rndv len=%u\n", m.rndv_len);
	rc = xs_pool_alloc(&c->dev->pool, m.rndv_len, &b);
	if (rc)
		die("pool", rc);
	if (strcmp(kind, "in") == 0) {
		st = rogue_rdma(c, IBV_WR_RDMA_READ, &b, m.rndv_len,
				m.rndv_addr, m.rndv_rkey);
		for (i = 0; i < m.rndv_len; i++)
			bad += ((uint8_t *)b.addr)[i] != pattern(i, 0);
		printf("rogue-rx in: %s, %u of %u bytes differ from what "
		       "was sent\n",
		       st, bad, m.rndv_len);
	} else if (strcmp(kind, "out") == 0 || strcmp(kind, "before") == 0) {
		st = rogue_rdma(c, IBV_WR_RDMA_READ, &b, 64,
				kind[0] == 'o' ? m.rndv_addr + (16u << 20)
					       : m.rndv_addr - (16u << 20),
				m.rndv_rkey);
		printf("rogue-rx %s: %s\n", kind, st);
	} else if (strcmp(kind, "write") == 0) {
		memset(b.addr, 0xee, 64);
		st = rogue_rdma(c, IBV_WR_RDMA_WRITE, &b, 64, m.rndv_addr,
				m.rndv_rkey);
		printf("rogue-rx write: %s\n", st);
	} else if (strcmp(kind, "after") == 0) {
		/* as a peer does once it has the bytes: release the region,
		 * give the sender time to invalidate, then try again */
		st = rogue_rdma(c, IBV_WR_RDMA_READ, &b, m.rndv_len,
				m.rndv_addr, m.rndv_rkey);
		printf("rogue-rx read before release: %s\n", st);
		m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE,
				     .rndv_id = m.rndv_id,
				     .rndv_addr = m.rndv_addr,
				     .rndv_rkey = m.rndv_rkey,
				     .rndv_len = m.rndv_len };
		xs_wire_msg_encode(&m, done);
		rc = xs_conn_post_send(c, done, sizeof(done), NULL, 8, true);
		if (rc)
			die("post", rc);
		usleep(500000);
		st = rogue_rdma(c, IBV_WR_RDMA_READ, &b, m.rndv_len,
				m.rndv_addr, m.rndv_rkey);
		printf("rogue-rx after: %s\n", st);
	} else {
		die("unknown rogue-rx kind", EINVAL);
	}
	xs_pool_free(&c->dev->pool, &b);
	xs_conn_destroy(c);
	xs_listener_destroy(l);
	return 0;
}

int main(int argc, char **argv)
{
	char missing[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	xs_log_cur = XS_LOG_DEBUG; /* core/ explains itself on stderr */
	if (xs_real_resolve(missing, sizeof(missing)))
		die(missing, ENOENT);
	if (argc >= 5 && strcmp(argv[1], "server") == 0)
		return do_server(argv[2], argv[3], atoi(argv[4]));
	if (argc >= 4 && strcmp(argv[1], "client") == 0)
		return do_client(argv[2], argv[3],
				 argc > 4 ? (uint32_t)atoi(argv[4]) : 100);
	if (argc >= 4 && strcmp(argv[1], "refused") == 0)
		return do_refused(argv[2], argv[3]);
	if (argc >= 5 && strcmp(argv[1], "rogue") == 0)
		return do_rogue(argv[2], argv[3], argv[4]);
	if (argc >= 5 && strcmp(argv[1], "rogue-rx") == 0)
		return do_rogue_rx(argv[2], argv[3], argv[4]);
	if (argc >= 5 && strcmp(argv[1], "hostile") == 0)
		return do_hostile(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: see the top of tests/rdma/conn_probe.c\n");
	return 2;
}
