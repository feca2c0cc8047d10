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
/* One spin in this many reads the clock at each look and measures what
 * a look costs; the others count looks. */
#define SPIN_TIME_EVERY 16u
/* The look cost is averaged over about this many timed spins. */
#define SPIN_LOOK_WEIGHT 4u

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

/* Monotonic us from the coarse clock: the last tick's time, read from
 * the vDSO whatever the clocksource (never a system call). */
static uint64_t spin_coarse_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Monotonic ns (a system call where the clocksource has no vDSO). */
static uint64_t spin_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t spin_cap_us(void)
{
	const struct xs_config *cfg = xs_core_cfg();

	return cfg ? cfg->spin_us : 0;
}

static void spin_learn(struct xs_spin *sp, uint64_t waited_us, bool news)
{
	uint32_t cap = spin_cap_us(), w, nw;

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

/* A timed spin of @r measured its looks until @now_ns: fold their cost,
 * without that of its clock reads, in (an average over about the last
 * SPIN_LOOK_WEIGHT timed spins). */
static void spin_measured(struct xs_spin_run *r, uint64_t now_ns)
{
	uint64_t ns, raw, old, clocks = (uint64_t)r->reads * r->clock_ns;

	if (!r->looks || now_ns < r->start_ns)
		return;
	/* never under a quarter of the cost with the clock reads: a read
	 * that cost more than the others once would otherwise leave the
	 * looks almost free, and an untimed spin that many times longer
	 * than its window (it stays within 4 windows this way) */
	raw = (now_ns - r->start_ns) / r->looks;
	ns = now_ns - r->start_ns > clocks
		     ? (now_ns - r->start_ns - clocks) / r->looks
		     : 0;
	if (ns < raw / 4)
		ns = raw / 4;
	if (ns > UINT32_MAX)
		ns = UINT32_MAX;
	old = atomic_load_explicit(&r->sp->look_ns, memory_order_relaxed);
	if (old)
		ns = (old * (SPIN_LOOK_WEIGHT - 1) + ns) / SPIN_LOOK_WEIGHT;
	atomic_store_explicit(&r->sp->look_ns, (uint32_t)(ns ? ns : 1),
			      memory_order_relaxed);
}

uint64_t xs_spin_begin(struct xs_spin_run *r, struct xs_spin *sp,
		       uint64_t limit_us)
{
	uint32_t cap = spin_cap_us(), w, look_ns, n;
	uint64_t now;

	*r = (struct xs_spin_run){ 0 };
	if (!cap)
		return 0; /* no spin, nothing to learn */
	r->sp = sp;
	w = atomic_load_explicit(&sp->window_us, memory_order_relaxed);
	if (w > cap)
		w = cap;
	if (w > limit_us)
		w = (uint32_t)limit_us;
	if (spin_crowd_check(spin_coarse_us())) {
		r->sp = NULL; /* no spin, and nothing learnt meanwhile */
		return 0;
	}
	if (!w) {
		/* no spin this time; the wait's length still sizes the
		 * next window (a first wait grows it from 0) */
		r->start_us = xs_now_us();
		r->stopped = true;
		return 0;
	}
	r->window_us = w;
	look_ns = atomic_load_explicit(&sp->look_ns, memory_order_relaxed);
	n = atomic_fetch_add_explicit(&sp->spins, 1, memory_order_relaxed);
	r->timed = !look_ns || n % SPIN_TIME_EVERY == 0 ||
		   limit_us < 2 * (uint64_t)w;
	if (r->timed) {
		/* two reads back to back: what one costs, taken off the
		 * looks' measure */
		r->start_ns = spin_now_ns();
		now = spin_now_ns();
		r->clock_ns = (uint32_t)(now - r->start_ns);
		r->start_ns = now;
	} else {
		uint64_t looks = (uint64_t)w * 1000u / look_ns;

		r->budget = looks < 1		 ? 1
			    : looks > UINT32_MAX ? UINT32_MAX
						 : (uint32_t)looks;
	}
	return w;
}

bool xs_spin_more(struct xs_spin_run *r)
{
	if (!r->window_us || r->stopped)
		return false;
	r->looks++;
	if (!r->timed)
		return r->looks <= r->budget;
	r->reads++;
	return spin_now_ns() - r->start_ns < r->window_us * 1000u;
}

uint64_t xs_spin_stop(struct xs_spin_run *r)
{
	uint64_t now, spent;

	if (!r->window_us || r->stopped)
		return 0;
	if (r->timed) {
		uint64_t now_ns = spin_now_ns();

		spent = (now_ns - r->start_ns) / 1000u;
		now = now_ns / 1000u; /* xs_now_us()'s clock */
		spin_measured(r, now_ns);
	} else {
		spent = (uint64_t)r->looks *
			atomic_load_explicit(&r->sp->look_ns,
					     memory_order_relaxed) /
			1000u;
		now = xs_now_us();
	}
	r->start_us = now > spent ? now - spent : 0;
	r->stopped = true;
	return spent;
}

void xs_spin_end(struct xs_spin_run *r, bool news)
{
	uint64_t now;

	if (!r->sp)
		return;
	if (!r->stopped) { /* news during the spin: the window holds */
		if (r->timed)
			spin_measured(r, spin_now_ns());
		return;
	}
	now = xs_now_us();
	spin_learn(r->sp, now > r->start_us ? now - r->start_us : 0, news);
}

void xs_spin_timed_out(struct xs_spin *sp)
{
	spin_learn(sp, 0, false);
}
