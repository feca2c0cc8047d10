/*
 * preload/interpose.c - the control half of the socket surface.
 *
 * socket, socketpair, bind, listen, accept/accept4, connect, shutdown,
 * close/close_range, dup/dup2/dup3, get/setsockopt, get{sock,peer}name,
 * fcntl/fcntl64, ioctl and fork. Each wrapper forwards to libc unless the
 * fd is a tracked socket, and then calls exactly one core/ operation or fd
 * table operation. Data calls live in io.c, waits in poll.c.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

XS_EXPORT int socket(int domain, int type, int protocol)
{
	struct xs_sock *s;
	int fd;

	if (!xs_enter() || !xs_sock_wanted(domain, type, protocol))
		return XS_CALL(socket, domain, type, protocol);
	fd = XS_CALL(socket, domain, type, protocol);
	if (fd < 0)
		return fd;
	s = xs_sock_create(domain, type, protocol);
	if (s) {
		xs_sock_set_fd(s, fd);
		XS_SAVE_ERRNO(xs_fdtab_insert(fd, s));
	}
	return fd;
}

XS_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	/* Only AF_UNIX makes pairs: never an RDMA candidate. */
	xs_enter();
	return XS_CALL(socketpair, domain, type, protocol, sv);
}

XS_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	xs_enter();
	return XS_CALL(bind, fd, addr, len);
}

XS_EXPORT int listen(int fd, int backlog)
{
	struct xs_sock *s;
	int rc;

	if (!xs_enter() || !(s = xs_fdtab_get(fd)))
		return XS_CALL(listen, fd, backlog);
	rc = xs_sock_listen(s, fd, backlog);
	xs_sock_put(s);
	return (int)xs_sys_ret(rc);
}

/* @s: the listener, with a reference that this function puts. */
static int accept_common(struct xs_sock *s, int fd, struct sockaddr *addr,
			 socklen_t *len, int flags, bool accept4)
{
	struct xs_sock *child;
	int nfd;

	nfd = xs_sock_accept(s, fd, addr, len, flags, accept4, &child);
	xs_sock_put(s);
	if (child) {
		xs_sock_set_fd(child, nfd);
		XS_SAVE_ERRNO(xs_fdtab_insert(nfd, child));
	}
	return (int)xs_sys_ret(nfd);
}

XS_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct xs_sock *s;

	if (!xs_enter() || !(s = xs_fdtab_get(fd)))
		return XS_CALL(accept, fd, addr, len);
	return accept_common(s, fd, addr, len, 0, false);
}

XS_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct xs_sock *s;

	if (!xs_enter() || !(s = xs_fdtab_get(fd)))
		return XS_CALL(accept4, fd, addr, len, flags);
	return accept_common(s, fd, addr, len, flags, true);
}

XS_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct xs_sock *s;
	int rc;

	if (!xs_enter() || !(s = xs_fdtab_get(fd)))
		return XS_CALL(connect, fd, addr, len);
	rc = xs_sock_connect(s, fd, addr, len);
	xs_sock_put(s);
	return (int)xs_sys_ret(rc);
}

XS_EXPORT int shutdown(int fd, int how)
{
	struct xs_sock *s;
	int rc;

	if (!xs_enter() || !(s = xs_fdtab_get_rdma(fd)))
		return XS_CALL(shutdown, fd, how);
	rc = xs_sock_shutdown(s, fd, how);
	xs_sock_put(s);
	return (int)xs_sys_ret(rc);
}

XS_EXPORT int close(int fd)
{
	return xs_io_close(fd);
}

/*
 * @fd, whose slot was just cleared, is about to close (close, close_range,
 * dup2 onto it): where it is the last fd of @s here, what the close of a
 * socket owes first, while the kernel fd is still open.
 */
static void close_last(struct xs_sock *s, int fd)
{
	if (!s || xs_fdtab_held(s))
		return;
	if (xs_sock_negotiable(s)) {
		xs_sock_closing(s, fd); /* a FIN, not an RST, goes out */
	} else if (xs_sock_kind(s) == XS_KIND_RDMA) {
		(void)xs_sock_let_go(s, fd, false); /* a child may hold it */
		xs_sock_close_failed(s, fd);	    /* bytes lost: an RST */
	}
}

int xs_io_close(int fd)
{
	struct xs_sock *s;
	int rc;

	if (!xs_enter())
		return XS_CALL(close, fd);
	/* Remove before close: a reused fd number never sees this entry. */
	s = xs_fdtab_remove(fd);
	close_last(s, fd);
	xs_log_fd_closed(fd);
	xs_poll_fd_closed(fd);
	rc = XS_CALL(close, fd);
	XS_SAVE_ERRNO(xs_sock_put(s));
	return rc;
}

static int close_removed_cmp(const void *a, const void *b)
{
	const struct xs_fdtab_removed *x = a, *y = b;

	if (x->s != y->s)
		return (uintptr_t)x->s < (uintptr_t)y->s ? -1 : 1;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

XS_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	struct xs_fdtab_removed *removed;
	size_t i, n;
	int rc;

	if (!xs_enter() || (flags & CLOSE_RANGE_CLOEXEC) || first > last)
		return XS_CALL(close_range, first, last, flags);
	if (!xs_real.close_range)
		return xs_no_symbol();
	/* Remove before close; a failed call closed nothing: put them back. */
	n = xs_fdtab_remove_range(first, last, &removed);
	/* each socket's last fd in the range, once: by socket, then fd */
	if (removed && n > 1)
		qsort(removed, n, sizeof(*removed), close_removed_cmp);
	for (i = 0; removed && i < n; i++)
		if (i + 1 == n || removed[i + 1].s != removed[i].s)
			close_last(removed[i].s, removed[i].fd);
	rc = XS_CALL(close_range, first, last, flags);
	XS_SAVE_ERRNO({
		for (i = 0; removed && i < n; i++) {
			if (rc < 0)
				xs_fdtab_restore(removed[i].fd, removed[i].s);
			else
				xs_sock_put(removed[i].s);
		}
		free(removed);
		if (rc == 0) {
			xs_log_fd_closed_range(first, last);
			for (i = first; i <= last && i < xs_fdtab_size(); i++)
				xs_poll_fd_closed((int)i);
		}
	});
	return rc;
}

/* Give @nfd, a fresh duplicate of the fd behind @s, the same socket. */
static int dup_track(int nfd, struct xs_sock *s)
{
	if (nfd >= 0)
		XS_SAVE_ERRNO(xs_fdtab_insert(nfd, s);
			      if (nfd <= STDERR_FILENO) xs_stdio_onto(nfd));
	else
		XS_SAVE_ERRNO(xs_sock_put(s));
	return nfd;
}

XS_EXPORT int dup(int fd)
{
	struct xs_sock *s;

	if (!xs_enter() || !(s = xs_fdtab_get(fd)))
		return XS_CALL(dup, fd);
	return dup_track(XS_CALL(dup, fd), s);
}

/*
 * dup2/dup3: @newfd is closed by the kernel, so its entry goes first; if
 * the call fails, nothing was closed and the entry comes back.
 */
static int dup_onto(int fd, int newfd, int flags, bool dup3)
{
	struct xs_sock *s = xs_fdtab_get(fd);
	struct xs_sock *victim = xs_fdtab_remove(newfd);
	int rc;

	/* the kernel closes @newfd: its socket's last fd too, unless the
	 * call fails at once (a bad @fd or flags: nothing is closed) */
	if (victim && (!dup3 || !(flags & ~O_CLOEXEC)) &&
	    xs_real.fcntl(fd, F_GETFD) >= 0)
		close_last(victim, newfd);
	rc = dup3 ? XS_CALL(dup3, fd, newfd, flags) : XS_CALL(dup2, fd, newfd);
	if (rc < 0) {
		XS_SAVE_ERRNO(xs_fdtab_restore(newfd, victim); xs_sock_put(s));
		return rc;
	}
	if (newfd != STDERR_FILENO)
		xs_log_fd_closed(newfd);
	XS_SAVE_ERRNO(xs_poll_fd_closed(newfd); xs_sock_put(victim);
		      if (s) xs_fdtab_insert(newfd, s);
		      if (s && newfd <= STDERR_FILENO) xs_stdio_onto(newfd));
	return rc;
}

XS_EXPORT int dup2(int fd, int newfd)
{
	/* dup2(fd, fd) changes nothing (or fails with EBADF). */
	if (!xs_enter() || fd == newfd)
		return XS_CALL(dup2, fd, newfd);
	return dup_onto(fd, newfd, 0, false);
}

XS_EXPORT int dup3(int fd, int newfd, int flags)
{
	/* dup3(fd, fd, ...) fails with EINVAL in the kernel. */
	if (!xs_enter() || fd == newfd)
		return XS_CALL(dup3, fd, newfd, flags);
	return dup_onto(fd, newfd, flags, true);
}

XS_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct xs_sock *s;
	int rc, err, kerr;
	bool own;

	/* Everything is the kernel fd's but SO_ERROR of an RDMA socket or of
	 * a non-blocking connect whose fallback the kernel refused at once:
	 * the kernel answers (and checks the pointers), then the stream's
	 * answer replaces it, 0 included (the idle kernel connection under
	 * the stream may hold the RST of the peer's abortive close), or
	 * that refusal replaces its 0. */
	if (!xs_enter() || level != SOL_SOCKET || name != SO_ERROR ||
	    !(s = xs_fdtab_get(fd)))
		return XS_CALL(getsockopt, fd, level, name, val, len);
	rc = XS_CALL(getsockopt, fd, level, name, val, len);
	if (xs_sock_kind(s) == XS_KIND_RDMA) {
		err = xs_sock_so_error(s);
		own = err >= 0;
	} else {
		err = xs_sock_take_connect_err(s);
		own = err != 0;
	}
	if (rc == 0 && !err && *len >= (socklen_t)sizeof(int) &&
	    xs_sock_kind(s) == XS_KIND_TCP) {
		memcpy(&kerr, val, sizeof(kerr));
		if (kerr)
			xs_sock_tcp_connect_failed(s, kerr);
	}
	if (rc == 0 && own && *len >= (socklen_t)sizeof(int))
		memcpy(val, &err, sizeof(err));
	XS_SAVE_ERRNO(xs_sock_put(s));
	return rc;
}

XS_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct xs_sock *s;
	int rc;

	/* Options always reach the kernel fd; the timeouts, SO_LINGER and
	 * keepalive are mirrored. */
	if (!xs_enter() || (level != SOL_SOCKET && level != IPPROTO_TCP) ||
	    !(s = xs_fdtab_get(fd)))
		return XS_CALL(setsockopt, fd, level, name, val, len);
	rc = XS_CALL(setsockopt, fd, level, name, val, len);
	if (rc == 0)
		XS_SAVE_ERRNO(xs_sock_setsockopt_done(s, fd, level, name));
	XS_SAVE_ERRNO(xs_sock_put(s));
	return rc;
}

static int name_common(int fd, bool peer, struct sockaddr *addr, socklen_t *len)
{
	struct xs_sock *s;
	int rc;

	if (!xs_enter() || !(s = xs_fdtab_get_rdma(fd)))
		return peer ? XS_CALL(getpeername, fd, addr, len)
			    : XS_CALL(getsockname, fd, addr, len);
	rc = xs_sock_name(s, fd, peer, addr, len);
	xs_sock_put(s);
	return (int)xs_sys_ret(rc);
}

XS_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	return name_common(fd, false, addr, len);
}

XS_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	return name_common(fd, true, addr, len);
}

/* How the third argument of fcntl(2) is passed, by command. */
enum fcntl_arg { FCNTL_ARG_NONE, FCNTL_ARG_INT, FCNTL_ARG_PTR };

static enum fcntl_arg fcntl_arg_of(int cmd)
{
	switch (cmd) {
	case F_GETFD:
	case F_GETFL:
	case F_GETOWN:
	case F_GETSIG:
	case F_GETLEASE:
	case F_GETPIPE_SZ:
	case F_GET_SEALS:
		return FCNTL_ARG_NONE;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
	case F_SETFD:
	case F_SETFL:
	case F_SETOWN:
	case F_SETSIG:
	case F_SETLEASE:
	case F_NOTIFY:
	case F_SETPIPE_SZ:
	case F_ADD_SEALS:
		return FCNTL_ARG_INT;
	default:
		/* Locks, F_[GS]ETOWN_EX, hints and unknown: pointer-sized. */
		return FCNTL_ARG_PTR;
	}
}

typedef int (*fcntl_fn)(int fd, int cmd, ...);

/* The one decoder behind fcntl and fcntl64. */
static int fcntl_common(fcntl_fn real, int fd, int cmd, va_list ap)
{
	enum fcntl_arg kind = fcntl_arg_of(cmd);
	struct xs_sock *s;
	void *parg = NULL;
	int iarg = 0;

	if (kind == FCNTL_ARG_INT)
		iarg = va_arg(ap, int);
	else if (kind == FCNTL_ARG_PTR)
		parg = va_arg(ap, void *);
	if (!real)
		return xs_no_symbol();
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && xs_enter() &&
	    (s = xs_fdtab_get(fd)))
		return dup_track(real(fd, cmd, iarg), s);
	if (cmd == F_SETFL && xs_enter() && (s = xs_fdtab_get(fd))) {
		int rc = real(fd, cmd, iarg);

		if (rc == 0)
			xs_sock_set_nonblock(s, (iarg & O_NONBLOCK) != 0);
		XS_SAVE_ERRNO(xs_sock_put(s));
		return rc;
	}
	switch (kind) {
	case FCNTL_ARG_NONE:
		return real(fd, cmd);
	case FCNTL_ARG_INT:
		return real(fd, cmd, iarg);
	case FCNTL_ARG_PTR:
		break;
	}
	return real(fd, cmd, parg);
}

XS_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	int rc;

	xs_enter();
	va_start(ap, cmd);
	rc = fcntl_common(xs_real.fcntl, fd, cmd, ap);
	va_end(ap);
	return rc;
}

XS_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	int rc;

	xs_enter();
	va_start(ap, cmd);
	rc = fcntl_common(xs_real.fcntl64 ? xs_real.fcntl64 : xs_real.fcntl, fd,
			  cmd, ap);
	va_end(ap);
	return rc;
}

XS_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	/* Every socket ioctl takes an int or a pointer: pass it as a word. */
	struct xs_sock *s;
	int rc;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!xs_enter() ||
	    (request != FIONBIO && request != FIONREAD && request != SIOCOUTQ &&
	     request != SIOCOUTQNSD && request != SIOCATMARK) ||
	    !(s = xs_fdtab_get(fd)))
		return XS_CALL(ioctl, fd, request, arg);
	rc = xs_sock_ioctl(s, fd, request, arg);
	xs_sock_put(s);
	return (int)xs_sys_ret(rc);
}

/* fork() and vfork() both: never through the exported name, which may
 * resolve to another library's fork() first. */
static pid_t fork_common(void)
{
	pid_t pid;

	if (!xs_enter())
		return XS_CALL(fork);
	pid = XS_CALL(fork);
	if (pid == 0)
		XS_SAVE_ERRNO(xs_core_fork_child());
	return pid;
}

XS_EXPORT pid_t fork(void)
{
	return fork_common();
}

/*
 * _exit() and _Exit(). The kernel closes a process's sockets however it
 * ends, each with a FIN after every byte it was handed; exit() runs
 * xs_core_exit() (atexit) to do so for the RDMA connections, and so do
 * these before the real call: a sender that _exit()s right after its last
 * send (Python's os._exit(), a forked child's usual end) delivers its
 * bytes, then EOF. Not from inside the library (a signal handler that
 * interrupted one of our calls, which may hold our locks): its RDMA
 * connections then reset, as after SIGKILL. A forked child has no RDMA
 * connection of its own until it makes one, so this costs it nothing.
 */
static void __attribute__((noreturn)) exit_now(void (*real)(int), int status)
{
	if (xs_enter())
		xs_core_exit();
	if (real)
		real(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

XS_EXPORT void _exit(int status)
{
	exit_now(xs_real._exit, status);
}

XS_EXPORT void _Exit(int status)
{
	exit_now(xs_real._Exit ? xs_real._Exit : xs_real._exit, status);
}

/*
 * vfork() is fork(). A vfork child runs in its parent's memory until it
 * execs, and what it does meanwhile - Python's subprocess closes every fd
 * above 2 there - would run this library's close() on the parent's own
 * socket state and tear its RDMA connections down. A real vfork() cannot
 * be wrapped at all: the child must not return from the frame that called
 * it. libvma makes the same substitution. POSIX lets a vfork child do
 * nothing but _exit() or exec, and fork() serves both.
 */
XS_EXPORT pid_t vfork(void)
{
	return fork_common();
}
