/*
 * preload/preload.h - what every interposed wrapper needs: the export
 * marker and the entry check (the checked call into libc, XS_CALL(), is
 * core/real.h's, reached through core/xs_core.h).
 *
 * Every wrapper has the same short shape:
 *     enter (init + reentrancy guard) -> fd table lookup -> NULL: forward to
 *     libc -> otherwise exactly one xs_sock_*() call -> put -> xs_sys_ret().
 * No protocol logic, locks or logging here.
 */
#ifndef XS_PRELOAD_PRELOAD_H
#define XS_PRELOAD_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "../core/xs_core.h"
#include "../core/fdtab.h"

#define XS_EXPORT __attribute__((visibility("default")))

/* Set once init has run and the process tracks sockets (mode not off). */
extern atomic_bool xs_active;
extern atomic_bool xs_init_done;

/**
 * xs_init_once() - resolve libc, load the configuration, set up the table
 *
 * Runs exactly once under pthread_once, from the constructor or from the
 * first wrapper called, whichever comes first (another library's
 * constructor may call socket() before ours runs). Raises the reentrancy
 * depth while it runs.
 */
void xs_init_once(void);

/*
 * Entry check of every wrapper: false means "forward to libc untouched"
 * (inside libxsock, passthrough mode, or init failed).
 */
static inline bool xs_enter(void)
{
	if (xs_tls_depth)
		return false;
	if (!atomic_load_explicit(&xs_init_done, memory_order_acquire))
		xs_init_once();
	return atomic_load_explicit(&xs_active, memory_order_relaxed);
}

/*
 * xs_io_read(), xs_io_write(), xs_io_close() - what read(), write() and
 * close() do (preload/io.c, preload/interpose.c), for the library's own
 * callers of those calls: the stdio streams of preload/stdio.c. Return
 * and errno: as the calls'.
 */
ssize_t xs_io_read(int fd, void *buf, size_t len);
ssize_t xs_io_write(int fd, const void *buf, size_t len);
int xs_io_close(int fd);

/*
 * xs_stdio_init() - at init, after the inherited sockets were adopted:
 * stdin, stdout and stderr on one of our sockets (an inetd-style child)
 * become streams whose reads and writes are the wrappers' (stdio.c); its
 * lock's fork handlers are registered. Context: once, at init.
 */
void xs_stdio_init(void);

/*
 * xs_stdio_onto() - @fd (0, 1 or 2) names one of our sockets from now on
 * (dup2(), dup3(), dup(), F_DUPFD): glibc's stdin, stdout or stderr on it
 * becomes one of our streams, with glibc's buffering mode and the output
 * it had not written yet; one of ours already, or a stdin with input read
 * ahead from what the fd was before, stays. Context: the thread that made
 * the fd; takes the stream's lock, then stdio.c's list lock.
 */
void xs_stdio_onto(int fd);

/* xs_stdio_exit() - atexit, before xs_core_exit() ends the connections:
 * what those streams hold goes out */
void xs_stdio_exit(void);

#endif /* XS_PRELOAD_PRELOAD_H */
