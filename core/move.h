/*
 * core/move.h - what core/move.c (the move, its channels) and core/hand.c
 *               (a connection handed on: exec, SCM_RIGHTS, posix_spawn, an
 *               owner that lets go) share; nothing else includes it.
 */
#ifndef XS_CORE_MOVE_H
#define XS_CORE_MOVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core_int.h"

/*
 * The longest a move waits for the peer's MOVE, ms: the peer answers from
 * its next library call on the socket (a wait, a read or a write), which
 * an interactive peer (ssh, an event loop) makes at once; an RC round
 * trip on rxe under TCG is about 1 ms.
 */
#define XS_MOVE_TIMEOUT_MS 10000

#define MOVE_MAGIC 0x58534d56u /* "XSMV" */
/* move_rep.ended beside XS_MOVE_*: the bytes are in the user's file for
 * the connection (/dev/shm/xsock-moved-EUID-KEY), not on the channel */
#define XS_MOVE_FILE 0x100u

struct move_req {
	uint32_t magic;
	uint32_t version; /* XS_WIRE_VERSION */
	uint64_t cookie;  /* SO_COOKIE of the socket (xs_sock.rdma_cookie) */
	uint32_t seq;	  /* echoed by the reply */
	uint32_t kind;	  /* MOVE_ASK, or MOVE_GIVE: @len bytes follow */
	uint64_t len;
};

enum { MOVE_ASK, MOVE_GIVE };

struct move_rep {
	uint32_t magic;
	int32_t status; /* 0, or a negative errno: nothing moved */
	uint64_t cookie;
	uint32_t seq;
	uint32_t ended; /* XS_MOVE_* of xs_stream_move_out() */
	uint64_t len;	/* unread bytes that follow */
};

/* Most owners a process can ask: its forked ancestors that owned RDMA
 * connections when they forked (the nearest first). */
#define MOVE_ASK_MAX 8

/* One child's channel, at its owner: the connections live when it was
 * forked, the only ones it may take over (another connection's bytes are
 * not its to read: sshd's preauth child is the untrusted one). */
struct move_chan {
	int fd;
	uint64_t *cookies; /* malloc'ed */
	size_t nr;
};

extern pthread_mutex_t move_lock; /* asker */
/* asker: the channel to each owner, inherited at fork (move_lock) */
struct move_ask_fd {
	pid_t owner;
	int fd;
};
extern struct move_ask_fd move_ask_fds[MOVE_ASK_MAX];
/* owner: one move of its own connections at a time, and one writer of
 * its channels (the probe thread's answers, the pushes at exit): held
 * around xs_stream_move_out() and every answer written */
extern pthread_mutex_t move_out_lock;
/* owner: its ends of the channels of its children (move_own_lock) */
extern pthread_mutex_t move_own_lock;
extern struct move_chan *move_own;
extern size_t move_nr_own;

/*
 * Connections this process let go (closed, or it ends) while a child
 * forked after they went live may still hold them (xs_sock_let_go()):
 * moved to kernel TCP, with what came over RDMA and nobody read, for the
 * first child that asks (move_own_lock). An entry goes when it is asked
 * for, or with the last channel whose child could ask for it.
 */
struct move_left {
	uint64_t cookie;
	uint8_t *bytes; /* malloc'ed, or NULL */
	size_t len;
	unsigned int ended; /* XS_MOVE_* */
	struct move_left *next;
};
extern struct move_left *move_lefts; /* move_own_lock */

/* core/move.c */
bool move_own_add(int fd, uint64_t *cookies, size_t nr);
void move_own_drop(int fd);
bool move_held_locked(uint64_t cookie);
int move_ask_fd(pid_t owner);
void move_give(struct xs_sock *s);
void move_prefix_clear(struct xs_sock *s);

/* core/hand.c */
void move_file_take(uint64_t key, uint8_t **bytes, size_t *len);
int move_lend(struct xs_sock *s, int fd, struct xs_handed *h);

#endif /* XS_CORE_MOVE_H */
