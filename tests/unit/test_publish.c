/*
 * tests/unit/test_publish.c - the counters file of core/publish.c, read
 * back from /dev/shm as xsock-stat reads it: made on the first slot, mode
 * 0600, grown 64 slots at a time, closed sockets' counters summed into the
 * header, and a forked child that never writes its parent's file.
 * (XSOCK_PUBLISH=0 is tests/bats/diag.bats': the state is per process.)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/stats.h"
#include "xt.h"

static struct xs_config cfg;

static const char *env_none(const char *name, void *ctx)
{
	(void)name;
	return ctx;
}

/* Load the defaults (XSOCK_PUBLISH=1); core/ calls libc through xs_real. */
static void load(void)
{
	char err[XS_CFG_ERR_MAX];

	XT_ASSERT_EQ(xs_real_resolve(err, sizeof(err)), 0);
	XT_ASSERT_EQ(xs_cfg_load(&cfg, env_none, NULL, err, sizeof(err)), 0);
	XT_ASSERT_EQ(cfg.publish, 1u);
	xs_core_init(&cfg);
}

static void path_of(pid_t pid, char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/xsock-%d", (int)pid);
}

/* The file of @pid, read whole; NULL when there is none. */
static void *read_file(pid_t pid, size_t *len)
{
	char path[64];
	struct stat st;
	void *buf;
	int fd;

	path_of(pid, path, sizeof(path));
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	XT_ASSERT_EQ(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	XT_ASSERT(buf != NULL);
	XT_ASSERT_EQ(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

XT_TEST(first_slot_makes_the_file_and_slots_grow_by_64)
{
	static struct xs_shm_slot own[130];
	struct xs_shm_slot *slot[130];
	const struct xs_shm_header *h;
	const struct xs_shm_slot *fs;
	char path[64];
	struct stat st;
	size_t len;
	uint8_t *buf;
	int i, status;
	pid_t pid;

	load();
	path_of(getpid(), path, sizeof(path));
	unlink(path);
	for (i = 0; i < 130; i++) {
		slot[i] = xs_pub_take(&own[i]);
		XT_ASSERT(slot[i] != &own[i]); /* published, not private */
		slot[i]->fd = 100 + i;
		slot[i]->kind = XS_SHM_KIND_RDMA;
		slot[i]->c.bytes_sent = 1000u + (unsigned)i;
	}
	XT_ASSERT_EQ(stat(path, &st), 0);
	XT_ASSERT_EQ(st.st_mode & 0777, 0600);
	buf = read_file(getpid(), &len);
	XT_ASSERT(buf != NULL);
	h = (const void *)buf;
	XT_ASSERT_EQ(h->magic, XS_SHM_MAGIC);
	XT_ASSERT_EQ(h->version, XS_SHM_VERSION);
	XT_ASSERT_EQ(h->pid, getpid());
	XT_ASSERT_EQ(h->nr_slots, 192u); /* three chunks of 64 */
	XT_ASSERT_EQ(len, (size_t)XS_SHM_HEADER_SIZE + 192u * XS_SHM_SLOT_SIZE);
	fs = (const void *)(buf + XS_SHM_HEADER_SIZE);
	for (i = 0; i < 130; i++) {
		XT_ASSERT_EQ(fs[i].state, (uint32_t)XS_SHM_USED);
		XT_ASSERT_EQ(fs[i].fd, 100 + i);
		XT_ASSERT_EQ(fs[i].c.bytes_sent, 1000u + (unsigned)i);
	}
	XT_ASSERT_EQ(fs[130].state, (uint32_t)XS_SHM_FREE);
	free(buf);

	/* closing two: their slots free, their bytes in the header's sum */
	xs_pub_give(slot[0], &own[0]);
	xs_pub_give(slot[129], &own[129]);
	buf = read_file(getpid(), &len);
	h = (const void *)buf;
	fs = (const void *)(buf + XS_SHM_HEADER_SIZE);
	XT_ASSERT_EQ(fs[0].state, (uint32_t)XS_SHM_FREE);
	XT_ASSERT_EQ(fs[129].state, (uint32_t)XS_SHM_FREE);
	XT_ASSERT_EQ(h->p.closed.bytes_sent, 1000u + 1129u);
	free(buf);
	/* a freed slot is taken again, zeroed, with a new incarnation */
	slot[0] = xs_pub_take(&own[0]);
	XT_ASSERT_EQ(slot[0]->c.bytes_sent, 0u);
	XT_ASSERT_EQ(slot[0]->fd, -1);
	XT_ASSERT(slot[0]->incarnation >= 2u);

	/* a forked child writes a file of its own, never its parent's */
	pid = fork();
	XT_ASSERT(pid >= 0);
	if (pid == 0) {
		struct xs_shm_slot mine, *s;

		xs_pub_fork_child();
		slot[1]->c.bytes_sent = 99; /* an inherited socket's counter */
		s = xs_pub_take(&mine);
		s->fd = 7;
		_exit(s == &mine ? 3 : 0);
	}
	XT_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	XT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	buf = read_file(getpid(), &len);
	fs = (const void *)(buf + XS_SHM_HEADER_SIZE);
	XT_ASSERT_EQ(fs[1].c.bytes_sent, 1001u); /* the parent's, untouched */
	free(buf);
	buf = read_file(pid, &len);
	XT_ASSERT(buf != NULL);
	h = (const void *)buf;
	XT_ASSERT_EQ(h->pid, pid);
	fs = (const void *)(buf + XS_SHM_HEADER_SIZE);
	XT_ASSERT_EQ(fs[1].c.bytes_sent, 99u); /* the child's copy */
	free(buf);
	path_of(pid, path, sizeof(path));
	unlink(path); /* the child left it with _exit() */

	xs_pub_exit();
	path_of(getpid(), path, sizeof(path));
	XT_ASSERT(stat(path, &st) != 0);
}
