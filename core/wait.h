/*
 * core/wait.h - what poll/select (core/poll.c) and the epoll engine
 * (core/epoll.c, core/epoll_wait.c) share; core/ only.
 */
#ifndef XS_CORE_WAIT_H
#define XS_CORE_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xs_core.h"

/*
 * How a wait uses the application's memory behind one of its pointers,
 * for xs_user_ok(): what the kernel would read and write there.
 */
enum user_use {
	USER_READ,    /* read only: epoll_ctl's event */
	USER_FDSET,   /* read and written whole: select's sets, timeval */
	USER_POLLFD,  /* read whole, revents written: poll's array */
	USER_PPOLLFD, /* the same, for ppoll */
	USER_EVENTS,  /* written from the start: epoll_wait's buffer */
};

/**
 * xs_user_ok() - whether the kernel could use @n bytes at @p as @use says
 * @p:   the application's pointer
 * @n:   its length in bytes
 * @use: what the kernel would do with it
 *
 * Return: false where the kernel's copy would fail (its EFAULT: the
 * caller lets the kernel's own call answer). Context: any thread; may
 * make one or two system calls (the last good ranges are remembered per
 * thread). See core/poll.c.
 */
bool xs_user_ok(const void *p, size_t n, enum user_use use);

/**
 * xs_poll_sock() - the socket behind @fd when a wait must ask xsock
 * @fd: any fd of the application
 *
 * Return: a reference the caller puts, or NULL for a kernel fd (an epoll
 * fd with xsock members is readied for its outer waiter meanwhile).
 * Context: any thread; takes the socket's lock briefly.
 */
struct xs_sock *xs_poll_sock(int fd);

/**
 * xs_ep_nest_check() - ready the inner set of epoll fd @fd for a wait
 * that holds @fd itself (poll, select or another epoll set)
 * @fd: any fd; nothing happens unless it is an epoll fd with xsock members
 *
 * Context: any thread; takes that set's lock.
 */
void xs_ep_nest_check(int fd);

#endif /* XS_CORE_WAIT_H */
