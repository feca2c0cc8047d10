/*
 * bench/tools/args.h - what the bench tools (connrate, verbs_rr, sock_rr)
 * read from their command lines, their clock and their fatal errors.
 * Header-only, as samples.h: each tool is one source file, and defines
 * usage() (its usage message on stderr, exit 2).
 */
#ifndef XS_BENCH_ARGS_H
#define XS_BENCH_ARGS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* The tool's usage message (@why first, when given) on stderr; exit 2. */
static void __attribute__((noreturn)) usage(const char *why);

/* An IPv4 address and port into @sin. Return: NULL, or what is wrong, as
 * a usage message. */
static inline const char *args_addr(const char *ip, const char *port,
				    struct sockaddr_in *sin)
{
	unsigned long p;
	char *end;

	*sin = (struct sockaddr_in){ .sin_family = AF_INET };
	errno = 0;
	p = strtoul(port, &end, 10);
	if (errno || end == port || *end || p > 65535 || *port == '-')
		return "PORT must be a number from 0 to 65535";
	sin->sin_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
		return "ADDR must be an IPv4 address";
	return NULL;
}

/* A decimal count from @min to @max into *@v. Return: whether it is one. */
static inline bool args_count(const char *s, long min, long max, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(s, &end, 10);
	return !errno && end != s && !*end && *v >= min && *v <= max;
}

/* CLOCK_MONOTONIC in ns (it cannot fail with a valid clock id). */
static inline uint64_t args_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An IPv4 address and port, else bad usage. */
static inline struct sockaddr_in addr_parse(const char *ip, const char *port)
{
	struct sockaddr_in sin;
	const char *why = args_addr(ip, port, &sin);

	if (why)
		usage(why);
	return sin;
}

/* A count from @min to @max, else bad usage (@why). */
static inline long count_parse(const char *s, long min, long max,
			       const char *why)
{
	long v;

	if (!args_count(s, min, max, &v))
		usage(why);
	return v;
}

/*
 * Print "<tool>: <what>[: <strerror(err)>]" on stderr and exit 1. @err is
 * a positive errno, or 0 when the message says it all.
 */
static inline void __attribute__((noreturn, format(printf, 2, 3)))
die_err(int err, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	exit(1);
}

/* Raise the soft RLIMIT_NOFILE to the hard one (a tool that holds
 * thousands of connections); return the new limit. Dies on failure. */
static inline rlim_t args_nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		die_err(errno, "getrlimit RLIMIT_NOFILE");
	if (rl.rlim_cur != rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			die_err(errno, "setrlimit RLIMIT_NOFILE %llu",
				(unsigned long long)rl.rlim_max);
	}
	return rl.rlim_cur;
}

#endif
