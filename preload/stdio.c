/*
 * preload/stdio.c - stdio streams on our sockets.
 *
 * glibc's stdio reads and writes a FILE's fd with calls of its own that no
 * wrapper sees: what a program gives fprintf() or fwrite() on a socket
 * would go out on the kernel TCP connection under an RDMA one, and
 * fgets() would read the control messages of a connection still being
 * negotiated. So a FILE on one of our sockets is a cookie stream
 * (fopencookie()) whose reads, writes and close are the wrappers' own:
 * fdopen() makes one, and at init stdin, stdout and stderr become one
 * where they are such a socket (a program started inetd-style), and so
 * does one whose fd becomes such a socket later, by dup2(), dup3(), dup()
 * or F_DUPFD (a forking server's child that speaks stdio on the
 * connection; xs_stdio_onto()). fileno() still names the fd.
 *
 * At exit, what these streams hold is written before the connections end
 * (xs_stdio_exit()); glibc would write it only after every atexit handler,
 * xs_core_exit()'s FIN among them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>

#include "preload.h"

/* One stream of ours, from its making to its fclose() (stdio_close()). */
struct stdio_cookie {
	int fd;
	FILE *f;
	struct stdio_cookie *next, *prev;
};

static pthread_mutex_t stdio_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stdio_cookie *stdio_list; /* stdio_lock */
/* A stream of ours that was stdin, stdout or stderr when fclose() freed
 * it: the variable may still hold it, and nothing may touch it then
 * (stdio_lock). */
static FILE *stdio_freed[3];

/* The variable of std stream @fd: stdin, stdout or stderr. */
static FILE **stdio_std(int fd)
{
	return fd == 0 ? &stdin : fd == 1 ? &stdout : &stderr;
}

static ssize_t stdio_read(void *cookie, char *buf, size_t len)
{
	const struct stdio_cookie *c = cookie;

	return xs_io_read(c->fd, buf, len);
}

/* All of @len, as glibc marks a stream failed when a cookie writes less
 * (_IO_cookie_write()); a failure after some bytes returns those. EINTR
 * ends it too, as in glibc's file streams (a write bounded by alarm()). */
static ssize_t stdio_write(void *cookie, const char *buf, size_t len)
{
	const struct stdio_cookie *c = cookie;
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = xs_io_write(c->fd, buf + off, len - off);
		if (n <= 0)
			return off ? (ssize_t)off : -1;
		off += (size_t)n;
	}
	return (ssize_t)off;
}

static int stdio_close(void *cookie)
{
	struct stdio_cookie *c = cookie;
	int fd = c->fd;

	pthread_mutex_lock(&stdio_lock);
	for (int i = 0; i <= 2; i++)
		if (*stdio_std(i) == c->f)
			stdio_freed[i] = c->f;
	if (c->prev)
		c->prev->next = c->next;
	else
		stdio_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&stdio_lock);
	free(c);
	return xs_io_close(fd);
}

/* A stream on socket @fd, opened with @mode as fopen() takes it, or NULL
 * with errno (EINVAL: a bad mode; ENOMEM). */
static FILE *stdio_open(int fd, const char *mode)
{
	cookie_io_functions_t io = {
		.read = stdio_read,
		.write = stdio_write,
		.close = stdio_close,
	};
	struct stdio_cookie *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->f = fopencookie(c, mode, io);
	if (!c->f) {
		free(c);
		return NULL;
	}
	c->f->_fileno = fd; /* fileno(); glibc's cookie streams say -2 */
	pthread_mutex_lock(&stdio_lock);
	c->next = stdio_list;
	if (stdio_list)
		stdio_list->prev = c;
	stdio_list = c;
	pthread_mutex_unlock(&stdio_lock);
	return c->f;
}

XS_EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct xs_sock *s;

	if (!xs_enter() || !(s = xs_fdtab_get(fd))) {
		if (xs_real.fdopen)
			return xs_real.fdopen(fd, mode);
		errno = ENOSYS; /* as XS_CALL() */
		return NULL;
	}
	xs_sock_put(s);
	return stdio_open(fd, mode);
}

/* Around fork(): a child whose parent forked while another thread held
 * stdio_lock (making or closing a stream) would wait for it for ever at
 * its first dup2() onto fd 0-2. Registered after the core's handlers, so
 * taken before its locks, as xs_stdio_exit() takes them. */
static void stdio_fork_prepare(void)
{
	pthread_mutex_lock(&stdio_lock);
}

static void stdio_fork_done(void)
{
	pthread_mutex_unlock(&stdio_lock);
}

void xs_stdio_init(void)
{
	struct xs_sock *s;
	FILE *f;
	int fd;

	pthread_atfork(stdio_fork_prepare, stdio_fork_done, stdio_fork_done);

	for (fd = 0; fd <= 2; fd++) {
		s = xs_fdtab_get(fd);
		if (!s)
			continue;
		xs_sock_put(s);
		f = stdio_open(fd, fd == 0 ? "r" : "w");
		if (!f)
			continue;
		xs_dbg("stdio", "fd %d: std%s reads and writes through us", fd,
		       fd == 0	 ? "in"
		       : fd == 1 ? "out"
				 : "err");
		if (fd == 2)
			setvbuf(f, NULL, _IONBF, 0); /* as glibc's stderr */
		*stdio_std(fd) = f;
	}
}

/* Whether @f, std stream @fd's, is one of ours, or one of ours that
 * fclose() freed. */
static bool stdio_ours(const FILE *f, int fd)
{
	const struct stdio_cookie *c;
	bool ours;

	pthread_mutex_lock(&stdio_lock);
	ours = f == stdio_freed[fd];
	for (c = stdio_list; c && !ours; c = c->next)
		ours = c->f == f;
	pthread_mutex_unlock(&stdio_lock);
	return ours;
}

/* glibc's buffering flags in FILE._flags (libio/libio.h): what setvbuf()
 * chose, or glibc at the first output (a terminal: line-buffered). */
#define STDIO_GLIBC_UNBUFFERED 0x0002
#define STDIO_GLIBC_LINE_BUF   0x0200

void xs_stdio_onto(int fd)
{
	FILE **std = stdio_std(fd);
	FILE *old = *std, *f;
	size_t pending;
	int mode;

	/* one of ours reads and writes whatever the fd is now */
	if (!old || stdio_ours(old, fd))
		return;
	flockfile(old);
	if (fileno_unlocked(old) != fd ||
	    (fd == 0 && old->_IO_read_ptr < old->_IO_read_end)) {
		/* another fd's; or input read ahead from what the fd was
		 * before, which glibc would give first: glibc's it stays */
		funlockfile(old);
		return;
	}
	f = stdio_open(fd, fd == 0 ? "r" : "w");
	if (!f) {
		funlockfile(old);
		return;
	}
	mode = fd == 2 || (old->_flags & STDIO_GLIBC_UNBUFFERED) ? _IONBF
	       : old->_flags & STDIO_GLIBC_LINE_BUF		 ? _IOLBF
								 : -1;
	if (mode >= 0)
		setvbuf(f, NULL, mode, mode == _IOLBF ? BUFSIZ : 0);
	/* output not yet written goes where glibc would write it at its
	 * next flush: to the fd as it is now */
	pending = fd == 0 ? 0 : __fpending(old);
	if (pending) {
		fwrite(old->_IO_write_base, 1, pending, f);
		__fpurge(old);
	}
	funlockfile(old);
	pthread_mutex_lock(&stdio_lock);
	stdio_freed[fd] = NULL;
	pthread_mutex_unlock(&stdio_lock);
	*std = f;
	xs_dbg("stdio", "fd %d: std%s reads and writes through us from here",
	       fd,
	       fd == 0	 ? "in"
	       : fd == 1 ? "out"
			 : "err");
}

void xs_stdio_exit(void)
{
	struct stdio_cookie *c;

	/* a stream another thread holds (blocked in fgets()) is left to
	 * glibc: waiting for it could wait for ever */
	pthread_mutex_lock(&stdio_lock);
	for (c = stdio_list; c; c = c->next) {
		if (ftrylockfile(c->f) != 0)
			continue;
		(void)fflush_unlocked(c->f);
		funlockfile(c->f);
	}
	pthread_mutex_unlock(&stdio_lock);
}
