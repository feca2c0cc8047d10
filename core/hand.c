/*
 * core/hand.c - a live RDMA connection handed on where its QP cannot
 *               follow: the image an exec makes, a process that gets it
 *               with SCM_RIGHTS, one that posix_spawn() makes, a child
 *               that holds it when its owner lets it go (core/move.c has
 *               the move itself and the channels it goes through).
 *
 * Context: the thread that makes the call (exec, sendmsg, posix_spawn,
 * close, exit); the owner's side under move_out_lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdtab.h"
#include "move.h"
#include "stream.h"

static long move_stash(const uint8_t *bytes, size_t len, bool exec,
		       uint64_t key, int *memfd);

int xs_move_spawn_open(uint64_t *cookies, size_t nr, int *child)
{
	int fds[2];

	*child = -1;
	if (!nr || xs_real.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				      fds) < 0) {
		free(cookies);
		return -1;
	}
	fds[0] = xs_fd_high(fds[0]);
	fds[1] = xs_fd_high(fds[1]);
	/* the spawned image inherits its end and finds it by its record */
	if (xs_real.fcntl(fds[1], F_SETFD, 0) < 0) {
		xs_real.close(fds[0]);
		xs_real.close(fds[1]);
		free(cookies);
		return -1;
	}
	xs_handoff_put(fds[1], XS_HANDOFF_CHANNEL, (unsigned int)getpid());
	if (!move_own_add(fds[0], cookies, nr)) {
		xs_handoff_drop(fds[1]);
		xs_real.close(fds[1]);
		return -1;
	}
	*child = fds[1];
	return fds[0];
}

void xs_move_spawn_close(int own, int child, bool ok)
{
	if (child < 0)
		return;
	if (!ok) { /* no child holds it: neither end is needed */
		xs_handoff_drop(child);
		move_own_drop(own);
	}
	xs_real.close(child);
}

int xs_sock_spawn_lend(struct xs_sock *s, int fd, int *own, int *child,
		       struct xs_handed *h)
{
	*h = (struct xs_handed){ .fd = fd, .memfd = -1, .chan = -1, .sock = s };
	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved))
		return 0; /* the kernel's, or recorded where it was decided */
	if (!xs_sock_mine(s)) /* our own channel to its owner */
		return move_lend(s, fd, h);
	if (*own < 0)
		*own = xs_sock_spawn_channel(child);
	if (*own < 0)
		return -ESRCH;
	xs_handoff_put(fd, XS_HANDOFF_LENT, (unsigned int)*child);
	h->s = s;
	h->own_lent = true;
	xs_sock_get(s);
	return 0;
}

void xs_sock_spawn_done(struct xs_handed *h, bool ok)
{
	int saved = errno;

	if (ok && h->chan >= 0) /* the child has its copy: ours again */
		(void)xs_real.fcntl(h->chan, F_SETFD, FD_CLOEXEC);
	if (ok || h->chan >= 0 || !h->s) {
		if (!ok)
			xs_sock_hand_done(h, false);
		else if (h->s)
			xs_sock_put(h->s);
		h->s = NULL;
		errno = saved;
		return;
	}
	/* ours, lent to no one: as its claim recorded it */
	xs_handoff_put(h->fd, XS_HANDOFF_ELSEWHERE, 0);
	xs_sock_put(h->s);
	h->s = NULL;
	errno = saved;
}

/* ------------------------------------------------ exec and SCM_RIGHTS */

/*
 * A program image that execs takes its QPs with it, and a process that
 * gets a socket with SCM_RIGHTS has no way to its owner: neither can
 * follow an RDMA connection. So before an exec every RDMA socket the new
 * image inherits (an fd without FD_CLOEXEC), and before a sendmsg() every
 * RDMA socket it passes, moves to its kernel TCP connection: this
 * process's own with xs_stream_move_out() here, another process's through
 * its channel (xs_sock_move()). What came over RDMA and nobody read goes
 * with it: to an exec'd image in a memfd named "xsock-moved"; to the
 * receiver of SCM_RIGHTS in /dev/shm/xsock-moved-EUID-KEY (mode 0600,
 * unlinked by the reader). Either is recorded with the socket in the
 * handoff table (core/handoff.c), and the new holder serves those bytes
 * first (xs_move_adopt()). A call that fails leaves every such socket
 * moved, its bytes still here, and its memfds, files and records go.
 */

/* The file of @key's bytes for a receiver of SCM_RIGHTS (user @uid). */
static void move_shm_path(char *path, size_t len, uid_t uid, uint64_t key)
{
	snprintf(path, len, "/dev/shm/" XS_MOVE_MEMFD "-%u-%llu",
		 (unsigned int)uid, (unsigned long long)key);
}

/*
 * Move this process's own RDMA connection @s (fd @fd) to its kernel TCP
 * connection: the image that owns its QP ends, or the socket goes to a
 * process that could not reach it. Waits for the peer to READ every
 * region we announced (they may go with this image). A connection whose
 * bytes cannot all be delivered is reset on its kernel TCP connection
 * (connect(AF_UNSPEC) is tcp_disconnect(): an RST), so that neither end
 * goes on as if none were lost. Called with move_out_lock held.
 * Return: 0 or -errno.
 */
static int move_self(struct xs_sock *s, int fd, unsigned int *endedp)
{
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	unsigned int ended = 0;
	uint8_t *bytes = NULL;
	size_t len = 0;
	int rc;

	rc = xs_stream_move_out(s->stream, XS_MOVE_TIMEOUT_MS, &bytes, &len,
				&ended);
	if (rc == 0)
		rc = xs_stream_linger(s->stream, XS_MOVE_TIMEOUT_MS);
	if (rc) {
		/* bytes may have left the stream, or our last regions were
		 * not READ: the peer, moved or not, learns of it */
		xs_info("move", "fd %d: the move failed (%s): reset", fd,
			strerror(-rc));
		if (fd >= 0)
			(void)xs_real.connect(fd, &unspec, sizeof(unspec));
	}
	if (rc == 0 && fd >= 0 && (ended & XS_MOVE_SHUT_WR))
		(void)xs_real.shutdown(fd, SHUT_WR);
	pthread_mutex_lock(&s->lock);
	s->prefix = bytes;
	s->prefix_len = len;
	s->prefix_off = 0;
	s->prefix_eof = rc == 0 && (ended & XS_MOVE_EOF);
	atomic_store(&s->prefix_left, len > 0 || s->prefix_eof);
	xs_sock_set_moved(s);
	pthread_mutex_unlock(&s->lock);
	xs_wake_all(); /* a waiter of ours looks at the kernel fd now */
	if (endedp)
		*endedp = ended;
	return rc;
}

int xs_sock_to_kernel(struct xs_sock *s, int fd)
{
	int saved = errno, rc = 0;

	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved))
		return 0;
	if (!xs_sock_mine(s))
		return xs_sock_move(s, fd); /* takes move_lock */
	pthread_mutex_lock(&move_out_lock);
	if (!atomic_load(&s->moved)) {
		XS_INSIDE(); /* the stream polls its CQ */
		rc = move_self(s, fd, NULL);
	}
	pthread_mutex_unlock(&move_out_lock);
	xs_info("move", "fd %d: kernel TCP from here on, for urgent data: %s",
		fd, rc ? strerror(-rc) : "done");
	errno = saved;
	return rc;
}

/* Write all of @len bytes of @bytes to file @fd. Return: 0 or -errno. */
static int move_write_file(int fd, const uint8_t *bytes, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = pwrite(fd, bytes + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	return 0;
}

/* Read all of @fd (a regular file) into a malloc'ed *@bytes, *@len. */
static void move_read_file(int fd, uint8_t **bytes, size_t *len)
{
	struct stat st;
	size_t got = 0;
	ssize_t n;

	*bytes = NULL;
	*len = 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > SIZE_MAX ||
	    !(*bytes = malloc((size_t)st.st_size)))
		return;
	while (got < (size_t)st.st_size) {
		n = pread(fd, *bytes + got, (size_t)st.st_size - got,
			  (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	*len = got;
}

/*
 * Put @len bytes of @bytes where the next holder of socket @fd finds
 * them: a memfd it inherits (@exec), else the user's file for @key.
 * Return: the record's strip field (the memfd, or XS_MOVE_SHM), with
 * *@memfd; or a negative errno.
 */
static long move_stash(const uint8_t *bytes, size_t len, bool exec,
		       uint64_t key, int *memfd)
{
	char path[80];
	int fd, rc;

	if (exec) {
		/* inherited, out of the application's way */
		fd = xs_fd_high(memfd_create(XS_MOVE_MEMFD, MFD_CLOEXEC));
		if (fd >= 0 && xs_real.fcntl(fd, F_SETFD, 0) < 0) {
			xs_real.close(fd);
			fd = -1;
		}
	} else {
		move_shm_path(path, sizeof(path), geteuid(), key);
		fd = open(path,
			  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			  0600);
	}
	if (fd < 0)
		return -errno;
	rc = move_write_file(fd, bytes, len);
	if (rc || !exec) {
		xs_real.close(fd);
		if (rc) {
			if (!exec)
				unlink(path);
			return rc;
		}
		return XS_MOVE_SHM;
	}
	*memfd = fd;
	return fd;
}

/*
 * Lend the image an exec makes our channel to the owner of @s (fd @fd),
 * which it inherits (FD_CLOEXEC cleared until the exec fails), and record
 * both: the channel with its owner's pid, the socket with the channel's
 * fd (xs_move_adopt()). Return: 0, or -ESRCH without a channel.
 */
int move_lend(struct xs_sock *s, int fd, struct xs_handed *h)
{
	int u;

	pthread_mutex_lock(&move_lock);
	u = move_ask_fd(s->rdma_pid);
	if (u < 0 || xs_real.fcntl(u, F_SETFD, 0) < 0) {
		pthread_mutex_unlock(&move_lock);
		return -ESRCH;
	}
	xs_handoff_put(u, XS_HANDOFF_CHANNEL, (unsigned int)s->rdma_pid);
	xs_handoff_put(fd, XS_HANDOFF_LENT, (unsigned int)u);
	pthread_mutex_unlock(&move_lock);
	h->chan = u;
	h->s = s;
	xs_sock_get(s);
	xs_info("move",
		"fd %d: the exec'd program may take the connection of pid "
		"%d over",
		fd, (int)s->rdma_pid);
	return 0;
}

/*
 * The new image's side of move_lend(): channel @u to owner pid in its
 * record joins our channels (close-on-exec again). Return: the owner's
 * pid, or -1 when @u is no such channel.
 */
static pid_t move_chan_adopt(int u)
{
	unsigned int state = 0, owner = 0;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	pid_t pid = -1;
	int i;

	pthread_mutex_lock(&move_lock);
	for (i = 0; i < MOVE_ASK_MAX; i++)
		if (move_ask_fds[i].owner > 0 && move_ask_fds[i].fd == u)
			pid = move_ask_fds[i].owner;
	if (pid < 0 &&
	    xs_real.getsockname(u, (struct sockaddr *)&ss, &len) == 0 &&
	    ss.ss_family == AF_UNIX &&
	    xs_handoff_take_cookie(xs_handoff_cookie(u), &state, &owner) &&
	    state == XS_HANDOFF_CHANNEL && owner > 0 && owner <= INT_MAX) {
		(void)xs_real.fcntl(u, F_SETFD, FD_CLOEXEC);
		if (move_ask_fds[MOVE_ASK_MAX - 1].owner)
			xs_real.close(move_ask_fds[MOVE_ASK_MAX - 1].fd);
		memmove(&move_ask_fds[1], &move_ask_fds[0],
			(MOVE_ASK_MAX - 1) * sizeof(move_ask_fds[0]));
		move_ask_fds[0].owner = (pid_t)owner;
		move_ask_fds[0].fd = u;
		pid = (pid_t)owner;
	}
	pthread_mutex_unlock(&move_lock);
	return pid;
}

bool xs_move_adopt_lent(struct xs_sock *s, int fd, unsigned int chan)
{
	pid_t owner = chan <= INT_MAX ? move_chan_adopt((int)chan) : -1;

	xs_info("move", "fd %d: came from an exec, pid %d's connection: %s", fd,
		(int)owner,
		owner > 0 ? "taken over at its first use" : "no channel");
	if (owner <= 0)
		return false;
	s->rdma_pid = owner;
	s->rdma_cookie = xs_handoff_cookie(fd);
	return true;
}

int xs_sock_hand(struct xs_sock *s, int fd, unsigned int how,
		 struct xs_handed *h)
{
	bool exec = how & XS_HAND_EXEC, bare = how & XS_HAND_BARE;
	int saved = errno, rc = 0;
	uint8_t *copy = NULL;
	unsigned int state;
	long where;
	size_t len;

	*h = (struct xs_handed){ .fd = fd, .memfd = -1, .chan = -1, .sock = s };
	if (xs_sock_kind(s) != XS_KIND_RDMA)
		return 0; /* its state is recorded where it was decided */
	if ((how & XS_HAND_SELF) &&
	    (atomic_load(&s->moved) || !xs_sock_mine(s)))
		return 0;
	/* another process's, untouched here: the new image may ask for it
	 * itself, when it uses it (a helper that never does leaves the
	 * owner's bytes to the owner) */
	if (exec && !bare && !atomic_load(&s->moved) && !xs_sock_mine(s) &&
	    move_lend(s, fd, h) == 0) {
		errno = saved;
		return 0;
	}
	if (!atomic_load(&s->moved) && !xs_sock_mine(s))
		rc = xs_sock_move(s, fd); /* takes move_lock */
	pthread_mutex_lock(&move_out_lock);
	if (rc == 0 && !atomic_load(&s->moved) && xs_sock_mine(s)) {
		XS_INSIDE(); /* the stream polls its CQ */
		rc = move_self(s, fd, NULL);
	}
	if (rc || !atomic_load(&s->moved)) {
		/* cannot follow: the record of its claim stands (every call
		 * there fails with ECONNRESET) */
		xs_info("move",
			"fd %d: the connection cannot go with the %s: %s", fd,
			exec ? "exec" : "socket passed", strerror(-rc));
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	len = s->prefix_len - s->prefix_off;
	copy = len ? malloc(len) : NULL;
	if (copy)
		memcpy(copy, s->prefix + s->prefix_off, len);
	state = s->prefix_eof ? XS_HANDOFF_MOVED_EOF : XS_HANDOFF_MOVED;
	pthread_mutex_unlock(&s->lock);
	if (bare && len && !xs_sock_mine(s) && s->stream) {
		/* a program without the library cannot take them: they go
		 * back to the owner, which reads on from there */
		free(copy);
		copy = NULL;
		pthread_mutex_lock(&move_lock);
		move_give(s);
		pthread_mutex_unlock(&move_lock);
		len = 0;
	}
	h->key = xs_handoff_cookie(fd);
	where = XS_MOVE_NO_MEMFD;
	if (len) {
		where = !copy  ? -ENOMEM
			: bare ? -ENOPROTOOPT /* no library there to read them */
			       : move_stash(copy, len, exec, h->key, &h->memfd);
		free(copy);
	}
	if (where < 0) {
		/* those bytes cannot follow: not silently lost */
		struct sockaddr unspec = { .sa_family = AF_UNSPEC };

		xs_info("move",
			"fd %d: %zu unread bytes cannot go with the %s (%s): "
			"reset",
			fd, len, exec ? "exec" : "socket",
			strerror((int)-where));
		(void)xs_real.connect(fd, &unspec, sizeof(unspec));
		rc = (int)where;
		where = XS_MOVE_NO_MEMFD;
		len = 0;
		state = XS_HANDOFF_MOVED;
	}
	xs_handoff_put(fd, state, (unsigned int)where);
	h->shm = where == XS_MOVE_SHM;
	h->len = len;
	h->s = s;
	xs_sock_get(s);
	xs_info("move",
		"fd %d: kernel TCP for the %s, %zu unread bytes "
		"handed over%s",
		fd, exec ? "exec'd program" : "process it goes to", len,
		state == XS_HANDOFF_MOVED_EOF ? ", then EOF" : "");
out:
	pthread_mutex_unlock(&move_out_lock);
	errno = saved;
	return rc;
}

void xs_sock_hand_done(struct xs_handed *h, bool ok)
{
	int saved = errno;
	char path[80];

	if (!h->s)
		return;
	if (!ok && h->chan >= 0) { /* the channel is ours again */
		xs_handoff_drop(h->chan);
		(void)xs_real.fcntl(h->chan, F_SETFD, FD_CLOEXEC);
		/* as its claim recorded it: RDMA in another process */
		xs_handoff_put(h->fd, XS_HANDOFF_ELSEWHERE, 0);
		xs_sock_put(h->s);
		h->s = NULL;
		errno = saved;
		return;
	}
	if (!ok) { /* the socket stays moved here, its bytes with it */
		xs_handoff_drop(h->fd);
		if (h->memfd >= 0)
			xs_real.close(h->memfd);
		if (h->shm) {
			move_shm_path(path, sizeof(path), geteuid(), h->key);
			unlink(path);
		}
	} else if (h->len && h->chan < 0) {
		/* they went with the socket, to be read there: the kernel
		 * gives a byte to one reader */
		pthread_mutex_lock(&h->s->lock);
		move_prefix_clear(h->s);
		pthread_mutex_unlock(&h->s->lock);
	}
	xs_sock_put(h->s);
	h->s = NULL;
	errno = saved;
}

/* Take the bytes of the user's own file for connection @key (then
 * removed) into a malloc'ed *@bytes, *@len. */
void move_file_take(uint64_t key, uint8_t **bytes, size_t *len)
{
	struct stat st;
	char path[80];
	int f;

	*bytes = NULL;
	*len = 0;
	move_shm_path(path, sizeof(path), geteuid(), key);
	/* O_NONBLOCK: a FIFO planted there never blocks us */
	f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (f < 0)
		return;
	if (fstat(f, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 077))
		move_read_file(f, bytes, len);
	xs_real.close(f);
	unlink(path);
}

bool xs_move_adopt(struct xs_sock *s, int fd, unsigned int state,
		   unsigned int memfd)
{
	char link[64], want[] = "/memfd:" XS_MOVE_MEMFD " ", path[80];
	uint8_t *bytes = NULL;
	size_t len = 0;
	ssize_t n;

	if (memfd == XS_MOVE_SHM) {
		move_file_take(xs_handoff_cookie(fd), &bytes, &len);
	} else if (memfd != XS_MOVE_NO_MEMFD && memfd <= INT_MAX) {
		/* the fd is the record's only if it is our memfd */
		snprintf(path, sizeof(path), "/proc/self/fd/%u", memfd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n >= (ssize_t)sizeof(want) - 1 &&
		    !memcmp(link, want, sizeof(want) - 1)) {
			move_read_file((int)memfd, &bytes, &len);
			xs_real.close((int)memfd);
		}
	}
	xs_info("move",
		"fd %d: came moved to kernel TCP, %zu unread bytes from "
		"the process before%s",
		fd, len, state == XS_HANDOFF_MOVED_EOF ? ", then EOF" : "");
	if (!len && state != XS_HANDOFF_MOVED_EOF) {
		free(bytes);
		return false;
	}
	pthread_mutex_lock(&s->lock);
	s->prefix = bytes;
	s->prefix_len = len;
	s->prefix_off = 0;
	s->prefix_eof = state == XS_HANDOFF_MOVED_EOF;
	atomic_store(&s->prefix_left, true);
	xs_sock_set_moved(s);
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* ----------------------------------------------- letting a connection go */

/*
 * Send @l as an answer nobody asked for yet to the first child whose
 * channel lists its connection: this process ends, and cannot answer
 * later. The bytes go on the channel where they fit at once (a child
 * reads them when it asks), else in the user's file for the connection.
 * Called with move_out_lock held.
 */
static void move_push(const struct move_left *l)
{
	struct move_rep rep = { .magic = MOVE_MAGIC,
				.cookie = l->cookie,
				.ended = l->ended,
				.len = l->len };
	int outq, sndbuf;
	socklen_t sl = sizeof(sndbuf);
	bool file = false;
	size_t i, k;
	ssize_t n;

	pthread_mutex_lock(&move_own_lock);
	for (i = 0; i < move_nr_own; i++) {
		for (k = 0; k < move_own[i].nr; k++)
			if (move_own[i].cookies[k] == l->cookie)
				break;
		if (k == move_own[i].nr ||
		    xs_real.ioctl(move_own[i].fd, SIOCOUTQ, &outq) < 0 ||
		    xs_real.getsockopt(move_own[i].fd, SOL_SOCKET, SO_SNDBUF,
				       &sndbuf, &sl) < 0)
			continue;
		if ((size_t)outq + 2 * (sizeof(rep) + rep.len) + 4096 >
			    (size_t)sndbuf &&
		    !file) {
			/* too big for the channel: in the user's file for
			 * this connection (the first child to ask reads it) */
			if (move_stash(l->bytes, l->len, false, l->cookie,
				       NULL) < 0)
				continue;
			file = true;
			rep.ended |= XS_MOVE_FILE;
			rep.len = 0;
		}
		n = xs_real.send(move_own[i].fd, &rep, sizeof(rep),
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof(rep) && rep.len)
			(void)xs_real.send(move_own[i].fd, l->bytes, l->len,
					   MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof(rep))
			break; /* one child gets them, as one reader would */
	}
	pthread_mutex_unlock(&move_own_lock);
}

/*
 * Whether our parent process holds socket @fd as well, by the same number
 * (a fork copied it, an exec'd image inherited it): a shell's subshell
 * that wrote on an inherited connection, a worker whose parent carries on
 * with the connection. TCP leaves a connection open while any process
 * holds it. Three system calls; false where /proc does not tell (another
 * user's parent, no parent of ours in this pid namespace); a process that
 * was reparented (to init) compares another process's fd, by its inode.
 */
static bool move_parent_holds(int fd)
{
	char path[48], link[48], want[48];
	pid_t parent = getppid();
	struct stat st;
	ssize_t n;

	if (fd < 0 || parent <= 0 || fstat(fd, &st) || !S_ISSOCK(st.st_mode))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)parent, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	snprintf(want, sizeof(want), "socket:[%llu]",
		 (unsigned long long)st.st_ino);
	return strcmp(link, want) == 0;
}

/*
 * Let @s go where the parent still holds it: to its kernel TCP connection
 * for good, what came over RDMA and nobody read in the user's file for
 * the connection, recorded for whichever process uses the socket next
 * (xs_sock_claim() there takes the record), as for SCM_RIGHTS.
 */
static int move_to_parent(struct xs_sock *s, int fd)
{
	struct xs_handed h;
	int rc;

	if (fd < 0)
		fd = xs_fdtab_holder(s, -1); /* at exit: any fd of it */
	if (!move_parent_holds(fd))
		return 0;
	rc = xs_sock_hand(s, fd, 0, &h);
	xs_sock_hand_done(&h, true);
	xs_info("move",
		"fd %d: let go while the parent process holds it: kernel "
		"TCP from here on (%s), %zu unread bytes left for it",
		fd, rc ? strerror(-rc) : "done", h.len);
	return rc;
}

int xs_sock_let_go(struct xs_sock *s, int fd, bool ending)
{
	unsigned int ended = 0;
	int saved = errno, rc;
	struct move_left *l;
	bool held;

	if (xs_sock_kind(s) != XS_KIND_RDMA || atomic_load(&s->moved) ||
	    !xs_sock_mine(s) || !s->rdma_cookie ||
	    (!ending && xs_fdtab_held(s))) /* not its last fd */
		return 0;
	pthread_mutex_lock(&move_own_lock);
	held = move_held_locked(s->rdma_cookie);
	pthread_mutex_unlock(&move_own_lock);
	if (!held) {
		rc = move_to_parent(s, fd);
		errno = saved;
		return rc;
	}
	XS_INSIDE(); /* the stream polls its CQ */
	pthread_mutex_lock(&move_out_lock);
	if (atomic_load(&s->moved)) { /* a child asked meanwhile */
		pthread_mutex_unlock(&move_out_lock);
		errno = saved;
		return 0;
	}
	rc = move_self(s, fd, &ended);
	l = rc ? NULL : calloc(1, sizeof(*l));
	if (l) {
		pthread_mutex_lock(&s->lock);
		l->cookie = s->rdma_cookie;
		l->len = s->prefix_len - s->prefix_off;
		l->bytes = l->len ? malloc(l->len) : NULL;
		if (l->bytes)
			memcpy(l->bytes, s->prefix + s->prefix_off, l->len);
		else
			l->len = 0;
		/* a child shuts its fd where ours is gone (@fd -1) */
		l->ended = (s->prefix_eof ? XS_MOVE_EOF : 0) |
			   (ended & XS_MOVE_SHUT_WR);
		move_prefix_clear(s);
		pthread_mutex_unlock(&s->lock);
	}
	xs_info("move",
		"fd %d: let go while a child may hold it: moved to kernel "
		"TCP (%s), %zu unread bytes kept for the child",
		fd, rc ? strerror(-rc) : "done", l ? l->len : 0);
	if (l && ending) {
		move_push(l);
		free(l->bytes);
		free(l);
	} else if (l) {
		pthread_mutex_lock(&move_own_lock);
		l->next = move_lefts;
		move_lefts = l;
		pthread_mutex_unlock(&move_own_lock);
	}
	pthread_mutex_unlock(&move_out_lock);
	errno = saved;
	return rc;
}

void xs_move_exit_push(void)
{
	struct move_left *l;

	pthread_mutex_lock(&move_out_lock);
	pthread_mutex_lock(&move_own_lock);
	l = move_lefts;
	move_lefts = NULL;
	pthread_mutex_unlock(&move_own_lock);
	while (l) { /* closed here, still held by a child: its bytes */
		struct move_left *next = l->next;

		move_push(l);
		free(l->bytes);
		free(l);
		l = next;
	}
	pthread_mutex_unlock(&move_out_lock);
}
