/*
 * bench/tools/samples.h - timings kept whole and their percentiles, for
 * the bench tools (connrate, verbs_rr). Header-only: each tool is one
 * source file.
 */
#ifndef XS_BENCH_SAMPLES_H
#define XS_BENCH_SAMPLES_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct samples {
	uint64_t *v; /* ns */
	size_t nr;
	size_t cap;
};

/* Keep @ns. Return: 0, or -ENOMEM (nothing kept). */
static inline int samples_add(struct samples *s, uint64_t ns)
{
	uint64_t *v;
	size_t cap;

	if (s->nr == s->cap) {
		cap = s->cap ? 2 * s->cap : 65536;
		v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->nr++] = ns;
	return 0;
}

static inline int samples_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Sort them: before samples_pct_us(). */
static inline void samples_sort(struct samples *s)
{
	qsort(s->v, s->nr, sizeof(*s->v), samples_cmp);
}

/* Nearest-rank percentile @p (0..1] of the sorted samples, in us; 0 when
 * there are none. */
static inline double samples_pct_us(const struct samples *s, double p)
{
	double exact = p * (double)s->nr;
	size_t rank = (size_t)exact;

	if (!s->nr)
		return 0;
	if ((double)rank < exact) /* ceil() without libm */
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > s->nr)
		rank = s->nr;
	return (double)s->v[rank - 1] / 1000.0;
}

#endif
