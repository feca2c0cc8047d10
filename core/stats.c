/*
 * core/stats.c - counters and the XSOCK_STATS exit summary.
 *
 * Owns the process-wide counters (relaxed atomics, bumped on the control
 * path only) and their printing at exit. Context: any thread; the dump runs
 * from atexit and writes with the real write(2).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

struct xs_stats xs_stats;

static const char *const stats_kind_names[XS_KIND__COUNT] = {
	[XS_KIND_PENDING] = "undecided", /* closed before connect/listen */
	[XS_KIND_TCP] = "tcp",
	[XS_KIND_LISTEN] = "listen",
	[XS_KIND_RDMA] = "rdma",
};

void xs_stats_registered(long delta)
{
	unsigned long now, peak;

	now = atomic_fetch_add_explicit(&xs_stats.mr_bytes,
					(unsigned long)delta,
					memory_order_relaxed) +
	      (unsigned long)delta;
	peak = atomic_load_explicit(&xs_stats.mr_bytes_peak,
				    memory_order_relaxed);
	while (delta > 0 && now > peak &&
	       !atomic_compare_exchange_weak_explicit(
		       &xs_stats.mr_bytes_peak, &peak, now,
		       memory_order_relaxed, memory_order_relaxed))
		;
}

void xs_stats_dump(void)
{
	const struct xs_config *cfg = xs_core_cfg();
	char buf[2048];
	size_t off = 0;
	int fd, i, saved = errno;

	if (!cfg || cfg->stats == XS_STATS_OFF || !xs_real.write)
		return;
	/* Processes that never made a stream socket (a shell, ls) stay quiet. */
	if (atomic_load(&xs_stats.sockets) == 0)
		return;
	off += (size_t)snprintf(buf + off, sizeof(buf) - off,
				"xsock stats pid %d (%s): %lu stream sockets\n",
				(int)getpid(), program_invocation_short_name,
				atomic_load(&xs_stats.sockets));
	for (i = 0; i < XS_KIND__COUNT && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"  %-10s %lu\n", stats_kind_names[i],
					atomic_load(&xs_stats.decided[i]));
	for (i = 1; i < XS_FB__COUNT && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"  fallback %-12s %lu\n",
					xs_fallback_name(i),
					atomic_load(&xs_stats.fallback[i]));
	if (off < sizeof(buf))
		off += (size_t)snprintf(
			buf + off, sizeof(buf) - off,
			"  rdma connects %lu accepts %lu bytes sent %lu "
			"received %lu\n",
			atomic_load(&xs_stats.rdma_connects),
			atomic_load(&xs_stats.rdma_accepts),
			atomic_load(&xs_stats.rdma_bytes_sent),
			atomic_load(&xs_stats.rdma_bytes_received));
	if (off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"  rendezvous exposed %lu pulled %lu\n",
					atomic_load(&xs_stats.rndv_exposed),
					atomic_load(&xs_stats.rndv_pulled));
	if (off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off,
					"  registered bytes %lu peak %lu\n",
					atomic_load(&xs_stats.mr_bytes),
					atomic_load(&xs_stats.mr_bytes_peak));
	if (off > sizeof(buf))
		off = sizeof(buf);
	if (cfg->stats == XS_STATS_FILE) {
		fd = open(cfg->stats_path,
			  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
				  O_NONBLOCK,
			  0600);
		if (fd < 0) {
			errno = saved;
			return;
		}
		(void)!xs_real.write(fd, buf, off);
		xs_real.close(fd);
	} else if (xs_log_stderr_ok()) {
		/* never into a file or socket that took over fd 2 */
		(void)!xs_real.write(STDERR_FILENO, buf, off);
	}
	errno = saved;
}
