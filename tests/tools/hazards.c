/*
 * tests/tools/hazards.c - call patterns that once broke the library.
 *
 *   hazards sighandler          socket()/close() in a SIGALRM handler firing
 *                               every 100 us while main does the same
 *                               (libc's versions are async-signal-safe)
 *   hazards forkrace N          fork N times while threads connect and
 *                               accept; each child connects and accepts once
 *                               (a child stuck in a lock is killed by its
 *                               alarm and counted as hung)
 *   hazards stderr-reuse FILE   close fd 2, open FILE (it gets fd 2), then use
 *                               sockets: nothing but our lines may reach FILE
 * Prints one result line; exit 0 when the pattern completed.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handler_runs;

static void on_alarm(int sig)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)sig;
	if (fd >= 0)
		close(fd);
	handler_runs++;
}

static int sighandler(void)
{
	struct sigaction sa = { .sa_handler = on_alarm,
				.sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	long i;

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (i = 0; i < 100000; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0)
			close(fd);
	}
	it = (struct itimerval){ { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
	printf("sighandler done handler_runs=%s\n",
	       handler_runs > 0 ? "some" : "none");
	return 0;
}

static struct sockaddr_in listen_addr;
static int listen_fd;

static void *connector(void *arg)
{
	(void)arg;
	for (;;) {
		int c = socket(AF_INET, SOCK_STREAM, 0);

		connect(c, (struct sockaddr *)&listen_addr,
			sizeof(listen_addr));
		close(c);
	}
	return NULL;
}

static void *acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		int s = accept(listen_fd, NULL, NULL);

		if (s >= 0)
			close(s);
		else
			usleep(100);
	}
	return NULL;
}

static int forkrace(int n)
{
	socklen_t len = sizeof(listen_addr);
	int i, ok = 0, hung = 0, other = 0;
	pthread_t t;

	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	listen_addr.sin_family = AF_INET;
	listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(listen_fd, (struct sockaddr *)&listen_addr, len) ||
	    listen(listen_fd, 4096) ||
	    getsockname(listen_fd, (struct sockaddr *)&listen_addr, &len))
		return 1;
	fcntl(listen_fd, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 2; i++) {
		pthread_create(&t, NULL, connector, NULL);
		pthread_create(&t, NULL, acceptor, NULL);
	}
	for (i = 0; i < n; i++) {
		int st;
		pid_t p = fork();

		if (p == 0) {
			int c = socket(AF_INET, SOCK_STREAM, 0);

			alarm(5);
			connect(c, (struct sockaddr *)&listen_addr,
				sizeof(listen_addr));
			close(c);
			_exit(0);
		}
		waitpid(p, &st, 0);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
			hung++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
		else
			other++;
	}
	printf("forkrace forks=%d ok=%d hung=%d other=%d\n", n, ok, hung,
	       other);
	fflush(stdout);
	_exit(0);
}

static int stderr_reuse(const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int f, l, c;

	close(STDERR_FILENO);
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (f != STDERR_FILENO)
		return 1;
	dprintf(f, "APPDATA begin\n");
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&a, len) || listen(l, 8) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		return 1;
	c = socket(AF_INET, SOCK_STREAM, 0);
	connect(c, (struct sockaddr *)&a, len);
	close(c);
	close(l);
	dprintf(f, "APPDATA end\n");
	printf("stderr-reuse done\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "sighandler") == 0)
		return sighandler();
	if (argc == 3 && strcmp(argv[1], "forkrace") == 0)
		return forkrace(atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "stderr-reuse") == 0)
		return stderr_reuse(argv[2]);
	fprintf(stderr, "usage: see the top of tests/tools/hazards.c\n");
	return 2;
}
