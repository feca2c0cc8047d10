/*
 * tests/unit/test_notes.c - the notes of which streams had news
 * (xs_stream_note(), xs_stream_notes() in core/stream.c), which let an
 * epoll look skip its idle members: a reader gets every note since its
 * place, in order; a note it may have missed (the ring outrun, a note with
 * no owner) makes it look at everything (-1), never skip; and with
 * writers racing the reader, no note read is one that was never written.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../../core/stream.h"
#include "xt.h"

static int owners[4]; /* addresses to note */

XT_TEST(notes_read_in_order_from_the_readers_place)
{
	unsigned long pos = xs_stream_notes_end();
	const void *got[8];
	int n;

	xs_stream_note(&owners[0]);
	xs_stream_note(&owners[1]);
	xs_stream_note(&owners[0]);
	n = xs_stream_notes(&pos, got, 8);
	XT_ASSERT_EQ(n, 3);
	XT_ASSERT(got[0] == &owners[0]);
	XT_ASSERT(got[1] == &owners[1]);
	XT_ASSERT(got[2] == &owners[0]);
	XT_ASSERT_EQ(pos, xs_stream_notes_end());
	/* nothing since: nothing read, the place unmoved */
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 8), 0);
	XT_ASSERT_EQ(pos, xs_stream_notes_end());
	xs_stream_note(&owners[2]);
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 8), 1);
	XT_ASSERT(got[0] == &owners[2]);
}

XT_TEST(more_notes_than_room_or_ring_is_a_loss)
{
	unsigned long pos = xs_stream_notes_end(), before;
	const void *got[300];
	int i;

	for (i = 0; i < 9; i++)
		xs_stream_note(&owners[i % 4]);
	before = pos;
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 8), -1); /* 9 > room 8 */
	XT_ASSERT_EQ(pos, before + 9); /* the reader goes on from the end */
	for (i = 0; i < 257; i++)      /* one more than the ring holds */
		xs_stream_note(&owners[i % 4]);
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 300), -1);
	for (i = 0; i < 256; i++) /* exactly the ring: every one read */
		xs_stream_note(&owners[i % 4]);
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 300), 256);
	for (i = 0; i < 256; i++)
		XT_ASSERT(got[i] == &owners[i % 4]);
}

XT_TEST(a_note_without_owner_is_a_loss)
{
	unsigned long pos = xs_stream_notes_end();
	const void *got[8];

	xs_stream_note(&owners[0]);
	xs_stream_note(NULL);
	XT_ASSERT_EQ(xs_stream_notes(&pos, got, 8), -1);
	XT_ASSERT_EQ(pos, xs_stream_notes_end());
}

/* Writers note only owners[0..3]; the reader must never read another
 * value (a torn or stale slot taken for a note), and each of its reads
 * either names every note since its place or says -1. */
static atomic_bool race_stop;
static atomic_int race_started;

static void *race_writer(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	unsigned int n = 0;

	atomic_fetch_add(&race_started, 1);
	while (!atomic_load(&race_stop)) {
		xs_stream_note(&owners[k % 4]);
		/* on one CPU, let the reader in before the ring laps it */
		if (++n % 16 == 0)
			sched_yield();
	}
	return NULL;
}

XT_TEST(racing_writers_never_yield_a_note_not_written)
{
	pthread_t t[3];
	unsigned long pos = xs_stream_notes_end(), reads = 0, lost = 0;
	const void *got[256];
	int i, n, k;

	for (i = 0; i < 3; i++)
		XT_ASSERT_EQ(pthread_create(&t[i], NULL, race_writer,
					    (void *)(uintptr_t)i),
			     0);
	/* the race begins once every writer runs (a slow start, as under
	 * the sanitizers, would leave the reader alone), and lasts until
	 * 100,000 notes were read or 2,000,000 reads made */
	while (atomic_load(&race_started) < 3)
		sched_yield();
	for (i = 0; i < 2000000 && reads < 100000; i++) {
		unsigned long from = pos;

		n = xs_stream_notes(&pos, got, 256);
		XT_ASSERT(pos >= from);
		if (n < 0) {
			/* lapped, or a writer preempted between its number
			 * and its slot, which fails every read past it till
			 * it runs again: let it (a loaded host) */
			lost++;
			sched_yield();
			continue;
		}
		XT_ASSERT_EQ((unsigned long)n, pos - from);
		for (k = 0; k < n; k++)
			XT_ASSERT(got[k] == &owners[0] ||
				  got[k] == &owners[1] || got[k] == &owners[2]);
		reads += (unsigned long)n;
	}
	atomic_store(&race_stop, true);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	XT_ASSERT(reads > 0);
}
