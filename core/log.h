/*
 * core/log.h - the one logger: xs_log(level, module, fmt, ...).
 *
 * Lines look like "xsock[pid.tid] W conn: message", are formatted into a
 * stack buffer and written with one real write(2): atomic, no stdio lock,
 * usable after fork. errno is preserved. The level is checked before the
 * arguments are evaluated (Redis serverLog pattern).
 */
#ifndef XS_CORE_LOG_H
#define XS_CORE_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "../config/xs_config.h"

/* Current level; XS_LOG_OFF (the default) prints nothing. */
extern int xs_log_cur;

#define xs_log(level, module, ...)                                             \
	do {                                                                   \
		if ((int)(level) <= xs_log_cur)                                \
			xs_log_emit((level), (module), __VA_ARGS__);           \
	} while (0)

/* Log at most once per call site and process. */
#define xs_log_once(level, module, ...)                                        \
	do {                                                                   \
		static atomic_flag xs_log_done_ = ATOMIC_FLAG_INIT;            \
		if ((int)(level) <= xs_log_cur &&                              \
		    !atomic_flag_test_and_set(&xs_log_done_))                  \
			xs_log_emit((level), (module), __VA_ARGS__);           \
	} while (0)

#define xs_err(module, ...)  xs_log(XS_LOG_ERROR, module, __VA_ARGS__)
#define xs_warn(module, ...) xs_log(XS_LOG_WARN, module, __VA_ARGS__)
#define xs_info(module, ...) xs_log(XS_LOG_INFO, module, __VA_ARGS__)
#define xs_dbg(module, ...)  xs_log(XS_LOG_DEBUG, module, __VA_ARGS__)

/**
 * xs_log_emit() - format and write one log line; use xs_log() instead
 * @level:  XS_LOG_ERROR..XS_LOG_TRACE
 * @module: short subsystem name ("init", "conn", ...)
 * @fmt:    printf format; the line is cut at 512 bytes
 *
 * Context: any thread, signal-unsafe only through vsnprintf. errno is kept.
 */
void xs_log_emit(int level, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * xs_log_init() - set the level and open the log file of @cfg
 * @cfg: loaded configuration
 *
 * A log file is opened O_APPEND and moved to a high, close-on-exec fd so
 * that it does not take a number the application expects to get. Before
 * each line the fd's identity is checked: a log file closed behind the
 * library's back is reopened, and a line is never written into an fd the
 * application has since been given.
 *
 * Return: 0, or a negative errno when the file cannot be opened (logging
 *         then goes to stderr).
 */
int xs_log_init(const struct xs_config *cfg);

/**
 * xs_log_config_error() - print the one line about invalid configuration
 * @msg: "where: message"
 *
 * Printed to stderr whatever the level, once per process.
 */
void xs_log_config_error(const char *msg);

/**
 * xs_log_fd_closed() - tell the logger that the application closed @fd
 * @fd: fd number being closed or replaced
 *
 * If it is the log file's fd, the file is reopened at the next line, so a
 * later socket that reuses the number never receives log lines. stderr is
 * checked by identity before each line instead.
 */
void xs_log_fd_closed(int fd);

/**
 * xs_log_fd_closed_range() - xs_log_fd_closed() for close_range()
 * @first: lowest fd closed
 * @last:  highest fd closed (inclusive)
 */
void xs_log_fd_closed_range(unsigned int first, unsigned int last);

/**
 * xs_log_lock() / xs_log_unlock() - hold the logger's lock across fork()
 */
void xs_log_lock(void);
void xs_log_unlock(void);

/**
 * xs_log_stderr_ok() - whether fd 2 is still the stderr the process had
 *                      when the library started (same device and inode)
 *
 * An fd 2 that was closed and reused by the application (a data file, a
 * socket) is not written to.
 * Return: true when a line may be written to fd 2.
 */
bool xs_log_stderr_ok(void);

#endif /* XS_CORE_LOG_H */
