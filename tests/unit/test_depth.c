/*
 * tests/unit/test_depth.c - the reentrancy depth (core/xs_core.h): an
 * XS_INSIDE() guard raises it to the end of its block whichever way the
 * block is left (return, goto, break), guards in called functions stack,
 * a new thread starts at 0, and rdma-core is called with the depth raised
 * (xs_dev_available(), against a stand-in for ibv_get_device_list()).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>

#include "../../core/xs_core.h"
#include "xt.h"

static int early_return(bool early)
{
	XS_INSIDE();

	if (early)
		return xs_tls_depth;
	return xs_tls_depth * 10;
}

static int leave_by_goto(void)
{
	int seen = -1;

	{
		XS_INSIDE();

		seen = xs_tls_depth;
		goto out;
	}
out:
	return seen * 100 + xs_tls_depth;
}

static int nested(void)
{
	XS_INSIDE();

	return early_return(true);
}

XT_TEST(guard_lowers_on_every_way_out)
{
	XT_ASSERT_EQ(xs_tls_depth, 0);
	XT_ASSERT_EQ(early_return(true), 1);
	XT_ASSERT_EQ(xs_tls_depth, 0);
	XT_ASSERT_EQ(early_return(false), 10);
	XT_ASSERT_EQ(xs_tls_depth, 0);
	XT_ASSERT_EQ(leave_by_goto(), 100);
	XT_ASSERT_EQ(xs_tls_depth, 0);
	for (int i = 0; i < 3; i++) {
		XS_INSIDE();

		XT_ASSERT_EQ(xs_tls_depth, 1);
		if (i == 1)
			break;
	}
	XT_ASSERT_EQ(xs_tls_depth, 0);
}

XT_TEST(guards_stack_across_calls)
{
	XT_ASSERT_EQ(nested(), 2);
	XT_ASSERT_EQ(xs_tls_depth, 0);
}

static void *depth_of_new_thread(void *arg)
{
	*(int *)arg = xs_tls_depth;
	return NULL;
}

XT_TEST(new_thread_starts_at_zero)
{
	pthread_t t;
	int seen = -1;
	XS_INSIDE();

	XT_ASSERT_EQ(pthread_create(&t, NULL, depth_of_new_thread, &seen), 0);
	XT_ASSERT_EQ(pthread_join(t, NULL), 0);
	XT_ASSERT_EQ(seen, 0);
	XT_ASSERT_EQ(xs_tls_depth, 1);
}

/*
 * A stand-in for rdma-core's ibv_get_device_list(): the test binary's own
 * definition wins over libibverbs' for core/dev.c linked into it. It
 * records the depth it was called at and reports no device.
 */
static int depth_in_rdma_core = -1;

struct ibv_device **(ibv_get_device_list)(int *num_devices)
{
	depth_in_rdma_core = xs_tls_depth;
	if (num_devices)
		*num_devices = 0;
	errno = ENODEV;
	return NULL;
}

XT_TEST(rdma_core_runs_inside_a_guard)
{
	static struct xs_config cfg;
	char err[XS_CFG_ERR_MAX];

	XT_ASSERT_EQ(xs_real_resolve(err, sizeof(err)), 0);
	XT_ASSERT_EQ(xs_cfg_load(&cfg, NULL, NULL, err, sizeof(err)), 0);
	xs_core_init(&cfg);
	XT_ASSERT_EQ(xs_tls_depth, 0);
	XT_ASSERT_EQ(xs_dev_available(), 0);
	/* rdma-core ran with the depth raised, so its own read/open/close
	 * pass through the wrappers untouched; and it is back at 0 */
	XT_ASSERT_EQ(depth_in_rdma_core, 1);
	XT_ASSERT_EQ(xs_tls_depth, 0);
}
