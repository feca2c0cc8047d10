/*
 * tests/unit/xt_main.c - runs every registered test in its own process
 * with a timeout (XT_TIMEOUT seconds, default 30) and prints TAP:
 *   ok N - binary: test          /  not ok N - binary: test (why)
 * Usage: test_x [NAME...]  runs only the named tests.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xt.h"

#define XT_MAX 512

static struct {
	const char *name;
	xt_fn fn;
} xt_tests[XT_MAX];
static int xt_nr;

void xt_register(const char *name, xt_fn fn)
{
	if (xt_nr == XT_MAX) {
		fprintf(stderr, "xt: more than %d tests\n", XT_MAX);
		exit(2);
	}
	xt_tests[xt_nr].name = name;
	xt_tests[xt_nr].fn = fn;
	xt_nr++;
}

void xt_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "# %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

static int xt_selected(const char *name, int argc, char **argv)
{
	int i;

	if (argc < 2)
		return 1;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog =
		strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *env = getenv("XT_TIMEOUT");
	unsigned int timeout = env ? (unsigned int)atoi(env) : 30;
	int i, n = 0, failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < xt_nr; i++) {
		int status;
		pid_t pid;

		if (!xt_selected(xt_tests[i].name, argc, argv))
			continue;
		n++;
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			alarm(timeout);
			xt_tests[i].fn();
			_exit(0);
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %d - %s: %s\n", n, prog, xt_tests[i].name);
		} else {
			failed++;
			if (WIFSIGNALED(status))
				printf("not ok %d - %s: %s (%s%s)\n", n, prog,
				       xt_tests[i].name,
				       strsignal(WTERMSIG(status)),
				       WTERMSIG(status) == SIGALRM ? ", timeout"
								   : "");
			else
				printf("not ok %d - %s: %s\n", n, prog,
				       xt_tests[i].name);
		}
	}
	printf("1..%d\n", n);
	return failed ? 1 : 0;
}
