/*
 * core/sig.c - SA_RESTART for the blocking calls the library waits in.
 *
 * A blocking recv, send or connect of an RDMA socket sleeps in poll(2),
 * which a signal handler always interrupts (EINTR), SA_RESTART or not
 * (signal(7)). The kernel's own recv, send and connect restart after a
 * handler installed with SA_RESTART, unless the socket has a timeout
 * (SO_RCVTIMEO, SO_SNDTIMEO). Which signal interrupted the sleep is not
 * known here, so the answer is the kernel's whenever it can be told:
 * every signal this thread could have taken - not blocked, with a handler
 * - restarts, or none could have been restarted for certain.
 */
#include <signal.h>
#include <stdbool.h>

#include "core_int.h"

bool xs_sig_restarts(void)
{
	struct sigaction sa;
	sigset_t blocked;
	int err = errno, sig;
	bool restart = true;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		return false;
	for (sig = 1; sig < NSIG && restart; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP ||
		    sigismember(&blocked, sig) == 1)
			continue;
		if (sigaction(sig, NULL, &sa))
			continue; /* not a signal of this system (32, 33) */
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue; /* it ends or stops the process, or never
				     comes: it interrupted nothing we see */
		restart = sa.sa_flags & SA_RESTART;
	}
	errno = err;
	return restart;
}
