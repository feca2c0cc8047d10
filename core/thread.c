/*
 * core/thread.c - the library's own threads.
 *
 * Every thread of ours is detached and runs with all signals blocked: the
 * application's signals are the application's, and a handler must never
 * run on a thread that holds one of our locks. The mask is set around
 * pthread_create() (a new thread inherits its creator's), then restored.
 * Context: any thread.
 */
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

void xs_thread_nap(pthread_mutex_t *lock, pthread_cond_t *cond, bool *kicked,
		   int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(lock);
	if (!*kicked)
		pthread_cond_timedwait(cond, lock, &ts);
	*kicked = false;
	pthread_mutex_unlock(lock);
}
