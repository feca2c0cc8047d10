/*
 * core/real.h - the libc entry points that libxsock interposes, as resolved
 * with dlsym(RTLD_NEXT) at init.
 *
 * The table lives in core/ rather than preload/ because core/ itself calls
 * libc (connect on fallback, close on teardown, write for the logger) and
 * must never call an interposed name, nor include a preload/ header.
 */
#ifndef XS_CORE_REAL_H
#define XS_CORE_REAL_H

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include <sys/uio.h>
#include <time.h>

struct xs_real {
#define XS_SYM(ret, name, params, args, required) ret(*name) params;
#include "real_syms.def"
#undef XS_SYM
};

/* Filled once by xs_real_resolve(); read-only afterwards. */
extern struct xs_real xs_real;

/* What a call of a symbol this libc lacks answers: ENOSYS, as a libc
 * without it would leave the caller. */
static inline int xs_no_symbol(void)
{
	errno = ENOSYS;
	return -1;
}

/*
 * Call the real libc function @name, never through an unchecked pointer:
 * an optional symbol may be missing, and code that runs before (or
 * without) xs_real_resolve() - unit tests linking core/ alone - finds the
 * table empty. Inside libxsock this is the only way to libc's entry
 * points of real_syms.def: the plain name is the library's own wrapper
 * (tests/check-symbols fails on one).
 */
#define XS_CALL(name, ...)                                                     \
	(xs_real.name ? xs_real.name(__VA_ARGS__) : xs_no_symbol())

/**
 * xs_real_resolve() - fill xs_real with dlsym(RTLD_NEXT, name) for every
 *                     entry of real_syms.def
 * @missing:     receives the name of the first missing required symbol
 * @missing_len: size of @missing in bytes
 *
 * dlerror() is cleared before and checked after each lookup. Optional
 * symbols may stay NULL.
 *
 * Context: called once, from xs_init_once(), before any other core call.
 * Return: 0, or -ENOENT when a required symbol is missing.
 */
int xs_real_resolve(char *missing, size_t missing_len);

/**
 * xs_real_nr_syms() - number of entries in real_syms.def
 * Return: the count, for the exported-symbol test.
 */
size_t xs_real_nr_syms(void);

/**
 * xs_real_sym_name() - name of entry @i of real_syms.def
 * @i: index below xs_real_nr_syms()
 * Return: the symbol name, or NULL when @i is out of range.
 */
const char *xs_real_sym_name(size_t i);

#endif /* XS_CORE_REAL_H */
