/*
 * tests/tools/stdiosrv.c - a forking server whose child speaks stdio on
 * the connection, the way classic C daemons do without exec.
 *
 *   stdiosrv ADDR PORT N HOW   serve N connections, then exit 0 once
 *                              every child has
 *
 * Each child prints "hello " to its stdout (no newline: held in the
 * buffer, line-buffered or not, as stdout is no terminal), then moves the connection onto fd 0 and 1 by HOW:
 * dup2 (dup2() onto 0 and 1), dup (close(), then dup(), which takes the
 * lowest fd) or fcntl (close(), then F_DUPFD from 0 and from 1). It then
 * answers every line that fgets() reads with printf("N: line"), and at
 * EOF prints "bye after N lines" and exits, so exit() flushes: over
 * kernel TCP the client reads "hello " first, then the answers and the "bye", as
 * glibc writes what its stdout buffer held to the fd as it is at the
 * flush. The parent prints "listening" once it listens, then "served N".
 * Errors: "stdiosrv: <call>: <strerror>" on stderr, exit 1; usage: 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *call)
{
	fprintf(stderr, "stdiosrv: %s: %s\n", call, strerror(errno));
	exit(1);
}

/* fd @c onto fd 0 and 1 by @how; @c is closed */
static void move_onto_std(int c, const char *how)
{
	if (strcmp(how, "dup2") == 0) {
		if (dup2(c, 0) != 0 || dup2(c, 1) != 1)
			die("dup2");
	} else if (strcmp(how, "dup") == 0) {
		close(0);
		if (dup(c) != 0)
			die("dup onto 0");
		close(1);
		if (dup(c) != 1)
			die("dup onto 1");
	} else {
		close(0);
		if (fcntl(c, F_DUPFD, 0) != 0)
			die("F_DUPFD onto 0");
		close(1);
		if (fcntl(c, F_DUPFD, 1) != 1)
			die("F_DUPFD onto 1");
	}
	close(c);
}

static int child(int c, const char *how)
{
	char line[512];
	int n = 0;

	printf("hello "); /* held: stdout is not a terminal */
	move_onto_std(c, how);
	while (fgets(line, sizeof(line), stdin))
		printf("%d: %s", ++n, line);
	printf("bye after %d lines\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int l, c, one = 1, n, served = 0;
	pid_t pid;

	if (argc != 5 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 ||
	    (strcmp(argv[4], "dup2") && strcmp(argv[4], "dup") &&
	     strcmp(argv[4], "fcntl"))) {
		fprintf(stderr, "usage: stdiosrv ADDR PORT N dup2|dup|fcntl\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[2]));
	n = atoi(argv[3]);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("bind");
	if (listen(l, 16) < 0)
		die("listen");
	printf("listening\n");
	fflush(stdout);
	while (served < n) {
		c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(l);
			return child(c, argv[4]);
		}
		close(c);
		served++;
	}
	while (wait(NULL) > 0)
		;
	printf("served %d\n", served);
	return 0;
}
