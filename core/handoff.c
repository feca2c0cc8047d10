/*
 * core/handoff.c - what a socket's transport state is, for a process that
 *                  gets the socket without the state: an exec'd program
 *                  that inherits it, or one that receives it with
 *                  SCM_RIGHTS.
 *
 * A fork copies the library's state with the socket; exec and fd passing
 * do not. A connection between two xsock ends carries our control
 * messages at the head of its TCP stream until it is claimed (core/neg.c),
 * so a process that knows nothing of it would read them as data. Every
 * socket in such a state is therefore recorded, by its SO_COOKIE (unique
 * per boot, never reused), in a table that this user's processes share:
 * /dev/shm/xsock-handoff-UID, mode 0600, owned by the user (any other
 * file of that name is not used). The process that gets the socket looks
 * its cookie up (xs_sock_adopt()) and carries on from the recorded state:
 *   XS_NEG_SERVER, XS_NEG_CLIENT  negotiable: it claims the socket itself
 *   XS_HANDOFF_STRIP              TCP, with control messages to strip
 *   XS_HANDOFF_ELSEWHERE          RDMA in the process that claimed it:
 *                                 it cannot follow; every call here
 *                                 fails with ECONNRESET (never a silent
 *                                 byte on the idle TCP connection)
 *   XS_HANDOFF_MOVED(_EOF)        moved to kernel TCP before an exec,
 *                                 with the memfd of its unread bytes
 *                                 (then an EOF) to serve first
 *                                 (core/move.c)
 * The same table holds, for a while, the clients whose probe this user's
 * listeners answered (client address and port, listening port): the
 * accepting process then knows that a hello is on its way, and waits
 * for it even when the application writes first.
 * A record is consumed by whoever claims the socket, or adopts it in a
 * state that it leaves; one still negotiable, or with control messages
 * still to strip, stays for the other images that hold the socket and
 * for an image an adopter execs in turn (a shell's `sh -c CMD` execs
 * CMD), a negotiable one marked with the pid of its last adopter: an
 * image that finds another one alive shares the socket with it (a
 * shell's pipeline), and the first of them to claim it decides TCP for
 * all (xs_sock_claim()). Records of sockets
 * closed meanwhile are harmless (their cookie never comes back) and the
 * oldest give way when the table is full.
 *
 * Context: any thread; the table is lock-free (a slot is taken with a
 * compare-and-swap on its cookie). No system call unless a socket is
 * recorded or looked up.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_int.h"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

#define HANDOFF_SLOTS 4096

struct handoff_slot {
	_Atomic uint64_t cookie; /* 0: free; 1: being written */
	_Atomic uint32_t state;	 /* enum xs_neg_role or XS_HANDOFF_* */
	_Atomic uint32_t strip;
	_Atomic uint64_t stamp; /* xs_now_us() when written */
};

static struct handoff_slot *handoff_table; /* mapped once per euid */
static uid_t handoff_uid;		   /* whose table it is */
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The shared table, mapped on first use (@create: make it if absent).
 * Where it is absent, a look (!@create) maps nothing and tries again the
 * next time: another process of this user may make it at any moment, and
 * a child forked before then (a pre-forked worker that gets sockets with
 * SCM_RIGHTS) must find the records written there. That costs one failed
 * open(2) a look, only until some xsock process of this user makes it
 * (every listener's and client's does), for as long as /dev/shm keeps it.
 */
static struct handoff_slot *handoff_map(bool create)
{
	size_t bytes = HANDOFF_SLOTS * sizeof(struct handoff_slot);
	struct handoff_slot *t;
	char path[64];
	struct stat st;
	void *p;
	int fd;

	t = __atomic_load_n(&handoff_table, __ATOMIC_ACQUIRE);
	/* A record is written for the program that comes next, which looks
	 * in its own user's table: a process that changed its euid since
	 * (a CGI server's child, setuid(nobody) before the exec) writes
	 * there. The old mapping stays: a thread may still use it. */
	if (t && create && geteuid() != handoff_uid)
		t = NULL;
	else if (t)
		return t;
	pthread_mutex_lock(&handoff_lock);
	if (handoff_table && (!create || geteuid() == handoff_uid))
		goto out;
	snprintf(path, sizeof(path), "/dev/shm/xsock-handoff-%u",
		 (unsigned int)geteuid());
	fd = open(path,
		  O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0),
		  0600);
	if (fd < 0)
		goto out;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || !S_ISREG(st.st_mode) ||
	    ((size_t)st.st_size < bytes && ftruncate(fd, (off_t)bytes) < 0)) {
		xs_real.close(fd);
		goto out;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	xs_real.close(fd);
	if (p != MAP_FAILED) {
		handoff_uid = st.st_uid;
		__atomic_store_n(&handoff_table, p, __ATOMIC_RELEASE);
	}
out:
	t = handoff_table;
	pthread_mutex_unlock(&handoff_lock);
	return t;
}

/*
 * The table's key for socket @fd: its SO_COOKIE plus one, as 0 and 1 mark
 * a free slot and one being written (the kernel numbers cookies from 1:
 * the first socket of a boot has cookie 1). Probe keys have bit 63 set.
 */
uint64_t xs_handoff_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);
	int err = errno;

	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) < 0)
		c = 0;
	errno = err;
	return c && c < (1ull << 62) ? c + 1 : 0;
}

/*
 * Write the record @key -> (@state, @strip) into a free slot of @t, or in
 * place of the oldest record when the table is full (a slot is taken by
 * a compare-and-swap of its cookie to 1, "being written"). Lost, never
 * blocking, when another process takes that oldest slot at the same time.
 */
static void handoff_write(struct handoff_slot *t, uint64_t key,
			  unsigned int state, unsigned int strip)
{
	struct handoff_slot *old = NULL;
	uint64_t want, oldest = UINT64_MAX;
	size_t i;

	for (i = 0; i < HANDOFF_SLOTS; i++) {
		want = 0;
		if (atomic_compare_exchange_strong(&t[i].cookie, &want, 1))
			goto fill;
		if (atomic_load(&t[i].stamp) < oldest) {
			oldest = atomic_load(&t[i].stamp);
			old = &t[i];
		}
	}
	/* full: the oldest record goes */
	want = atomic_load(&old->cookie);
	if (want <= 1 ||
	    !atomic_compare_exchange_strong(&old->cookie, &want, 1))
		return;
	i = (size_t)(old - t);
fill:
	atomic_store(&t[i].state, state);
	atomic_store(&t[i].strip, strip);
	atomic_store(&t[i].stamp, xs_now_us());
	atomic_store(&t[i].cookie, key);
}

void xs_handoff_put(int fd, unsigned int state, unsigned int strip)
{
	struct handoff_slot *t = handoff_map(true);
	uint64_t cookie = xs_handoff_cookie(fd);

	if (!t || !cookie)
		return;
	xs_handoff_take_cookie(cookie, NULL, NULL);
	handoff_write(t, cookie, state, strip);
}

/*
 * The record of @cookie, its state and strip into @state and @strip (as
 * found; either may be NULL), taken. For a process that got the socket
 * (@adopt: xs_sock_adopt()), a negotiable record, or one with control
 * messages to strip, stays for the other images that hold the socket too
 * (`sh -c 'od | head'` runs two) and for the one this image execs, a
 * negotiable one marked adopted by this process (XS_HANDOFF_ADOPTED and
 * its pid). Return: whether there was one.
 */
static bool handoff_lookup(uint64_t cookie, unsigned int *state,
			   unsigned int *strip, bool adopt)
{
	struct handoff_slot *t = handoff_map(false);
	uint32_t st, old, mark;
	uint64_t want;
	bool neg;
	size_t i;

	if (!t || !cookie)
		return false;
	for (i = 0; i < HANDOFF_SLOTS; i++) {
		if (atomic_load(&t[i].cookie) != cookie)
			continue;
		st = atomic_load(&t[i].state);
		old = atomic_load(&t[i].strip);
		neg = st == XS_NEG_SERVER || st == XS_NEG_CLIENT;
		if (adopt && neg) {
			mark = XS_HANDOFF_ADOPTED |
			       (((uint32_t)getpid() << XS_HANDOFF_PID_SHIFT) &
				XS_HANDOFF_PID_MASK);
			while (!atomic_compare_exchange_weak(
				&t[i].strip, &old,
				(old & ~XS_HANDOFF_PID_MASK) | mark))
				;
		}
		if (state)
			*state = st;
		if (strip)
			*strip = old;
		want = cookie;
		if ((adopt && (neg || st == XS_HANDOFF_STRIP)) ||
		    atomic_compare_exchange_strong(&t[i].cookie, &want, 0))
			return true;
	}
	return false;
}

bool xs_handoff_take_cookie(uint64_t cookie, unsigned int *state,
			    unsigned int *strip)
{
	return handoff_lookup(cookie, state, strip, false);
}

bool xs_handoff_take(int fd, unsigned int *state, unsigned int *strip)
{
	return handoff_map(false) &&
	       xs_handoff_take_cookie(xs_handoff_cookie(fd), state, strip);
}

void xs_handoff_drop(int fd)
{
	if (__atomic_load_n(&handoff_table, __ATOMIC_ACQUIRE))
		xs_handoff_take_cookie(xs_handoff_cookie(fd), NULL, NULL);
}

bool xs_handoff_any(void)
{
	struct handoff_slot *t = handoff_map(false);
	size_t i;

	if (!t)
		return false;
	for (i = 0; i < HANDOFF_SLOTS; i++)
		if (atomic_load(&t[i].cookie) > 1)
			return true;
	return false;
}

/* Whether process @pid runs (or is another user's). */
static bool handoff_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Whether our parent has another child: one more command of a shell's
 * pipeline, forked before the shell waits (dash forks them all first).
 * Where /proc does not say, it may have: true. */
static bool handoff_siblings(void)
{
	char path[64], buf[256], *p, *end;
	pid_t parent = getppid();
	long pid;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)parent,
		 (int)parent);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = xs_real.read(fd, buf, sizeof(buf) - 1);
	xs_real.close(fd);
	if (n < 0 || n == (ssize_t)sizeof(buf) - 1)
		return true;
	buf[n] = '\0';
	for (p = buf;; p = end) {
		pid = strtol(p, &end, 10);
		if (end == p)
			return false;
		if (pid != getpid())
			return true;
	}
}

bool xs_handoff_shared(pid_t adopter)
{
	int err = errno;
	bool shared = adopter > 0 && adopter != getpid() &&
		      handoff_alive(adopter) &&
		      (adopter != getppid() || handoff_siblings());

	errno = err;
	return shared;
}

struct xs_sock *xs_sock_adopt(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned int state = 0, strip = 0;
	struct xs_sock *s;
	int type = 0, fl, err = errno;

	if (!handoff_map(false))
		return NULL;
	len = sizeof(type);
	if (xs_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    type != SOCK_STREAM)
		goto out_none;
	len = sizeof(ss);
	if (xs_real.getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		goto out_none;
	if (!handoff_lookup(xs_handoff_cookie(fd), &state, &strip, true))
		goto out_none;
	fl = xs_real.fcntl(fd, F_GETFL);
	s = xs_sock_create(
		ss.ss_family,
		SOCK_STREAM |
			(fl >= 0 && (fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0),
		IPPROTO_TCP);
	if (!s)
		goto out_none;
	xs_sock_adopted(s, fd, state, strip);
	/* the image that adopted it before us: xs_sock_claim() asks
	 * whether it still runs, beside us */
	if ((state == XS_NEG_SERVER || state == XS_NEG_CLIENT) &&
	    (strip & XS_HANDOFF_ADOPTED))
		s->neg_adopter = (pid_t)((strip & XS_HANDOFF_PID_MASK) >>
					 XS_HANDOFF_PID_SHIFT);
	xs_dbg("handoff", "fd %d adopted (state %u, after %d)", fd, state,
	       (int)s->neg_adopter);
	errno = err;
	return s;
out_none:
	errno = err;
	return NULL;
}

bool xs_sock_same(int a, int b)
{
	uint64_t c = xs_handoff_cookie(a);

	return c && c == xs_handoff_cookie(b);
}

/* The key of a probe record: tag bit, client address, both ports (never
 * a SO_COOKIE, which counts up from 1). */
static uint64_t handoff_probe_key(const struct sockaddr *client, uint16_t cport,
				  uint16_t sport)
{
	uint64_t k = 0;
	const uint8_t *a;
	size_t i, n;

	if (client->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)client)
			    ->sin_addr;
		n = 4;
	} else if (client->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)client;

		a = s6->sin6_addr.s6_addr;
		n = 16;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			a += 12;
			n = 4;
		}
	} else {
		return 0;
	}
	for (i = 0; i < n; i++)
		k = (k << 8 | (k >> 56)) ^ a[i];
	k ^= (uint64_t)cport << 40 ^ (uint64_t)sport << 20;
	return k | (1ull << 63);
}

void xs_handoff_note_probe(const struct sockaddr *client, uint16_t cport,
			   uint16_t sport)
{
	struct handoff_slot *t = handoff_map(true);
	uint64_t key = handoff_probe_key(client, cport, sport);

	if (!t || !cport || !key)
		return;
	handoff_write(t, key, 0, 0);
}

bool xs_handoff_probed(int fd)
{
	struct sockaddr_storage peer, local;
	socklen_t plen = sizeof(peer), llen = sizeof(local);
	uint16_t cport, sport;

	if (xs_real.getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 ||
	    xs_real.getsockname(fd, (struct sockaddr *)&local, &llen) < 0)
		return false;
	cport = ntohs(((struct sockaddr_in *)&peer)->sin_port);
	sport = ntohs(((struct sockaddr_in *)&local)->sin_port);
	return xs_handoff_take_cookie(
		handoff_probe_key((struct sockaddr *)&peer, cport, sport), NULL,
		NULL);
}

void xs_handoff_fork_child(void)
{
	/* another thread of the parent may have held it, mapping */
	pthread_mutex_init(&handoff_lock, NULL);
}

void xs_handoff_init(void)
{
	(void)handoff_map(true);
}
