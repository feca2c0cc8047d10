/*
 * core/publish.c - the counters file another process reads live:
 * /dev/shm/xsock-<pid>, laid out as core/xs_shm.h says.
 *
 * Made on the first tracked socket (a process that never makes one leaves
 * no file), grown 64 slots at a time into one address range reserved up
 * front (so slot pointers never move), removed at exit. Everything but the
 * counters themselves runs under the socket pool lock (signals blocked):
 * callers are core/sock.c's object allocator and free. Without a file
 * (XSOCK_PUBLISH=0, no /dev/shm, out of slots) a socket keeps its counters
 * in a slot of its own, which nobody else sees.
 *
 * fork(): the child must not write into its parent's file. Its mapping is
 * turned into a private copy at once; a child that makes a socket of its
 * own then publishes that copy under its own pid (a pre-forked server's
 * worker), and one that does not (redis' BGSAVE child) leaves no file.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "stats.h"

#define PUB_RESERVE                                                            \
	((size_t)XS_SHM_HEADER_SIZE +                                          \
	 (size_t)XS_SHM_MAX_SLOTS * XS_SHM_SLOT_SIZE)
#define PUB_CHUNK ((size_t)XS_SHM_CHUNK_SLOTS * XS_SHM_SLOT_SIZE)

static struct xs_shm_process pub_private; /* until (or without) a file */
struct xs_shm_process *xs_statp = &pub_private;

static uint8_t *pub_base;  /* the reserved range, or NULL */
static size_t pub_len;	   /* bytes of it in use (header + chunks) */
static bool pub_published; /* the range is the file's (MAP_SHARED) */
static dev_t pub_dev;	   /* the file, to find it again by name */
static ino_t pub_ino;
static bool pub_failed;		       /* do not try again in this process */
static bool pub_private_copy;	       /* a forked child's unpublished copy */
static uint32_t pub_free = UINT32_MAX; /* free slot list, by index */
static char pub_path[64];

static struct xs_shm_header *pub_hdr(void)
{
	return (struct xs_shm_header *)(void *)pub_base;
}

static struct xs_shm_slot *pub_slot(uint32_t i)
{
	return (struct xs_shm_slot *)(void *)(pub_base + XS_SHM_HEADER_SIZE +
					      (size_t)i * XS_SHM_SLOT_SIZE);
}

static uint64_t pub_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Name the file after this pid and make it, empty; replaces one that an
 * earlier image of this pid (before an exec) left. Return: fd or -1. */
static uint64_t pub_pid_ns(void);

/* Whether the file at pub_path belongs to a process of another pid
 * namespace (a container sharing /dev/shm): same pid, another process. */
static bool pub_path_foreign(void)
{
	struct xs_shm_header h;
	bool foreign = false;
	int fd;

	fd = open(pub_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    h.magic == XS_SHM_MAGIC && h.pid_ns != pub_pid_ns())
		foreign = true;
	XS_CALL(close, fd);
	return foreign;
}

/* Whether a file of @len bytes stays within RLIMIT_FSIZE (beyond it the
 * kernel sends SIGXFSZ, which kills the application). */
static bool pub_size_ok(size_t len)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_FSIZE, &rl) != 0 ||
	       rl.rlim_cur == RLIM_INFINITY || (rlim_t)len <= rl.rlim_cur;
}

static int pub_create_file(void)
{
	int fd;

	snprintf(pub_path, sizeof(pub_path), "%s/%s%d", XS_SHM_DIR,
		 XS_SHM_PREFIX, (int)getpid());
	fd = open(pub_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 && errno == EEXIST) {
		/* an earlier image of this pid (before exec), or a process
		 * that died: ours to replace; another namespace's is not */
		if (pub_path_foreign()) {
			errno = EEXIST;
			return -1;
		}
		unlink(pub_path);
		fd = open(pub_path,
			  O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			  0600);
	}
	return fd;
}

/* The inode of this process's pid namespace, or 0. */
static uint64_t pub_pid_ns(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Header fields that name this process. */
static void pub_fill_header(void)
{
	struct xs_shm_header *h = pub_hdr();

	h->magic = XS_SHM_MAGIC;
	h->version = XS_SHM_VERSION;
	h->header_size = XS_SHM_HEADER_SIZE;
	h->slot_size = XS_SHM_SLOT_SIZE;
	h->pid = (int32_t)getpid();
	h->start_unix_ms = pub_unix_ms();
	h->pid_ns = pub_pid_ns();
	strncpy(h->comm, program_invocation_short_name, sizeof(h->comm) - 1);
}

/*
 * Publish: the file, sized and mapped over [pub_base, pub_base + len),
 * with what that range holds now copied in. No fd is kept: an application
 * may close every fd it did not open (close_range, daemons), and the
 * number would then name one of its own.
 * Return: 0 or -1.
 */
static int pub_map_file(size_t len, bool copy)
{
	struct stat st;
	void *tmp = NULL, *p;
	int fd, err;

	if (!pub_size_ok(len))
		return -1;
	fd = pub_create_file();
	if (fd < 0)
		return -1;
	/* fallocate, not ftruncate: a full /dev/shm must fail here, not
	 * raise SIGBUS at the first store into a page it cannot back */
	if (fstat(fd, &st) != 0 || fallocate(fd, 0, 0, (off_t)len) != 0)
		goto fail;
	if (copy) {
		tmp = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tmp == MAP_FAILED)
			goto fail;
		memcpy(tmp, pub_base, len);
	}
	p = mmap(pub_base, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, 0);
	if (p == MAP_FAILED) {
		if (tmp)
			munmap(tmp, len);
		goto fail;
	}
	if (tmp) {
		memcpy(pub_base, tmp, len);
		munmap(tmp, len);
	}
	XS_CALL(close, fd);
	pub_dev = st.st_dev;
	pub_ino = st.st_ino;
	pub_published = true;
	return 0;
fail:
	err = errno;
	XS_CALL(close, fd);
	unlink(pub_path);
	errno = err;
	return -1;
}

/*
 * Remove the files that processes of this user which no longer exist left
 * behind (killed, or ended with _exit(): no atexit), as a process starts
 * publishing: a fork-heavy program's children would otherwise pile up.
 * A pid in use again is left alone (xsock-stat then checks the mapping),
 * and so is the file of another pid namespace (a container sharing
 * /dev/shm), where the pid means another process. Bounded: at most 4096
 * entries looked at.
 */
static void pub_reap_stale(void)
{
	size_t plen = strlen(XS_SHM_PREFIX);
	uint64_t ns = pub_pid_ns();
	struct xs_shm_header h;
	struct dirent *d;
	struct stat st;
	int seen = 0, fd;
	char *end;
	long pid;
	DIR *dir;

	dir = opendir(XS_SHM_DIR);
	if (!dir)
		return;
	while ((d = readdir(dir)) && seen++ < 4096) {
		if (strncmp(d->d_name, XS_SHM_PREFIX, plen) != 0)
			continue;
		pid = strtol(d->d_name + plen, &end, 10);
		if (*end || pid <= 0 || pid > INT32_MAX ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		fd = openat(dirfd(dir), d->d_name,
			    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() &&
		    pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		    h.magic == XS_SHM_MAGIC && h.version == XS_SHM_VERSION &&
		    h.pid == (int32_t)pid && h.pid_ns == ns)
			unlinkat(dirfd(dir), d->d_name, 0);
		XS_CALL(close, fd);
	}
	closedir(dir);
}

/* Reserve the range and publish the header. Return: 0 or -1. */
static int pub_start(void)
{
	const struct xs_config *cfg = xs_core_cfg();
	void *p;

	if (pub_failed || !cfg || !cfg->publish)
		return -1;
	p = mmap(NULL, PUB_RESERVE, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		goto fail;
	pub_base = p;
	pub_reap_stale();
	if (pub_map_file(XS_SHM_HEADER_SIZE, false) != 0) {
		munmap(p, PUB_RESERVE);
		pub_base = NULL;
		goto fail;
	}
	pub_len = XS_SHM_HEADER_SIZE;
	pub_fill_header();
	memcpy(&pub_hdr()->p, &pub_private, sizeof(pub_private));
	__atomic_store_n(&xs_statp, &pub_hdr()->p, __ATOMIC_RELEASE);
	return 0;
fail:
	pub_failed = true;
	xs_info("publish", "no counters file in %s: %s", XS_SHM_DIR,
		strerror(errno));
	return -1;
}

/* A forked child's first socket of its own: publish its private copy
 * under its own pid. Return: 0 or -1 (the copy stays private). */
static int pub_child_publish(void)
{
	if (!pub_failed)
		pub_reap_stale(); /* siblings that ended with _exit() */
	if (pub_failed || pub_map_file(pub_len, true) != 0) {
		pub_failed = true;
		return -1;
	}
	pub_private_copy = false;
	pub_fill_header();
	return 0;
}

/* 64 more slots at the end of the file. Return: 0 or -1 (and no more
 * tries: a full /dev/shm would cost every new socket system calls). */
static int pub_grow(void)
{
	static bool full;
	uint32_t first, i;
	void *p;

	if (full || pub_len + PUB_CHUNK > PUB_RESERVE ||
	    !pub_size_ok(pub_len + PUB_CHUNK))
		return -1;
	full = true; /* until it worked */
	if (pub_published) {
		struct stat st;
		int fd = open(pub_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

		/* still our file (not removed, not replaced) */
		if (fd < 0)
			return -1;
		if (fstat(fd, &st) != 0 || st.st_dev != pub_dev ||
		    st.st_ino != pub_ino ||
		    fallocate(fd, 0, (off_t)pub_len, (off_t)PUB_CHUNK) != 0) {
			XS_CALL(close, fd);
			return -1;
		}
		p = mmap(pub_base + pub_len, PUB_CHUNK, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, (off_t)pub_len);
		XS_CALL(close, fd);
	} else {
		p = mmap(pub_base + pub_len, PUB_CHUNK, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	}
	if (p == MAP_FAILED)
		return -1;
	first = (uint32_t)((pub_len - XS_SHM_HEADER_SIZE) / XS_SHM_SLOT_SIZE);
	pub_len += PUB_CHUNK;
	for (i = XS_SHM_CHUNK_SLOTS; i-- > 0;) {
		pub_slot(first + i)->fd = (int32_t)pub_free;
		pub_free = first + i;
	}
	__atomic_store_n(&pub_hdr()->nr_slots, first + XS_SHM_CHUNK_SLOTS,
			 __ATOMIC_RELEASE);
	full = false;
	return 0;
}

struct xs_shm_slot *xs_pub_take(struct xs_shm_slot *own)
{
	struct xs_shm_slot *slot = own;
	uint32_t incarnation;

	if (!pub_base && pub_start() != 0)
		goto fill;
	if (pub_private_copy && pub_child_publish() != 0)
		goto fill;
	/* The list lives in the shared file: never trust it beyond the
	 * slots mapped, or a slot in use (a same-user writer could aim our
	 * next store anywhere); a broken list is dropped, the rest grows. */
	if (pub_free != UINT32_MAX &&
	    (pub_free >= (pub_len - XS_SHM_HEADER_SIZE) / XS_SHM_SLOT_SIZE ||
	     __atomic_load_n(&pub_slot(pub_free)->state, __ATOMIC_RELAXED) !=
		     XS_SHM_FREE))
		pub_free = UINT32_MAX;
	if (pub_free == UINT32_MAX && pub_grow() != 0) {
		__atomic_fetch_add(&xs_statp->unpublished, 1, __ATOMIC_RELAXED);
		goto fill;
	}
	slot = pub_slot(pub_free);
	pub_free = (uint32_t)slot->fd;
fill:
	incarnation = slot->incarnation + 1;
	memset(slot, 0, sizeof(*slot));
	slot->incarnation = incarnation;
	slot->fd = -1;
	slot->opened_unix_ms = pub_unix_ms();
	__atomic_store_n(&slot->state, XS_SHM_USED, __ATOMIC_RELEASE);
	return slot;
}

void xs_pub_give(struct xs_shm_slot *slot, struct xs_shm_slot *own)
{
	xs_pub_sum(&xs_statp->closed, slot); /* closed += its counters */
	__atomic_store_n(&slot->state, XS_SHM_FREE, __ATOMIC_RELEASE);
	if (slot == own)
		return;
	slot->fd = (int32_t)pub_free;
	pub_free =
		(uint32_t)(((uint8_t *)slot - pub_base - XS_SHM_HEADER_SIZE) /
			   XS_SHM_SLOT_SIZE);
}

void xs_pub_sum(struct xs_shm_counters *sum, const struct xs_shm_slot *slot)
{
	uint64_t *dst = (uint64_t *)(void *)sum;
	const uint64_t *src = (const void *)&slot->c;
	int i;

	for (i = 0; i < XS_SHM_NR_COUNTERS; i++)
		dst[i] += src[i];
}

void xs_pub_fork_child(void)
{
	void *tmp;

	memset(&pub_private, 0, sizeof(pub_private));
	if (!pub_base || pub_private_copy || !pub_published) {
		/* no file of the parent's to leave alone */
		memset(xs_statp, 0, sizeof(*xs_statp));
		return;
	}
	pub_published = false;
	/* the same bytes, in memory of the child's own */
	tmp = mmap(NULL, pub_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp != MAP_FAILED) {
		memcpy(tmp, pub_base, pub_len);
		if (mmap(pub_base, pub_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) != MAP_FAILED)
			memcpy(pub_base, tmp, pub_len);
		munmap(tmp, pub_len);
	} else {
		/* never write the parent's file: zeroed memory of our own */
		mmap(pub_base, pub_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	}
	pub_private_copy = true;
	/* The child counts its own sockets, not its parent's again. */
	memset(&pub_hdr()->p, 0, sizeof(pub_hdr()->p));
}

void xs_pub_exit(void)
{
	struct stat st;

	/* ours only: not a file another image of this pid made after exec */
	if (pub_published && stat(pub_path, &st) == 0 && st.st_dev == pub_dev &&
	    st.st_ino == pub_ino)
		unlink(pub_path);
	pub_published = false;
}
