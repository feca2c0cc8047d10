/*
 * tests/unit/test_pool.c - the registered buffer pool over a fake
 * registration seam: size classes, superblock registration, the byte
 * limit and backpressure, reuse, no overlap, the release of emptied
 * superblocks (and none at a boundary swing), and double-free detection.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/pool.h"
#include "xt.h"

static int nr_reg, nr_dereg, fail_reg;

static int fake_reg(void *pd, void *addr, size_t len, uint32_t *lkey, void **mr)
{
	XT_ASSERT(pd == (void *)0x1234);
	XT_ASSERT_EQ(len, XS_POOL_SUPERBLOCK);
	if (fail_reg)
		return -fail_reg;
	nr_reg++;
	*lkey = 1000u + (uint32_t)nr_reg;
	*mr = addr;
	return 0;
}

static void fake_dereg(void *mr)
{
	XT_ASSERT(mr != NULL);
	nr_dereg++;
}

static const struct xs_pool_ops fake_ops = { fake_reg, fake_dereg };

static void setup(struct xs_pool *p, size_t mb)
{
	nr_reg = nr_dereg = fail_reg = 0;
	XT_ASSERT_EQ(xs_pool_init(p, &fake_ops, (void *)0x1234, mb << 20), 0);
}

XT_TEST(size_classes)
{
	static const size_t want[][2] = {
		{ 1, 64 },
		{ 64, 64 },
		{ 65, 128 },
		{ 4096, 4096 },
		{ 4097, 8192 },
		{ 1 << 20, 1 << 20 },
		{ 4u << 20, 4u << 20 },
	};
	struct xs_pool p;
	struct xs_buf b;
	size_t i;

	setup(&p, 64);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		XT_ASSERT_EQ(xs_pool_alloc(&p, want[i][0], &b), 0);
		XT_ASSERT_EQ(b.size, want[i][1]);
		XT_ASSERT(b.lkey > 1000);
		memset(b.addr, 0xab, b.size); /* the whole class is usable */
	}
	XT_ASSERT_EQ(xs_pool_alloc(&p, 0, &b), -EINVAL);
	XT_ASSERT_EQ(xs_pool_alloc(&p, (4u << 20) + 1, &b), -EINVAL);
	xs_pool_fini(&p);
	XT_ASSERT_EQ(nr_dereg, nr_reg);
}

XT_TEST(one_superblock_serves_many)
{
	struct xs_pool p;
	struct xs_buf b[100];
	int i;

	setup(&p, 64);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 0); /* lazy */
	for (i = 0; i < 100; i++)
		XT_ASSERT_EQ(xs_pool_alloc(&p, 4096, &b[i]), 0);
	XT_ASSERT_EQ(nr_reg, 1);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), XS_POOL_SUPERBLOCK);
	for (i = 1; i < 100; i++) {
		XT_ASSERT_EQ(b[i].lkey, b[0].lkey);
		XT_ASSERT_EQ((char *)b[i].addr - (char *)b[i - 1].addr, 4096);
	}
	/* reuse: the last freed buffer comes back first */
	xs_pool_free(&p, &b[42]);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 3000, &b[0]), 0);
	XT_ASSERT(b[0].addr == b[42].addr);
	xs_pool_fini(&p);
}

XT_TEST(limit_gives_backpressure_not_loss)
{
	struct xs_pool p;
	struct xs_buf a, b, c;

	setup(&p, 8); /* two superblocks */
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &a), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 3u << 20, &b), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &c), -ENOBUFS);
	XT_ASSERT_EQ(p.nr_exhausted, 1);
	memset(a.addr, 1, a.size);
	memset(b.addr, 2, b.size);
	xs_pool_free(&p, &a);
	/* a freed 4 MiB buffer serves the next 4 MiB request */
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &c), 0);
	XT_ASSERT(c.addr == a.addr);
	XT_ASSERT_EQ(((unsigned char *)b.addr)[b.size - 1], 2); /* untouched */
	XT_ASSERT_EQ(nr_reg, 2);
	xs_pool_fini(&p);
	XT_ASSERT_EQ(nr_dereg, 2);
}

XT_TEST(tiny_limit_still_has_one_superblock)
{
	struct xs_pool p;
	struct xs_buf b;

	setup(&p, 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 100, &b), 0);
	xs_pool_fini(&p);
}

XT_TEST(no_overlap_across_a_full_superblock)
{
	size_t n = XS_POOL_SUPERBLOCK / 64, i;
	struct xs_buf *b = calloc(n, sizeof(*b));
	struct xs_pool p;

	XT_ASSERT(b != NULL);
	setup(&p, 4);
	for (i = 0; i < n; i++) {
		XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &b[i]), 0);
		memset(b[i].addr, (int)(i % 251), 64);
	}
	XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &b[0]), -ENOBUFS);
	for (i = 0; i < n; i++) {
		XT_ASSERT_EQ(((unsigned char *)b[i].addr)[0], i % 251);
		XT_ASSERT_EQ(((unsigned char *)b[i].addr)[63], i % 251);
	}
	for (i = 0; i < n; i++)
		xs_pool_free(&p, &b[i]);
	XT_ASSERT_EQ(p.bytes_in_use, 0);
	xs_pool_fini(&p);
	free(b);
}

XT_TEST(registration_failure_is_reported)
{
	struct xs_pool p;
	struct xs_buf b;

	setup(&p, 64);
	fail_reg = ENOMEM;
	XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &b), -ENOMEM);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 0);
	fail_reg = 0;
	XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &b), 0);
	XT_ASSERT_EQ(nr_reg, 1);
	xs_pool_fini(&p);
}

XT_TEST(emptied_superblock_released_while_its_class_keeps_one_free)
{
	struct xs_pool p;
	struct xs_buf a, b, c, d;

	setup(&p, 12); /* three superblocks; one 4 MiB buffer each */
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &a), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &b), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &c), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &d), -ENOBUFS);
	xs_pool_free(&p, &a); /* the class's only free superblock: kept */
	XT_ASSERT_EQ(nr_dereg, 0);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 3 * XS_POOL_SUPERBLOCK);
	xs_pool_free(&p, &b); /* a's is free too: b's goes */
	XT_ASSERT_EQ(nr_dereg, 1);
	XT_ASSERT_EQ(p.nr_released, 1);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 2 * XS_POOL_SUPERBLOCK);
	xs_pool_free(&p, &c);
	XT_ASSERT_EQ(nr_dereg, 2);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), XS_POOL_SUPERBLOCK);
	XT_ASSERT_EQ(p.bytes_in_use, 0);
	/* the kept one serves the next request; the limit counts what is
	 * registered now, so two more fit, in the released slots */
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &a), 0);
	XT_ASSERT_EQ(nr_reg, 3);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &b), 0);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &c), 0);
	XT_ASSERT_EQ(nr_reg, 5);
	XT_ASSERT(a.sb < 3 && b.sb < 3 && c.sb < 3);
	XT_ASSERT(a.sb != b.sb && b.sb != c.sb && a.sb != c.sb);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 4u << 20, &d), -ENOBUFS);
	memset(a.addr, 1, a.size);
	memset(b.addr, 2, b.size);
	memset(c.addr, 3, c.size);
	XT_ASSERT_EQ(((unsigned char *)a.addr)[a.size - 1], 1);
	xs_pool_fini(&p);
	XT_ASSERT_EQ(nr_dereg, nr_reg);
}

XT_TEST(a_use_that_swings_at_a_superblock_boundary_registers_once)
{
	size_t n = XS_POOL_SUPERBLOCK / 4096, i;
	struct xs_buf *b = calloc(n + 1, sizeof(*b));
	struct xs_pool p;

	XT_ASSERT(b != NULL);
	setup(&p, 64);
	for (i = 0; i < n; i++)
		XT_ASSERT_EQ(xs_pool_alloc(&p, 4096, &b[i]), 0);
	XT_ASSERT_EQ(nr_reg, 1);
	for (i = 0; i < 100; i++) { /* one buffer over, then back */
		XT_ASSERT_EQ(xs_pool_alloc(&p, 4096, &b[n]), 0);
		XT_ASSERT(b[n].sb != b[0].sb);
		xs_pool_free(&p, &b[n]);
	}
	XT_ASSERT_EQ(nr_reg, 2);
	XT_ASSERT_EQ(nr_dereg, 0);
	/* all back: the class keeps one superblock, not two */
	for (i = 0; i < n; i++)
		xs_pool_free(&p, &b[i]);
	XT_ASSERT_EQ(nr_dereg, 1);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), XS_POOL_SUPERBLOCK);
	xs_pool_fini(&p);
	XT_ASSERT_EQ(nr_dereg, 2);
	free(b);
}

XT_TEST(a_burst_given_back_leaves_one_superblock_per_class)
{
	size_t n = 3 * (XS_POOL_SUPERBLOCK / 64), i;
	struct xs_buf *b = calloc(n, sizeof(*b));
	struct xs_buf big;
	struct xs_pool p;

	XT_ASSERT(b != NULL);
	setup(&p, 64);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 1u << 20, &big), 0);
	for (i = 0; i < n; i++)
		XT_ASSERT_EQ(xs_pool_alloc(&p, 64, &b[i]), 0);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 4 * XS_POOL_SUPERBLOCK);
	for (i = 0; i < n; i++)
		xs_pool_free(&p, &b[n - 1 - i]);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 2 * XS_POOL_SUPERBLOCK);
	XT_ASSERT_EQ(p.nr_released, 2);
	XT_ASSERT_EQ(p.bytes_in_use, 1u << 20); /* the other class's, kept */
	xs_pool_free(&p, &big);
	XT_ASSERT_EQ(xs_pool_registered_bytes(&p), 2 * XS_POOL_SUPERBLOCK);
	xs_pool_fini(&p);
	XT_ASSERT_EQ(nr_dereg, 4);
	free(b);
}

XT_TEST(double_free_aborts)
{
	struct xs_pool p;
	struct xs_buf b;
	int status;
	pid_t pid;

	setup(&p, 64);
	XT_ASSERT_EQ(xs_pool_alloc(&p, 128, &b), 0);
	xs_pool_free(&p, &b);
	pid = fork();
	XT_ASSERT(pid >= 0);
	if (pid == 0) {
		close(STDERR_FILENO); /* the assertion message is expected */
		xs_pool_free(&p, &b);
		_exit(0);
	}
	XT_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	XT_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	xs_pool_fini(&p);
}
