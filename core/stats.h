/*
 * core/stats.h - counters: the process's (internal to core/) and the
 *                published file behind them (core/publish.c).
 */
#ifndef XS_CORE_STATS_H
#define XS_CORE_STATS_H

#include "xs_core.h"
#include "xs_shm.h"

/*
 * The process-wide counters: in the published file's header once there is
 * one, in private memory before (and without) it. Relaxed atomics, bumped
 * on the control path only.
 */
extern struct xs_shm_process *xs_statp;

#define xs_stats_inc(field) xs_stats_add(field, 1)
#define xs_stats_add(field, n)                                                 \
	__atomic_fetch_add(                                                    \
		&__atomic_load_n(&xs_statp, __ATOMIC_ACQUIRE)->field, (n),     \
		__ATOMIC_RELAXED)

/**
 * xs_stats_registered() - count memory registered (@delta > 0) or
 *                         deregistered (@delta < 0), in bytes, and keep
 *                         the peak: what XSOCK_STATS reports as
 *                         "registered bytes N peak M"
 * @delta: bytes
 */
void xs_stats_registered(long delta);

/**
 * xs_pub_take() - a counters slot for a new socket: one in the published
 *                 file, or @own when there is no file or no free slot
 * @own: the socket's private slot
 *
 * Makes the file on first use (XSOCK_PUBLISH). The slot comes back zeroed,
 * fd -1, state XS_SHM_USED.
 * Context: socket pool lock held (signals blocked).
 * Return: the slot.
 */
struct xs_shm_slot *xs_pub_take(struct xs_shm_slot *own);

/**
 * xs_pub_give() - release a slot of xs_pub_take(); its counters are added
 *                 to the process's closed-socket sums
 * @slot: the slot
 * @own:  the socket's private slot (@slot may be it)
 * Context: socket pool lock held (signals blocked).
 */
void xs_pub_give(struct xs_shm_slot *slot, struct xs_shm_slot *own);

/**
 * xs_pub_sum() - add @slot's counters to @sum
 * @sum:  accumulator
 * @slot: a slot
 */
void xs_pub_sum(struct xs_shm_counters *sum, const struct xs_shm_slot *slot);

/**
 * xs_pub_fork_child() - in a forked child: stop writing the parent's file
 *                       (a private copy until the child makes a socket),
 *                       and zero the process counters
 * Context: the child, right after fork(), single-threaded.
 */
void xs_pub_fork_child(void);

/**
 * xs_sock_live_sum() - add the counters of this process's open RDMA
 *                      sockets to @sum
 * @sum: accumulator
 * Context: takes the linger lock.
 */
void xs_sock_live_sum(struct xs_shm_counters *sum);

/**
 * xs_sock_teardowns_wait() - wait until no other thread is between
 *                            unlinking a closed RDMA socket and adding its
 *                            counters to the process's closed ones
 * Context: the exit summary, before it reads them; sleeps 200 ms at most
 * (SOCK_TEARDOWN_WAIT_MS); takes no lock.
 * Return: the teardowns begun so far (see xs_sock_teardowns()).
 */
unsigned int xs_sock_teardowns_wait(void);

/* xs_sock_teardowns() - the teardowns begun so far: unchanged across a
 * read of the counters, none began while it ran. */
unsigned int xs_sock_teardowns(void);

#endif /* XS_CORE_STATS_H */
