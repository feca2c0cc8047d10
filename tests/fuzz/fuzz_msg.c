/*
 * tests/fuzz/fuzz_msg.c - libFuzzer target: one message as it lands in a
 * receive buffer (xs_wire_msg_decode). The first 8 input bytes choose this
 * side's receive buffer size and rendezvous limit; the rest is the
 * message. What the decoder accepts must respect those bounds (a DATA
 * payload inside the buffer, a RNDV region that neither is empty, exceeds
 * the limit nor wraps the address space) and encode back to the same
 * header bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t again[XS_WIRE_MSG_LEN + XS_WIRE_RNDV_LEN];
	uint32_t eager, max_rndv;
	struct xs_msg m;
	size_t hdr;

	if (size < 8)
		return 0;
	memcpy(&eager, data, 4);
	memcpy(&max_rndv, data + 4, 4);
	/* buffer sizes a hello may announce */
	eager = XS_WIRE_MIN_EAGER +
		eager % (XS_WIRE_MAX_EAGER - XS_WIRE_MIN_EAGER + 1);
	data += 8;
	size -= 8;
	if (size > eager)
		return 0; /* no completion reports more than the buffer */
	if (xs_wire_msg_decode(data, size, eager, max_rndv, &m) != 0)
		return 0;
	switch (m.type) {
	case XS_MSG_DATA:
		if (m.len == 0 || m.len > eager - XS_WIRE_MSG_LEN ||
		    size != XS_WIRE_MSG_LEN + m.len)
			abort();
		hdr = XS_WIRE_MSG_LEN;
		break;
	case XS_MSG_RNDV:
		if (m.rndv_len == 0 || m.rndv_len > max_rndv ||
		    m.rndv_addr + m.rndv_len < m.rndv_addr)
			abort();
		hdr = XS_WIRE_MSG_LEN + XS_WIRE_RNDV_LEN;
		break;
	case XS_MSG_RNDV_DONE:
		hdr = XS_WIRE_MSG_LEN + XS_WIRE_RNDV_DONE_LEN;
		break;
	case XS_MSG_CREDIT:
	case XS_MSG_FIN:
	case XS_MSG_RESET:
	case XS_MSG_MOVE:
		hdr = XS_WIRE_MSG_LEN;
		break;
	default:
		abort(); /* an unknown type was accepted */
	}
	if (size < hdr || xs_wire_msg_encode(&m, again) != hdr ||
	    memcmp(again, data, hdr) != 0)
		abort();
	return 0;
}
