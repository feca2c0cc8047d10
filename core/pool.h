/*
 * core/pool.h - the registered buffer pool shared by every connection.
 *
 * Memory is registered once, in 4 MiB superblocks (XRDMA's superblock size),
 * with local access only: no byte of the pool is ever remote-readable or
 * remote-writable, nor can a memory window be bound over it. (Rendezvous
 * regions live in each connection's own staging MR: core/stream.h.) Superblocks are carved by a slab allocator into
 * power-of-two buffers of 64 B to 4 MiB; each superblock serves one size
 * class. The pool never grows past its byte limit (XSOCK_POOL_MB): an
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

struct xs_pool_sb {
	uint8_t *base;
	void *mr;
	uint32_t lkey;
	unsigned int cls; /* size class this superblock serves */
	size_t carved;	  /* bytes handed to the class so far */
	uint64_t *inuse;  /* one bit per buffer: allocated */
};

struct xs_pool {
	pthread_mutex_t lock; /* protects everything below */
	const struct xs_pool_ops *ops;
	void *pd;
	size_t max_sb; /* superblocks allowed by the byte limit */
	size_t nr_sb;
	struct xs_pool_sb *sb;
	void *free_list[XS_POOL_NR_CLASSES]; /* intrusive: next in the buffer */
	int free_sb[XS_POOL_NR_CLASSES]; /* superblock still carving, or -1 */
	size_t bytes_in_use;
	uint64_t nr_exhausted; /* -ENOBUFS answers */
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
 */
void xs_pool_free(struct xs_pool *p, const struct xs_buf *b);

/**
 * xs_pool_registered_bytes() - bytes registered so far
 * @p: pool
 * Return: superblocks registered times XS_POOL_SUPERBLOCK.
 */
size_t xs_pool_registered_bytes(struct xs_pool *p);

/* The real seam: ibv_reg_mr(LOCAL_WRITE) / ibv_dereg_mr. */
extern const struct xs_pool_ops xs_pool_verbs_ops;

#endif /* XS_CORE_POOL_H */
