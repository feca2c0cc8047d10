/*
 * core/core_int.h - declarations shared between core/ files only.
 */
#ifndef XS_CORE_CORE_INT_H
#define XS_CORE_CORE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conn.h"
#include "xs_core.h"

/*
 * Monotonic microseconds. Inline: the completion-queue spin reads it in a
 * tight loop (XSOCK_SPIN_US).
 */
static inline uint64_t xs_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/**
 * xs_copy_in() - copy @n bytes from an application pointer without
 *                trusting it (process_vm_readv on ourselves fails cleanly
 *                where a plain read would crash)
 * @dst: library memory
 * @src: application memory; NULL or unmapped gives -EFAULT
 * @n:   bytes
 * Return: 0, or -EFAULT as the kernel would answer.
 */
int xs_copy_in(void *dst, const void *src, size_t n);

/**
 * xs_sock_mine() - whether @s's RDMA objects belong to this process
 * @s: socket with a stream or listener
 *
 * False only in a forked child for what its parent made (shared kernel
 * context: the child never touches it). No system call outside a child.
 */
bool xs_sock_mine(const struct xs_sock *s);

/**
 * xs_dev_open() - the opened device for a verbs context
 * @verbs:      context that rdma_cm resolved
 * @pool_bytes: pool limit, used when the device is opened here
 * @rc:         receives the negative errno on failure
 *
 * The PD and the registered pool are made on first use and kept for the
 * life of the process image; a forked child starts with none.
 * Context: any thread, the depth raised (from connection setup); takes
 * dev_lock, and calls rdma-core (PD, pool registration) under it.
 * Return: the device, or NULL with *@rc set.
 */
struct xs_dev *xs_dev_open(struct ibv_context *verbs, size_t pool_bytes,
			   int *rc);

/**
 * xs_dev_fork_child() - forget the parent's device probe and opened
 *                       devices in a forked child
 *
 * Context: the child, right after fork(), single-threaded.
 */
void xs_dev_fork_child(void);

/**
 * xs_dev_inherited() - whether this process image holds an ancestor's
 *                      RDMA state: a process forked after the parent
 *                      probed devices, or forked from such a child
 *
 * Such a process never uses RDMA: rdma-core's device list, rdma_cm's
 * opened devices and their verbs contexts are the parent's (shared kernel
 * context). A child forked before any probe - a daemon's fork() and
 * setsid() at start, as redis-server --daemonize does - starts afresh.
 */
bool xs_dev_inherited(void);

/* dev_lock around fork(): see xs_core_atfork_prepare(). */
void xs_dev_lock(void);
void xs_dev_unlock(void);

/**
 * xs_fd_high() - move a library-owned fd up, to RLIMIT_NOFILE / 2 or
 *                above, so that the application's own fds stay as small
 *                as over kernel TCP: an event loop may size its tables by
 *                the connections it opens (wrk's ae: 10 + 3 x connections;
 *                a socket numbered past that is a "connect error")
 * @fd: an fd of ours; CLOEXEC after the move
 * Context: any thread; two system calls.
 * Return: the new fd (@fd closed), or @fd when nothing is free up there.
 */
int xs_fd_high(int fd);

/**
 * xs_fd_dup_high() - a CLOEXEC dup of @fd, numbered as xs_fd_high() would
 *                    place it, or anywhere when nothing is free up there
 * @fd: any fd
 * Return: the new fd, or -1 with errno set (fcntl(2)'s).
 */
int xs_fd_dup_high(int fd);

#endif /* XS_CORE_CORE_INT_H */
