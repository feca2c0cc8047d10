/*
 * core/fdtab.h - the fd table: application fd number -> struct xs_sock.
 *
 * A two-level array covering the RLIMIT_NOFILE hard limit read at init,
 * 4,096-entry chunks allocated on demand and published with compare-and-
 * swap. Lookup, insert and remove are lock-free (NULL means "not ours, pass
 * through"), so they are safe in signal handlers and across fork(). Each
 * occupied slot holds one reference.
 */
#ifndef XS_CORE_FDTAB_H
#define XS_CORE_FDTAB_H

#include <stddef.h>

#include "xs_core.h"

/* fds per second-level chunk */
#define XS_FDTAB_CHUNK 4096

/**
 * xs_fdtab_init() - allocate the first level for @nr_fds descriptors
 * @nr_fds: fd numbers 0..@nr_fds-1 can be tracked; larger ones pass through
 * Return: 0, or -ENOMEM.
 */
int xs_fdtab_init(size_t nr_fds);

/**
 * xs_fdtab_fini() - free the table and put every entry (tests, teardown)
 */
void xs_fdtab_fini(void);

/**
 * xs_fdtab_size() - number of fd slots the table covers
 * Return: the count given to xs_fdtab_init() (0 before init).
 */
size_t xs_fdtab_size(void);

/**
 * xs_fdtab_get() - the socket behind @fd, with a reference
 * @fd: any fd number, negative or huge included
 *
 * Context: any thread, lock-free; never blocks.
 * Return: the socket (caller must xs_sock_put() it), or NULL when @fd is
 *         not a tracked socket.
 */
struct xs_sock *xs_fdtab_get(int fd);

/**
 * xs_fdtab_get_rdma() - the socket behind @fd if it is carried by RDMA
 * @fd: any fd number
 *
 * The data path's lookup: for kernel TCP sockets and every other fd it
 * costs two loads and takes no reference.
 * Context: any thread, lock-free.
 * Return: the socket with a reference (caller puts it), or NULL.
 */
struct xs_sock *xs_fdtab_get_rdma(int fd);

/**
 * xs_fdtab_get_data() - as xs_fdtab_get_rdma(), and also the socket of a
 *                       non-blocking connect still deciding its transport
 *                       (the data calls wait for it or answer EAGAIN)
 * @fd: any fd number
 * Return: the socket with a reference (caller puts it), or NULL.
 */
struct xs_sock *xs_fdtab_get_data(int fd);

/**
 * xs_fdtab_insert() - make @fd refer to @s
 * @fd: fd number just returned by the kernel
 * @s:  socket; the caller's reference moves into the table, also on failure
 *      (the reference is then dropped)
 *
 * A stale entry left by an fd closed behind libxsock's back (a raw
 * syscall, fclose of an fdopen'ed socket) is replaced and released.
 *
 * Context: any thread or signal handler; lock-free.
 * Return: 0, -EBADF when @fd is beyond the table, -ENOMEM.
 */
int xs_fdtab_insert(int fd, struct xs_sock *s);

/**
 * xs_fdtab_remove() - clear @fd's slot before the kernel fd is closed
 * @fd: fd number
 * Return: the table's reference to the socket (caller puts it), or NULL.
 */
struct xs_sock *xs_fdtab_remove(int fd);

/**
 * xs_fdtab_holder() - an fd whose slot holds @s (a dup of a closed fd)
 * @s:    socket object; the caller holds no slot of it, maybe a reference
 * @hint: the fd to try first (the last answer), or -1
 *
 * Scans the chunks in use unless @hint still holds @s, so its callers ask
 * only after an fd of @s closed. The answer may be stale at once: a slot
 * can change under any thread; check the object with xs_fdtab_get().
 * Context: any thread, lock-free.
 * Return: that fd, or -1 when no slot holds @s.
 */
int xs_fdtab_holder(struct xs_sock *s, int hint);

/**
 * xs_fdtab_held() - whether a slot still holds @s after the caller removed
 *                   one of its fds: the close of that fd is not its last
 * @s: socket; the caller holds the reference its removed slot gave it
 *
 * A reference count above one does not tell: an operation holds one too
 * (a negotiation's worker that has published its outcome and not yet let
 * go, a waiter on another thread). Only a slot does.
 * Context: any thread, lock-free; scans the chunks in use only when the
 * count is above one.
 * Return: true when some fd of this process still holds @s.
 */
bool xs_fdtab_held(struct xs_sock *s);

/**
 * xs_fdtab_restore() - undo xs_fdtab_remove() after a failed close/dup2
 * @fd: fd number
 * @s:  what xs_fdtab_remove() returned; the reference moves back, or is
 *      dropped if the slot has been filled meanwhile
 */
void xs_fdtab_restore(int fd, struct xs_sock *s);

/* One entry taken out of the table by xs_fdtab_remove_range(). */
struct xs_fdtab_removed {
	int fd;
	struct xs_sock *s; /* the table's reference */
};

/**
 * xs_fdtab_remove_range() - remove every entry in [@first, @last]
 * @first: lowest fd number
 * @last:  highest fd number (inclusive; may exceed the table)
 * @out:   if not NULL, receives a malloc'ed array of what was removed, so
 *         a failed close_range() can put it back (xs_fdtab_restore());
 *         if NULL, or if the array cannot be allocated (*@out is then
 *         NULL), every reference is dropped here
 *
 * Walks only the allocated chunks, so close_range(3, ~0U) costs little.
 * Return: the number of entries in *@out, or removed when @out is NULL.
 */
size_t xs_fdtab_remove_range(unsigned int first, unsigned int last,
			     struct xs_fdtab_removed **out);

/**
 * xs_fdtab_next() - the lowest tracked fd above @fd
 * @fd: -1 for the first
 *
 * Walks only the allocated chunks. Context: any thread, lock-free.
 * Return: that fd, or -1 when there is none.
 */
int xs_fdtab_next(int fd);

#endif /* XS_CORE_FDTAB_H */
