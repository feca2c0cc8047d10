/*
 * core/pool.c - the registered buffer pool (see pool.h).
 *
 * Owns superblock registration and the slab allocator over it. It does not
 * own waiting for free buffers (callers sleep on their completion
 * channel).
 * Context: any thread; one mutex, held only for list and bitmap updates and
 * for the registration of a new superblock.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"
#include "stats.h"
#include "xs_core.h"

static int pool_verbs_reg(void *pd, void *addr, size_t len, uint32_t *lkey,
			  void **mr)
{
	struct ibv_mr *m;

	m = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (!m)
		return -errno; /* libibverbs: NULL and errno */
	*lkey = m->lkey;
	*mr = m;
	xs_stats_registered((long)len);
	return 0;
}

static void pool_verbs_dereg(void *mr)
{
	long len = (long)((struct ibv_mr *)mr)->length;

	if (ibv_dereg_mr(mr) == 0)
		xs_stats_registered(-len);
}

const struct xs_pool_ops xs_pool_verbs_ops = {
	.reg = pool_verbs_reg,
	.dereg = pool_verbs_dereg,
};

/* Size class of @len: class c holds buffers of 64 << c bytes. */
static unsigned int pool_class(size_t len)
{
	unsigned int c = 0;

	while (((size_t)XS_POOL_MIN_BUF << c) < len)
		c++;
	return c;
}

static size_t pool_class_size(unsigned int c)
{
	return (size_t)XS_POOL_MIN_BUF << c;
}

/* Buffers one superblock of class @c holds. */
static size_t pool_per_sb(unsigned int c)
{
	return XS_POOL_SUPERBLOCK / pool_class_size(c);
}

int xs_pool_init(struct xs_pool *p, const struct xs_pool_ops *ops, void *pd,
		 size_t max_bytes)
{
	unsigned int c;

	memset(p, 0, sizeof(*p));
	p->max_sb = max_bytes / XS_POOL_SUPERBLOCK;
	if (p->max_sb == 0)
		p->max_sb = 1;
	p->sb = calloc(p->max_sb, sizeof(*p->sb));
	if (!p->sb)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->ops = ops;
	p->pd = pd;
	for (c = 0; c < XS_POOL_NR_CLASSES; c++)
		p->room[c] = -1;
	return 0;
}

/* Deregister, unmap and forget superblock @sb's memory. */
static void pool_sb_drop(struct xs_pool *p, struct xs_pool_sb *sb)
{
	p->ops->dereg(sb->mr);
	munmap(sb->base, XS_POOL_SUPERBLOCK);
	free(sb->inuse);
	*sb = (struct xs_pool_sb){ .prev = -1, .next = -1 };
	p->nr_registered--;
}

void xs_pool_fini(struct xs_pool *p)
{
	size_t i;

	for (i = 0; i < p->nr_sb; i++)
		if (p->sb[i].base)
			pool_sb_drop(p, &p->sb[i]);
	free(p->sb);
	pthread_mutex_destroy(&p->lock);
	memset(p, 0, sizeof(*p));
}

/* Put superblock @s on its class's list of superblocks with room (at the
 * head: the next allocation of the class comes from it). Called with
 * p->lock held. */
static void pool_room_add(struct xs_pool *p, int s)
{
	struct xs_pool_sb *sb = &p->sb[s];
	int *head = &p->room[sb->cls];

	sb->prev = -1;
	sb->next = *head;
	if (*head >= 0)
		p->sb[*head].prev = s;
	*head = s;
}

/* Take superblock @s off that list. Called with p->lock held. */
static void pool_room_del(struct xs_pool *p, int s)
{
	struct xs_pool_sb *sb = &p->sb[s];

	if (sb->prev >= 0)
		p->sb[sb->prev].next = sb->next;
	else
		p->room[sb->cls] = sb->next;
	if (sb->next >= 0)
		p->sb[sb->next].prev = sb->prev;
}

/* Register one more superblock for class @c, in the first free slot.
 * Called with p->lock held. */
static int pool_grow(struct xs_pool *p, unsigned int c)
{
	struct xs_pool_sb *sb;
	size_t i;
	int rc;

	if (p->nr_registered == p->max_sb) {
		p->nr_exhausted++;
		return -ENOBUFS;
	}
	for (i = 0; i < p->nr_sb && p->sb[i].base; i++)
		;
	sb = &p->sb[i];
	sb->base = mmap(NULL, XS_POOL_SUPERBLOCK, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sb->base == MAP_FAILED) {
		sb->base = NULL;
		return -ENOMEM;
	}
	sb->inuse = calloc((pool_per_sb(c) + 63) / 64, sizeof(uint64_t));
	if (!sb->inuse) {
		rc = -ENOMEM;
		goto out_unmap;
	}
	rc = p->ops->reg(p->pd, sb->base, XS_POOL_SUPERBLOCK, &sb->lkey,
			 &sb->mr);
	if (rc)
		goto out_free_bitmap;
	sb->cls = c;
	sb->carved = 0;
	sb->free = NULL;
	sb->nr_inuse = 0;
	if (i == p->nr_sb)
		p->nr_sb++;
	p->nr_registered++;
	p->nr_free[c] += pool_per_sb(c);
	pool_room_add(p, (int)i);
	return 0;

out_free_bitmap:
	free(sb->inuse);
	sb->inuse = NULL;
out_unmap:
	munmap(sb->base, XS_POOL_SUPERBLOCK);
	sb->base = NULL;
	return rc;
}

static void pool_mark(struct xs_pool_sb *sb, const void *addr, bool inuse)
{
	size_t idx = (size_t)((const uint8_t *)addr - sb->base) /
		     pool_class_size(sb->cls);
	uint64_t bit = 1ull << (idx % 64);

	XS_ASSERT(!!(sb->inuse[idx / 64] & bit) != inuse);
	if (inuse)
		sb->inuse[idx / 64] |= bit;
	else
		sb->inuse[idx / 64] &= ~bit;
}

int xs_pool_alloc(struct xs_pool *p, size_t len, struct xs_buf *out)
{
	struct xs_pool_sb *sb;
	unsigned int c;
	size_t size;
	void *addr;
	int rc = 0, s;

	if (len == 0 || len > XS_POOL_SUPERBLOCK)
		return -EINVAL;
	c = pool_class(len);
	size = pool_class_size(c);
	pthread_mutex_lock(&p->lock);
	if (p->room[c] < 0) {
		rc = pool_grow(p, c);
		if (rc)
			goto out_unlock;
	}
	s = p->room[c];
	sb = &p->sb[s];
	if (sb->free) {
		addr = sb->free;
		memcpy(&sb->free, addr, sizeof(void *));
	} else {
		addr = sb->base + sb->carved;
		sb->carved += size;
	}
	if (!sb->free && sb->carved == XS_POOL_SUPERBLOCK)
		pool_room_del(p, s);
	pool_mark(sb, addr, true);
	sb->nr_inuse++;
	p->nr_free[c]--;
	p->bytes_in_use += size;
	out->addr = addr;
	out->size = size;
	out->lkey = sb->lkey;
	out->sb = (uint32_t)s;
	out->mr = sb->mr;
out_unlock:
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void xs_pool_free(struct xs_pool *p, const struct xs_buf *b)
{
	struct xs_pool_sb *sb;
	unsigned int c;

	pthread_mutex_lock(&p->lock);
	XS_ASSERT(b->sb < p->nr_sb);
	sb = &p->sb[b->sb];
	XS_ASSERT(sb->base && b->size == pool_class_size(sb->cls));
	XS_ASSERT((const uint8_t *)b->addr >= sb->base &&
		  (const uint8_t *)b->addr < sb->base + XS_POOL_SUPERBLOCK &&
		  (size_t)((const uint8_t *)b->addr - sb->base) % b->size == 0);
	c = sb->cls;
	if (!sb->free && sb->carved == XS_POOL_SUPERBLOCK)
		pool_room_add(p, (int)b->sb); /* full until now: room again */
	pool_mark(sb, b->addr, false);
	memcpy(b->addr, &sb->free, sizeof(void *));
	sb->free = b->addr;
	sb->nr_inuse--;
	p->nr_free[c]++;
	p->bytes_in_use -= b->size;
	if (sb->nr_inuse == 0 && p->nr_free[c] >= 2 * pool_per_sb(c)) {
		/* the class keeps a superblock's worth free without it */
		pool_room_del(p, (int)b->sb);
		p->nr_free[c] -= pool_per_sb(c);
		p->nr_released++;
		pool_sb_drop(p, sb);
	}
	pthread_mutex_unlock(&p->lock);
}

size_t xs_pool_registered_bytes(struct xs_pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->nr_registered * (size_t)XS_POOL_SUPERBLOCK;
	pthread_mutex_unlock(&p->lock);
	return n;
}
