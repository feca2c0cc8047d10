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
 * where they are such a socket (a program started inetd-style). fileno()
 * still names the fd. What a program dup2()s onto 0, 1 or 2 later keeps
 * glibc's stream.
 *
 * At exit, what these streams hold is written before the connections end
 * (xs_stdio_exit()); glibc would write it only after every atexit handler,
 * xs_core_exit()'s FIN among them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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

void xs_stdio_init(void)
{
	struct xs_sock *s;
	FILE *f;
	int fd;

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
		if (fd == 0)
			stdin = f;
		else if (fd == 1)
			stdout = f;
		else {
			setvbuf(f, NULL, _IONBF, 0); /* as glibc's stderr */
			stderr = f;
		}
	}
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
