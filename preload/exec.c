/*
 * preload/exec.c - the exec family.
 *
 * A new program image inherits the sockets whose fds lack FD_CLOEXEC, and
 * nothing of this library's state: before the real call, each RDMA
 * connection among them moves to its kernel TCP connection, its unread
 * bytes handed over (xs_sock_exec_move(), core/move.c); an exec that
 * returns (it failed) takes back what was prepared for the new image.
 * execl, execlp and execle become execv, execvp and execve: glibc's own
 * reach the kernel without a call this library could see.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "preload.h"

/* Whether @s is among the first @nr of @seen. */
static bool exec_seen(struct xs_sock *const *seen, size_t nr,
		      const struct xs_sock *s)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if (seen[i] == s)
			return true;
	return false;
}

/* Hand every inheritable RDMA socket to the image an exec makes; dup'ed
 * fds share a socket: it goes once. */
static void exec_prepare(void)
{
	struct xs_sock **seen = NULL, **n, *s;
	size_t nr = 0, cap = 0, i;
	int fd = -1, fl;

	while ((fd = xs_fdtab_next(fd)) >= 0) {
		if (!(s = xs_fdtab_get(fd)))
			continue;
		fl = xs_real.fcntl(fd, F_GETFD);
		if (xs_sock_kind(s) != XS_KIND_RDMA || fl < 0 ||
		    (fl & FD_CLOEXEC) || exec_seen(seen, nr, s)) {
			xs_sock_put(s);
			continue;
		}
		(void)xs_sock_exec_move(s, fd);
		if (nr == cap &&
		    (n = realloc(seen, (cap ? 2 * cap : 16) * sizeof(*n)))) {
			seen = n;
			cap = cap ? 2 * cap : 16;
		}
		if (nr < cap)
			seen[nr++] = s; /* its reference, until the end */
		else
			xs_sock_put(s);
	}
	for (i = 0; i < nr; i++)
		xs_sock_put(seen[i]);
	free(seen);
}

/* After an exec that returned: @rc, with errno as the exec left it. */
static int exec_failed(int rc)
{
	XS_SAVE_ERRNO(xs_sock_exec_failed());
	return rc;
}

/* The wrappers' bodies: the execl family calls these, never an
 * interposed name (tests/check-symbols). */
static int exec_ve(const char *path, char *const argv[], char *const envp[])
{
	if (!xs_enter())
		return XS_CALL(execve, path, argv, envp);
	exec_prepare();
	return exec_failed(XS_CALL(execve, path, argv, envp));
}

static int exec_v(const char *path, char *const argv[])
{
	if (!xs_enter())
		return XS_CALL(execv, path, argv);
	exec_prepare();
	return exec_failed(XS_CALL(execv, path, argv));
}

static int exec_vp(const char *file, char *const argv[])
{
	if (!xs_enter())
		return XS_CALL(execvp, file, argv);
	exec_prepare();
	return exec_failed(XS_CALL(execvp, file, argv));
}

XS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_ve(path, argv, envp);
}

XS_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_v(path, argv);
}

XS_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_vp(file, argv);
}

XS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!xs_enter())
		return XS_CALL(execvpe, file, argv, envp);
	exec_prepare();
	return exec_failed(XS_CALL(execvpe, file, argv, envp));
}

XS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!xs_enter())
		return XS_CALL(fexecve, fd, argv, envp);
	exec_prepare();
	return exec_failed(XS_CALL(fexecve, fd, argv, envp));
}

XS_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
		       char *const envp[], int flags)
{
	if (!xs_enter())
		return XS_CALL(execveat, dirfd, path, argv, envp, flags);
	exec_prepare();
	return exec_failed(XS_CALL(execveat, dirfd, path, argv, envp, flags));
}

/*
 * The argument list of an execl call, from @arg to its NULL, as an argv
 * array (malloc'ed); with @envp, the pointer after that NULL (execle).
 * Return: the array, or NULL with errno ENOMEM.
 */
static char **exec_argv(const char *arg, va_list ap, char *const **envp)
{
	size_t nr = 1, cap = 16;
	char **argv = malloc(cap * sizeof(*argv)), **n;

	if (!argv)
		return NULL;
	argv[0] = (char *)arg;
	while (argv[nr - 1]) {
		if (nr == cap) {
			n = realloc(argv, 2 * cap * sizeof(*argv));
			if (!n) {
				free(argv);
				errno = ENOMEM;
				return NULL;
			}
			argv = n;
			cap *= 2;
		}
		argv[nr++] = va_arg(ap, char *);
	}
	if (envp)
		*envp = va_arg(ap, char *const *);
	return argv;
}

XS_EXPORT int execl(const char *path, const char *arg, ...)
{
	char **argv;
	va_list ap;
	int rc;

	va_start(ap, arg);
	argv = exec_argv(arg, ap, NULL);
	va_end(ap);
	if (!argv)
		return -1;
	rc = exec_v(path, argv);
	XS_SAVE_ERRNO(free(argv));
	return rc;
}

XS_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char **argv;
	va_list ap;
	int rc;

	va_start(ap, arg);
	argv = exec_argv(arg, ap, NULL);
	va_end(ap);
	if (!argv)
		return -1;
	rc = exec_vp(file, argv);
	XS_SAVE_ERRNO(free(argv));
	return rc;
}

XS_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	char **argv;
	va_list ap;
	int rc;

	va_start(ap, arg);
	argv = exec_argv(arg, ap, &envp);
	va_end(ap);
	if (!argv)
		return -1;
	rc = exec_ve(path, argv, envp);
	XS_SAVE_ERRNO(free(argv));
	return rc;
}
