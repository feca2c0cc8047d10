/*
 * tools/xsock-stat.c - list the sockets of xsock processes, like ss -tnp.
 *
 * Reads the counter files processes publish at /dev/shm/xsock-<pid>
 * (layout: core/xs_shm.h). Files are read with pread(2) into private
 * memory, never mapped, so a file truncated under us cannot raise SIGBUS;
 * every field is checked after the copy. A file that no live process maps
 * is stale: it is skipped and, when the caller owns it, removed.
 * Output: a table (default), one JSON document (--json), or either one
 * redrawn every SECS seconds (--watch). Does not link the library and
 * makes no socket.
 *
 * Errors: "xsock-stat: ..." on stderr; exit 1 on a failure, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../core/xs_shm.h"

#define STAT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STAT_GRACE_S	   5  /* a younger unmapped file is left alone */
#define STAT_CHUNK_SLOTS   64 /* slots per pread(2): 16 KiB */
#define STAT_CELL_LEN	   128
#define STAT_WATCH_MIN_S   0.1
#define STAT_WATCH_MAX_S   86400.0
#define STAT_OPT_JSON	   256 /* --json has no short form */

/* "--listening" and friends: one bit per enum xs_shm_kind */
#define STAT_KIND_BIT(k) (1u << (k))

static const char *const stat_kind_names[] = { "pending", "tcp", "listen",
					       "rdma" };
static const char *const stat_reason_names[] = XS_SHM_REASON_NAMES;

#define STAT_NR_KINDS STAT_ARRAY_SIZE(stat_kind_names)

_Static_assert(STAT_ARRAY_SIZE(stat_kind_names) == XS_SHM_KIND_RDMA + 1,
	       "a name for every enum xs_shm_kind");
_Static_assert(sizeof(((struct xs_shm_process *)0)->decided) ==
		       STAT_NR_KINDS * sizeof(uint64_t),
	       "decided[] is indexed by enum xs_shm_kind");
_Static_assert(STAT_ARRAY_SIZE(stat_reason_names) == XS_SHM_NR_REASONS,
	       "XS_SHM_REASON_NAMES names every reason");

/* The counters of struct xs_shm_counters, by field name (X-macro). */
#define STAT_COUNTERS(X)                                                       \
	X(bytes_sent)                                                          \
	X(bytes_received)                                                      \
	X(msgs_inline)                                                         \
	X(msgs_eager)                                                          \
	X(rndv_sent)                                                           \
	X(rndv_read)                                                           \
	X(msgs_received)                                                       \
	X(credit_msgs)                                                         \
	X(credit_stalls)                                                       \
	X(pool_waits)                                                          \
	X(cq_polls_work)                                                       \
	X(cq_polls_empty)                                                      \
	X(sleeps)                                                              \
	X(rnr_errors)                                                          \
	X(retry_errors)                                                        \
	X(wc_errors)
#define STAT_CNT_NAME(f) #f,
#define STAT_CNT_OFF(f)	 offsetof(struct xs_shm_counters, f),
static const char *const stat_cnt_names[] = { STAT_COUNTERS(STAT_CNT_NAME) };
static const size_t stat_cnt_offs[] = { STAT_COUNTERS(STAT_CNT_OFF) };
_Static_assert(STAT_ARRAY_SIZE(stat_cnt_names) == XS_SHM_NR_COUNTERS,
	       "a name for every counter");

/* Table columns; the two rates appear in --watch mode only. */
enum stat_col {
	STAT_COL_TRANSPORT,
	STAT_COL_STATE,
	STAT_COL_RECV_Q,
	STAT_COL_SEND_Q,
	STAT_COL_LOCAL,
	STAT_COL_PEER,
	STAT_COL_REASON,
	STAT_COL_SENT,
	STAT_COL_RECEIVED,
	STAT_COL_SEND_RATE,
	STAT_COL_RECV_RATE,
	STAT_COL_PROCESS,
	STAT_COL__COUNT,
};

static const struct {
	const char *name;
	int right; /* numbers are right-aligned */
} stat_cols[STAT_COL__COUNT] = {
	[STAT_COL_TRANSPORT] = { "Transport", 0 },
	[STAT_COL_STATE] = { "State", 0 },
	[STAT_COL_RECV_Q] = { "Recv-Q", 1 },
	[STAT_COL_SEND_Q] = { "Send-Q", 1 },
	[STAT_COL_LOCAL] = { "Local", 0 },
	[STAT_COL_PEER] = { "Peer", 0 },
	[STAT_COL_REASON] = { "Reason", 0 },
	[STAT_COL_SENT] = { "Sent", 1 },
	[STAT_COL_RECEIVED] = { "Received", 1 },
	[STAT_COL_SEND_RATE] = { "Send/s", 1 },
	[STAT_COL_RECV_RATE] = { "Recv/s", 1 },
	[STAT_COL_PROCESS] = { "Process", 0 },
};

/* What the command line asked for. */
struct stat_opts {
	int pid;	    /* only this process; 0: every process */
	unsigned int kinds; /* STAT_KIND_BIT()s to show; 0: all */
	int extended;
	int json;
	int watch;
	double interval_s; /* --watch period */
	long count;	   /* --watch draws; 0: until SIGINT */
};

/* One published socket, copied out of its file. */
struct stat_sock {
	uint32_t idx;	      /* slot index in the file */
	struct xs_shm_slot s; /* private copy; device NUL-terminated */
};

/* One process's file, copied out. */
struct stat_proc {
	int pid;
	struct xs_shm_header h;	 /* private copy; comm NUL-terminated */
	struct stat_sock *socks; /* its USED slots, sorted by fd */
	size_t nr_socks;
};

/* Every process found by one scan, sorted by pid. */
struct stat_snap {
	struct stat_proc *procs;
	size_t nr_procs;
};

/* A socket's byte counters at the previous draw (--watch rates). */
struct stat_prev {
	int pid;
	uint32_t idx;
	uint32_t incarnation;
	uint64_t sent;
	uint64_t received;
};

/* The previous draw, sorted by (pid, idx); valid once one draw is done. */
struct stat_rates {
	struct stat_prev *prev;
	size_t nr_prev;
	double prev_s; /* CLOCK_MONOTONIC time of the previous scan */
	double now_s;  /* ... of this one */
	int valid;
};

/* Sums for a totals line: one process or all of them. */
struct stat_totals {
	size_t nr_procs;
	uint64_t open[STAT_NR_KINDS + 1]; /* live slots by kind; last: bad */
	uint64_t fallback[XS_SHM_NR_REASONS];
	uint64_t mr_bytes;
	struct xs_shm_counters sum; /* closed sockets + live slots */
};

/* How the liveness check judged a file. */
enum stat_live {
	STAT_LIVE,     /* the process maps it */
	STAT_UNKNOWN,  /* the process exists; its maps are not readable */
	STAT_GONE,     /* no such process */
	STAT_UNMAPPED, /* the process exists and does not map it */
};

static volatile sig_atomic_t stat_stop; /* SIGINT or SIGTERM arrived */

/* ----------------------------------------------------------------------
 * Small helpers
 */

/* Print "xsock-stat: why" and the usage hint to stderr, exit 2. */
static void __attribute__((noreturn)) stat_usage_error(const char *why)
{
	if (why)
		fprintf(stderr, "xsock-stat: %s\n", why);
	fputs("Try 'xsock-stat --help'.\n", stderr);
	exit(2);
}

/* Print the --help text to stdout. */
static void stat_usage(void)
{
	fputs("usage: xsock-stat [-elrt] [-p PID] [--json] "
	      "[-w [SECS] [-n COUNT]]\n"
	      "\n"
	      "List the sockets of processes running under libxsock, like\n"
	      "ss -tnp, from the counter files they publish at\n" XS_SHM_DIR
	      "/" XS_SHM_PREFIX "<pid> (mode 0600: you see your own\n"
	      "processes, root sees all).\n"
	      "\n"
	      "  -p, --pid PID       only process PID\n"
	      "  -e, --extended      after each RDMA socket: device, QP "
	      "number, setup\n"
	      "                      time and every counter\n"
	      "  -l, --listening     only listening sockets\n"
	      "  -r, --rdma          only sockets carried by RDMA\n"
	      "  -t, --tcp           only connections that fell back to "
	      "kernel TCP\n"
	      "                      (-l, -r and -t add up: -rt shows both)\n"
	      "      --json          one JSON document instead of the table "
	      "(with\n"
	      "                      --watch: one document per line)\n"
	      "  -w, --watch[=SECS]  clear the screen and redraw every SECS\n"
	      "                      seconds (default 1, at least 0.1) until "
	      "SIGINT,\n"
	      "                      with each socket's bytes/s since the "
	      "last draw\n"
	      "  -n, --count COUNT   with --watch: stop after COUNT draws\n"
	      "  -h, --help          this text\n"
	      "\n"
	      "Transport: rdma, tcp (kernel TCP, Reason says why), listen, or\n"
	      "pending (made, not yet connected or listening). Queues and\n"
	      "bytes are counted for RDMA sockets only: a kernel TCP socket\n"
	      "shows - (ss -ti has them). Queues are as of the socket's last\n"
	      "call or reaped completion.\n"
	      "\n"
	      "Totals count every socket of a process, whatever -l/-r/-t "
	      "select,\n"
	      "and fallbacks and bytes include the process's closed "
	      "sockets.\n"
	      "\n"
	      "A file that no live process maps is stale (its process was "
	      "killed\n"
	      "or called exec): it is skipped and, if you own it, removed. A "
	      "file\n"
	      "younger than 5 s whose process is alive is left for it to "
	      "map.\n"
	      "\n"
	      "Exit status: 0 (also when there are no sockets), 1 on an "
	      "error,\n"
	      "2 on bad usage.\n",
	      stdout);
}

/* A whole decimal number from @min to @max into @out; 0 or -1 if not. */
static int stat_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Whether @s starts like a decimal number ("2", "0.5", ".5"). */
static int stat_numeric(const char *s)
{
	return (*s >= '0' && *s <= '9') || *s == '.';
}

/* A --watch period in seconds ("2", "0.5") into @out; 0 or -1 if bad. */
static int stat_parse_secs(const char *s, double *out)
{
	char *end;
	double v;

	if (!stat_numeric(s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < STAT_WATCH_MIN_S ||
	    v > STAT_WATCH_MAX_S)
		return -1;
	*out = v;
	return 0;
}

/* CLOCK_MONOTONIC now, in seconds. */
static double stat_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Counter @i (an index into stat_cnt_names) of @c. */
static uint64_t stat_counter_get(const struct xs_shm_counters *c, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)c + stat_cnt_offs[i], sizeof(v));
	return v;
}

/* @dst += @src, counter by counter. */
static void stat_counters_add(struct xs_shm_counters *dst,
			      const struct xs_shm_counters *src)
{
	size_t i;
	uint64_t v;

	for (i = 0; i < XS_SHM_NR_COUNTERS; i++) {
		v = stat_counter_get(dst, i) + stat_counter_get(src, i);
		memcpy((char *)dst + stat_cnt_offs[i], &v, sizeof(v));
	}
}

/* Transport name of slot kind @kind, "?" when out of range. */
static const char *stat_kind_name(unsigned int kind)
{
	return kind < STAT_NR_KINDS ? stat_kind_names[kind] : "?";
}

/* Fallback reason name of @reason, "?" when out of range. */
static const char *stat_reason_name(unsigned int reason)
{
	return reason < XS_SHM_NR_REASONS ? stat_reason_names[reason] : "?";
}

/* The ss-like state column of slot @s. */
static const char *stat_state(const struct xs_shm_slot *s)
{
	int wr_shut = s->flags & XS_SHM_F_WR_SHUT;
	int peer_fin = s->flags & XS_SHM_F_PEER_FIN;

	switch (s->kind) {
	case XS_SHM_KIND_RDMA:
		if (s->flags & XS_SHM_F_RESET)
			return "RESET";
		if (wr_shut && peer_fin)
			return "CLOSING";
		if (wr_shut)
			return "FIN-WAIT";
		if (peer_fin)
			return "CLOSE-WAIT";
		return "ESTAB";
	case XS_SHM_KIND_LISTEN:
		return "LISTEN";
	case XS_SHM_KIND_TCP:
	case XS_SHM_KIND_PENDING:
		return "-";
	default:
		return "?";
	}
}

/*
 * Format @a as addr:port ([addr]:port for IPv6, port 0 as *) into @buf.
 * Return: 1, or 0 when the family is 0 (no address: "*").
 */
static int stat_addr_fmt(const struct sockaddr_in6 *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	char port[8] = "*";
	struct sockaddr_in a4;

	switch (a->sin6_family) {
	case 0:
		snprintf(buf, len, "*");
		return 0;
	case AF_INET:
		memcpy(&a4, a, sizeof(a4)); /* stored zero-padded */
		inet_ntop(AF_INET, &a4.sin_addr, host, sizeof(host));
		if (a4.sin_port)
			snprintf(port, sizeof(port), "%u", ntohs(a4.sin_port));
		snprintf(buf, len, "%s:%s", host, port);
		return 1;
	case AF_INET6:
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		if (a->sin6_port)
			snprintf(port, sizeof(port), "%u", ntohs(a->sin6_port));
		if (a->sin6_scope_id)
			snprintf(buf, len, "[%s%%%" PRIu32 "]:%s", host,
				 a->sin6_scope_id, port);
		else
			snprintf(buf, len, "[%s]:%s", host, port);
		return 1;
	default:
		snprintf(buf, len, "?");
		return 1;
	}
}

/*
 * Copy the NUL-terminated @src (at most @max bytes) into @dst for a
 * terminal: anything but printable ASCII becomes '?', so a process name
 * cannot carry escape sequences.
 */
static void stat_sanitize(char *dst, size_t len, const char *src, size_t max)
{
	size_t i;

	for (i = 0; i + 1 < len && i < max && src[i]; i++)
		/* no quote either: a name must not close ss's ("...") */
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f && src[i] != '"' &&
					 src[i] != '\\'
				 ? src[i]
				 : '?';
	dst[i] = '\0';
}

/* A rate in bytes/s as "950", "12.5K", "3.1M" ... (decimal units). */
static void stat_rate_fmt(char *buf, size_t len, double bps)
{
	static const char units[] = "KMGTP";
	int u = -1;

	while (bps >= 1000 && u + 1 < (int)sizeof(units) - 1) {
		bps /= 1000;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%.0f", bps);
	else
		snprintf(buf, len, "%.1f%c", bps, units[u]);
}

/* ----------------------------------------------------------------------
 * Reading the files
 */

/*
 * pread(2) @len bytes at @off, retrying short reads and EINTR.
 * Return: the bytes read (fewer at end of file), or -1 with errno set.
 */
static ssize_t stat_pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t r;

	while (done < len) {
		r = pread(fd, (char *)buf + done, len - done,
			  off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* The pid in a file name "xsock-<pid>", or 0 if the name is not one. */
static int stat_name_pid(const char *name)
{
	const char *s = name + sizeof(XS_SHM_PREFIX) - 1;
	long v = 0;

	if (strncmp(name, XS_SHM_PREFIX, sizeof(XS_SHM_PREFIX) - 1))
		return 0;
	if (*s < '1' || *s > '9') /* the library writes %d: no sign, no 0 */
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (*s - '0');
		if (v > INT_MAX)
			return 0;
	}
	return (int)v;
}

/* Whether header @h is one we understand, for the file of @pid. */
static int stat_header_ok(const struct xs_shm_header *h, int pid)
{
	return h->magic == XS_SHM_MAGIC && h->version == XS_SHM_VERSION &&
	       h->header_size == XS_SHM_HEADER_SIZE &&
	       h->slot_size == XS_SHM_SLOT_SIZE && h->pid == pid;
}

/* The inode of our pid namespace (0: unknown), as the library records it. */
static uint64_t stat_pid_ns(void)
{
	static uint64_t ns = UINT64_MAX;
	struct stat st;

	if (ns == UINT64_MAX)
		ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino
							 : 0;
	return ns;
}

/*
 * Whether process @pid maps the file @st (by device and inode, from its
 * /proc/<pid>/maps: the path there is the one the process sees, which a
 * chroot or a symlinked /dev/shm changes).
 */
static enum stat_live stat_file_live(int pid, const struct stat *st)
{
	char maps[64], *line = NULL;
	enum stat_live live = STAT_UNMAPPED;
	unsigned long long inode;
	unsigned int maj, min;
	size_t cap = 0;
	ssize_t n;
	FILE *f;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return STAT_GONE;
	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "re");
	if (!f) /* gone since, or maps closed to us (non-dumpable, hidepid) */
		return kill(pid, 0) < 0 && errno == ESRCH ? STAT_GONE
							  : STAT_UNKNOWN;
	/* "start-end perms offset major:minor inode   path" */
	while ((n = getline(&line, &cap, f)) > 0) {
		if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min,
			   &inode) != 3)
			continue;
		if (inode == (unsigned long long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev)) {
			live = STAT_LIVE;
			break;
		}
	}
	if (ferror(f) && live != STAT_LIVE)
		live = STAT_UNKNOWN; /* EACCES comes from read(2) too */
	free(line);
	fclose(f);
	return live;
}

/*
 * Remove the stale file @name of @dirfd, fstat'ed as @st, if the caller
 * owns it and it is still the same file. An unmapped file (@live) whose
 * process lives is removed only past STAT_GRACE_S: its process may be
 * between creating and mapping it.
 */
static void stat_stale_remove(int dirfd, const char *name,
			      const struct stat *st, enum stat_live live)
{
	struct stat now;

	if (st->st_uid != geteuid())
		return;
	if (live == STAT_UNMAPPED && time(NULL) - st->st_ctime < STAT_GRACE_S)
		return;
	/* A new process with the same pid may have made a new file since. */
	if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    now.st_dev != st->st_dev || now.st_ino != st->st_ino)
		return;
	unlinkat(dirfd, name, 0);
}

/* qsort(3) order of sockets: by fd, then by slot. */
static int stat_sock_cmp(const void *a, const void *b)
{
	const struct stat_sock *x = a, *y = b;

	if (x->s.fd != y->s.fd)
		return x->s.fd < y->s.fd ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Copy the USED slots of the open file @fd (size @size) into @p->socks.
 * Reads min(nr_slots, whole slots in the file, XS_SHM_MAX_SLOTS) slots,
 * fewer if the file shrinks meanwhile.
 * Return: 0, or -ENOMEM.
 */
static int stat_slots_load(int fd, off_t size, struct stat_proc *p)
{
	struct xs_shm_slot chunk[STAT_CHUNK_SLOTS];
	struct stat_sock *grown;
	size_t nr, i, j, want, got, cap = 0;
	ssize_t r;

	nr = (size_t)(size - XS_SHM_HEADER_SIZE) / XS_SHM_SLOT_SIZE;
	if (nr > p->h.nr_slots)
		nr = p->h.nr_slots;
	if (nr > XS_SHM_MAX_SLOTS)
		nr = XS_SHM_MAX_SLOTS;
	for (i = 0; i < nr; i += got) {
		want = nr - i < STAT_CHUNK_SLOTS ? nr - i : STAT_CHUNK_SLOTS;
		r = stat_pread_full(fd, chunk, want * XS_SHM_SLOT_SIZE,
				    XS_SHM_HEADER_SIZE +
					    (off_t)(i * XS_SHM_SLOT_SIZE));
		if (r < 0)
			break; /* show what was read */
		got = (size_t)r / XS_SHM_SLOT_SIZE;
		for (j = 0; j < got; j++) {
			if (chunk[j].state != XS_SHM_USED)
				continue;
			if (p->nr_socks == cap) {
				cap = cap ? 2 * cap : 16;
				grown = realloc(p->socks, cap * sizeof(*grown));
				if (!grown)
					return -ENOMEM;
				p->socks = grown;
			}
			p->socks[p->nr_socks].idx = (uint32_t)(i + j);
			p->socks[p->nr_socks].s = chunk[j];
			p->socks[p->nr_socks].s.device[15] = '\0';
			p->nr_socks++;
		}
		if (got < want)
			break; /* the file shrank */
	}
	if (p->nr_socks > 1)
		qsort(p->socks, p->nr_socks, sizeof(*p->socks), stat_sock_cmp);
	return 0;
}

/*
 * Load the file @name (of @pid) in the directory @dirfd into @p.
 * Unreadable files (another user's: EACCES), files that vanish, that are
 * not regular, too small or not valid are skipped silently; stale ones
 * are skipped and removed when ours.
 * Return: 1 loaded, 0 skipped, or -ENOMEM.
 */
static int stat_proc_load(int dirfd, const char *name, int pid,
			  struct stat_proc *p)
{
	char path[sizeof(XS_SHM_DIR) + 256];
	enum stat_live live;
	struct stat st;
	int fd, ret = 0;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	fd = openat(dirfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno != EACCES && errno != EPERM && errno != ENOENT &&
		    errno != ELOOP)
			fprintf(stderr, "xsock-stat: open %s/%s: %s\n",
				XS_SHM_DIR, name, strerror(errno));
		return 0;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size < XS_SHM_HEADER_SIZE)
		goto out_close;
	if (stat_pread_full(fd, &p->h, sizeof(p->h), 0) != sizeof(p->h) ||
	    !stat_header_ok(&p->h, pid))
		goto out_close;
	p->h.comm[sizeof(p->h.comm) - 1] = '\0';
	/* A process of another pid namespace (a container sharing /dev/shm):
	 * its pid means another process here, so it cannot be judged. */
	if (p->h.pid_ns != stat_pid_ns())
		goto out_close;
	snprintf(path, sizeof(path), "%s/%s", XS_SHM_DIR, name);
	live = stat_file_live(pid, &st);
	if (live == STAT_GONE || live == STAT_UNMAPPED) {
		stat_stale_remove(dirfd, name, &st, live);
		goto out_close;
	}
	ret = stat_slots_load(fd, st.st_size, p);
	if (ret == 0)
		ret = 1;
out_close:
	close(fd);
	if (ret != 1) {
		free(p->socks);
		p->socks = NULL;
	}
	return ret;
}

/* qsort(3) order of processes: by pid. */
static int stat_proc_cmp(const void *a, const void *b)
{
	const struct stat_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Free what stat_scan() put in @snap. */
static void stat_snap_free(struct stat_snap *snap)
{
	size_t i;

	for (i = 0; i < snap->nr_procs; i++)
		free(snap->procs[i].socks);
	free(snap->procs);
	snap->procs = NULL;
	snap->nr_procs = 0;
}

/*
 * Read every live process file of XS_SHM_DIR (only @o->pid's if set)
 * into @snap, sorted by pid. A missing directory is an empty scan.
 * Return: 0, or -1 after printing why (the caller frees @snap).
 */
static int stat_scan(const struct stat_opts *o, struct stat_snap *snap)
{
	struct stat_proc *grown;
	struct dirent *e;
	size_t cap = 0;
	int pid, rc;
	DIR *d;

	d = opendir(XS_SHM_DIR);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "xsock-stat: opendir %s: %s\n", XS_SHM_DIR,
			strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		pid = stat_name_pid(e->d_name);
		if (!pid || (o->pid && pid != o->pid))
			continue;
		if (snap->nr_procs == cap) {
			cap = cap ? 2 * cap : 8;
			grown = realloc(snap->procs, cap * sizeof(*grown));
			if (!grown)
				goto out_nomem;
			snap->procs = grown;
		}
		rc = stat_proc_load(dirfd(d), e->d_name, pid,
				    &snap->procs[snap->nr_procs]);
		if (rc < 0)
			goto out_nomem;
		if (rc > 0)
			snap->nr_procs++;
	}
	closedir(d);
	if (snap->nr_procs > 1)
		qsort(snap->procs, snap->nr_procs, sizeof(*snap->procs),
		      stat_proc_cmp);
	return 0;

out_nomem:
	closedir(d);
	fprintf(stderr, "xsock-stat: out of memory\n");
	return -1;
}

/* ----------------------------------------------------------------------
 * Totals and rates
 */

/* Add process @p (every live slot, whatever the filters) to @t. */
static void stat_totals_add(struct stat_totals *t, const struct stat_proc *p)
{
	size_t i;

	t->nr_procs++;
	for (i = 0; i < XS_SHM_NR_REASONS; i++)
		t->fallback[i] += p->h.p.fallback[i];
	t->mr_bytes += p->h.p.mr_bytes;
	stat_counters_add(&t->sum, &p->h.p.closed);
	for (i = 0; i < p->nr_socks; i++) {
		t->open[p->socks[i].s.kind < STAT_NR_KINDS ? p->socks[i].s.kind
							   : STAT_NR_KINDS]++;
		stat_counters_add(&t->sum, &p->socks[i].s.c);
	}
}

/* qsort(3)/bsearch(3) order of stat_prev: by pid, then by slot. */
static int stat_prev_cmp(const void *a, const void *b)
{
	const struct stat_prev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Bytes/s of socket @k of @pid since the previous draw, into @sent and
 * @received. Return: 1, or 0 when unknown (first draw, new socket, a
 * slot reused since).
 */
static int stat_rate(const struct stat_rates *rt, int pid,
		     const struct stat_sock *k, double *sent, double *received)
{
	struct stat_prev key = { .pid = pid, .idx = k->idx };
	const struct stat_prev *prev;
	double dt = rt->now_s - rt->prev_s;

	if (!rt->valid || dt <= 0)
		return 0;
	prev = bsearch(&key, rt->prev, rt->nr_prev, sizeof(key), stat_prev_cmp);
	if (!prev || prev->incarnation != k->s.incarnation ||
	    prev->sent > k->s.c.bytes_sent ||
	    prev->received > k->s.c.bytes_received)
		return 0;
	*sent = (double)(k->s.c.bytes_sent - prev->sent) / dt;
	*received = (double)(k->s.c.bytes_received - prev->received) / dt;
	return 1;
}

/* Remember @snap's byte counters for the next draw's rates. */
static int stat_rates_update(struct stat_rates *rt,
			     const struct stat_snap *snap)
{
	struct stat_prev *prev;
	const struct stat_sock *k;
	size_t i, j, n = 0;

	for (i = 0; i < snap->nr_procs; i++)
		n += snap->procs[i].nr_socks;
	prev = malloc((n ? n : 1) * sizeof(*prev));
	if (!prev)
		return -ENOMEM;
	n = 0;
	for (i = 0; i < snap->nr_procs; i++) {
		for (j = 0; j < snap->procs[i].nr_socks; j++) {
			k = &snap->procs[i].socks[j];
			prev[n].pid = snap->procs[i].pid;
			prev[n].idx = k->idx;
			prev[n].incarnation = k->s.incarnation;
			prev[n].sent = k->s.c.bytes_sent;
			prev[n].received = k->s.c.bytes_received;
			n++;
		}
	}
	qsort(prev, n, sizeof(*prev), stat_prev_cmp);
	free(rt->prev);
	rt->prev = prev;
	rt->nr_prev = n;
	rt->prev_s = rt->now_s;
	rt->valid = 1;
	return 0;
}

/* ----------------------------------------------------------------------
 * Table output
 */

/* Whether socket @s passes the -l/-r/-t filters of @o. */
static int stat_shown(const struct stat_opts *o, const struct xs_shm_slot *s)
{
	return !o->kinds ||
	       (s->kind < STAT_NR_KINDS && (o->kinds & STAT_KIND_BIT(s->kind)));
}

/* Whether column @col is drawn (the rates only in --watch). */
static int stat_col_on(const struct stat_opts *o, int col)
{
	return o->watch ||
	       (col != STAT_COL_SEND_RATE && col != STAT_COL_RECV_RATE);
}

/* Format the table cells of socket @k of process @p. */
static void stat_row_fmt(const struct stat_proc *p, const struct stat_sock *k,
			 const struct stat_rates *rt,
			 char cells[STAT_COL__COUNT][STAT_CELL_LEN])
{
	const struct xs_shm_slot *s = &k->s;
	double sent, received;
	char comm[sizeof(p->h.comm)];

	snprintf(cells[STAT_COL_TRANSPORT], STAT_CELL_LEN, "%s",
		 stat_kind_name(s->kind));
	snprintf(cells[STAT_COL_STATE], STAT_CELL_LEN, "%s", stat_state(s));
	snprintf(cells[STAT_COL_RECV_Q], STAT_CELL_LEN, "%" PRIu64, s->recv_q);
	snprintf(cells[STAT_COL_SEND_Q], STAT_CELL_LEN, "%" PRIu64, s->send_q);
	stat_addr_fmt(&s->local, cells[STAT_COL_LOCAL], STAT_CELL_LEN);
	stat_addr_fmt(&s->peer, cells[STAT_COL_PEER], STAT_CELL_LEN);
	snprintf(cells[STAT_COL_REASON], STAT_CELL_LEN, "%s",
		 stat_reason_name(s->reason));
	snprintf(cells[STAT_COL_SENT], STAT_CELL_LEN, "%" PRIu64,
		 s->c.bytes_sent);
	snprintf(cells[STAT_COL_RECEIVED], STAT_CELL_LEN, "%" PRIu64,
		 s->c.bytes_received);
	if (s->kind != XS_SHM_KIND_RDMA) {
		/* the kernel carries it: its queues and bytes are the
		 * kernel's (ss -ti), not counted here */
		snprintf(cells[STAT_COL_RECV_Q], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_SEND_Q], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_SENT], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_RECEIVED], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_SEND_RATE], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_RECV_RATE], STAT_CELL_LEN, "-");
	} else if (rt && stat_rate(rt, p->pid, k, &sent, &received)) {
		stat_rate_fmt(cells[STAT_COL_SEND_RATE], STAT_CELL_LEN, sent);
		stat_rate_fmt(cells[STAT_COL_RECV_RATE], STAT_CELL_LEN,
			      received);
	} else {
		snprintf(cells[STAT_COL_SEND_RATE], STAT_CELL_LEN, "-");
		snprintf(cells[STAT_COL_RECV_RATE], STAT_CELL_LEN, "-");
	}
	stat_sanitize(comm, sizeof(comm), p->h.comm, sizeof(p->h.comm));
	snprintf(cells[STAT_COL_PROCESS], STAT_CELL_LEN,
		 "users:((\"%s\",pid=%d,fd=%" PRId32 "))", comm, p->pid, s->fd);
}

/* Print one table line of @cells padded to @width, no trailing blanks. */
static void stat_row_print(const struct stat_opts *o,
			   char cells[STAT_COL__COUNT][STAT_CELL_LEN],
			   const int width[STAT_COL__COUNT])
{
	const char *sep = "";
	int col;

	for (col = 0; col < STAT_COL__COUNT; col++) {
		if (!stat_col_on(o, col))
			continue;
		if (col == STAT_COL__COUNT - 1)
			printf("%s%s", sep, cells[col]);
		else if (stat_cols[col].right)
			printf("%s%*s", sep, width[col], cells[col]);
		else
			printf("%s%-*s", sep, width[col], cells[col]);
		sep = "  ";
	}
	putchar('\n');
}

/* The -e line under an RDMA socket: device, QP, setup time, counters. */
static void stat_extended_print(const struct xs_shm_slot *s)
{
	char dev[sizeof(s->device)];
	size_t i;

	stat_sanitize(dev, sizeof(dev), s->device, sizeof(s->device));
	printf("\tdevice:%s qp_num:%" PRIu32 " setup_us:%" PRIu64,
	       dev[0] ? dev : "-", s->qp_num, s->setup_us);
	for (i = 0; i < XS_SHM_NR_COUNTERS; i++)
		printf(" %s:%" PRIu64, stat_cnt_names[i],
		       stat_counter_get(&s->c, i));
	putchar('\n');
}

/* One totals line: @label, then the sums of @t. */
static void stat_totals_print(const char *label, const struct stat_totals *t)
{
	uint64_t open = 0;
	size_t i;
	int any = 0;

	for (i = 0; i <= STAT_NR_KINDS; i++)
		open += t->open[i];
	printf("%s: %" PRIu64 " open (rdma %" PRIu64 ", tcp %" PRIu64
	       ", listen %" PRIu64 ", pending %" PRIu64,
	       label, open, t->open[XS_SHM_KIND_RDMA], t->open[XS_SHM_KIND_TCP],
	       t->open[XS_SHM_KIND_LISTEN], t->open[XS_SHM_KIND_PENDING]);
	if (t->open[STAT_NR_KINDS])
		printf(", unknown %" PRIu64, t->open[STAT_NR_KINDS]);
	printf("), sent %" PRIu64 " B, received %" PRIu64 " B, fallbacks",
	       t->sum.bytes_sent, t->sum.bytes_received);
	for (i = 1; i < XS_SHM_NR_REASONS; i++) {
		if (!t->fallback[i])
			continue;
		printf("%s %s %" PRIu64, any ? "," : "", stat_reason_names[i],
		       t->fallback[i]);
		any = 1;
	}
	printf("%s, registered %" PRIu64 " B\n", any ? "" : " none",
	       t->mr_bytes);
}

/*
 * Print @snap as the table: a header, the sockets @o selects, then a
 * totals line per process and the grand total. @rt gives --watch rates.
 */
static void stat_table_print(const struct stat_opts *o,
			     const struct stat_snap *snap,
			     const struct stat_rates *rt)
{
	char cells[STAT_COL__COUNT][STAT_CELL_LEN];
	char label[64 + sizeof(snap->procs->h.comm)];
	char comm[sizeof(snap->procs->h.comm)];
	struct stat_totals total = { 0 }, one;
	int width[STAT_COL__COUNT], col, len;
	const struct stat_proc *p;
	size_t i, j;

	/* Two passes: the widths first, as ss does. */
	for (col = 0; col < STAT_COL__COUNT; col++) {
		width[col] = (int)strlen(stat_cols[col].name);
		snprintf(cells[col], STAT_CELL_LEN, "%s", stat_cols[col].name);
	}
	for (i = 0; i < snap->nr_procs; i++) {
		p = &snap->procs[i];
		for (j = 0; j < p->nr_socks; j++) {
			if (!stat_shown(o, &p->socks[j].s))
				continue;
			stat_row_fmt(p, &p->socks[j], rt, cells);
			for (col = 0; col < STAT_COL__COUNT; col++) {
				len = (int)strlen(cells[col]);
				if (len > width[col])
					width[col] = len;
			}
		}
	}
	for (col = 0; col < STAT_COL__COUNT; col++)
		snprintf(cells[col], STAT_CELL_LEN, "%s", stat_cols[col].name);
	stat_row_print(o, cells, width);
	for (i = 0; i < snap->nr_procs; i++) {
		p = &snap->procs[i];
		for (j = 0; j < p->nr_socks; j++) {
			if (!stat_shown(o, &p->socks[j].s))
				continue;
			stat_row_fmt(p, &p->socks[j], rt, cells);
			stat_row_print(o, cells, width);
			if (o->extended &&
			    p->socks[j].s.kind == XS_SHM_KIND_RDMA)
				stat_extended_print(&p->socks[j].s);
		}
	}
	putchar('\n');
	for (i = 0; i < snap->nr_procs; i++) {
		p = &snap->procs[i];
		memset(&one, 0, sizeof(one));
		stat_totals_add(&one, p);
		stat_totals_add(&total, p);
		stat_sanitize(comm, sizeof(comm), p->h.comm, sizeof(p->h.comm));
		snprintf(label, sizeof(label), "pid %d (%s)", p->pid, comm);
		stat_totals_print(label, &one);
	}
	snprintf(label, sizeof(label), "total %zu %s", total.nr_procs,
		 total.nr_procs == 1 ? "process" : "processes");
	stat_totals_print(label, &total);
}

/* ----------------------------------------------------------------------
 * JSON output
 */

/*
 * Length of the valid UTF-8 sequence of 2 to 4 bytes at @s (at most @n
 * bytes), or 0 if the bytes there are not one.
 */
static size_t stat_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0; /* overlong */
	else if (s[0] == 0xed)
		hi = 0x9f; /* surrogates */
	else if (s[0] == 0xf0)
		lo = 0x90; /* overlong */
	else if (s[0] == 0xf4)
		hi = 0x8f; /* beyond U+10FFFF */
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/*
 * Print the NUL-terminated @str (at most @max bytes) as a JSON string.
 * Quotes, backslashes and control characters are escaped; bytes that are
 * not valid UTF-8 are written as \u00XX (their Latin-1 reading), so the
 * document stays valid UTF-8 whatever a process is called.
 */
static void stat_json_str(const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i, n, len;

	for (n = 0; n < max && s[n]; n++)
		;
	putchar('"');
	for (i = 0; i < n; i += len) {
		len = 1;
		if (s[i] == '"' || s[i] == '\\')
			printf("\\%c", s[i]);
		else if (s[i] < 0x20 || s[i] == 0x7f)
			printf("\\u%04x", s[i]);
		else if (s[i] < 0x80)
			putchar(s[i]);
		else if ((len = stat_utf8_len(s + i, n - i)))
			fwrite(s + i, 1, len, stdout);
		else {
			printf("\\u%04x", s[i]);
			len = 1;
		}
	}
	putchar('"');
}

/* Print @c as a JSON object, one member per counter. */
static void stat_json_counters(const struct xs_shm_counters *c)
{
	size_t i;

	putchar('{');
	for (i = 0; i < XS_SHM_NR_COUNTERS; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", stat_cnt_names[i],
		       stat_counter_get(c, i));
	putchar('}');
}

/* Print the totals object of process @p. */
static void stat_json_totals(const struct stat_proc *p)
{
	const struct xs_shm_process *pp = &p->h.p;
	struct stat_totals t = { 0 };
	size_t i;

	stat_totals_add(&t, p);
	printf("{\"sockets\":%" PRIu64 ",\"rdma_connects\":%" PRIu64
	       ",\"rdma_accepts\":%" PRIu64 ",\"mr_bytes\":%" PRIu64
	       ",\"mr_bytes_peak\":%" PRIu64 ",\"unpublished\":%" PRIu64,
	       pp->sockets, pp->rdma_connects, pp->rdma_accepts, pp->mr_bytes,
	       pp->mr_bytes_peak, pp->unpublished);
	printf(",\"decided\":{");
	for (i = 0; i < STAT_NR_KINDS; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", stat_kind_names[i],
		       pp->decided[i]);
	printf("},\"open\":{");
	for (i = 0; i < STAT_NR_KINDS; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", stat_kind_names[i],
		       t.open[i]);
	printf("},\"fallback\":{");
	for (i = 1; i < XS_SHM_NR_REASONS; i++)
		printf("%s\"%s\":%" PRIu64, i > 1 ? "," : "",
		       stat_reason_names[i], pp->fallback[i]);
	printf("},\"closed\":");
	stat_json_counters(&pp->closed);
	printf(",\"sum\":");
	stat_json_counters(&t.sum);
	putchar('}');
}

/* Print socket @k as a JSON object; no address or device is null. */
static void stat_json_sock(const struct stat_sock *k)
{
	const struct xs_shm_slot *s = &k->s;
	char addr[STAT_CELL_LEN];

	printf("{\"fd\":%" PRId32 ",\"transport\":", s->fd);
	stat_json_str(stat_kind_name(s->kind), SIZE_MAX);
	printf(",\"state\":");
	stat_json_str(stat_state(s), SIZE_MAX);
	printf(",\"local\":");
	if (stat_addr_fmt(&s->local, addr, sizeof(addr)))
		stat_json_str(addr, sizeof(addr));
	else
		printf("null");
	printf(",\"peer\":");
	if (stat_addr_fmt(&s->peer, addr, sizeof(addr)))
		stat_json_str(addr, sizeof(addr));
	else
		printf("null");
	printf(",\"reason\":");
	if (s->reason)
		stat_json_str(stat_reason_name(s->reason), SIZE_MAX);
	else
		printf("null");
	printf(",\"device\":");
	if (s->device[0])
		stat_json_str(s->device, sizeof(s->device));
	else
		printf("null");
	printf(",\"qp_num\":%" PRIu32 ",\"setup_us\":%" PRIu64
	       ",\"send_q\":%" PRIu64 ",\"recv_q\":%" PRIu64
	       ",\"opened_unix_ms\":%" PRIu64 ",\"flags\":%u,\"counters\":",
	       s->qp_num, s->setup_us, s->send_q, s->recv_q, s->opened_unix_ms,
	       (unsigned int)s->flags);
	stat_json_counters(&s->c);
	putchar('}');
}

/* Print @snap as one JSON document on one line. */
static void stat_json_print(const struct stat_opts *o,
			    const struct stat_snap *snap)
{
	const struct stat_proc *p;
	const char *sep;
	size_t i, j;

	printf("{\"processes\":[");
	for (i = 0; i < snap->nr_procs; i++) {
		p = &snap->procs[i];
		printf("%s{\"pid\":%d,\"comm\":", i ? "," : "", p->pid);
		stat_json_str(p->h.comm, sizeof(p->h.comm));
		printf(",\"start_unix_ms\":%" PRIu64 ",\"totals\":",
		       p->h.start_unix_ms);
		stat_json_totals(p);
		printf(",\"sockets\":[");
		sep = "";
		for (j = 0; j < p->nr_socks; j++) {
			if (!stat_shown(o, &p->socks[j].s))
				continue;
			fputs(sep, stdout);
			stat_json_sock(&p->socks[j]);
			sep = ",";
		}
		printf("]}");
	}
	printf("]}\n");
}

/* ----------------------------------------------------------------------
 * Command line and main loop
 */

/* SIGINT/SIGTERM handler: end --watch after the current draw. */
static void stat_on_signal(int sig)
{
	(void)sig;
	stat_stop = 1;
}

/* Parse @argv into @o; bad usage exits 2, --help exits 0. */
static void stat_opts_parse(int argc, char **argv, struct stat_opts *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "extended", no_argument, NULL, 'e' },
		{ "listening", no_argument, NULL, 'l' },
		{ "rdma", no_argument, NULL, 'r' },
		{ "tcp", no_argument, NULL, 't' },
		{ "json", no_argument, NULL, STAT_OPT_JSON },
		{ "watch", optional_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* "+": no permutation, so -w may take the next word as its SECS */
	const char *shortopts = "+p:elrtw::n:h";
	long v;
	int c;

	memset(o, 0, sizeof(*o));
	o->interval_s = 1;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (stat_parse_long(optarg, 1, INT_MAX, &v))
				stat_usage_error("-p needs a process id (a "
						 "positive integer)");
			o->pid = (int)v;
			break;
		case 'e':
			o->extended = 1;
			break;
		case 'l':
			o->kinds |= STAT_KIND_BIT(XS_SHM_KIND_LISTEN);
			break;
		case 'r':
			o->kinds |= STAT_KIND_BIT(XS_SHM_KIND_RDMA);
			break;
		case 't':
			o->kinds |= STAT_KIND_BIT(XS_SHM_KIND_TCP);
			break;
		case STAT_OPT_JSON:
			o->json = 1;
			break;
		case 'w':
			o->watch = 1;
			/* "-w 2": a next word that starts like a number */
			if (!optarg && optind < argc &&
			    stat_numeric(argv[optind]))
				optarg = argv[optind++];
			if (optarg && stat_parse_secs(optarg, &o->interval_s))
				stat_usage_error("-w needs seconds from 0.1 to "
						 "86400");
			break;
		case 'n':
			if (stat_parse_long(optarg, 1, LONG_MAX, &v))
				stat_usage_error("-n needs a count (a positive "
						 "integer)");
			o->count = v;
			break;
		case 'h':
			stat_usage();
			exit(0);
		default:
			stat_usage_error(NULL); /* getopt said why */
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xsock-stat: unexpected argument '%s'\n",
			argv[optind]);
		stat_usage_error(NULL);
	}
	if (o->count && !o->watch)
		stat_usage_error("-n needs -w");
}

/*
 * Sleep until @deadline advanced by @interval_s (CLOCK_MONOTONIC); a
 * late deadline restarts from now. Return: 1 if a signal asked to stop.
 */
static int stat_sleep(struct timespec *deadline, double interval_s)
{
	struct timespec now;
	long long ns;

	ns = deadline->tv_nsec + llround(fmod(interval_s, 1.0) * 1e9);
	deadline->tv_sec += (time_t)interval_s + (time_t)(ns / 1000000000);
	deadline->tv_nsec = (long)(ns % 1000000000);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (deadline->tv_sec < now.tv_sec ||
	    (deadline->tv_sec == now.tv_sec &&
	     deadline->tv_nsec < now.tv_nsec)) {
		*deadline = now;
		return stat_sleep(deadline, interval_s);
	}
	while (!stat_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
					     deadline, NULL) == EINTR)
		;
	return stat_stop;
}

/* The first line of a --watch screen: period and wall-clock time. */
static void stat_watch_title(const struct stat_opts *o, long draw)
{
	char when[32] = "";
	struct tm tm;
	time_t t = time(NULL);

	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("Every %gs: xsock-stat (draw %ld)  %s\n\n", o->interval_s, draw,
	       when);
}

int main(int argc, char **argv)
{
	struct stat_rates rt = { 0 };
	struct stat_snap snap;
	struct timespec deadline;
	struct sigaction sa;
	struct stat_opts o;
	long draw;
	int rc = 0;

	stat_opts_parse(argc, argv, &o);
	if (o.watch) {
		/* no SA_RESTART: the signal ends the sleep at once */
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = stat_on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	for (draw = 1;; draw++) {
		memset(&snap, 0, sizeof(snap));
		if (stat_scan(&o, &snap) < 0) {
			stat_snap_free(&snap);
			rc = 1;
			break;
		}
		rt.now_s = stat_now_s();
		if (o.json) {
			stat_json_print(&o, &snap);
		} else {
			if (o.watch) {
				if (isatty(STDOUT_FILENO))
					fputs("\033[H\033[2J", stdout);
				stat_watch_title(&o, draw);
			}
			stat_table_print(&o, &snap, o.watch ? &rt : NULL);
		}
		if (o.watch && stat_rates_update(&rt, &snap) < 0) {
			fprintf(stderr, "xsock-stat: out of memory\n");
			rc = 1;
		}
		stat_snap_free(&snap);
		if (fflush(stdout) == EOF || ferror(stdout)) {
			fprintf(stderr, "xsock-stat: write: %s\n",
				strerror(errno));
			rc = 1;
		}
		if (rc || !o.watch || (o.count && draw >= o.count) ||
		    stat_stop || stat_sleep(&deadline, o.interval_s))
			break;
	}
	free(rt.prev);
	return rc;
}
