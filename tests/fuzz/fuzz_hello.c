/*
 * tests/fuzz/fuzz_hello.c - libFuzzer target: the connection hello a peer
 * sends as rdma_cm private data (xs_wire_hello_decode) and the reject's
 * "busy" check. Anything may arrive from a rogue peer: the decoder must
 * never read outside @data, and what it accepts must encode back to the
 * same bytes (so no field is silently dropped or clamped).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t again[XS_WIRE_HELLO_LEN];
	struct xs_hello h, h2;
	size_t i;

	(void)xs_wire_reject_is_busy(data, size);
	if (xs_wire_hello_decode(data, size, &h) != 0)
		return 0;
	/* accepted: the bounds hold, and it round-trips */
	if (h.credits < XS_WIRE_MIN_CREDITS ||
	    h.credits > XS_WIRE_MAX_CREDITS ||
	    h.eager_size < XS_WIRE_MIN_EAGER ||
	    h.eager_size > XS_WIRE_MAX_EAGER)
		abort();
	if (size < XS_WIRE_HELLO_LEN)
		abort();
	xs_wire_hello_encode(&h, again);
	if (memcmp(again, data, XS_WIRE_HELLO_LEN) != 0)
		abort();
	for (i = XS_WIRE_HELLO_LEN; i < size; i++)
		if (data[i] != 0) /* the excess must be zero */
			abort();
	if (xs_wire_hello_decode(again, sizeof(again), &h2) != 0 ||
	    memcmp(&h, &h2, sizeof(h)) != 0)
		abort();
	return 0;
}
