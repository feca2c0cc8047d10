/*
 * preload/init.c - the one initialization path.
 *
 * Owns xs_init_once(): (a) raise the reentrancy guard, (b) resolve the real
 * libc entry points, (c) load the configuration, then set up the fd table,
 * the fork handlers and the exit summary. Nothing else: RDMA devices are
 * opened lazily by core/. Reached from the constructor and from every
 * wrapper; pthread_once makes concurrent first calls wait for one init.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "preload.h"

/* Most fds the table covers when RLIMIT_NOFILE's hard limit is unlimited. */
#define INIT_MAX_FDS (1u << 24)

atomic_bool xs_active;
atomic_bool xs_init_done;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static struct xs_config init_cfg;

static size_t init_table_size(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > INIT_MAX_FDS)
		return INIT_MAX_FDS;
	return (size_t)rl.rlim_max;
}

/*
 * Sockets inherited across exec whose transport state the program before
 * recorded (core/handoff.c): into the fd table with it. Only when some
 * socket is recorded at all: one open(2) in every other process.
 */
static void init_adopt(void)
{
	struct {
		int fd;
		struct xs_sock *s;
	} seen[16];
	size_t nseen = 0, i;
	struct dirent *d;
	DIR *dir;
	int fd;

	if (!xs_handoff_any() || !(dir = opendir("/proc/self/fd")))
		return;
	while ((d = readdir(dir))) {
		struct xs_sock *s;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		fd = atoi(d->d_name);
		if (fd == dirfd(dir))
			continue;
		/* dup'ed fds of one socket (inetd's 0 and 1) share it: it is
		 * adopted once (its record may stay, for our own execs) */
		s = NULL;
		for (i = 0; !s && i < nseen; i++)
			if (xs_sock_same(seen[i].fd, fd)) {
				s = seen[i].s;
				xs_sock_get(s);
			}
		if (!s)
			s = xs_sock_adopt(fd);
		if (!s)
			continue;
		if (nseen < sizeof(seen) / sizeof(seen[0])) {
			seen[nseen].fd = fd;
			seen[nseen++].s = s;
		}
		xs_fdtab_insert(fd, s);
	}
	closedir(dir);
}

static void init_run(void)
{
	char err[XS_CFG_ERR_MAX];
	int saved = errno;
	XS_INSIDE(); /* a wrapper reached from here must not enter
		      * pthread_once again: it would wait for this run */

	if (xs_real_resolve(err, sizeof(err)) != 0) {
		char msg[XS_CFG_ERR_MAX + 64];

		snprintf(msg, sizeof(msg), "libc symbol %s not found", err);
		xs_log_config_error(msg);
		goto out;
	}
	if (xs_cfg_load(&init_cfg, NULL, NULL, err, sizeof(err)) != 0)
		xs_log_config_error(err);
	xs_core_init(&init_cfg);
	if (init_cfg.mode == XS_MODE_OFF)
		goto out;
	if (xs_fdtab_init(init_table_size()) != 0) {
		xs_err("init", "cannot allocate the fd table: passthrough");
		goto out;
	}
	/* No thread may hold a core/ lock across fork(): the child would
	 * inherit it locked by a thread that does not exist there. */
	pthread_atfork(xs_core_atfork_prepare, xs_core_atfork_parent,
		       xs_core_atfork_child);
	xs_epoll_created(-1); /* its table, before any wait may need it */
	atexit(xs_pub_exit);  /* runs last: the file goes with the process */
	if (init_cfg.stats != XS_STATS_OFF)
		atexit(xs_stats_dump);
	atexit(xs_core_exit);  /* runs before the dump: its bytes count */
	atexit(xs_stdio_exit); /* before xs_core_exit(): its bytes go */
	xs_dbg("init", "mode %s, %zu fd slots",
	       init_cfg.mode == XS_MODE_TCP ? "tcp" : "auto", xs_fdtab_size());
	atomic_store(&xs_active, true);
	init_adopt();
	xs_stdio_init();
out:
	atomic_store_explicit(&xs_init_done, true, memory_order_release);
	errno = saved;
}

void xs_init_once(void)
{
	pthread_once(&init_once, init_run);
}

__attribute__((constructor)) static void init_constructor(void)
{
	xs_init_once();
}
