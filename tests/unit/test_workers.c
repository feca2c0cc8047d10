/*
 * tests/unit/test_workers.c - the worker pools of core/thread.c: jobs run
 * in the order they came, at most w->max at once; a worker that finds no
 * job waits w->linger_ms for one and is reused, then ends; a forked
 * child's pools start empty and start workers of their own; a job whose
 * worker cannot start is the caller's again, and none is queued behind a
 * start that may fail (pthread_create() below stands in for libc's).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../core/core_int.h"
#include "xt.h"

#define JOBS 8

struct rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;	 /* jobs finished */
	int order[JOBS]; /* job index, in the order they ran */
	pid_t tid[JOBS]; /* the thread each ran on */
	int now, most;	 /* jobs running now, most at once */
	bool hold;	 /* jobs wait while set */
};

static struct rec rec = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

struct tjob {
	struct xs_job job;
	int index;
};

static struct tjob jobs[JOBS];

static void *submit_held(void *arg);

/* pthread_create() fails its next create_fail calls with EAGAIN; while
 * create_hold is set, the first call waits for it to clear first */
static int create_fail;
static bool create_hold, create_held;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t create_cond = PTHREAD_COND_INITIALIZER;

int pthread_create(pthread_t *t, const pthread_attr_t *attr,
		   void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *,
			   void *(*)(void *), void *);
	bool fail;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	if (fn == submit_held) /* the test's own thread */
		return real(t, attr, fn, arg);
	pthread_mutex_lock(&create_lock);
	fail = create_fail > 0;
	if (fail)
		create_fail--;
	if (create_hold && !create_held) { /* the first call only */
		create_held = true;
		pthread_cond_broadcast(&create_cond);
		while (create_hold)
			pthread_cond_wait(&create_cond, &create_lock);
	}
	pthread_mutex_unlock(&create_lock);
	return fail ? EAGAIN : real(t, attr, fn, arg);
}

static void tjob_run(struct xs_job *job)
{
	struct tjob *t = xs_job_owner(job, struct tjob, job);

	pthread_mutex_lock(&rec.lock);
	if (++rec.now > rec.most)
		rec.most = rec.now;
	while (rec.hold)
		pthread_cond_wait(&rec.cond, &rec.lock);
	rec.order[rec.done] = t->index;
	rec.tid[rec.done] = gettid();
	rec.done++;
	rec.now--;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
}

static void submit(struct xs_workers *w, int i)
{
	jobs[i].index = i;
	jobs[i].job.run = tjob_run;
	XT_ASSERT_EQ(xs_workers_run(w, &jobs[i].job), 0);
}

/* Wait (5 s at most) until @n jobs are done. */
static void wait_done(int n)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&rec.lock);
	while (rec.done < n &&
	       pthread_cond_timedwait(&rec.cond, &rec.lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&rec.lock);
	XT_ASSERT_EQ(rec.done, n);
}

/* w's counts, read under its lock */
static unsigned int running(struct xs_workers *w)
{
	unsigned int n;

	pthread_mutex_lock(&w->lock);
	n = w->running;
	pthread_mutex_unlock(&w->lock);
	return n;
}

static unsigned int idle(struct xs_workers *w)
{
	unsigned int n;

	pthread_mutex_lock(&w->lock);
	n = w->idle;
	pthread_mutex_unlock(&w->lock);
	return n;
}

XT_TEST(jobs_run_in_order_on_a_worker_that_lingers_then_ends)
{
	static struct xs_workers w = XS_WORKERS_INIT(1, 300);

	rec.hold = true;
	for (int i = 0; i < 5; i++)
		submit(&w, i);
	XT_ASSERT_EQ(running(&w), 1); /* the others queued behind it */
	pthread_mutex_lock(&rec.lock);
	rec.hold = false;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
	wait_done(5);
	for (int i = 0; i < 5; i++) {
		XT_ASSERT_EQ(rec.order[i], i);
		XT_ASSERT_EQ(rec.tid[i], rec.tid[0]);
	}
	XT_ASSERT(rec.tid[0] != gettid());
	XT_ASSERT_EQ(rec.most, 1);
	/* idle now, within its linger: the next job is its own */
	for (int i = 0; i < 50 && idle(&w) != 1; i++)
		usleep(1000);
	XT_ASSERT_EQ(idle(&w), 1);
	submit(&w, 5);
	wait_done(6);
	XT_ASSERT_EQ(rec.tid[5], rec.tid[0]);
	/* no job for longer than the linger: it ends */
	usleep(600 * 1000);
	XT_ASSERT_EQ(running(&w), 0);
	XT_ASSERT_EQ(idle(&w), 0);
	submit(&w, 6);
	wait_done(7);
	XT_ASSERT(rec.tid[6] != rec.tid[0]);
}

XT_TEST(at_most_max_jobs_run_at_once_and_every_one_runs)
{
	static struct xs_workers w = XS_WORKERS_INIT(3, 1000);

	rec.hold = true;
	for (int i = 0; i < JOBS; i++)
		submit(&w, i);
	for (int i = 0; i < 500 && rec.now < 3; i++)
		usleep(1000);
	pthread_mutex_lock(&rec.lock);
	XT_ASSERT_EQ(rec.now, 3);
	rec.hold = false;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
	wait_done(JOBS);
	XT_ASSERT_EQ(rec.most, 3);
	XT_ASSERT_EQ(running(&w), 3);
	pthread_mutex_lock(&w.lock);
	XT_ASSERT_EQ(w.queued, 0);
	XT_ASSERT(w.head == NULL && w.tail == NULL);
	pthread_mutex_unlock(&w.lock);
}

XT_TEST(a_forked_child_starts_with_its_pools_empty)
{
	static struct xs_workers w = XS_WORKERS_INIT(1, 1000);
	int status = -1;
	pid_t pid;

	rec.hold = true;
	submit(&w, 0); /* runs, held */
	submit(&w, 1); /* queued behind it */
	for (int i = 0; i < 500 && rec.now < 1; i++)
		usleep(1000);
	XT_ASSERT_EQ(rec.now, 1);
	pid = fork();
	XT_ASSERT(pid >= 0);
	if (pid == 0) {
		bool ok = w.running == 0 && w.idle == 0 && w.queued == 0 &&
			  w.head == NULL;

		/* the parent's jobs stay the parent's; the child's own run on
		 * a worker of its own */
		rec.hold = false;
		rec.done = 0;
		rec.now = 0;
		pthread_mutex_init(&rec.lock, NULL);
		pthread_cond_init(&rec.cond, NULL);
		jobs[2].index = 2;
		jobs[2].job.run = tjob_run;
		ok = ok && xs_workers_run(&w, &jobs[2].job) == 0;
		for (int i = 0; ok && i < 5000 && rec.done < 1; i++)
			usleep(1000);
		_exit(ok && rec.done == 1 && rec.order[0] == 2 ? 0 : 1);
	}
	XT_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	XT_ASSERT(WIFEXITED(status));
	XT_ASSERT_EQ(WEXITSTATUS(status), 0);
	pthread_mutex_lock(&rec.lock);
	rec.hold = false;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
	wait_done(2);
	XT_ASSERT_EQ(rec.order[0], 0);
	XT_ASSERT_EQ(rec.order[1], 1);
}

static struct xs_workers held_pool = XS_WORKERS_INIT(1, 1000);
static int held_rc = 1;

static void *submit_held(void *arg)
{
	(void)arg;
	jobs[0].index = 0;
	jobs[0].job.run = tjob_run;
	held_rc = xs_workers_run(&held_pool, &jobs[0].job);
	return NULL;
}

XT_TEST(a_job_whose_worker_cannot_start_is_the_callers_and_none_waits_on_it)
{
	static struct xs_workers w = XS_WORKERS_INIT(4, 1000);
	pthread_t t;

	/* no worker starts: the caller keeps the job, nothing is queued */
	create_fail = 1;
	jobs[0].index = 0;
	jobs[0].job.run = tjob_run;
	XT_ASSERT_EQ(xs_workers_run(&w, &jobs[0].job), -EAGAIN);
	XT_ASSERT_EQ(running(&w), 0);
	pthread_mutex_lock(&w.lock);
	XT_ASSERT_EQ(w.queued, 0);
	XT_ASSERT(w.head == NULL);
	pthread_mutex_unlock(&w.lock);
	XT_ASSERT_EQ(rec.done, 0);

	/* the pool's one slot is a start that then fails: the next job is
	 * not queued behind it (nothing would run it) but gets a worker */
	create_hold = true;
	create_fail = 1;
	XT_ASSERT_EQ(pthread_create(&t, NULL, submit_held, NULL), 0);
	pthread_mutex_lock(&create_lock);
	while (!create_held)
		pthread_cond_wait(&create_cond, &create_lock);
	pthread_mutex_unlock(&create_lock);
	submit(&held_pool, 1);
	wait_done(1);
	XT_ASSERT_EQ(rec.order[0], 1);
	pthread_mutex_lock(&held_pool.lock);
	XT_ASSERT_EQ(held_pool.queued, 0);
	XT_ASSERT_EQ(held_pool.running, 2); /* past max while one starts */
	pthread_mutex_unlock(&held_pool.lock);
	pthread_mutex_lock(&create_lock);
	create_hold = false;
	pthread_cond_broadcast(&create_cond);
	pthread_mutex_unlock(&create_lock);
	XT_ASSERT_EQ(pthread_join(t, NULL), 0);
	XT_ASSERT_EQ(held_rc, -EAGAIN);
	XT_ASSERT_EQ(running(&held_pool), 1);
	pthread_mutex_lock(&held_pool.lock);
	XT_ASSERT_EQ(held_pool.starting, 0);
	XT_ASSERT(held_pool.head == NULL);
	pthread_mutex_unlock(&held_pool.lock);
	usleep(100 * 1000);
	XT_ASSERT_EQ(rec.done, 1); /* job 0 never ran */
}
