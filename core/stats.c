/*
 * core/stats.c - the XSOCK_STATS exit summary.
 *
 * Prints the process's counters (core/stats.h, published by
 * core/publish.c) at exit: what xsock-stat shows of a live process, on one
 * screen. Context: atexit; writes with the real write(2).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

/* The published file mirrors these enums (core/xs_shm.h). */
_Static_assert(XS_KIND__COUNT == 4 && (int)XS_KIND_RDMA == XS_SHM_KIND_RDMA &&
		       (int)XS_KIND_LISTEN == XS_SHM_KIND_LISTEN &&
		       (int)XS_KIND_TCP == XS_SHM_KIND_TCP,
	       "enum xs_fd_kind is enum xs_shm_kind");
_Static_assert(XS_FB__COUNT == XS_SHM_NR_REASONS,
	       "every fallback reason has a published name");

static const char *const stats_kind_names[XS_KIND__COUNT] = {
	[XS_KIND_PENDING] = "undecided", /* closed before connect/listen */
	[XS_KIND_TCP] = "tcp",
	[XS_KIND_LISTEN] = "listen",
	[XS_KIND_RDMA] = "rdma",
};

void xs_stats_registered(long delta)
{
	struct xs_shm_process *p = __atomic_load_n(&xs_statp, __ATOMIC_ACQUIRE);
	uint64_t now, peak;

	now = __atomic_add_fetch(&p->mr_bytes, (uint64_t)delta,
				 __ATOMIC_RELAXED);
	peak = __atomic_load_n(&p->mr_bytes_peak, __ATOMIC_RELAXED);
	while (delta > 0 && now > peak &&
	       !__atomic_compare_exchange_n(&p->mr_bytes_peak, &peak, now, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

struct stats_buf {
	char text[3072];
	size_t off;
};

static void __attribute__((format(printf, 2, 3)))
stats_put(struct stats_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->off >= sizeof(b->text))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->text + b->off, sizeof(b->text) - b->off, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->off += (size_t)n;
	if (b->off > sizeof(b->text))
		b->off = sizeof(b->text);
}

void xs_stats_dump(void)
{
	const struct xs_config *cfg = xs_core_cfg();
	const struct xs_shm_process *p = xs_statp;
	struct xs_shm_counters sum;
	struct stats_buf b = { .off = 0 };
	int fd, i, saved = errno;

	if (!cfg || cfg->stats == XS_STATS_OFF || !xs_real.write)
		return;
	/* A socket whose last close another thread runs meanwhile would be
	 * in neither the live sockets nor the closed counters: read them
	 * while none runs (a few tries; xsock-cm may drop the last
	 * reference of a negotiated socket while the process exits). */
	for (i = 0; i < 5; i++) {
		unsigned int begun = xs_sock_teardowns_wait();

		sum = p->closed;
		xs_sock_live_sum(&sum);
		if (xs_sock_teardowns() == begun)
			break;
	}
	/* Processes that never had a stream socket (a shell, ls) stay quiet;
	 * a forked child that decided one it inherited speaks. */
	for (i = 0; i < XS_KIND__COUNT; i++)
		if (p->decided[i])
			break;
	if (p->sockets == 0 && i == XS_KIND__COUNT && !p->rdma_connects &&
	    !p->rdma_accepts)
		return;
	stats_put(&b, "xsock stats pid %d (%s): %llu stream sockets\n",
		  (int)getpid(), program_invocation_short_name,
		  (unsigned long long)p->sockets);
	for (i = 0; i < XS_KIND__COUNT; i++)
		stats_put(&b, "  %-10s %llu\n", stats_kind_names[i],
			  (unsigned long long)p->decided[i]);
	for (i = 1; i < XS_FB__COUNT; i++)
		stats_put(&b, "  fallback %-13s %llu\n", xs_fallback_name(i),
			  (unsigned long long)p->fallback[i]);
	stats_put(&b,
		  "  rdma connects %llu accepts %llu bytes sent %llu "
		  "received %llu\n",
		  (unsigned long long)p->rdma_connects,
		  (unsigned long long)p->rdma_accepts,
		  (unsigned long long)sum.bytes_sent,
		  (unsigned long long)sum.bytes_received);
	stats_put(&b,
		  "  messages inline %llu eager %llu arrived %llu "
		  "credit returns %llu\n",
		  (unsigned long long)sum.msgs_inline,
		  (unsigned long long)sum.msgs_eager,
		  (unsigned long long)sum.msgs_received,
		  (unsigned long long)sum.credit_msgs);
	stats_put(&b, "  rendezvous exposed %llu pulled %llu\n",
		  (unsigned long long)sum.rndv_sent,
		  (unsigned long long)sum.rndv_read);
	stats_put(&b, "  waits credit %llu pool %llu sleeps %llu\n",
		  (unsigned long long)sum.credit_stalls,
		  (unsigned long long)sum.pool_waits,
		  (unsigned long long)sum.sleeps);
	stats_put(&b, "  cq polls with work %llu empty %llu\n",
		  (unsigned long long)sum.cq_polls_work,
		  (unsigned long long)sum.cq_polls_empty);
	stats_put(&b, "  completion errors rnr %llu retry %llu other %llu\n",
		  (unsigned long long)sum.rnr_errors,
		  (unsigned long long)sum.retry_errors,
		  (unsigned long long)sum.wc_errors);
	stats_put(&b, "  registered bytes %llu peak %llu\n",
		  (unsigned long long)p->mr_bytes,
		  (unsigned long long)p->mr_bytes_peak);
	if (p->unpublished)
		stats_put(&b, "  sockets not published (no slot) %llu\n",
			  (unsigned long long)p->unpublished);
	if (cfg->stats == XS_STATS_FILE) {
		fd = open(cfg->stats_path,
			  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
				  O_NONBLOCK,
			  0600);
		if (fd < 0) {
			errno = saved;
			return;
		}
		(void)!xs_real.write(fd, b.text, b.off);
		xs_real.close(fd);
	} else if (xs_log_stderr_ok()) {
		/* never into a file or socket that took over fd 2 */
		(void)!xs_real.write(STDERR_FILENO, b.text, b.off);
	}
	errno = saved;
}
