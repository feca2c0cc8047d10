/*
 * core/thread.c - the library's own threads.
 *
 * Every thread of ours is detached and runs with all signals blocked: the
 * application's signals are the application's, and a handler must never
 * run on a thread that holds one of our locks. The mask is set around
 * pthread_create() (a new thread inherits its creator's), then restored.
 * Context: any thread.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "core_int.h"

int xs_thread_start(void *(*fn)(void *), void *arg, size_t stack_bytes,
		    const char *name)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc;

	sigfillset(&all);
	rc = pthread_attr_init(&attr);
	if (rc)
		return -rc;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_attr_setstacksize(&attr, stack_bytes ? stack_bytes
							  : XS_THREAD_STACK);
	if (rc) {
		pthread_attr_destroy(&attr);
		return -rc;
	}
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -rc;
	if (name)
		pthread_setname_np(t, name);
	return 0;
}

/* CLOCK_REALTIME @ms from now, for pthread_cond_timedwait(). */
static void thread_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void xs_thread_nap(pthread_mutex_t *lock, pthread_cond_t *cond, bool *kicked,
		   int ms)
{
	struct timespec ts;

	thread_deadline(&ts, ms);
	pthread_mutex_lock(lock);
	if (!*kicked)
		pthread_cond_timedwait(cond, lock, &ts);
	*kicked = false;
	pthread_mutex_unlock(lock);
}

/*
 * fork(): every pool that ran a job is held across it, so its queue and
 * counts are whole in both processes; a child's pools start empty (the
 * parent's workers run the parent's queue, and no worker runs in the
 * child). workers_all is a leaf lock, taken before any pool's.
 */
#define WORKERS_POOLS 8
static pthread_mutex_t workers_all = PTHREAD_MUTEX_INITIALIZER;
static struct xs_workers *workers_pools[WORKERS_POOLS]; /* workers_all */
static unsigned int workers_nr;				/* workers_all */
static pthread_once_t workers_once = PTHREAD_ONCE_INIT;

static void workers_prepare(void)
{
	pthread_mutex_lock(&workers_all);
	for (unsigned int i = 0; i < workers_nr; i++)
		pthread_mutex_lock(&workers_pools[i]->lock);
}

static void workers_parent(void)
{
	for (unsigned int i = workers_nr; i-- > 0;)
		pthread_mutex_unlock(&workers_pools[i]->lock);
	pthread_mutex_unlock(&workers_all);
}

static void workers_child(void)
{
	for (unsigned int i = workers_nr; i-- > 0;) {
		struct xs_workers *w = workers_pools[i];

		w->head = w->tail = NULL;
		w->queued = w->running = w->starting = w->idle = 0;
		pthread_cond_init(&w->more, NULL);
		pthread_mutex_unlock(&w->lock);
	}
	pthread_mutex_unlock(&workers_all);
}

static void workers_atfork(void)
{
	(void)pthread_atfork(workers_prepare, workers_parent, workers_child);
}

/* @w among the pools held across fork(), from its first job on. */
static void workers_register(struct xs_workers *w)
{
	pthread_once(&workers_once, workers_atfork);
	pthread_mutex_lock(&workers_all);
	if (!w->registered && workers_nr < WORKERS_POOLS) {
		workers_pools[workers_nr++] = w;
		w->registered = true;
	}
	pthread_mutex_unlock(&workers_all);
}

/*
 * A worker: runs the job it was started for, then queued ones (each job
 * raises the reentrancy depth where it calls the library, XS_INSIDE());
 * ends once none came for w->linger_ms.
 */
static void *workers_main(void *arg)
{
	struct xs_job *job = arg;
	struct xs_workers *w = job->pool;
	struct timespec ts;

	for (;;) {
		job->run(job);
		pthread_mutex_lock(&w->lock);
		if (!w->head) {
			thread_deadline(&ts, w->linger_ms);
			w->idle++;
			while (!w->head &&
			       pthread_cond_timedwait(&w->more, &w->lock,
						      &ts) != ETIMEDOUT)
				;
			w->idle--;
			if (!w->head)
				break;
		}
		job = w->head;
		w->head = job->next;
		if (!w->head)
			w->tail = NULL;
		w->queued--;
		pthread_mutex_unlock(&w->lock);
	}
	w->running--;
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int xs_workers_run(struct xs_workers *w, struct xs_job *job)
{
	int rc;

	if (!atomic_load_explicit(&w->registered, memory_order_acquire))
		workers_register(w);
	job->pool = w;
	job->next = NULL;
	pthread_mutex_lock(&w->lock);
	/* queued only where a worker that runs will take it: an idle one,
	 * or (all max busy, one at least started) the first that comes free;
	 * a worker leaves only with the queue empty */
	if (w->queued < w->idle ||
	    (w->running >= w->max && w->running > w->starting)) {
		if (w->tail)
			w->tail->next = job;
		else
			w->head = job;
		w->tail = job;
		w->queued++;
		if (w->idle)
			pthread_cond_signal(&w->more);
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	/* else a new worker, with @job as its first (past max only while
	 * every other one is still starting): a start that fails leaves
	 * nothing queued, and the job is the caller's again */
	w->running++;
	w->starting++;
	pthread_mutex_unlock(&w->lock);
	rc = xs_thread_start(workers_main, job, 0, NULL);
	pthread_mutex_lock(&w->lock);
	w->starting--;
	if (rc)
		w->running--;
	pthread_mutex_unlock(&w->lock);
	return rc;
}
