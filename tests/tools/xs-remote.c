/*
 * xs-remote - run a command through xs-agent (the Soft-RoCE test tier).
 *
 * In topology `two` the agent runs on the server guest (10.77.0.1); in
 * topology `one` and in host mode on the same machine, so tests can be
 * written once. The agent is found through $XS_AGENT (ADDR:PORT) and
 * $XS_AGENT_TOKEN, which tests/softroce/run exports.
 *
 *   xs-remote [--timeout S] [--] CMD [ARGS...]
 *         run CMD, relay its stdout/stderr, exit with its status (124 when
 *         the timeout ran out)
 *   xs-remote --bg NAME [--] CMD [ARGS...]
 *         start CMD in the background; prints "PID LOGFILE" (stdout and
 *         stderr go to $XS_RUN_DIR/remote/NAME.log)
 *   xs-remote --kill NAME [--signal SIG]
 *         stop it (SIGTERM by default, SIGKILL after 5 s); exits with its
 *         status
 *   xs-remote --wait NAME [--timeout S]
 *         wait for it to exit; exits with its status
 *   xs-remote --list      list background commands and their state
 *   xs-remote --ping      check that the agent answers
 *
 * CMD's stdin is /dev/null; the caller's XSOCK_* variables are passed on.
 * The agent may still be starting when the command under test begins: the
 * connection is retried for $XS_AGENT_WAIT seconds (default 60).
 * Exit status 125: the agent could not be reached; 2: bad usage.
 *
 * The protocol (tests/softroce/xs-agent): frames of a kind byte, a 32-bit
 * big-endian length and that many bytes. The request is T (token), P (op),
 * S (signal), N (name), L (timeout), A (one per argument), V (one per
 * XSOCK_* variable, NAME=VALUE), then G; the answer is O (stdout) and E
 * (stderr) frames, then X (the exit status, in decimal). A C program, as
 * tests call it hundreds of times and a Python one starts in 0.3 s under
 * TCG.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct buf {
	char *p;
	size_t len, cap;
};

static void usage_error(const char *fmt, const char *arg)
{
	fputs("xs-remote: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (see xs-remote --help)\n", stderr);
	exit(2);
}

static void buf_put(struct buf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			perror("xs-remote");
			exit(125);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void frame(struct buf *b, char kind, const char *data)
{
	size_t n = strlen(data);
	uint32_t be = htonl((uint32_t)n);

	buf_put(b, &kind, 1);
	buf_put(b, &be, sizeof(be));
	buf_put(b, data, n);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Connect to HOST:PORT, retrying while the agent starts for @wait_s. */
static int agent_connect(const char *agent, double wait_s)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	const char *colon = strrchr(agent, ':');
	double deadline = now_s() + wait_s;
	char host[256];
	int fd, rc;

	if (!colon || (size_t)(colon - agent) >= sizeof(host)) {
		fprintf(stderr, "xs-remote: XS_AGENT=%s is not ADDR:PORT\n",
			agent);
		exit(125);
	}
	memcpy(host, agent, (size_t)(colon - agent));
	host[colon - agent] = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		fprintf(stderr,
			"xs-remote: cannot talk to xs-agent at %s: %s\n", agent,
			gai_strerror(rc));
		exit(125);
	}
	for (;;) {
		for (a = ai; a; a = a->ai_next) {
			struct timeval tmo = { 10, 0 }; /* each attempt's */

			fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
				    a->ai_protocol);
			if (fd < 0)
				continue;
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo,
				   sizeof(tmo));
			if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
				freeaddrinfo(ai);
				return fd;
			}
			close(fd);
		}
		if (now_s() >= deadline) {
			fprintf(stderr,
				"xs-remote: cannot talk to xs-agent at %s: "
				"%s\n",
				agent, strerror(errno));
			exit(125);
		}
		usleep(100000);
	}
}

static bool read_full(int fd, void *p, size_t n)
{
	ssize_t r;

	while (n) {
		r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return true;
}

static void write_full(int fd, const void *p, size_t n)
{
	ssize_t r;

	while (n) {
		r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return; /* our reader has gone: keep draining the agent */
		p = (const char *)p + r;
		n -= (size_t)r;
	}
}

int main(int argc, char **argv)
{
	const char *op = "run", *name = NULL, *timeout = NULL, *agent;
	const char *token = getenv("XS_AGENT_TOKEN");
	const char *wait = getenv("XS_AGENT_WAIT");
	char sig[32] = "TERM", kind, *data = NULL, *more;
	struct buf req = { 0 };
	int i = 1, fd, nargs;
	uint32_t be;
	size_t n;

	signal(SIGPIPE, SIG_IGN);
	while (i < argc && strncmp(argv[i], "--", 2) == 0) {
		const char *opt = argv[i++], *val;

		if (strcmp(opt, "--") == 0)
			break;
		if (strcmp(opt, "--help") == 0) {
			printf("usage: xs-remote [--timeout S] [--] CMD "
			       "[ARGS...]\n"
			       "       xs-remote --bg NAME [--] CMD [ARGS...]\n"
			       "       xs-remote --kill NAME [--signal SIG]\n"
			       "       xs-remote --wait NAME [--timeout S]\n"
			       "       xs-remote --list | --ping\n"
			       "(tests/tools/xs-remote.c says what each "
			       "does)\n");
			return 0;
		}
		if (strcmp(opt, "--list") == 0 || strcmp(opt, "--ping") == 0) {
			op = opt + 2;
			continue;
		}
		if (i >= argc)
			usage_error("%s needs a value", opt);
		val = argv[i++];
		if (strcmp(opt, "--bg") == 0 || strcmp(opt, "--kill") == 0 ||
		    strcmp(opt, "--wait") == 0) {
			op = opt + 2;
			name = val;
		} else if (strcmp(opt, "--timeout") == 0) {
			char *end;

			strtod(val, &end);
			if (end == val || *end)
				usage_error("--timeout needs seconds, not '%s'",
					    val);
			timeout = val;
		} else if (strcmp(opt, "--signal") == 0) {
			size_t k;

			if (strncasecmp(val, "SIG", 3) == 0)
				val += 3;
			for (k = 0; k < sizeof(sig) - 1 && val[k]; k++)
				sig[k] = (char)(val[k] >= 'a' && val[k] <= 'z'
							? val[k] - 'a' + 'A'
							: val[k]);
			sig[k] = '\0';
		} else {
			usage_error("unknown option %s", opt);
		}
	}
	nargs = argc - i;
	if ((!strcmp(op, "run") || !strcmp(op, "bg")) && nargs == 0)
		usage_error("no command given%s", "");
	if (strcmp(op, "run") && strcmp(op, "bg") && nargs)
		usage_error("--%s takes no command", op);
	agent = getenv("XS_AGENT");
	if (!agent || !*agent) {
		fputs("xs-remote: XS_AGENT is not set (run under "
		      "tests/softroce/run)\n",
		      stderr);
		return 125;
	}

	frame(&req, 'T', token ? token : "");
	frame(&req, 'P', op);
	frame(&req, 'S', sig);
	if (name)
		frame(&req, 'N', name);
	if (timeout)
		frame(&req, 'L', timeout);
	for (; i < argc; i++)
		frame(&req, 'A', argv[i]);
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "XSOCK_", 6) == 0)
			frame(&req, 'V', *e);
	frame(&req, 'G', "");

	fd = agent_connect(agent, wait ? atof(wait) : 60.0);
	for (n = 0; n < req.len;) {
		ssize_t r = send(fd, req.p + n, req.len - n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr,
				"xs-remote: cannot talk to xs-agent at %s: "
				"%s\n",
				agent, strerror(errno));
			return 125;
		}
		n += (size_t)r;
	}
	for (;;) {
		if (!read_full(fd, &kind, 1) || !read_full(fd, &be, 4)) {
			fprintf(stderr,
				"xs-remote: agent %s closed the connection\n",
				agent);
			return 125;
		}
		n = ntohl(be);
		more = realloc(data, n + 1);
		if (!more || !read_full(fd, more, n)) {
			fprintf(stderr,
				"xs-remote: agent %s closed the connection\n",
				agent);
			return 125;
		}
		data = more;
		data[n] = '\0';
		if (kind == 'X')
			return atoi(data);
		write_full(kind == 'O' ? 1 : 2, data, n);
	}
}
