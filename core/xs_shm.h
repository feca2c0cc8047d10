/*
 * core/xs_shm.h - the layout of the counters a process publishes for
 * xsock-stat and xsock-check (cf. libvma's vma_stats shared memory).
 *
 * Each process that made a tracked socket maps the file
 * /dev/shm/xsock-<pid> (mode 0600: readable by the same user only) and
 * keeps its counters in it: a header, then slots, one per open socket.
 * The data path writes its counters in place (plain stores under the
 * stream's lock, no system call); readers map the file read-only and
 * tolerate a slot that changes under them. The file is removed at exit;
 * one left by a process killed with SIGKILL is recognised as stale
 * because no live process maps it (/proc/<pid>/maps).
 *
 * Readers check magic, version and the sizes before they trust anything,
 * and never read past the file's size. Every field is a fixed-width
 * integer; the file is in the host's byte order.
 */
#ifndef XS_CORE_XS_SHM_H
#define XS_CORE_XS_SHM_H

#include <netinet/in.h>
#include <stdint.h>

#define XS_SHM_MAGIC   0x31747365736b7378ULL /* "xsksest1" */
#define XS_SHM_VERSION 1
#define XS_SHM_DIR     "/dev/shm"
#define XS_SHM_PREFIX  "xsock-" /* then the pid in decimal */

/* Slots are added 64 at a time (16 KiB, a whole number of pages). */
#define XS_SHM_SLOT_SIZE   256
#define XS_SHM_HEADER_SIZE 4096
#define XS_SHM_CHUNK_SLOTS 64
#define XS_SHM_MAX_SLOTS   65536 /* beyond: counted, not published */

/* struct xs_shm_slot.state */
enum xs_shm_slot_state {
	XS_SHM_FREE, /* not in use: skip */
	XS_SHM_USED, /* an open socket */
};

/* struct xs_shm_slot.flags */
#define XS_SHM_F_WR_SHUT  0x1 /* FIN sent or queued (shutdown, close) */
#define XS_SHM_F_PEER_FIN 0x2 /* the peer's FIN arrived (EOF) */
#define XS_SHM_F_RESET	  0x4 /* reset: the connection is dead */

/* struct xs_shm_slot.kind: enum xs_fd_kind's values */
enum xs_shm_kind {
	XS_SHM_KIND_PENDING, /* transport not chosen yet */
	XS_SHM_KIND_TCP,     /* kernel TCP (reason says why) */
	XS_SHM_KIND_LISTEN,  /* listening socket */
	XS_SHM_KIND_RDMA,    /* an RC QP */
};

/*
 * struct xs_shm_slot.reason: enum xs_fallback_reason's values; the names
 * are the ones XSOCK_STATS and xsock-stat print.
 */
#define XS_SHM_REASON_NAMES                                                    \
	{                                                                      \
		"-", "mode", "rule", "loopback", "no-device", "no-transport",  \
			"peer-no-xsock", "timeout", "resource", "unsupported"  \
	}
#define XS_SHM_NR_REASONS 10

/*
 * Counters of one socket (all in the slot) and, in the header, the sum
 * over the process's closed sockets. Bytes are payload bytes the
 * application handed over or was given; messages are the wire messages
 * of core/proto.h.
 */
struct xs_shm_counters {
	uint64_t bytes_sent;	 /* accepted by send() and friends */
	uint64_t bytes_received; /* given to recv() and friends */
	uint64_t msgs_inline;	 /* eager DATA posted with IBV_SEND_INLINE */
	uint64_t msgs_eager;	 /* eager DATA posted from a pool buffer */
	uint64_t rndv_sent;	 /* regions exposed for the peer's READ */
	uint64_t rndv_read;	 /* peer's regions pulled with RDMA READ */
	uint64_t msgs_received;	 /* DATA and RNDV messages received */
	uint64_t credit_msgs;	 /* CREDIT messages sent (window update) */
	uint64_t credit_stalls;	 /* sends that found no credit left */
	uint64_t pool_waits;	 /* pool buffers refused (exhausted) */
	uint64_t cq_polls_work;	 /* ibv_poll_cq() calls that found work */
	uint64_t cq_polls_empty; /* ... that found none (busy polling) */
	uint64_t sleeps;	 /* waits that slept on the channel fds */
	uint64_t rnr_errors;	 /* IBV_WC_RNR_RETRY_EXC_ERR completions */
	uint64_t retry_errors;	 /* IBV_WC_RETRY_EXC_ERR completions */
	uint64_t wc_errors;	 /* other error completions (not flushes) */
};
#define XS_SHM_NR_COUNTERS 16

/* One socket: 256 bytes. */
struct xs_shm_slot {
	uint32_t state;		   /* enum xs_shm_slot_state; written last */
	uint32_t incarnation;	   /* moves each time the slot is reused */
	int32_t fd;		   /* the fd socket() or accept() returned */
	uint8_t kind;		   /* enum xs_shm_kind */
	uint8_t reason;		   /* fallback reason, 0 for none */
	uint8_t flags;		   /* XS_SHM_F_* (RDMA sockets) */
	uint8_t pad0;		   /* zero */
	struct sockaddr_in6 local; /* AF_INET or AF_INET6 (family 0: none) */
	struct sockaddr_in6 peer;  /* (an AF_INET address is stored as
				    * struct sockaddr_in, zero-padded) */
	char device[16];	   /* RDMA device name, NUL-terminated */
	uint32_t qp_num;	   /* this side's QP number */
	uint32_t peer_qp_num;	   /* reserved, 0 */
	uint64_t setup_us;	   /* RDMA connection setup time, us */
	uint64_t opened_unix_ms;   /* when the slot was taken (wall clock) */
	uint64_t send_q; /* bytes posted and not yet completed (SIOCOUTQ) */
	uint64_t recv_q; /* bytes received and not yet read (SIOCINQ) */
	struct xs_shm_counters c;
};

/*
 * Process-wide counters (XSOCK_STATS prints them). sum = closed + every
 * live slot's counters.
 */
struct xs_shm_process {
	uint64_t sockets;    /* stream sockets ever tracked */
	uint64_t decided[4]; /* by enum xs_shm_kind, at decision */
	uint64_t fallback[XS_SHM_NR_REASONS]; /* TCP, by reason */
	uint64_t rdma_connects;		      /* RC connections made */
	uint64_t rdma_accepts;		      /* RC connections accepted */
	uint64_t mr_bytes;		      /* bytes registered now */
	uint64_t mr_bytes_peak;		      /* the most there were */
	uint64_t unpublished;	       /* sockets that found no free slot */
	struct xs_shm_counters closed; /* sum over closed sockets */
};

/* The file's first 4096 bytes. */
struct xs_shm_header {
	uint64_t magic;	      /* XS_SHM_MAGIC */
	uint32_t version;     /* XS_SHM_VERSION */
	uint32_t header_size; /* XS_SHM_HEADER_SIZE */
	uint32_t slot_size;   /* XS_SHM_SLOT_SIZE */
	uint32_t nr_slots;    /* slots in the file now (grows; never
			       * shrinks); read it, then the file size */
	int32_t pid;
	uint32_t pad0;
	uint64_t start_unix_ms; /* when the file was made (wall clock) */
	char comm[16];		/* program_invocation_short_name */
	struct xs_shm_process p;
	uint64_t pid_ns; /* inode of /proc/self/ns/pid (0: unknown): pid
			  * names a process only in its own pid namespace */
};

_Static_assert(sizeof(struct xs_shm_slot) == XS_SHM_SLOT_SIZE,
	       "a slot is 256 bytes");
_Static_assert(sizeof(struct xs_shm_counters) == XS_SHM_NR_COUNTERS * 8,
	       "counters are 64-bit each");
_Static_assert(sizeof(struct xs_shm_header) <= XS_SHM_HEADER_SIZE,
	       "the header fits its page");

#endif /* XS_CORE_XS_SHM_H */
