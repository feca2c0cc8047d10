/*
 * preload/fdtab.c - the fd table.
 *
 * Owns the mapping from application fd numbers to socket objects and the
 * "remove before close" discipline: a slot is cleared before the kernel fd
 * is released, so an fd number reused by a concurrent accept() or open()
 * never sees a stale entry. Lock: fdtab.lock (insert/remove only); lookup
 * is lock-free thanks to the type-stable struct xs_sock.
 */
#include <errno.h>
#include <stdlib.h>

#include "fdtab.h"

typedef _Atomic(struct xs_sock *) fdtab_slot;

static struct {
	_Atomic(fdtab_slot *) *chunks; /* nr_chunks pointers, NULL = none yet */
	size_t nr_chunks;
	size_t nr_fds;
	pthread_mutex_t lock;
} fdtab = { .lock = PTHREAD_MUTEX_INITIALIZER };

int xs_fdtab_init(size_t nr_fds)
{
	size_t nr_chunks = (nr_fds + XS_FDTAB_CHUNK - 1) / XS_FDTAB_CHUNK;

	fdtab.chunks = calloc(nr_chunks ? nr_chunks : 1, sizeof(*fdtab.chunks));
	if (!fdtab.chunks)
		return -ENOMEM;
	fdtab.nr_chunks = nr_chunks;
	fdtab.nr_fds = nr_fds;
	return 0;
}

void xs_fdtab_fini(void)
{
	size_t i;

	if (!fdtab.chunks)
		return;
	xs_fdtab_remove_range(0, ~0u, NULL);
	for (i = 0; i < fdtab.nr_chunks; i++)
		free(atomic_load(&fdtab.chunks[i]));
	free(fdtab.chunks);
	fdtab.chunks = NULL;
	fdtab.nr_chunks = 0;
	fdtab.nr_fds = 0;
}

size_t xs_fdtab_size(void)
{
	return fdtab.nr_fds;
}

/* The slot of @fd, or NULL when it is out of range or not allocated. */
static fdtab_slot *fdtab_slot_of(int fd)
{
	fdtab_slot *chunk;

	if (fd < 0 || (size_t)fd >= fdtab.nr_fds)
		return NULL;
	chunk = atomic_load_explicit(&fdtab.chunks[(size_t)fd / XS_FDTAB_CHUNK],
				     memory_order_acquire);
	return chunk ? &chunk[(size_t)fd % XS_FDTAB_CHUNK] : NULL;
}

struct xs_sock *xs_fdtab_get(int fd)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *s;

	if (!slot)
		return NULL;
	for (;;) {
		s = atomic_load_explicit(slot, memory_order_acquire);
		if (!s)
			return NULL;
		/*
		 * The object may have been removed, released and recycled
		 * since the load: only a reference taken while the slot still
		 * points to it is a reference to this fd's socket.
		 */
		if (xs_sock_tryget(s)) {
			if (atomic_load_explicit(slot, memory_order_acquire) ==
			    s)
				return s;
			xs_sock_put(s);
		}
	}
}

/* Allocate @fd's chunk if needed. Called with fdtab.lock held. */
static fdtab_slot *fdtab_slot_alloc(int fd)
{
	size_t ci = (size_t)fd / XS_FDTAB_CHUNK;
	fdtab_slot *chunk =
		atomic_load_explicit(&fdtab.chunks[ci], memory_order_relaxed);

	if (!chunk) {
		chunk = calloc(XS_FDTAB_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		atomic_store_explicit(&fdtab.chunks[ci], chunk,
				      memory_order_release);
	}
	return &chunk[(size_t)fd % XS_FDTAB_CHUNK];
}

int xs_fdtab_insert(int fd, struct xs_sock *s)
{
	struct xs_sock *stale = NULL;
	fdtab_slot *slot;
	int rc = 0;

	if (fd < 0 || (size_t)fd >= fdtab.nr_fds) {
		xs_log_once(XS_LOG_WARN, "fdtab",
			    "fd %d beyond the table (%zu slots): passthrough",
			    fd, fdtab.nr_fds);
		xs_sock_put(s);
		return -EBADF;
	}
	pthread_mutex_lock(&fdtab.lock);
	slot = fdtab_slot_alloc(fd);
	if (slot)
		stale = atomic_exchange_explicit(slot, s, memory_order_acq_rel);
	else
		rc = -ENOMEM;
	pthread_mutex_unlock(&fdtab.lock);
	if (rc) {
		xs_sock_put(s);
		return rc;
	}
	if (stale) {
		xs_dbg("fdtab",
		       "fd %d: stale entry replaced (closed behind libxsock)",
		       fd);
		xs_sock_put(stale);
	}
	return 0;
}

struct xs_sock *xs_fdtab_remove(int fd)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *s;

	if (!slot || !atomic_load_explicit(slot, memory_order_relaxed))
		return NULL;
	pthread_mutex_lock(&fdtab.lock);
	s = atomic_exchange_explicit(slot, NULL, memory_order_acq_rel);
	pthread_mutex_unlock(&fdtab.lock);
	return s;
}

void xs_fdtab_restore(int fd, struct xs_sock *s)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *expected = NULL;
	bool restored = false;

	if (!s)
		return;
	if (slot) {
		pthread_mutex_lock(&fdtab.lock);
		restored = atomic_compare_exchange_strong(slot, &expected, s);
		pthread_mutex_unlock(&fdtab.lock);
	}
	if (!restored)
		xs_sock_put(s);
}

/*
 * Visit the occupied slots of [first, last], skipping unallocated chunks.
 * With @remove, each entry is taken out: stored in @out while @cap allows,
 * released otherwise. Without, entries are only counted.
 */
static size_t fdtab_walk(unsigned int first, unsigned int last, bool remove,
			 struct xs_fdtab_removed *out, size_t cap)
{
	size_t fd, end, ci, n = 0;
	fdtab_slot *chunk;
	struct xs_sock *s;

	if (fdtab.nr_fds == 0 || first >= fdtab.nr_fds || first > last)
		return 0;
	end = (size_t)last < fdtab.nr_fds ? (size_t)last : fdtab.nr_fds - 1;
	for (fd = first; fd <= end; fd++) {
		ci = fd / XS_FDTAB_CHUNK;
		chunk = atomic_load_explicit(&fdtab.chunks[ci],
					     memory_order_acquire);
		if (!chunk) {
			fd = (ci + 1) * XS_FDTAB_CHUNK - 1; /* next chunk */
			continue;
		}
		if (!remove) {
			n += atomic_load_explicit(&chunk[fd % XS_FDTAB_CHUNK],
						  memory_order_relaxed) != NULL;
			continue;
		}
		s = xs_fdtab_remove((int)fd);
		if (!s)
			continue;
		if (n < cap) {
			out[n].fd = (int)fd;
			out[n].s = s;
			n++;
		} else {
			xs_sock_put(s);
			n += out == NULL;
		}
	}
	return n;
}

size_t xs_fdtab_remove_range(unsigned int first, unsigned int last,
			     struct xs_fdtab_removed **out)
{
	size_t cap;

	if (!out)
		return fdtab_walk(first, last, true, NULL, 0);
	*out = NULL;
	/* Entries other threads add meanwhile are released, not restored. */
	cap = fdtab_walk(first, last, false, NULL, 0);
	if (cap == 0)
		return 0;
	*out = calloc(cap, sizeof(**out));
	return fdtab_walk(first, last, true, *out, *out ? cap : 0);
}

void xs_fdtab_lock(void)
{
	pthread_mutex_lock(&fdtab.lock);
}

void xs_fdtab_unlock(void)
{
	pthread_mutex_unlock(&fdtab.lock);
}
