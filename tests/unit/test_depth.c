/*
 * tests/unit/test_depth.c - the reentrancy depth (core/xs_core.h): an
 * XS_INSIDE() guard raises it to the end of its block whichever way the
 * block is left (return, goto, break), guards in called functions stack,
 * a new thread starts at 0, and core/ calls that end without RDMA work
 * (a socket's last put) leave it where they found it.
 */
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

XT_TEST(last_put_restores_depth)
{
	static struct xs_config cfg;
	char err[XS_CFG_ERR_MAX];
	struct xs_sock *s;

	XT_ASSERT_EQ(xs_real_resolve(err, sizeof(err)), 0);
	XT_ASSERT_EQ(xs_cfg_load(&cfg, NULL, NULL, err, sizeof(err)), 0);
	xs_core_init(&cfg);
	s = xs_sock_create(AF_INET, SOCK_STREAM, 0);
	XT_ASSERT(s != NULL);
	xs_sock_get(s);
	xs_sock_put(s);
	XT_ASSERT_EQ(xs_tls_depth, 0);
	xs_sock_put(s); /* the last: teardown of a socket never decided */
	XT_ASSERT_EQ(xs_tls_depth, 0);
}
