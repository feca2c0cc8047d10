/*
 * core/core_int.h - declarations shared between core/ files only.
 */
#ifndef XS_CORE_CORE_INT_H
#define XS_CORE_CORE_INT_H

#include "xs_core.h"

/**
 * xs_dev_fork_child() - forget the parent's device probe in a forked child
 *
 * Context: the child, right after fork(), single-threaded.
 */
void xs_dev_fork_child(void);

/* dev_lock around fork(): see xs_core_atfork_prepare(). */
void xs_dev_lock(void);
void xs_dev_unlock(void);

#endif /* XS_CORE_CORE_INT_H */
