/*
 * core/stats.h - process-wide counters (internal to core/).
 */
#ifndef XS_CORE_STATS_H
#define XS_CORE_STATS_H

#include <stdatomic.h>

#include "xs_core.h"

struct xs_stats {
	atomic_ulong sockets;		      /* stream sockets tracked */
	atomic_ulong decided[XS_KIND__COUNT]; /* by transport kind */
	atomic_ulong fallback[XS_FB__COUNT];  /* TCP, by reason */
	atomic_ulong rdma_connects;	      /* RC connections made */
	atomic_ulong rdma_accepts;	      /* RC connections accepted */
	atomic_ulong rdma_bytes_sent;	      /* payload bytes over RDMA */
	atomic_ulong rdma_bytes_received;
	atomic_ulong rndv_exposed;  /* regions exposed for RDMA READ */
	atomic_ulong rndv_pulled;   /* peers' regions pulled by RDMA READ */
	atomic_ulong mr_bytes;	    /* bytes under ibv_reg_mr() now */
	atomic_ulong mr_bytes_peak; /* the most there ever were */
};

extern struct xs_stats xs_stats;

#define xs_stats_inc(field)                                                    \
	atomic_fetch_add_explicit(&xs_stats.field, 1, memory_order_relaxed)
#define xs_stats_add(field, n)                                                 \
	atomic_fetch_add_explicit(&xs_stats.field, (n), memory_order_relaxed)

/**
 * xs_stats_registered() - count memory registered (@delta > 0) or
 *                         deregistered (@delta < 0), in bytes, and keep
 *                         the peak: what XSOCK_STATS reports as
 *                         "registered bytes N peak M"
 * @delta: bytes
 */
void xs_stats_registered(long delta);

#endif /* XS_CORE_STATS_H */
