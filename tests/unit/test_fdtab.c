/*
 * tests/unit/test_fdtab.c - the fd table: lookup, insert over stale
 * entries, remove-before-close, ranges across chunks, refcounts shared by
 * duplicates, whether a closed fd was its socket's last, type-stable
 * recycling, and concurrent use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "../../core/fdtab.h"
#include "xt.h"

static struct xs_config cfg;

static void setup(size_t nr_fds)
{
	char err[XS_CFG_ERR_MAX];

	XT_ASSERT_EQ(xs_cfg_load(&cfg, NULL, NULL, err, sizeof(err)), 0);
	xs_core_init(&cfg);
	XT_ASSERT_EQ(xs_fdtab_init(nr_fds), 0);
	XT_ASSERT_EQ(xs_fdtab_size(), nr_fds);
}

static unsigned int refs(struct xs_sock *s)
{
	return atomic_load(&s->refcnt);
}

static struct xs_sock *new_sock(void)
{
	struct xs_sock *s = xs_sock_create(AF_INET, SOCK_STREAM, 0);

	XT_ASSERT(s != NULL);
	XT_ASSERT_EQ(refs(s), 1);
	XT_ASSERT_EQ(xs_sock_kind(s), XS_KIND_PENDING);
	return s;
}

XT_TEST(lookup_out_of_range)
{
	setup(10000);
	XT_ASSERT(xs_fdtab_get(-1) == NULL);
	XT_ASSERT(xs_fdtab_get(0) == NULL);
	XT_ASSERT(xs_fdtab_get(9999) == NULL);
	XT_ASSERT(xs_fdtab_get(10000) == NULL);
	XT_ASSERT(xs_fdtab_get(2147483647) == NULL);
	XT_ASSERT(xs_fdtab_remove(-5) == NULL);
	XT_ASSERT(xs_fdtab_remove(123456789) == NULL);
}

XT_TEST(insert_get_remove)
{
	struct xs_sock *s, *g;

	setup(10000);
	s = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(5000, s), 0); /* second chunk */
	XT_ASSERT_EQ(refs(s), 1);		   /* the table's reference */
	g = xs_fdtab_get(5000);
	XT_ASSERT(g == s);
	XT_ASSERT_EQ(refs(s), 2);
	xs_sock_put(g);
	XT_ASSERT_EQ(refs(s), 1);
	XT_ASSERT(xs_fdtab_get(5001) == NULL);
	XT_ASSERT(xs_fdtab_get(904) == NULL); /* other chunk, not allocated */
	g = xs_fdtab_remove(5000);
	XT_ASSERT(g == s);
	XT_ASSERT(xs_fdtab_get(5000) == NULL);
	XT_ASSERT(xs_fdtab_remove(5000) == NULL);
	XT_ASSERT_EQ(refs(s), 1);
	xs_sock_put(g);
	XT_ASSERT_EQ(refs(s), 0);
}

XT_TEST(insert_beyond_table_drops_reference)
{
	struct xs_sock *s;

	setup(100);
	s = new_sock();
	xs_sock_get(s);
	XT_ASSERT_EQ(xs_fdtab_insert(100, s), -EBADF);
	XT_ASSERT_EQ(refs(s), 1);
	XT_ASSERT_EQ(xs_fdtab_insert(-1, s), -EBADF);
	XT_ASSERT_EQ(refs(s), 0);
}

XT_TEST(duplicates_share_one_socket)
{
	struct xs_sock *s;

	setup(64);
	s = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(3, s), 0);
	xs_sock_get(s); /* as dup() does: a reference for the new slot */
	XT_ASSERT_EQ(xs_fdtab_insert(7, s), 0);
	XT_ASSERT_EQ(refs(s), 2);
	xs_sock_put(xs_fdtab_remove(3)); /* close the original */
	XT_ASSERT_EQ(refs(s), 1);
	XT_ASSERT(xs_fdtab_get(7) == s); /* the duplicate still works */
	xs_sock_put(s);
	xs_sock_put(xs_fdtab_remove(7));
	XT_ASSERT_EQ(refs(s), 0);
}

XT_TEST(held_is_the_slots_answer_not_the_counts)
{
	struct xs_sock *s, *r;

	setup(10000);
	s = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(3, s), 0);
	xs_sock_get(s); /* dup() to an fd in the third chunk */
	XT_ASSERT_EQ(xs_fdtab_insert(9000, s), 0);
	r = xs_fdtab_remove(3); /* close(3): fd 9000 still holds it */
	XT_ASSERT(r == s);
	XT_ASSERT(xs_fdtab_held(s));
	xs_sock_put(r);
	r = xs_fdtab_remove(9000); /* its last fd */
	XT_ASSERT(!xs_fdtab_held(s));
	xs_sock_get(s); /* an operation's reference: no fd's */
	XT_ASSERT_EQ(refs(s), 2);
	XT_ASSERT(!xs_fdtab_held(s));
	xs_sock_put(s);
	xs_sock_put(r);
	XT_ASSERT_EQ(refs(s), 0);
}

XT_TEST(stale_entry_replaced)
{
	struct xs_sock *a, *b;

	setup(64);
	a = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(9, a), 0);
	/* fd 9 closed behind our back, reused by a new socket */
	b = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(9, b), 0);
	XT_ASSERT_EQ(refs(a), 0);
	XT_ASSERT(xs_fdtab_get(9) == b);
	xs_sock_put(b);
}

XT_TEST(restore_after_failed_close)
{
	struct xs_sock *a, *b, *r;

	setup(64);
	a = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(4, a), 0);
	r = xs_fdtab_remove(4);
	xs_fdtab_restore(4, r);
	XT_ASSERT_EQ(refs(a), 1);
	XT_ASSERT(xs_fdtab_get(4) == a);
	xs_sock_put(a);
	/* if the slot was filled meanwhile, the old reference is dropped */
	r = xs_fdtab_remove(4);
	b = new_sock();
	XT_ASSERT_EQ(xs_fdtab_insert(4, b), 0);
	xs_fdtab_restore(4, r);
	XT_ASSERT_EQ(refs(a), 0);
	XT_ASSERT(xs_fdtab_get(4) == b);
	xs_sock_put(b);
	xs_fdtab_restore(4, NULL);
}

XT_TEST(remove_range_across_chunks)
{
	static const int fds[] = { 0, 3, 4095, 4096, 9000, 20000, 20479 };
	struct xs_sock *s[7];
	int i;

	setup(20480);
	for (i = 0; i < 7; i++) {
		s[i] = new_sock();
		XT_ASSERT_EQ(xs_fdtab_insert(fds[i], s[i]), 0);
	}
	XT_ASSERT_EQ(xs_fdtab_remove_range(4, 9000, NULL), 3);
	XT_ASSERT(xs_fdtab_get(3) == s[1]);
	xs_sock_put(s[1]);
	XT_ASSERT(xs_fdtab_get(4095) == NULL);
	XT_ASSERT(xs_fdtab_get(4096) == NULL);
	XT_ASSERT(xs_fdtab_get(9000) == NULL);
	XT_ASSERT_EQ(refs(s[2]), 0);
	XT_ASSERT_EQ(refs(s[4]), 0);
	{
		struct xs_fdtab_removed *r;

		/* close_range(3, ~0U) that fails: everything comes back */
		XT_ASSERT_EQ(xs_fdtab_remove_range(3, ~0u, &r), 3);
		XT_ASSERT(r != NULL);
		XT_ASSERT_EQ(r[0].fd, 3);
		XT_ASSERT_EQ(r[2].fd, 20479);
		XT_ASSERT(xs_fdtab_get(3) == NULL);
		for (i = 0; i < 3; i++)
			xs_fdtab_restore(r[i].fd, r[i].s);
		free(r);
		XT_ASSERT(xs_fdtab_get(20000) == s[5]);
		xs_sock_put(s[5]);
	}
	XT_ASSERT_EQ(xs_fdtab_remove_range(3, ~0u, NULL), 3);
	XT_ASSERT(xs_fdtab_get(0) == s[0]);
	xs_sock_put(s[0]);
	XT_ASSERT_EQ(refs(s[5]), 0);
	XT_ASSERT_EQ(refs(s[6]), 0);
	XT_ASSERT_EQ(xs_fdtab_remove_range(10, 5, NULL), 0); /* reversed */
	XT_ASSERT_EQ(refs(s[0]), 1);
}

XT_TEST(released_memory_is_recycled)
{
	struct xs_sock *a, *b;

	setup(16);
	a = new_sock();
	xs_sock_put(a);
	b = new_sock(); /* type-stable: the same object comes back */
	XT_ASSERT(a == b);
	XT_ASSERT_EQ(refs(b), 1);
	xs_sock_put(b);
	XT_ASSERT(!xs_sock_tryget(b)); /* no reference from zero */
}

XT_TEST(transport_decision_on_connect_to_closed_port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct xs_sock *s;
	int fd;

	setup(16);
	XT_ASSERT_EQ(xs_real_resolve((char[64]){ 0 }, 64), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	XT_ASSERT(fd >= 0);
	s = new_sock();
	sin.sin_addr.s_addr = htonl(0x7f000001);
	sin.sin_port = htons(1); /* nothing listens on port 1 */
	XT_ASSERT_EQ(
		xs_sock_connect(s, fd, (struct sockaddr *)&sin, sizeof(sin)),
		-ECONNREFUSED);
	XT_ASSERT_EQ(xs_sock_kind(s), XS_KIND_TCP);
	XT_ASSERT_EQ(xs_sock_reason(s), XS_FB_LOOPBACK);
	XT_ASSERT_STREQ(xs_fallback_name(xs_sock_reason(s)), "loopback");
	XT_ASSERT_STREQ(xs_fallback_name(XS_FB__COUNT), "?");
	xs_sock_put(s);
	close(fd);
}

#define RACE_THREADS 8
#define RACE_FDS     64
#define RACE_ITERS   20000

static void *race_worker(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	int i;

	for (i = 0; i < RACE_ITERS; i++) {
		int fd = (int)(rand_r(&seed) % RACE_FDS);
		struct xs_sock *s;

		switch (rand_r(&seed) % 3) {
		case 0:
			s = xs_sock_create(AF_INET, SOCK_STREAM, 0);
			if (s)
				xs_fdtab_insert(fd, s);
			break;
		case 1:
			s = xs_fdtab_get(fd);
			if (s) {
				/* a reference keeps the object alive */
				XT_ASSERT(atomic_load(&s->refcnt) >= 1);
				xs_sock_put(s);
			}
			break;
		default:
			xs_sock_put(xs_fdtab_remove(fd));
			break;
		}
	}
	return NULL;
}

XT_TEST(concurrent_insert_get_remove)
{
	pthread_t t[RACE_THREADS];
	struct xs_sock *seen[RACE_FDS];
	int i;

	setup(RACE_FDS);
	for (i = 0; i < RACE_THREADS; i++)
		XT_ASSERT_EQ(pthread_create(&t[i], NULL, race_worker,
					    (void *)(uintptr_t)(i + 1)),
			     0);
	for (i = 0; i < RACE_THREADS; i++)
		pthread_join(t[i], NULL);
	/* quiescent: every occupied slot holds exactly one reference */
	for (i = 0; i < RACE_FDS; i++) {
		seen[i] = xs_fdtab_get(i);
		if (seen[i]) {
			XT_ASSERT_EQ(refs(seen[i]), 2);
			xs_sock_put(seen[i]);
		}
	}
	xs_fdtab_remove_range(0, RACE_FDS, NULL);
	for (i = 0; i < RACE_FDS; i++)
		if (seen[i])
			XT_ASSERT_EQ(refs(seen[i]), 0);
}

XT_TEST(connect_with_a_bad_address_pointer_is_efault)
{
	struct xs_sock *s;
	int fd;

	setup(16);
	XT_ASSERT_EQ(xs_real_resolve((char[64]){ 0 }, 64), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	XT_ASSERT(fd >= 0);
	s = new_sock();
	/* the kernel's answer, not a crash reading the pointer first */
	XT_ASSERT_EQ(xs_sock_connect(s, fd, (const struct sockaddr *)16, 16),
		     -EFAULT);
	XT_ASSERT_EQ(xs_sock_kind(s), XS_KIND_PENDING);
	XT_ASSERT_EQ(xs_sock_connect(s, fd, NULL, 0),
		     -EINVAL); /* as the kernel says */
	xs_sock_put(s);
	close(fd);
}

XT_TEST(config_error_is_one_escaped_line)
{
	char buf[512];
	int p[2];
	ssize_t n;

	XT_ASSERT_EQ(xs_real_resolve((char[64]){ 0 }, 64), 0);
	XT_ASSERT_EQ(pipe(p), 0);
	XT_ASSERT_EQ(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	xs_log_config_error("XSOCK_RULES: /tmp/a\nb\x1b[2J: cannot open");
	xs_log_config_error("a second error is not printed");
	close(STDERR_FILENO);
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	XT_ASSERT(n > 0);
	buf[n] = '\0';
	XT_ASSERT_STREQ(buf, "xsock: XSOCK_RULES: /tmp/a\\x0ab\\x1b[2J: cannot "
			     "open (all sockets use kernel TCP)\n");
}
