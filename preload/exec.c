/*
 * preload/exec.c - the exec family.
 *
 * A new program image inherits the sockets whose fds lack FD_CLOEXEC, and
 * nothing of this library's state: before the real call, each RDMA
 * connection among them moves to its kernel TCP connection, its unread
 * bytes handed over (xs_sock_hand(), core/move.c); an exec that
 * returns (it failed) takes back what was prepared for the new image.
 * execl, execlp and execle become execv, execvp and execve: glibc's own
 * reach the kernel without a call this library could see.
 * posix_spawn() and posix_spawnp() are a fork and an exec in one: the
 * image they make is lent every inheritable RDMA connection, as a forked
 * child's exec lends it (xs_sock_spawn_lend()), and asks for its move at
 * its first use. system() and popen() spawn inside glibc, unseen.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

/* What exec_prepare() handed over, for exec_failed(). */
struct exec_handed {
	struct xs_handed *h; /* malloc'ed */
	size_t nr;
};

/* Whether socket @s is among those of @e. */
static bool exec_seen(const struct exec_handed *e, const struct xs_sock *s)
{
	size_t i;

	for (i = 0; i < e->nr; i++)
		if (e->h[i].sock == s)
			return true;
	return false;
}

/* Whether the image an exec makes with environment @envp runs without
 * this library (its LD_PRELOAD gone: an environment made anew). A
 * set-user-ID program that ignores LD_PRELOAD is not seen here. */
static bool exec_bare(char *const envp[])
{
	size_t i;

	for (i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], "LD_PRELOAD=", 11) &&
		    strstr(envp[i], "libxsock"))
			return false;
	return envp != NULL;
}

/*
 * Call @hand for every inheritable RDMA socket (no FD_CLOEXEC) once, dup'ed
 * fds sharing one, collecting what it prepared in @e; where @e cannot
 * grow, @drop lets that one go at once.
 */
static void exec_each(struct exec_handed *e,
		      void (*hand)(struct xs_sock *s, int fd,
				   struct xs_handed *h, void *arg),
		      void (*drop)(struct xs_handed *h), void *arg)
{
	struct xs_handed h, *n;
	size_t cap = 0;
	struct xs_sock *s;
	int fd = -1, fl;

	e->h = NULL;
	e->nr = 0;
	while ((fd = xs_fdtab_next(fd)) >= 0) {
		if (!(s = xs_fdtab_get(fd)))
			continue;
		fl = xs_real.fcntl(fd, F_GETFD);
		/* the new image may claim it: a close here leaves its hello
		 * (xs_sock_closing()), though that image adopts it later */
		if (fl >= 0 && !(fl & FD_CLOEXEC) && xs_sock_negotiable(s))
			xs_sock_passed(s);
		if (xs_sock_kind(s) == XS_KIND_RDMA && fl >= 0 &&
		    !(fl & FD_CLOEXEC) && !exec_seen(e, s)) {
			hand(s, fd, &h, arg);
			if (e->nr == cap &&
			    (n = realloc(e->h,
					 (cap ? 2 * cap : 8) * sizeof(*n)))) {
				e->h = n;
				cap = cap ? 2 * cap : 8;
			}
			if (e->nr < cap)
				e->h[e->nr++] = h;
			else
				drop(&h);
		}
		xs_sock_put(s);
	}
}

static void exec_hand_one(struct xs_sock *s, int fd, struct xs_handed *h,
			  void *how)
{
	(void)xs_sock_hand(s, fd, *(unsigned int *)how, h);
}

/* kept only if the exec fails: let it go */
static void exec_drop_one(struct xs_handed *h)
{
	xs_sock_hand_done(h, true);
}

/* Every inheritable unclaimed socket (@all: every one, close-on-exec too:
 * posix_spawn's file actions dup2 inside the child, unseen) goes to
 * kernel TCP with its peer, for an image without this library
 * (xs_sock_exec_bare()). */
static void exec_settle_bare(bool all)
{
	struct xs_sock *s;
	int fd = -1, fl;

	while ((fd = xs_fdtab_next(fd)) >= 0) {
		if (!(s = xs_fdtab_get(fd)))
			continue;
		fl = xs_real.fcntl(fd, F_GETFD);
		if (fl >= 0 && (all || !(fl & FD_CLOEXEC)) &&
		    xs_sock_negotiable(s))
			xs_sock_exec_bare(s, fd);
		xs_sock_put(s);
	}
}

/* Hand every inheritable RDMA socket to the image an exec makes. */
static void exec_prepare(struct exec_handed *e, char *const envp[])
{
	bool bare = exec_bare(envp);
	unsigned int how = XS_HAND_EXEC | (bare ? XS_HAND_BARE : 0);

	if (bare)
		exec_settle_bare(false);
	exec_each(e, exec_hand_one, exec_drop_one, &how);
}

/* After an exec that returned: @rc, with errno as the exec left it; what
 * @e prepared goes. */
static int exec_failed(struct exec_handed *e, int rc)
{
	size_t i;

	for (i = 0; i < e->nr; i++)
		xs_sock_hand_done(&e->h[i], false);
	XS_SAVE_ERRNO(free(e->h));
	return rc;
}

/* The wrappers' bodies: the execl family calls these, never an
 * interposed name (tests/check-symbols). */
static int exec_ve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(execve, path, argv, envp);
	exec_prepare(&e, envp);
	return exec_failed(&e, XS_CALL(execve, path, argv, envp));
}

static int exec_v(const char *path, char *const argv[])
{
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(execv, path, argv);
	exec_prepare(&e, environ);
	return exec_failed(&e, XS_CALL(execv, path, argv));
}

static int exec_vp(const char *file, char *const argv[])
{
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(execvp, file, argv);
	exec_prepare(&e, environ);
	return exec_failed(&e, XS_CALL(execvp, file, argv));
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
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(execvpe, file, argv, envp);
	exec_prepare(&e, envp);
	return exec_failed(&e, XS_CALL(execvpe, file, argv, envp));
}

XS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(fexecve, fd, argv, envp);
	exec_prepare(&e, envp);
	return exec_failed(&e, XS_CALL(fexecve, fd, argv, envp));
}

XS_EXPORT int execveat(int dirfd, const char *path, char *const argv[],
		       char *const envp[], int flags)
{
	struct exec_handed e;

	if (!xs_enter())
		return XS_CALL(execveat, dirfd, path, argv, envp, flags);
	exec_prepare(&e, envp);
	return exec_failed(&e,
			   XS_CALL(execveat, dirfd, path, argv, envp, flags));
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

/* Which exec an execl-family call ends in. */
enum exec_list_how {
	EXEC_LIST_PATH,	  /* execl: execv(path) */
	EXEC_LIST_SEARCH, /* execlp: execvp(file), searched in PATH */
	EXEC_LIST_ENV,	  /* execle: execve(path), the environment after NULL */
};

/*
 * execl, execlp and execle: the list from @arg on as an argv, then the
 * exec of @how on @target. Return: as the exec (no return on success).
 */
static int exec_list(const char *target, const char *arg, va_list ap,
		     enum exec_list_how how)
{
	char *const *envp = NULL;
	char **argv = exec_argv(arg, ap, how == EXEC_LIST_ENV ? &envp : NULL);
	int rc;

	if (!argv)
		return -1;
	if (how == EXEC_LIST_SEARCH)
		rc = exec_vp(target, argv);
	else if (how == EXEC_LIST_ENV)
		rc = exec_ve(target, argv, envp);
	else
		rc = exec_v(target, argv);
	XS_SAVE_ERRNO(free(argv));
	return rc;
}

XS_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = exec_list(path, arg, ap, EXEC_LIST_PATH);
	va_end(ap);
	return rc;
}

XS_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = exec_list(file, arg, ap, EXEC_LIST_SEARCH);
	va_end(ap);
	return rc;
}

XS_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int rc;

	va_start(ap, arg);
	rc = exec_list(path, arg, ap, EXEC_LIST_ENV);
	va_end(ap);
	return rc;
}

/* What spawn_prepare() lent for one posix_spawn(). */
struct spawn_lent {
	int own, child; /* the channel made for the spawned image */
	struct exec_handed e;
};

static void spawn_lend_one(struct xs_sock *s, int fd, struct xs_handed *h,
			   void *arg)
{
	struct spawn_lent *sl = arg;

	(void)xs_sock_spawn_lend(s, fd, &sl->own, &sl->child, h);
}

static void spawn_drop_one(struct xs_handed *h)
{
	xs_sock_spawn_done(h, false);
}

/* Lend every inheritable RDMA socket to the image posix_spawn() makes
 * with environment @envp and file actions @fa (none to one without the
 * library). */
static void spawn_prepare(struct spawn_lent *sl, char *const envp[],
			  const posix_spawn_file_actions_t *fa)
{
	sl->own = sl->child = -1;
	sl->e.h = NULL;
	sl->e.nr = 0;
	if (!exec_bare(envp ? envp : environ))
		exec_each(&sl->e, spawn_lend_one, spawn_drop_one, sl);
	else
		exec_settle_bare(fa != NULL);
}

/* After posix_spawn() returned @rc (0: a child was made). */
static int spawn_done(struct spawn_lent *sl, int rc)
{
	size_t i;

	for (i = 0; i < sl->e.nr; i++)
		xs_sock_spawn_done(&sl->e.h[i], rc == 0);
	xs_move_spawn_close(sl->own, sl->child, rc == 0);
	XS_SAVE_ERRNO(free(sl->e.h));
	return rc;
}

XS_EXPORT int posix_spawn(pid_t *pid, const char *path,
			  const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[],
			  char *const envp[])
{
	struct spawn_lent sl;

	if (!xs_enter())
		return XS_CALL(posix_spawn, pid, path, fa, attr, argv, envp);
	spawn_prepare(&sl, envp, fa);
	return spawn_done(
		&sl, XS_CALL(posix_spawn, pid, path, fa, attr, argv, envp));
}

XS_EXPORT int posix_spawnp(pid_t *pid, const char *file,
			   const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[],
			   char *const envp[])
{
	struct spawn_lent sl;

	if (!xs_enter())
		return XS_CALL(posix_spawnp, pid, file, fa, attr, argv, envp);
	spawn_prepare(&sl, envp, fa);
	return spawn_done(
		&sl, XS_CALL(posix_spawnp, pid, file, fa, attr, argv, envp));
}

/*
 * set*id(), setgroups() and initgroups(). A process whose credentials
 * change may no longer use the verbs objects it made before: the kernel
 * refuses their commands (ib_safe_file_access(): EACCES), so its RDMA
 * connections would reset at their next post (rsync's daemon sets its
 * group after the greeting). They move to their kernel TCP connections
 * first, live, with the bytes that came over RDMA and nobody read, as
 * before an exec that fails; whatever the call answers, they go on there.
 * A process without RDMA connections pays a walk of its fd table.
 */
static void creds_changing(void)
{
	struct xs_handed h;
	struct xs_sock *s;
	int fd = -1;

	while ((fd = xs_fdtab_next(fd)) >= 0) {
		if (!(s = xs_fdtab_get(fd)))
			continue;
		if (xs_sock_kind(s) == XS_KIND_RDMA) {
			(void)xs_sock_hand(s, fd, XS_HAND_SELF, &h);
			xs_sock_hand_done(&h, false);
		}
		xs_sock_put(s);
	}
}

#define CREDS_WRAPPER(name, params, ...)                                       \
	XS_EXPORT int name params                                              \
	{                                                                      \
		if (xs_enter())                                                \
			creds_changing();                                      \
		return XS_CALL(name, __VA_ARGS__);                             \
	}

CREDS_WRAPPER(setuid, (uid_t uid), uid)
CREDS_WRAPPER(setgid, (gid_t gid), gid)
CREDS_WRAPPER(seteuid, (uid_t uid), uid)
CREDS_WRAPPER(setegid, (gid_t gid), gid)
CREDS_WRAPPER(setreuid, (uid_t ruid, uid_t euid), ruid, euid)
CREDS_WRAPPER(setregid, (gid_t rgid, gid_t egid), rgid, egid)
CREDS_WRAPPER(setresuid, (uid_t ruid, uid_t euid, uid_t suid), ruid, euid, suid)
CREDS_WRAPPER(setresgid, (gid_t rgid, gid_t egid, gid_t sgid), rgid, egid, sgid)
CREDS_WRAPPER(setgroups, (size_t n, const gid_t *list), n, list)
CREDS_WRAPPER(initgroups, (const char *user, gid_t group), user, group)
