/*
 * core/sock_int.h - what core/sock.c (socket objects, their lifetime and
 * the negative cache) and core/sock_connect.c (connect, listen, accept)
 * share. Each function's comment is at its definition (core/sock.c, or
 * core/sock_connect.c for sock_peer_text()).
 */
#ifndef XS_CORE_SOCK_INT_H
#define XS_CORE_SOCK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core_int.h"

void sock_set_kind(struct xs_sock *s, enum xs_fd_kind kind, int reason);
void sock_pub_kernel_addrs(struct xs_sock *s, int fd,
			   const struct sockaddr *peer, socklen_t peer_len);
bool sock_copy_addr(const struct sockaddr *addr, socklen_t len,
		    struct sockaddr_storage *out);
int sock_neg_lookup(const struct sockaddr *addr);
void sock_neg_add(const struct sockaddr *addr, int reason);
void sock_neg_forget(const struct sockaddr *addr, int err);

/* Room for sock_peer_text(): "[IPv6]:port" and its NUL. */
#define SOCK_ADDR_TEXT 56
const char *sock_peer_text(const struct xs_sock *s, char *buf, size_t len);

#endif /* XS_CORE_SOCK_INT_H */
