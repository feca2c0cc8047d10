/*
 * tests/unit/xt.h - the unit-test harness: XT_TEST(name) registers a test,
 * XT_ASSERT*() stop it with the expression, both values and file:line
 * (libuv's ASSERT_EQ style). xt_main.c runs each test in its own forked
 * process with a timeout and prints TAP.
 */
#ifndef XS_TESTS_XT_H
#define XS_TESTS_XT_H

#include <stdio.h>
#include <string.h>

typedef void (*xt_fn)(void);

void xt_register(const char *name, xt_fn fn);
void xt_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

#define XT_TEST(name)                                                          \
	static void xt_test_##name(void);                                      \
	__attribute__((constructor)) static void xt_reg_##name(void)           \
	{                                                                      \
		xt_register(#name, xt_test_##name);                            \
	}                                                                      \
	static void xt_test_##name(void)

#define XT_ASSERT(cond)                                                        \
	do {                                                                   \
		if (!(cond))                                                   \
			xt_fail(__FILE__, __LINE__, "assertion failed: %s",    \
				#cond);                                        \
	} while (0)

#define XT_ASSERT_EQ(a, b)                                                     \
	do {                                                                   \
		long long xt_a_ = (long long)(a), xt_b_ = (long long)(b);      \
		if (xt_a_ != xt_b_)                                            \
			xt_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld",  \
				#a, #b, xt_a_, xt_b_);                         \
	} while (0)

#define XT_ASSERT_STREQ(a, b)                                                  \
	do {                                                                   \
		const char *xt_a_ = (a), *xt_b_ = (b);                         \
		if (!xt_a_ || !xt_b_ || strcmp(xt_a_, xt_b_) != 0)             \
			xt_fail(__FILE__, __LINE__,                            \
				"%s == %s: \"%s\" != \"%s\"", #a, #b,          \
				xt_a_ ? xt_a_ : "(null)",                      \
				xt_b_ ? xt_b_ : "(null)");                     \
	} while (0)

/* @hay contains @needle */
#define XT_ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                   \
		const char *xt_h_ = (hay), *xt_n_ = (needle);                  \
		if (!xt_h_ || !strstr(xt_h_, xt_n_))                           \
			xt_fail(__FILE__, __LINE__,                            \
				"%s contains %s: \"%s\" lacks \"%s\"", #hay,   \
				#needle, xt_h_ ? xt_h_ : "(null)", xt_n_);     \
	} while (0)

#endif /* XS_TESTS_XT_H */
