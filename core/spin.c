/*
 * core/spin.c - how long a waiting call busy-polls before it sleeps.
 *
 * A wait that sleeps on a completion channel pays a wake-up that costs
 * more than a round trip on an RDMA fabric; a wait that polls the CQ in
 * userspace catches the reply as it lands. Spinning pays only when the
 * news comes soon, so each waiter (an epoll set, a stream's blocking
 * calls, poll/select) learns its window from its own recent waits, the
 * way KVM's halt polling does (virt/kvm/kvm_main.c, halt_poll_ns): news
 * within the window keeps it; news shortly after it (within the cap)
 * doubles it; a longer wait, or none, halves it. XSOCK_SPIN_US is the
 * cap. No spin at all while this machine has more runnable threads than
 * CPUs: a spinner would take the CPU its peer or the provider needs.
 * Context: any thread; lock-free.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_int.h"

/* The first window after a wait that slept through news which came
 * within the cap (KVM's halt_poll_ns_grow_start: 10 us). */
#define SPIN_START_US 10u
/* How often the runnable threads are counted (/proc/loadavg). */
#define SPIN_CROWD_CHECK_US 100000u

static _Atomic uint64_t spin_crowd_next; /* when to count again */
static _Atomic bool spin_crowded;	 /* the last count's verdict */
static _Atomic int spin_cpus;		 /* CPUs we may run on; 0: unknown */

static int spin_cpu_count(void)
{
	cpu_set_t set;
	int n = atomic_load_explicit(&spin_cpus, memory_order_relaxed);

	if (n)
		return n;
	n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	atomic_store_explicit(&spin_cpus, n, memory_order_relaxed);
	return n;
}

/*
 * Whether runnable threads outnumber the CPUs: the fourth field of
 * /proc/loadavg ("running/total") counts them this instant, the caller
 * among them. Counted at most every SPIN_CROWD_CHECK_US; a file that
 * cannot be read says no.
 */
static bool spin_crowd_check(uint64_t now)
{
	char buf[128], *p;
	ssize_t n;
	long running;
	bool crowded;
	int fd, saved;

	if (now < atomic_load_explicit(&spin_crowd_next, memory_order_relaxed))
		return atomic_load_explicit(&spin_crowded,
					    memory_order_relaxed);
	atomic_store_explicit(&spin_crowd_next, now + SPIN_CROWD_CHECK_US,
			      memory_order_relaxed);
	saved = errno;
	fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? xs_real.read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		xs_real.close(fd);
	errno = saved;
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "0.10 0.20 0.30 2/345 6789" */
	p = buf;
	for (int field = 0; field < 3 && p; field++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	running = p ? strtol(p, NULL, 10) : 0;
	crowded = running > spin_cpu_count();
	atomic_store_explicit(&spin_crowded, crowded, memory_order_relaxed);
	return crowded;
}

uint64_t xs_spin_window_us(struct xs_spin *sp, uint64_t now)
{
	const struct xs_config *cfg = xs_core_cfg();
	uint32_t cap = cfg ? cfg->spin_us : 0, w;

	if (!cap)
		return 0;
	w = atomic_load_explicit(&sp->window_us, memory_order_relaxed);
	if (w > cap)
		w = cap;
	if (!w || spin_crowd_check(now))
		return 0;
	return w;
}

void xs_spin_learn(struct xs_spin *sp, uint64_t waited_us, bool news)
{
	const struct xs_config *cfg = xs_core_cfg();
	uint32_t cap = cfg ? cfg->spin_us : 0, w, nw;

	if (!cap)
		return;
	w = atomic_load_explicit(&sp->window_us, memory_order_relaxed);
	if (news && waited_us <= w)
		return; /* caught by the spin */
	if (news && waited_us <= cap)
		nw = w * 2 > SPIN_START_US ? w * 2 : SPIN_START_US;
	else
		nw = w / 2;
	atomic_store_explicit(&sp->window_us, nw < cap ? nw : cap,
			      memory_order_relaxed);
}
