/*
 * tests/unit/test_proto.c - the wire format: round trips, every rule the
 * decoders enforce, and a deterministic mutation run over hostile bytes.
 */
#include <errno.h>
#include <stdlib.h>

#include "../../core/proto.h"
#include "xt.h"

static struct xs_hello good_hello(void)
{
	struct xs_hello h = {
		.flags = XS_HELLO_F_RNDV,
		.credits = 64,
		.eager_size = 4096,
		.max_rndv = 1u << 20,
		.tcp_port = 6379,
		.conn_id = 0x0102030405060708ull,
	};
	return h;
}

XT_TEST(hello_round_trip_and_layout)
{
	struct xs_hello h = good_hello(), d;
	uint8_t buf[XS_WIRE_PRIVATE_DATA_MAX] = { 0 };

	XT_ASSERT_EQ(xs_wire_hello_encode(&h, buf), XS_WIRE_HELLO_LEN);
	/* big-endian magic "XSK1" first, version next */
	XT_ASSERT(memcmp(buf, "XSK1", 4) == 0);
	XT_ASSERT_EQ(buf[4], XS_WIRE_VERSION);
	XT_ASSERT_EQ(buf[16], 6379 >> 8);
	XT_ASSERT_EQ(buf[17], 6379 & 0xff);
	XT_ASSERT_EQ(xs_wire_hello_decode(buf, XS_WIRE_HELLO_LEN, &d), 0);
	XT_ASSERT_EQ(d.version, XS_WIRE_VERSION);
	XT_ASSERT_EQ(d.flags, h.flags);
	XT_ASSERT_EQ(d.credits, 64);
	XT_ASSERT_EQ(d.eager_size, 4096);
	XT_ASSERT_EQ(d.max_rndv, 1u << 20);
	XT_ASSERT_EQ(d.tcp_port, 6379);
	XT_ASSERT(d.conn_id == h.conn_id);
	/* transport padding: longer private data with zero tail is fine */
	XT_ASSERT_EQ(xs_wire_hello_decode(buf, sizeof(buf), &d), 0);
}

/* Encode a good hello, let @mutate change it, expect @rc from decode. */
static void hello_case(void (*mutate)(uint8_t *), size_t len, int rc)
{
	struct xs_hello h = good_hello(), d = { .credits = 7 };
	uint8_t buf[XS_WIRE_PRIVATE_DATA_MAX] = { 0 };

	xs_wire_hello_encode(&h, buf);
	if (mutate)
		mutate(buf);
	XT_ASSERT_EQ(xs_wire_hello_decode(buf, len, &d), rc);
	if (rc)
		XT_ASSERT_EQ(d.credits, 7); /* untouched on failure */
}

/* One mutation of a valid hello each, a table: one line a case. */
/* clang-format off */
static void m_magic(uint8_t *b) { b[0] = 'Y'; }
static void m_version(uint8_t *b) { b[4] = XS_WIRE_VERSION + 1; }
static void m_flags(uint8_t *b) { b[5] = 0x80; }
static void m_credits0(uint8_t *b) { b[6] = 0; b[7] = 0; }
static void m_credits_big(uint8_t *b) { b[6] = 0x10; b[7] = 0x01; } /* 4097 */
static void m_eager_small(uint8_t *b) { memset(b + 8, 0, 3); b[11] = 63; }
static void m_eager_big(uint8_t *b) { b[8] = 0; b[9] = 0x10; b[10] = 0; b[11] = 1; }
static void m_rndv_big(uint8_t *b) { b[12] = 0x40; b[13] = 0; b[14] = 0; b[15] = 1; }
static void m_rndv_zero(uint8_t *b) { memset(b + 12, 0, 4); }
static void m_reserved(uint8_t *b) { b[19] = 1; }
static void m_reserved2(uint8_t *b) { b[31] = 1; }
static void m_tail(uint8_t *b) { b[40] = 1; }
/* clang-format on */

XT_TEST(hello_rejections)
{
	hello_case(NULL, XS_WIRE_HELLO_LEN - 1, -ENOPROTOOPT);
	hello_case(NULL, 0, -ENOPROTOOPT);
	hello_case(m_magic, XS_WIRE_HELLO_LEN, -ENOPROTOOPT);
	hello_case(m_version, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_flags, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_credits0, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_credits_big, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_eager_small, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_eager_big, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_rndv_big, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_rndv_zero, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_reserved, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_reserved2, XS_WIRE_HELLO_LEN, -EPROTO);
	hello_case(m_tail, XS_WIRE_PRIVATE_DATA_MAX, -EPROTO);
	XT_ASSERT_EQ(xs_wire_hello_decode(NULL, 56, &(struct xs_hello){ 0 }),
		     -ENOPROTOOPT);
}

XT_TEST(msg_round_trips)
{
	uint8_t buf[4096];
	struct xs_msg m = { .type = XS_MSG_DATA, .credits = 3, .len = 100 }, d;
	size_t n;

	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(n, XS_WIRE_MSG_LEN);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n + 100, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.type, XS_MSG_DATA);
	XT_ASSERT_EQ(d.flags, 0);
	XT_ASSERT_EQ(d.credits, 3);
	XT_ASSERT_EQ(d.len, 100);
	/* a grow: the flag in byte 1, on any message */
	m.flags = XS_WIRE_F_GROW;
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(buf[1], XS_WIRE_F_GROW);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n + 100, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.flags, XS_WIRE_F_GROW);
	XT_ASSERT_EQ(d.credits, 3);

	m = (struct xs_msg){ .type = XS_MSG_RNDV,
			     .credits = 1,
			     .rndv_addr = 0x7f0000001000ull,
			     .rndv_rkey = 0xabcd,
			     .rndv_len = 65536,
			     .rndv_id = 42 };
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(n, XS_WIRE_MSG_LEN + XS_WIRE_RNDV_LEN);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), 0);
	XT_ASSERT(d.rndv_addr == 0x7f0000001000ull);
	XT_ASSERT_EQ(d.rndv_rkey, 0xabcd);
	XT_ASSERT_EQ(d.rndv_len, 65536);
	XT_ASSERT_EQ(d.rndv_id, 42);

	m = (struct xs_msg){ .type = XS_MSG_RNDV_DONE, .rndv_id = 42 };
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.type, XS_MSG_RNDV_DONE);
	XT_ASSERT_EQ(d.rndv_id, 42);

	m = (struct xs_msg){ .type = XS_MSG_FIN, .credits = 9 };
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.type, XS_MSG_FIN);
	XT_ASSERT_EQ(d.credits, 9);

	m = (struct xs_msg){ .type = XS_MSG_MOVE, .credits = 3 };
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(n, XS_WIRE_MSG_LEN);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.type, XS_MSG_MOVE);
	XT_ASSERT_EQ(d.credits, 3);
	/* MOVE carries nothing */
	buf[7] = 1;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n + 1, 4096, 1 << 20, &d),
		     -EPROTO);
}

XT_TEST(msg_rejections)
{
	uint8_t buf[4096] = { 0 };
	struct xs_msg m = { .type = XS_MSG_DATA, .len = 10 }, d;

	xs_wire_msg_encode(&m, buf);
	/* the length must match what arrived, exactly */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8 + 9, 4096, 1 << 20, &d),
		     -EPROTO);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8 + 11, 4096, 1 << 20, &d),
		     -EPROTO);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 7, 4096, 1 << 20, &d), -EPROTO);
	XT_ASSERT_EQ(xs_wire_msg_decode(NULL, 18, 4096, 1 << 20, &d), -EPROTO);
	/* more bytes than the receive buffer can hold */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 4097, 4096, 1 << 20, &d), -EPROTO);
	/* empty DATA */
	m.len = 0;
	xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	/* unknown type, flags, too many credits */
	m = (struct xs_msg){ .type = XS_MSG_CREDIT };
	xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), 0);
	buf[0] = 0;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	buf[0] = 8; /* past XS_MSG_MOVE */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	buf[0] = XS_MSG_CREDIT;
	buf[1] = 4; /* a flag no version defines */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	buf[1] = 0x80;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	/* "my last credit" only on a message that spends one */
	buf[1] = XS_WIRE_F_LAST;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	m = (struct xs_msg){ .type = XS_MSG_DATA,
			     .flags = XS_WIRE_F_LAST | XS_WIRE_F_GROW,
			     .len = 1 };
	xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 9, 4096, 1 << 20, &d), 0);
	XT_ASSERT_EQ(d.flags, XS_WIRE_F_LAST | XS_WIRE_F_GROW);
	m = (struct xs_msg){ .type = XS_MSG_CREDIT };
	xs_wire_msg_encode(&m, buf);
	buf[1] = 0;
	buf[2] = 0x10;
	buf[3] = 0x01; /* 4097 credits */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 8, 4096, 1 << 20, &d), -EPROTO);
	/* CREDIT with a payload */
	m = (struct xs_msg){ .type = XS_MSG_CREDIT };
	xs_wire_msg_encode(&m, buf);
	buf[7] = 4;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, 12, 4096, 1 << 20, &d), -EPROTO);
}

XT_TEST(window_starts_small_and_doubles_to_the_hello)
{
	XT_ASSERT_EQ(xs_wire_start_credits(1), 1);
	XT_ASSERT_EQ(xs_wire_start_credits(XS_WIRE_START_CREDITS),
		     XS_WIRE_START_CREDITS);
	XT_ASSERT_EQ(xs_wire_start_credits(32), XS_WIRE_START_CREDITS);
	XT_ASSERT_EQ(xs_wire_grown(4, 32), 8);
	XT_ASSERT_EQ(xs_wire_grown(16, 32), 32);
	XT_ASSERT_EQ(xs_wire_grown(4, 6), 6);
	XT_ASSERT_EQ(xs_wire_grown(32, 32), 32);
	XT_ASSERT_EQ(xs_wire_grown(4096, XS_WIRE_MAX_CREDITS), 4096);
}

XT_TEST(rndv_descriptor_bounds)
{
	uint8_t buf[64];
	struct xs_msg m = { .type = XS_MSG_RNDV,
			    .rndv_addr = 4096,
			    .rndv_rkey = 1,
			    .rndv_len = 1 << 20,
			    .rndv_id = 1 },
		      d;
	size_t n = xs_wire_msg_encode(&m, buf);

	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), 0);
	/* larger than this side accepts */
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, (1 << 20) - 1, &d),
		     -EPROTO);
	/* zero length */
	m.rndv_len = 0;
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), -EPROTO);
	/* a region that wraps the address space */
	m.rndv_len = 4096;
	m.rndv_addr = UINT64_MAX - 100;
	n = xs_wire_msg_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), -EPROTO);
	/* non-zero padding */
	m.rndv_addr = 4096;
	n = xs_wire_msg_encode(&m, buf);
	buf[31] = 1;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n, 4096, 1 << 20, &d), -EPROTO);
	/* a descriptor cut short */
	buf[31] = 0;
	XT_ASSERT_EQ(xs_wire_msg_decode(buf, n - 1, 4096, 1 << 20, &d),
		     -EPROTO);
}

/*
 * Deterministic mutation run: random bytes and random flips of valid
 * messages, every length from 0 to 64. The decoders must never accept
 * something that breaks their own bounds (and, in the ASan build, never
 * read outside the buffer they were given).
 */
XT_TEST(mutated_inputs_respect_bounds)
{
	unsigned int seed = 12345;
	int i, accepted = 0;

	for (i = 0; i < 200000; i++) {
		size_t len = (size_t)(rand_r(&seed) % 65);
		uint8_t *buf = malloc(len ? len : 1);
		struct xs_msg d;
		struct xs_hello h;
		size_t j;

		XT_ASSERT(buf != NULL);
		for (j = 0; j < len; j++)
			buf[j] = (uint8_t)rand_r(&seed);
		if (len >= 8 && (i & 1)) { /* make half of them plausible */
			buf[0] = (uint8_t)(1 + rand_r(&seed) % 6);
			buf[1] = 0;
			buf[2] = 0;
			buf[4] = buf[5] = buf[6] = 0;
			buf[7] = (uint8_t)(len - 8);
		}
		if (xs_wire_msg_decode(buf, len, 4096, 65536, &d) == 0) {
			accepted++;
			XT_ASSERT(d.type >= XS_MSG_DATA &&
				  d.type <= XS_MSG_MOVE);
			XT_ASSERT_EQ(d.len + XS_WIRE_MSG_LEN, len);
			XT_ASSERT(d.credits <= XS_WIRE_MAX_CREDITS);
			if (d.type == XS_MSG_RNDV)
				XT_ASSERT(d.rndv_len >= 1 &&
					  d.rndv_len <= 65536);
		}
		if (xs_wire_hello_decode(buf, len, &h) == 0) {
			XT_ASSERT(h.credits >= 1 &&
				  h.credits <= XS_WIRE_MAX_CREDITS);
			XT_ASSERT(h.eager_size >= XS_WIRE_MIN_EAGER);
		}
		free(buf);
	}
	XT_ASSERT(accepted > 1000); /* the plausible half does get through */
}

XT_TEST(busy_reject_round_trip)
{
	uint8_t buf[XS_WIRE_REJECT_LEN + 4] = { 0 };

	XT_ASSERT(!xs_wire_reject_is_busy(NULL, 0));
	XT_ASSERT(!xs_wire_reject_is_busy(buf, sizeof(buf))); /* zeros */
	xs_wire_reject_busy_encode(buf);
	XT_ASSERT(xs_wire_reject_is_busy(buf, XS_WIRE_REJECT_LEN));
	XT_ASSERT(xs_wire_reject_is_busy(buf, sizeof(buf)));
	XT_ASSERT(!xs_wire_reject_is_busy(buf, XS_WIRE_REJECT_LEN - 1));
	buf[5] = 2; /* another reason */
	XT_ASSERT(!xs_wire_reject_is_busy(buf, XS_WIRE_REJECT_LEN));
	buf[5] = 1;
	buf[0] ^= 1; /* not our magic */
	XT_ASSERT(!xs_wire_reject_is_busy(buf, XS_WIRE_REJECT_LEN));
}

XT_TEST(xsock_reject_is_not_busy)
{
	uint8_t buf[XS_WIRE_REJECT_LEN] = { 0 };

	xs_wire_reject_xsock_encode(buf);
	XT_ASSERT(xs_wire_reject_is_xsock(buf, sizeof(buf)));
	XT_ASSERT(!xs_wire_reject_is_busy(buf, sizeof(buf)));
	XT_ASSERT(!xs_wire_reject_is_xsock(buf, sizeof(buf) - 1));
	XT_ASSERT(!xs_wire_reject_is_xsock(NULL, 0));
	xs_wire_reject_busy_encode(buf);
	XT_ASSERT(!xs_wire_reject_is_xsock(buf, sizeof(buf)));
}

XT_TEST(ended_reject_is_neither_busy_nor_xsock)
{
	uint8_t buf[XS_WIRE_REJECT_LEN] = { 0 };

	XT_ASSERT(!xs_wire_reject_is_ended(NULL, 0));
	XT_ASSERT(!xs_wire_reject_is_ended(buf, sizeof(buf))); /* zeros */
	xs_wire_reject_ended_encode(buf);
	XT_ASSERT(xs_wire_reject_is_ended(buf, sizeof(buf)));
	XT_ASSERT(!xs_wire_reject_is_ended(buf, sizeof(buf) - 1));
	XT_ASSERT(!xs_wire_reject_is_busy(buf, sizeof(buf)));
	XT_ASSERT(!xs_wire_reject_is_xsock(buf, sizeof(buf)));
	buf[4]++; /* another version */
	XT_ASSERT(!xs_wire_reject_is_ended(buf, sizeof(buf)));
	xs_wire_reject_busy_encode(buf);
	XT_ASSERT(!xs_wire_reject_is_ended(buf, sizeof(buf)));
	xs_wire_reject_xsock_encode(buf);
	XT_ASSERT(!xs_wire_reject_is_ended(buf, sizeof(buf)));
}

/* The control messages on the kernel TCP connection (core/neg.c). */
XT_TEST(tcp_msg_round_trips)
{
	struct xs_tcp_msg m = { .type = XS_TCP_REPLY,
				.rdma = 1,
				.port = 40000,
				.token = 0x1122334455667788ull },
			  d = { 0 };
	uint8_t buf[XS_TCP_MSG_LEN];
	int type;

	XT_ASSERT_EQ(xs_wire_tcp_encode(&m, buf), XS_TCP_MSG_LEN);
	XT_ASSERT_EQ(buf[0], 0xf5); /* no text protocol starts so */
	XT_ASSERT_EQ(xs_wire_tcp_decode(buf, sizeof(buf), XS_TCP_REPLY, &d), 1);
	XT_ASSERT_EQ(d.type, XS_TCP_REPLY);
	XT_ASSERT_EQ(d.rdma, 1);
	XT_ASSERT_EQ(d.port, 40000);
	XT_ASSERT(d.token == m.token);
	/* a reply that says TCP carries no port and no token */
	m = (struct xs_tcp_msg){ .type = XS_TCP_REPLY, .port = 1, .token = 2 };
	xs_wire_tcp_encode(&m, buf);
	XT_ASSERT_EQ(xs_wire_tcp_decode(buf, sizeof(buf), XS_TCP_REPLY, &d), 1);
	XT_ASSERT(d.rdma == 0 && d.port == 0 && d.token == 0);
	for (type = XS_TCP_HELLO; type <= XS_TCP_FALLBACK; type++) {
		m = (struct xs_tcp_msg){ .type = (enum xs_tcp_type)type };
		xs_wire_tcp_encode(&m, buf);
		XT_ASSERT_EQ(xs_wire_tcp_decode(buf, sizeof(buf), type, &d), 1);
		XT_ASSERT_EQ(xs_wire_tcp_decode(buf, sizeof(buf), 0, &d), 1);
		XT_ASSERT_EQ(d.type, type);
		/* another type than the one expected is not ours */
		XT_ASSERT_EQ(
			xs_wire_tcp_decode(buf, sizeof(buf), type % 3 + 1, &d),
			-1);
	}
}

XT_TEST(tcp_msg_prefixes_and_rejections)
{
	struct xs_tcp_msg m = { .type = XS_TCP_HELLO }, d = { .port = 7 };
	uint8_t buf[XS_TCP_MSG_LEN], bad[XS_TCP_MSG_LEN];
	size_t n;

	xs_wire_tcp_encode(&m, buf);
	/* every proper prefix of a hello may still become one */
	for (n = 0; n < XS_TCP_MSG_LEN; n++)
		XT_ASSERT_EQ(xs_wire_tcp_decode(buf, n, XS_TCP_HELLO, &d), 0);
	XT_ASSERT_EQ(d.port, 7); /* untouched */
	/* the application's own first byte is no message of ours */
	memcpy(bad, "GET / HTTP/1.1\r\nHost: x\r\n", sizeof(bad));
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, 1, XS_TCP_HELLO, &d), -1);
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), 0, &d), -1);
	/* a version we do not speak, an unknown type */
	memcpy(bad, buf, sizeof(bad));
	bad[4] = XS_WIRE_VERSION + 1;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_HELLO, &d),
		     -1);
	memcpy(bad, buf, sizeof(bad));
	bad[5] = 9;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, 6, 0, &d), -1);
	/* reserved bytes, rdma on a hello, rdma > 1, a reply without port */
	memcpy(bad, buf, sizeof(bad));
	bad[7] = 1;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_HELLO, &d),
		     -1);
	memcpy(bad, buf, sizeof(bad));
	bad[12] = 1;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_HELLO, &d),
		     -1);
	memcpy(bad, buf, sizeof(bad));
	bad[6] = 1;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_HELLO, &d),
		     -1);
	m = (struct xs_tcp_msg){ .type = XS_TCP_REPLY, .rdma = 1, .port = 9 };
	xs_wire_tcp_encode(&m, bad);
	bad[6] = 2;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_REPLY, &d),
		     -1);
	bad[6] = 1;
	bad[8] = bad[9] = 0;
	XT_ASSERT_EQ(xs_wire_tcp_decode(bad, sizeof(bad), XS_TCP_REPLY, &d),
		     -1);
	XT_ASSERT_EQ(d.port, 7);
}
