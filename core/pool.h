/*
 * core/pool.h - the registered buffer pool shared by every connection.
 *
 * Memory is registered once, in 4 MiB superblocks (XRDMA's superblock size),
 * with local access only: no byte of the pool is ever remote-readable or
 * remote-writable, nor can a memory window be bound over it. (Rendezvous
 * regions live in each connection's own staging MR: core/stream.h.)
 * Superblocks are carved by a slab allocator into
 * power-of-two buffers of 64 B to 4 MiB; each superblock serves one size
 * class. Superblocks are registered as buffers are asked for, and one
 * that an allocation frees wholly is deregistered while its class keeps
 * another superblock's worth of free buffers (so a class whose use swings
 * around a superblock boundary does not register and deregister on every
 * message). The pool never grows past its byte limit (XSOCK_POOL_MB): an
 * exhausted pool answers -ENOBUFS and the caller waits (backpressure).
 */
#ifndef XS_CORE_POOL_H
#define XS_CORE_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define XS_POOL_SUPERBLOCK (4u << 20) /* bytes, XRDMA's superblock size */
#define XS_POOL_MIN_BUF	   64u	      /* bytes, smallest size class */
#define XS_POOL_NR_CLASSES 17	      /* 64 B .. 4 MiB */

/*
 * The verbs the pool needs, as a seam: the real implementation registers
 * with ibv_reg_mr(); unit tests pass a fake that records calls.
 */
struct xs_pool_ops {
	/* Register [addr, addr+len): 0 with lkey and mr set, or -errno. */
	int (*reg)(void *pd, void *addr, size_t len, uint32_t *lkey, void **mr);
	/* Deregister what reg returned. */
	void (*dereg)(void *mr);
};

/* One buffer handed out by the pool. */
struct xs_buf {
	void *addr;
	size_t size;   /* bytes usable, the size class (>= what was asked) */
	uint32_t lkey; /* for SGEs */
	uint32_t sb;   /* superblock index, for xs_pool_free() */
	void *mr;      /* its MR (struct ibv_mr * on a real device) */
};

/* One superblock; a slot whose base is NULL holds none (never registered,
 * or deregistered once emptied) and is reused by the next registration. */
struct xs_pool_sb {
	uint8_t *base;
	void *mr;
	uint32_t lkey;
	unsigned int cls; /* size class this superblock serves */
	size_t carved;	  /* bytes handed to the class so far */
	uint64_t *inuse;  /* one bit per buffer: allocated */
	void *free;	  /* freed buffers, intrusive: next in the buffer */
	size_t nr_inuse;  /* buffers out */
	/* in its class's list of superblocks with room (a freed buffer, or
	 * room to carve): on it exactly while it has some */
	int prev, next;
};

struct xs_pool {
	pthread_mutex_t lock; /* protects everything below */
	const struct xs_pool_ops *ops;
	void *pd;
	size_t max_sb; /* superblocks allowed by the byte limit */
	size_t nr_sb;  /* slots used in @sb, registered or not */
	size_t nr_registered;
	struct xs_pool_sb *sb;
	int room[XS_POOL_NR_CLASSES];	    /* superblocks with room, or -1 */
	size_t nr_free[XS_POOL_NR_CLASSES]; /* buffers not out, per class */
	size_t bytes_in_use;
	uint64_t nr_exhausted; /* -ENOBUFS answers */
	uint64_t nr_released;  /* superblocks deregistered once emptied */
};

/**
 * xs_pool_init() - set up an empty pool; registers nothing yet
 * @p:         pool
 * @ops:       verbs seam (xs_pool_verbs_ops for real devices)
 * @pd:        protection domain passed to @ops->reg
 * @max_bytes: byte limit, rounded down to whole superblocks (at least one)
 * Return: 0, or -ENOMEM.
 */
int xs_pool_init(struct xs_pool *p, const struct xs_pool_ops *ops, void *pd,
		 size_t max_bytes);

/**
 * xs_pool_fini() - deregister and unmap every superblock
 * @p: pool; buffers still out become invalid
 */
void xs_pool_fini(struct xs_pool *p);

/**
 * xs_pool_alloc() - take a registered buffer of at least @len bytes
 * @p:   pool
 * @len: bytes wanted, 1 .. XS_POOL_SUPERBLOCK
 * @out: the buffer, on success
 *
 * Context: any thread; takes p->lock; never blocks on I/O.
 * Return: 0; -EINVAL for a length of 0 or above a superblock; -ENOBUFS when
 *         the byte limit is reached (wait for frees: backpressure);
 *         -ENOMEM or the registration's error when a new superblock fails.
 */
int xs_pool_alloc(struct xs_pool *p, size_t len, struct xs_buf *out);

/**
 * xs_pool_free() - give a buffer back
 * @p: pool
 * @b: what xs_pool_alloc() returned; freeing twice is a bug (asserted)
 *
 * Context: any thread; takes p->lock, and deregisters (a system call) the
 * buffer's superblock under it when this leaves the superblock unused and
 * its class holds at least two superblocks' worth of free buffers.
 */
void xs_pool_free(struct xs_pool *p, const struct xs_buf *b);

/**
 * xs_pool_registered_bytes() - bytes registered so far
 * @p: pool
 * Return: superblocks registered now times XS_POOL_SUPERBLOCK.
 */
size_t xs_pool_registered_bytes(struct xs_pool *p);

/* The real seam: ibv_reg_mr(LOCAL_WRITE) / ibv_dereg_mr. */
extern const struct xs_pool_ops xs_pool_verbs_ops;

#endif /* XS_CORE_POOL_H */
