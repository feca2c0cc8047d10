/*
 * core/fdtab.c - the fd table.
 *
 * Owns the mapping from application fd numbers to socket objects and the
 * "remove before close" discipline: a slot is cleared before the kernel fd
 * is released, so an fd number reused by a concurrent accept() or open()
 * never sees a stale entry. Lock-free throughout: slots change by atomic
 * exchange, chunks (mmap'ed, never freed while the process runs) are
 * published by compare-and-swap, and lookup relies on the type-stable
 * struct xs_sock. No lock and no malloc, so socket() and close() stay
 * async-signal-safe, as libc's are, and fork() needs no handler here.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fdtab.h"

typedef _Atomic(struct xs_sock *) fdtab_slot;

static struct {
	_Atomic(fdtab_slot *) *chunks; /* nr_chunks pointers, NULL = none yet */
	size_t nr_chunks;
	size_t nr_fds;
} fdtab;

#define FDTAB_CHUNK_BYTES (XS_FDTAB_CHUNK * sizeof(fdtab_slot))

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
		if (atomic_load(&fdtab.chunks[i]))
			munmap(atomic_load(&fdtab.chunks[i]),
			       FDTAB_CHUNK_BYTES);
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

/* Whether @s takes the data path: RDMA (not moved to its kernel TCP
 * connection, core/move.c), or (@deciding) a non-blocking connect still
 * deciding its transport. */
static bool fdtab_served(struct xs_sock *s, bool deciding)
{
	return (xs_sock_kind(s) == XS_KIND_RDMA && !xs_sock_plain(s)) ||
	       (deciding &&
		(xs_sock_connecting(s) || xs_sock_negotiable(s) ||
		 atomic_load_explicit(&s->strip, memory_order_relaxed)));
}

static struct xs_sock *fdtab_get_served(int fd, bool deciding)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *s;

	if (!slot)
		return NULL;
	/* Type-stable memory: reading the kind of a stale object is safe. */
	s = atomic_load_explicit(slot, memory_order_acquire);
	if (!s || !fdtab_served(s, deciding))
		return NULL;
	s = xs_fdtab_get(fd);
	if (s && !fdtab_served(s, deciding)) {
		xs_sock_put(s);
		return NULL;
	}
	return s;
}

struct xs_sock *xs_fdtab_get_rdma(int fd)
{
	return fdtab_get_served(fd, false);
}

struct xs_sock *xs_fdtab_get_data(int fd)
{
	return fdtab_get_served(fd, true);
}

/* @fd's slot, allocating its chunk if needed; NULL when out of memory. */
static fdtab_slot *fdtab_slot_alloc(int fd)
{
	size_t ci = (size_t)fd / XS_FDTAB_CHUNK;
	fdtab_slot *chunk =
		atomic_load_explicit(&fdtab.chunks[ci], memory_order_acquire);
	fdtab_slot *expected = NULL;

	if (!chunk) {
		chunk = mmap(NULL, FDTAB_CHUNK_BYTES, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (chunk == MAP_FAILED)
			return NULL;
		if (!atomic_compare_exchange_strong_explicit(
			    &fdtab.chunks[ci], &expected, chunk,
			    memory_order_acq_rel, memory_order_acquire)) {
			munmap(chunk,
			       FDTAB_CHUNK_BYTES); /* another thread won */
			chunk = expected;
		}
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
	slot = fdtab_slot_alloc(fd);
	if (slot)
		stale = atomic_exchange_explicit(slot, s, memory_order_acq_rel);
	else
		rc = -ENOMEM;
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

/* An fd other than @gone whose slot holds @s; -1 when none. Scans the
 * chunks in use. */
static int fdtab_other_fd(struct xs_sock *s, int gone)
{
	size_t ci, i,
		nr_chunks =
			(fdtab.nr_fds + XS_FDTAB_CHUNK - 1) / XS_FDTAB_CHUNK;
	fdtab_slot *chunk;

	for (ci = 0; ci < nr_chunks; ci++) {
		chunk = atomic_load_explicit(&fdtab.chunks[ci],
					     memory_order_acquire);
		for (i = 0; chunk && i < XS_FDTAB_CHUNK; i++)
			if (atomic_load_explicit(&chunk[i],
						 memory_order_relaxed) == s &&
			    (int)(ci * XS_FDTAB_CHUNK + i) != gone)
				return (int)(ci * XS_FDTAB_CHUNK + i);
	}
	return -1;
}

struct xs_sock *xs_fdtab_remove(int fd)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *s;

	if (!slot || !atomic_load_explicit(slot, memory_order_relaxed))
		return NULL;
	s = atomic_exchange_explicit(slot, NULL, memory_order_acq_rel);
	/* xsock-stat shows the socket by another fd (a dup) from now on;
	 * refcnt 1 is this slot's alone (or an operation's): none other */
	if (s && s->pub && s->pub->fd == fd)
		s->pub->fd = atomic_load_explicit(&s->refcnt,
						  memory_order_relaxed) > 1
				     ? fdtab_other_fd(s, fd)
				     : -1;
	/* epoll sets holding the fd as an idle member look at it again,
	 * find it closed and drop it, as the kernel's close would */
	if (s)
		xs_sock_note(s);
	return s;
}

int xs_fdtab_holder(struct xs_sock *s, int hint)
{
	fdtab_slot *slot = fdtab_slot_of(hint);

	if (slot && atomic_load_explicit(slot, memory_order_acquire) == s)
		return hint;
	if (atomic_load_explicit(&s->refcnt, memory_order_relaxed) == 0)
		return -1; /* no slot holds it */
	return fdtab_other_fd(s, -1);
}

bool xs_fdtab_held(struct xs_sock *s)
{
	return atomic_load_explicit(&s->refcnt, memory_order_acquire) > 1 &&
	       fdtab_other_fd(s, -1) >= 0;
}

void xs_fdtab_restore(int fd, struct xs_sock *s)
{
	fdtab_slot *slot = fdtab_slot_of(fd);
	struct xs_sock *expected = NULL;
	bool restored = false;

	if (!s)
		return;
	if (slot)
		restored = atomic_compare_exchange_strong(slot, &expected, s);
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

int xs_fdtab_next(int fd)
{
	size_t i = fd < 0 ? 0 : (size_t)fd + 1, c;
	fdtab_slot *chunk;

	while (i < fdtab.nr_fds) {
		c = i / XS_FDTAB_CHUNK;
		chunk = atomic_load_explicit(&fdtab.chunks[c],
					     memory_order_acquire);
		if (!chunk) {
			i = (c + 1) * XS_FDTAB_CHUNK;
			continue;
		}
		for (; i < fdtab.nr_fds && i / XS_FDTAB_CHUNK == c; i++)
			if (atomic_load_explicit(&chunk[i % XS_FDTAB_CHUNK],
						 memory_order_relaxed))
				return (int)i;
	}
	return -1;
}
