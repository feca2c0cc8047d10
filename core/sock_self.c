/*
 * core/sock_self.c - connections a process makes to itself.
 *
 * The server side of a connection negotiates RDMA in the process that does
 * its I/O, and so does the client side (core/neg.c): each end waits for a
 * call on it, so that a child forked meanwhile may take it. A process
 * that connects to its own listener and then uses the two ends in one
 * thread - a socketpair made over TCP, a test suite - would stall: the
 * end it uses waits for an answer that only a call on the other end
 * could start. So this process's client sockets still negotiating are
 * listed here by local address, and the connections it accepted from
 * them by peer address; when one end is claimed (a call on it) and no
 * fork came since both were listed, the other end is claimed too. After
 * a fork either end may be the other process's, and each waits for its
 * own call, as any connection's.
 *
 * Context: any thread; sock_self_lock is a leaf. The list is short (a
 * process's connects to itself in flight) and its count is read without
 * the lock, so a process with none pays one load per accept and claim.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "core_int.h"
#include "fdtab.h"

/* Connects in flight to our own listeners at once, at most (two entries
 * each); past that, a self-connection negotiates as any other (a stall,
 * then kernel TCP). */
#define SELF_SLOTS 64

struct self_entry {
	struct xs_sock *s;
	int fd;		    /* the fd it was connected or accepted on */
	bool accepted;	    /* the server end (@addr: its peer's) */
	unsigned int forks; /* xs_sock_forks() when listed */
	struct sockaddr_storage addr; /* the client end's local address */
	socklen_t len;
};

static pthread_mutex_t sock_self_lock = PTHREAD_MUTEX_INITIALIZER;
static struct self_entry self_tab[SELF_SLOTS];
static atomic_int self_nr;

static void self_put_entry(const struct self_entry *e)
{
	pthread_mutex_lock(&sock_self_lock);
	if (atomic_load(&self_nr) < SELF_SLOTS) {
		self_tab[atomic_load(&self_nr)] = *e;
		atomic_fetch_add(&self_nr, 1);
	}
	pthread_mutex_unlock(&sock_self_lock);
}

void xs_self_add(struct xs_sock *s, int fd)
{
	struct self_entry e = { .s = s,
				.fd = fd,
				.forks = xs_sock_forks(),
				.len = sizeof(e.addr) };
	int err = errno;

	if (xs_real.getsockname(fd, (struct sockaddr *)&e.addr, &e.len) == 0)
		self_put_entry(&e);
	errno = err;
}

void xs_self_accepted(struct xs_sock *s, int fd)
{
	struct self_entry e = { .s = s,
				.fd = fd,
				.accepted = true,
				.forks = xs_sock_forks(),
				.len = sizeof(e.addr) };
	bool self = false;
	int i, err = errno;

	if (!atomic_load(&self_nr))
		return;
	if (xs_real.getpeername(fd, (struct sockaddr *)&e.addr, &e.len)) {
		errno = err;
		return;
	}
	errno = err;
	pthread_mutex_lock(&sock_self_lock);
	for (i = 0; i < atomic_load(&self_nr) && !self; i++)
		self = !self_tab[i].accepted && self_tab[i].len == e.len &&
		       !memcmp(&self_tab[i].addr, &e.addr, e.len);
	pthread_mutex_unlock(&sock_self_lock);
	if (self)
		self_put_entry(&e);
}

void xs_self_del(const struct xs_sock *s)
{
	int i, n;

	if (!atomic_load(&self_nr))
		return;
	pthread_mutex_lock(&sock_self_lock);
	n = atomic_load(&self_nr);
	for (i = 0; i < n; i++) {
		if (self_tab[i].s != s)
			continue;
		self_tab[i] = self_tab[--n];
		atomic_store(&self_nr, n);
		break;
	}
	pthread_mutex_unlock(&sock_self_lock);
}

/*
 * An fd of this process that refers to @s: @fd, on which it was connected
 * or accepted, or, where the application closed that one and kept a dup
 * (fcntl(F_DUPFD) to a high number, then close), the lowest such dup;
 * -1 when none is left. Never a number that another file took since.
 * Context: without sock_self_lock (the table takes its references).
 */
static int self_fd_of(const struct xs_sock *s, int fd)
{
	struct xs_sock *t = xs_fdtab_get(fd);
	bool same = t == s;

	xs_sock_put(t);
	if (same)
		return fd;
	for (fd = xs_fdtab_next(-1); fd >= 0; fd = xs_fdtab_next(fd)) {
		t = xs_fdtab_get(fd);
		same = t == s;
		xs_sock_put(t);
		if (same)
			return fd;
	}
	return -1;
}

struct xs_sock *xs_self_other(const struct xs_sock *s, int *other_fd)
{
	struct xs_sock *found = NULL;
	unsigned int forks = xs_sock_forks();
	int i, j, n;

	if (!atomic_load(&self_nr))
		return NULL;
	pthread_mutex_lock(&sock_self_lock);
	n = atomic_load(&self_nr);
	for (i = 0; i < n && self_tab[i].s != s; i++)
		;
	for (j = 0; i < n && j < n; j++) {
		struct self_entry *e = &self_tab[j];

		if (e->accepted == self_tab[i].accepted ||
		    e->len != self_tab[i].len ||
		    memcmp(&e->addr, &self_tab[i].addr, e->len))
			continue;
		/* the other end; after a fork, either end may be the other
		 * process's */
		if (e->forks == forks && self_tab[i].forks == forks &&
		    xs_sock_tryget(e->s)) {
			found = e->s;
			*other_fd = e->fd;
		}
		break;
	}
	pthread_mutex_unlock(&sock_self_lock);
	if (found && (*other_fd = self_fd_of(found, *other_fd)) < 0) {
		xs_sock_put(found); /* the application closed every fd of it */
		found = NULL;
	}
	return found;
}

void xs_self_fork_child(void)
{
	/* the parent's connects are not this process's */
	atomic_store(&self_nr, 0);
	pthread_mutex_init(&sock_self_lock, NULL);
}
