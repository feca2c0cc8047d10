/*
 * core/proto.c - encode and validate the wire format of core/proto.h.
 *
 * Owns the only code that reads or writes wire bytes; it never trusts a
 * length, count or address from a peer. Pure functions: no locks, no
 * allocation, no verbs. These decoders are the first target of fuzzing.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "proto.h"

_Static_assert(XS_WIRE_HELLO_LEN <= XS_WIRE_PRIVATE_DATA_MAX,
	       "hello must fit a CM REQ's private data");

static void put16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static int all_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

size_t xs_wire_hello_encode(const struct xs_hello *h, void *buf)
{
	uint8_t *p = buf;

	memset(p, 0, XS_WIRE_HELLO_LEN);
	put32(p + 0, XS_WIRE_MAGIC);
	p[4] = XS_WIRE_VERSION;
	p[5] = h->flags;
	put16(p + 6, h->credits);
	put32(p + 8, h->eager_size);
	put32(p + 12, h->max_rndv);
	put16(p + 16, h->tcp_port);
	put64(p + 20, h->conn_id);
	return XS_WIRE_HELLO_LEN;
}

int xs_wire_hello_decode(const void *buf, size_t len, struct xs_hello *h)
{
	const uint8_t *p = buf;
	struct xs_hello d;

	if (!p || len < XS_WIRE_HELLO_LEN || get32(p) != XS_WIRE_MAGIC)
		return -ENOPROTOOPT;
	if (!all_zero(p + XS_WIRE_HELLO_LEN, len - XS_WIRE_HELLO_LEN))
		return -EPROTO;
	d.version = p[4];
	d.flags = p[5];
	d.credits = get16(p + 6);
	d.eager_size = get32(p + 8);
	d.max_rndv = get32(p + 12);
	d.tcp_port = get16(p + 16);
	d.conn_id = get64(p + 20);
	if (d.version != XS_WIRE_VERSION || (d.flags & ~XS_HELLO_F_KNOWN))
		return -EPROTO;
	if (d.credits < XS_WIRE_MIN_CREDITS || d.credits > XS_WIRE_MAX_CREDITS)
		return -EPROTO;
	if (d.eager_size < XS_WIRE_MIN_EAGER ||
	    d.eager_size > XS_WIRE_MAX_EAGER)
		return -EPROTO;
	if (d.max_rndv > XS_WIRE_MAX_RNDV ||
	    ((d.flags & XS_HELLO_F_RNDV) && d.max_rndv == 0))
		return -EPROTO;
	if (get16(p + 18) != 0 || get32(p + 28) != 0)
		return -EPROTO;
	*h = d;
	return 0;
}

/* The 8 bytes of a reject of @kind (1 busy, 2 xsock, 3 ended). */
static void wire_reject_encode(void *buf, uint8_t kind)
{
	uint8_t *p = buf;

	put32(p, XS_WIRE_MAGIC);
	p[4] = XS_WIRE_VERSION;
	p[5] = kind;
	p[6] = p[7] = 0;
}

static bool wire_reject_is(const void *buf, size_t len, uint8_t kind)
{
	const uint8_t *p = buf;

	return p && len >= XS_WIRE_REJECT_LEN && get32(p) == XS_WIRE_MAGIC &&
	       p[4] == XS_WIRE_VERSION && p[5] == kind;
}

void xs_wire_reject_busy_encode(void *buf)
{
	wire_reject_encode(buf, 1);
}

bool xs_wire_reject_is_busy(const void *buf, size_t len)
{
	return wire_reject_is(buf, len, 1);
}

void xs_wire_reject_xsock_encode(void *buf)
{
	wire_reject_encode(buf, 2);
}

bool xs_wire_reject_is_xsock(const void *buf, size_t len)
{
	return wire_reject_is(buf, len, 2);
}

void xs_wire_reject_ended_encode(void *buf)
{
	wire_reject_encode(buf, 3);
}

bool xs_wire_reject_is_ended(const void *buf, size_t len)
{
	return wire_reject_is(buf, len, 3);
}

size_t xs_wire_tcp_encode(const struct xs_tcp_msg *m, void *buf)
{
	uint8_t *p = buf;

	memset(p, 0, XS_TCP_MSG_LEN);
	put32(p, XS_TCP_MAGIC);
	p[4] = XS_WIRE_VERSION;
	p[5] = (uint8_t)m->type;
	if (m->type == XS_TCP_REPLY && m->rdma) {
		p[6] = 1;
		put16(p + 8, m->port);
		put64(p + 16, m->token);
	}
	return XS_TCP_MSG_LEN;
}

int xs_wire_tcp_decode(const void *buf, size_t len, int type,
		       struct xs_tcp_msg *m)
{
	uint8_t head[6];
	const uint8_t *p = buf;
	size_t n = len < sizeof(head) ? len : sizeof(head);
	struct xs_tcp_msg d = { 0 };

	put32(head, XS_TCP_MAGIC);
	head[4] = XS_WIRE_VERSION;
	head[5] = (uint8_t)type;
	if (n && memcmp(p, head, type ? n : (n < 5 ? n : 5)))
		return -1;
	if (n > 5 && !type && (p[5] < XS_TCP_HELLO || p[5] > XS_TCP_FALLBACK))
		return -1;
	if (len < XS_TCP_MSG_LEN)
		return 0;
	d.type = (enum xs_tcp_type)p[5];
	d.rdma = p[6];
	d.port = get16(p + 8);
	d.token = get64(p + 16);
	if (p[7] || get16(p + 10) || get32(p + 12) || d.rdma > 1 ||
	    (d.type != XS_TCP_REPLY && d.rdma) ||
	    (!d.rdma && (d.port || d.token)) || (d.rdma && !d.port))
		return -1;
	*m = d;
	return 1;
}

size_t xs_wire_msg_encode(const struct xs_msg *m, void *buf)
{
	uint8_t *p = buf;
	uint32_t len = 0;

	switch (m->type) {
	case XS_MSG_DATA:
		len = m->len;
		break;
	case XS_MSG_RNDV:
		len = XS_WIRE_RNDV_LEN;
		put64(p + 8, m->rndv_addr);
		put32(p + 16, m->rndv_rkey);
		put32(p + 20, m->rndv_len);
		put32(p + 24, m->rndv_id);
		put32(p + 28, 0);
		break;
	case XS_MSG_RNDV_DONE:
		len = XS_WIRE_RNDV_DONE_LEN;
		put32(p + 8, m->rndv_id);
		put32(p + 12, 0);
		break;
	case XS_MSG_CREDIT:
	case XS_MSG_FIN:
	case XS_MSG_RESET:
	case XS_MSG_MOVE:
		break;
	}
	p[0] = (uint8_t)m->type;
	p[1] = m->flags;
	put16(p + 2, m->credits);
	put32(p + 4, len);
	return XS_WIRE_MSG_LEN + (m->type == XS_MSG_DATA ? 0 : len);
}

int xs_wire_msg_decode(const void *buf, size_t len, uint32_t eager_size,
		       uint32_t max_rndv, struct xs_msg *m)
{
	const uint8_t *p = buf;
	struct xs_msg d;

	if (!p || len < XS_WIRE_MSG_LEN || len > eager_size ||
	    (p[1] & ~(XS_WIRE_F_GROW | XS_WIRE_F_LAST)))
		return -EPROTO;
	memset(&d, 0, sizeof(d));
	d.type = (enum xs_msg_type)p[0];
	d.flags = p[1];
	d.credits = get16(p + 2);
	d.len = get32(p + 4);
	if (d.credits > XS_WIRE_MAX_CREDITS || d.len != len - XS_WIRE_MSG_LEN)
		return -EPROTO;
	/* only a message that spends a credit can spend the last */
	if ((d.flags & XS_WIRE_F_LAST) && d.type != XS_MSG_DATA &&
	    d.type != XS_MSG_RNDV)
		return -EPROTO;
	switch (d.type) {
	case XS_MSG_DATA:
		if (d.len == 0)
			return -EPROTO;
		break;
	case XS_MSG_RNDV:
		if (d.len != XS_WIRE_RNDV_LEN || get32(p + 28) != 0)
			return -EPROTO;
		d.rndv_addr = get64(p + 8);
		d.rndv_rkey = get32(p + 16);
		d.rndv_len = get32(p + 20);
		d.rndv_id = get32(p + 24);
		if (d.rndv_len == 0 || d.rndv_len > max_rndv ||
		    d.rndv_addr > UINT64_MAX - d.rndv_len)
			return -EPROTO;
		break;
	case XS_MSG_RNDV_DONE:
		if (d.len != XS_WIRE_RNDV_DONE_LEN || get32(p + 12) != 0)
			return -EPROTO;
		d.rndv_id = get32(p + 8);
		break;
	case XS_MSG_CREDIT:
	case XS_MSG_FIN:
	case XS_MSG_RESET:
	case XS_MSG_MOVE:
		if (d.len != 0)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	*m = d;
	return 0;
}
