/*
 * core/helper.c - the xsock-cm helper process: probes, and the probe
 *                 listeners of listening ports.
 *
 * librdmacm opens a device's verbs context in whichever process first
 * resolves an address on it or takes a connection request, and keeps it
 * for the life of the process; a forked child inherits it, but the kernel
 * refuses the child that context's write() commands (ib_safe_file_access:
 * EACCES), so a child could never post on a QP made there. Probes happen
 * in the processes that fork the most - a listener before its workers, a
 * client before the child that uses the connection - so they run in a
 * helper instead: a process of its own (reparented to init, its stdio on
 * /dev/null, every other inherited fd closed, signals blocked), made the
 * first time one is needed, before this process opens any context. The
 * processes of the family (forks inherit the control socket) ask it over
 * a SOCK_SEQPACKET socket; each request carries a fresh reply socket
 * (SCM_RIGHTS), so that replies go to the process that asked. Contexts
 * then open only in the helper and in the process that does a
 * connection's I/O (its QP, core/neg.c).
 *
 * The helper answers probes on every listening port the family asked for,
 * and asks peers' listeners on the family's behalf (one thread per probe).
 * It exits when no process of the family holds the control socket any
 * more (exec closes it: a new program image makes its own helper).
 *
 * Context: any thread; helper_lock serialises the start (a leaf lock).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_int.h"

#define HELPER_LISTENERS 64

enum helper_op {
	HELPER_PROBE = 1,
	HELPER_LISTEN,
	HELPER_UNLISTEN,
};

struct helper_req {
	int op;
	int timeout_ms;
	int afonly;
	uint16_t tcp_port;
	uint64_t ino; /* LISTEN: the listening socket's inode */
	struct sockaddr_storage addr;
};

static pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
static int helper_fd = -1; /* our end of the control socket */

/* ------------------------------------------------------ the helper */

struct helper_listen {
	struct sockaddr_storage addr; /* family 0: free */
	struct xs_listener *l;
	uint64_t ino;	  /* the kernel listener it speaks for */
	uint64_t next_us; /* when to look again that it still listens */
};

/*
 * A listener is answered for while its kernel listener exists - by its
 * inode in /proc/net/tcp{,6}, state LISTEN - in whichever process of the
 * family holds it; looked at once a second at most. Then a program that
 * takes the port later, without xsock, never gets a client's hello.
 */
#define HELPER_ALIVE_US 1000000u

static bool helper_still_listens(uint64_t ino)
{
	static const char *const files[] = { "/proc/net/tcp",
					     "/proc/net/tcp6" };
	char line[512];
	unsigned long long inode;
	unsigned int st;
	size_t i;
	FILE *f;

	for (i = 0; i < 2; i++) {
		f = fopen(files[i], "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line,
				   "%*s %*s %*s %x %*s %*s %*s %*s %*s %llu",
				   &st, &inode) == 2 &&
			    st == 0x0a && inode == ino) {
				fclose(f);
				return true;
			}
		fclose(f);
	}
	return false;
}

static struct helper_listen helper_listeners[HELPER_LISTENERS];

static bool helper_same_addr(const struct sockaddr_storage *a,
			     const struct sockaddr_storage *b)
{
	size_t n = a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					    : sizeof(struct sockaddr_in);

	return a->ss_family == b->ss_family && memcmp(a, b, n) == 0;
}

struct helper_probe {
	struct helper_req req;
	int reply;
	struct xs_job job; /* on helper_probers */
};

/*
 * Probes run on a pool of threads (each waits for its REJ), one per probe
 * in flight, at most HELPER_PROBERS; an idle one waits HELPER_PROBE_LINGER_MS
 * for the next, so that a client that connects again and again starts no
 * thread per probe: a start cost 0.4-0.8 ms of each probe's 3.6-3.9 ms
 * (Soft-RoCE guest, connrate rate, trace log). The helper serves the
 * whole family, each process with up to 64 connect workers and any number
 * of threads in blocking connects, and a probe to a host that does not
 * answer holds its thread for the whole timeout: so none waits behind
 * another (a queued one would spend its client's time limit in the queue,
 * and a client that times out remembers the destination as TCP).
 */
#define HELPER_PROBERS	       4096
#define HELPER_PROBE_LINGER_MS 2000

static struct xs_workers helper_probers =
	XS_WORKERS_INIT(HELPER_PROBERS, HELPER_PROBE_LINGER_MS);

/*
 * The route of the next probe to a destination where xsock listens, made
 * as soon as a probe there is answered and kept HELPER_ROUTE_KEEP_US: a
 * probe of a client that connects there again and again then starts with
 * its REQ. The resolution and the route cost 1.0-1.3 ms of each probe's
 * 3.2-3.7 ms (Soft-RoCE guest, connrate rate, trace log). A probe that
 * fails on a kept route, with anything but a peer's answer, is tried once
 * more on a fresh one: the route may have changed meanwhile. At most
 * HELPER_ROUTES destinations (each a cm_id and its CM channel's fd);
 * expired ones go at the next probe or within a second of the main loop.
 */
#define HELPER_ROUTES	     16
#define HELPER_ROUTE_KEEP_US 2000000u

struct helper_route {
	struct sockaddr_storage dst; /* address and port; family 0: free */
	struct xs_conn *c;	     /* NULL: being made */
	uint64_t until;		     /* xs_now_us() */
};

static pthread_mutex_t helper_routes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct helper_route helper_routes[HELPER_ROUTES]; /* the lock */
static atomic_uint helper_nr_routes;			 /* kept now */
/* probes asked and not yet done (each may keep a route at its end): the
 * main loop looks every second while any is, to let expired routes go */
static atomic_uint helper_nr_probing;

/* The kept route to @dst (NULL: none; taken: the caller's), the expired
 * ones destroyed. @dst NULL: only the expired ones. */
static struct xs_conn *helper_route_take(const struct sockaddr_storage *dst)
{
	struct xs_conn *c = NULL, *gone[HELPER_ROUTES];
	uint64_t now = xs_now_us();
	size_t i, n = 0;

	if (!atomic_load(&helper_nr_routes))
		return NULL;
	pthread_mutex_lock(&helper_routes_lock);
	for (i = 0; i < HELPER_ROUTES; i++) {
		struct helper_route *r = &helper_routes[i];

		if (!r->c)
			continue;
		if (now >= r->until)
			gone[n++] = r->c;
		else if (dst && !c && helper_same_addr(&r->dst, dst))
			c = r->c;
		else
			continue;
		memset(r, 0, sizeof(*r));
		atomic_fetch_sub(&helper_nr_routes, 1);
	}
	pthread_mutex_unlock(&helper_routes_lock);
	while (n)
		xs_conn_destroy(gone[--n]);
	return c;
}

/* Keep a fresh route to @dst for the next probe there, unless one is
 * kept or being made (a burst of probes there makes one, not one each) or
 * no slot is free. */
static void helper_route_keep(const struct sockaddr_storage *dst,
			      int timeout_ms)
{
	struct helper_route *r = NULL;
	struct xs_conn *c;
	size_t i;

	pthread_mutex_lock(&helper_routes_lock);
	for (i = 0; i < HELPER_ROUTES; i++) {
		if (helper_routes[i].dst.ss_family &&
		    helper_same_addr(&helper_routes[i].dst, dst)) {
			pthread_mutex_unlock(&helper_routes_lock);
			return;
		}
		if (!r && !helper_routes[i].dst.ss_family)
			r = &helper_routes[i];
	}
	if (r)
		r->dst = *dst; /* being made */
	pthread_mutex_unlock(&helper_routes_lock);
	if (!r)
		return;
	if (xs_conn_probe_route(&c, (const struct sockaddr *)dst, timeout_ms))
		c = NULL;
	pthread_mutex_lock(&helper_routes_lock);
	if (c) {
		r->c = c;
		r->until = xs_now_us() + HELPER_ROUTE_KEEP_US;
		atomic_fetch_add(&helper_nr_routes, 1);
	} else {
		memset(r, 0, sizeof(*r));
	}
	pthread_mutex_unlock(&helper_routes_lock);
}

static void helper_probe_run(struct xs_job *job)
{
	struct helper_probe *p = xs_job_owner(job, struct helper_probe, job);
	const struct sockaddr *dst = (const struct sockaddr *)&p->req.addr;
	int timeout_ms = p->req.timeout_ms, rc = 0;
	uint64_t t0 = xs_now_us();
	bool fresh = true;
	struct xs_conn *c;
	XS_INSIDE(); /* a thread of ours: rdma_cm */

	c = helper_route_take(&p->req.addr);
	if (c) {
		rc = xs_conn_probe_on(c, p->req.tcp_port, timeout_ms);
		/* a peer's answer stands (xsock, none, an rdma_cm server that
		 * is not xsock); anything else again, in the time left */
		timeout_ms -= (int)((xs_now_us() - t0) / 1000u);
		fresh = rc && rc != -ECONNREFUSED && rc != -EPROTO &&
			timeout_ms > 0;
		xs_dbg("helper", "probe on a kept route: %s%s",
		       rc ? strerror(-rc) : "xsock",
		       fresh ? ", again on a fresh one" : "");
	}
	if (fresh)
		rc = xs_conn_probe(dst, p->req.tcp_port, timeout_ms);
	(void)!xs_real.write(p->reply, &rc, sizeof(rc));
	xs_real.close(p->reply);
	if (rc == 0)
		helper_route_keep(&p->req.addr, p->req.timeout_ms);
	atomic_fetch_sub(&helper_nr_probing, 1);
	free(p);
}

static int helper_listen(const struct helper_req *req)
{
	struct xs_conn_params p;
	size_t i, slot = HELPER_LISTENERS;
	int rc;

	for (i = 0; i < HELPER_LISTENERS; i++) {
		struct helper_listen *h = &helper_listeners[i];

		if (h->addr.ss_family &&
		    helper_same_addr(&h->addr, &req->addr)) {
			/* the family has it already; for this kernel listener
			 * from now on where the one it spoke for is closed (a
			 * server that closes its listener and listens again,
			 * as iperf3 does for each test: else the look below
			 * finds that one gone and drops the port) */
			if (req->ino && req->ino != h->ino &&
			    (!h->ino || !helper_still_listens(h->ino))) {
				h->ino = req->ino;
				h->next_us = xs_now_us() + HELPER_ALIVE_US;
			}
			return 1;
		}
		if (!helper_listeners[i].addr.ss_family &&
		    slot == HELPER_LISTENERS)
			slot = i;
	}
	if (slot == HELPER_LISTENERS)
		return -ENOBUFS;
	xs_sock_conn_params(&p);
	p.probe_only = true;
	p.afonly = req->afonly;
	rc = xs_listener_create(&helper_listeners[slot].l,
				(const struct sockaddr *)&req->addr, 64, &p);
	if (rc == 0) {
		helper_listeners[slot].addr = req->addr;
		helper_listeners[slot].ino = req->ino;
		helper_listeners[slot].next_us = xs_now_us() + HELPER_ALIVE_US;
	}
	return rc;
}

static void helper_unlisten(const struct helper_req *req)
{
	size_t i;

	for (i = 0; i < HELPER_LISTENERS; i++)
		if (helper_listeners[i].addr.ss_family &&
		    helper_same_addr(&helper_listeners[i].addr, &req->addr)) {
			xs_listener_destroy(helper_listeners[i].l);
			memset(&helper_listeners[i], 0,
			       sizeof(helper_listeners[i]));
		}
}

/* One request from @ctl, answered on the reply socket it carries.
 * Return: false when the family has gone (end of the control socket). */
static bool helper_serve(int ctl)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct helper_req req;
	struct iovec v = { &req, sizeof(req) };
	struct msghdr m = {
		.msg_iov = &v,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int reply = -1, rc = -EINVAL;
	ssize_t n = xs_real.recvmsg(ctl, &m, MSG_CMSG_CLOEXEC);

	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
		return false;
	if (n < 0)
		return true;
	c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&reply, CMSG_DATA(c), sizeof(reply));
	if (reply < 0)
		return true;
	if ((size_t)n == sizeof(req) && req.op == HELPER_PROBE) {
		struct helper_probe *p = malloc(sizeof(*p));

		if (p) {
			p->req = req;
			p->reply = reply;
			p->job.run = helper_probe_run;
			atomic_fetch_add(&helper_nr_probing, 1);
			if (xs_workers_run(&helper_probers, &p->job) == 0)
				return true;
			atomic_fetch_sub(&helper_nr_probing, 1);
			free(p);
		}
		rc = -EAGAIN;
	} else if ((size_t)n == sizeof(req) && req.op == HELPER_LISTEN) {
		rc = helper_listen(&req);
	} else if ((size_t)n == sizeof(req) && req.op == HELPER_UNLISTEN) {
		helper_unlisten(&req);
		rc = 0;
	}
	(void)!xs_real.write(reply, &rc, sizeof(rc));
	xs_real.close(reply);
	return true;
}

/* The helper's end: libc's _exit(), not the library's (which would close
 * the application's RDMA connections, none of them the helper's). */
static void __attribute__((noreturn)) helper_exit(void)
{
	if (xs_real._exit)
		xs_real._exit(0);
	syscall(SYS_exit_group, 0);
	__builtin_unreachable();
}

/* Close what the family had open: the helper must never keep one of
 * its connections (or its stdout pipe) alive. */
static void helper_close_fds(int keep)
{
	int null = open("/dev/null", O_RDWR);
	struct dirent *d;
	DIR *dir;
	int fd;

	if (null >= 0) {
		xs_real.dup2(null, 0);
		xs_real.dup2(null, 1);
		xs_real.dup2(null, 2);
		if (null > 2)
			xs_real.close(null);
	}
	dir = opendir("/proc/self/fd");
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		fd = atoi(d->d_name);
		if (fd > 2 && fd != keep && fd != dirfd(dir))
			xs_real.close(fd);
	}
	closedir(dir);
}

static void __attribute__((noreturn)) helper_main(int ctl)
{
	struct pollfd pfd[HELPER_LISTENERS + 1];
	sigset_t all;
	size_t i, n;
	XS_INSIDE(); /* the helper runs only our code */

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	prctl(PR_SET_NAME, "xsock-cm");
	helper_close_fds(ctl);
	xs_core_fork_child();
	for (;;) {
		n = 0;
		pfd[n++] = (struct pollfd){ .fd = ctl, .events = POLLIN };
		for (i = 0; i < HELPER_LISTENERS; i++)
			if (helper_listeners[i].addr.ss_family)
				pfd[n++] = (struct pollfd){
					.fd = xs_listener_fd(
						helper_listeners[i].l),
					.events = POLLIN
				};
		if (xs_real.poll(pfd, n,
				 n > 1 || atomic_load(&helper_nr_routes) ||
						 atomic_load(&helper_nr_probing)
					 ? 1000
					 : -1) < 0)
			continue;
		(void)helper_route_take(NULL); /* the expired ones */
		if (pfd[0].revents && !helper_serve(ctl))
			helper_exit();
		for (i = 0; i < HELPER_LISTENERS; i++) {
			struct helper_listen *h = &helper_listeners[i];

			if (!h->addr.ss_family)
				continue;
			if (xs_now_us() >= h->next_us) {
				h->next_us = xs_now_us() + HELPER_ALIVE_US;
				if (h->ino && !helper_still_listens(h->ino)) {
					xs_listener_destroy(h->l);
					memset(h, 0, sizeof(*h));
					continue;
				}
			}
			xs_listener_poll(h->l, true);
		}
	}
}

/* ------------------------------------------------- asking the helper */

/* The control socket, the helper made if needed. Called with helper_lock
 * held. */
static int helper_get_locked(void)
{
	int sv[2], st;
	pid_t pid;

	if (helper_fd >= 0)
		return helper_fd;
	if (xs_real.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) <
	    0)
		return -errno;
	xs_handoff_init(); /* the helper notes probes in the family's table */
	xs_forking_helper = true; /* not one of the application's forks */
	pid = xs_real.fork();
	xs_forking_helper = false;
	if (pid == 0) {
		/* a grandchild of the application, reparented to init: it
		 * never shows up in the application's wait() */
		if (xs_real.fork() == 0)
			helper_main(sv[1]);
		helper_exit();
	}
	xs_real.close(sv[1]);
	if (pid < 0) {
		st = -errno;
		xs_real.close(sv[0]);
		return st;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	helper_fd = xs_fd_high(sv[0]);
	return helper_fd;
}

/* Ask: send @req with a reply socket, wait up to @wait_ms for the int. */
static int helper_ask(const struct helper_req *req, int wait_ms)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec v = { (void *)req, sizeof(*req) };
	struct msghdr m = {
		.msg_iov = &v,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	struct pollfd p;
	int r[2], ctl, rc = -EIO, tries;

	for (tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&helper_lock);
		ctl = helper_get_locked();
		pthread_mutex_unlock(&helper_lock);
		if (ctl < 0)
			return ctl;
		if (xs_real.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				       r) < 0)
			return -errno;
		memset(cbuf, 0, sizeof(cbuf));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &r[1], sizeof(int));
		if (xs_real.sendmsg(ctl, &m, MSG_NOSIGNAL) < 0) {
			/* the helper has gone: another one */
			xs_real.close(r[0]);
			xs_real.close(r[1]);
			pthread_mutex_lock(&helper_lock);
			if (helper_fd == ctl) {
				xs_real.close(helper_fd);
				helper_fd = -1;
			}
			pthread_mutex_unlock(&helper_lock);
			continue;
		}
		xs_real.close(r[1]);
		p = (struct pollfd){ .fd = r[0], .events = POLLIN };
		rc = -ETIMEDOUT;
		if (xs_real.poll(&p, 1, wait_ms) > 0 &&
		    xs_real.read(r[0], &rc, sizeof(rc)) != sizeof(rc))
			rc = -EIO;
		xs_real.close(r[0]);
		return rc;
	}
	return rc;
}

int xs_helper_probe(const struct sockaddr *dst, uint16_t tcp_port,
		    int timeout_ms)
{
	struct helper_req req = {
		.op = HELPER_PROBE,
		.timeout_ms = timeout_ms,
		.tcp_port = tcp_port,
	};

	memcpy(&req.addr, dst,
	       dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					  : sizeof(struct sockaddr_in));
	return helper_ask(&req, timeout_ms + 1000);
}

int xs_helper_listen(const struct sockaddr *local, int afonly, uint64_t ino)
{
	struct helper_req req = { .op = HELPER_LISTEN,
				  .afonly = afonly,
				  .ino = ino };

	memcpy(&req.addr, local,
	       local->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					    : sizeof(struct sockaddr_in));
	return helper_ask(&req, 10000);
}

void xs_helper_unlisten(const struct sockaddr *local)
{
	struct helper_req req = { .op = HELPER_UNLISTEN };

	memcpy(&req.addr, local,
	       local->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					    : sizeof(struct sockaddr_in));
	(void)helper_ask(&req, 10000);
}
