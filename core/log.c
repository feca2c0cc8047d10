/*
 * core/log.c - the logger behind xs_log().
 *
 * Owns the log level and the log file descriptor. Writes go through the
 * real write(2) so that logging never re-enters the interposed surface.
 * Context: any thread; the fd is an atomic so close() can retire it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "real.h"

#define LOG_LINE_MAX 512

int xs_log_cur = XS_LOG_OFF;
static atomic_int log_fd = STDERR_FILENO;

/*
 * What the log's fd referred to when it was opened. An fd can be closed
 * behind the library's back (glibc's closefrom() makes the system call
 * directly) and its number reused by the application: before each line the
 * fd is checked against this identity, so a log line never lands in the
 * application's own file, pipe or socket.
 */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static dev_t log_dev;	     /* protected by log_lock */
static ino_t log_ino;	     /* protected by log_lock */
static const char *log_path; /* NULL: stderr */

/* fd 2 as the process had it when the library started. */
static bool stderr_valid;
static dev_t stderr_dev;
static ino_t stderr_ino;

static const char log_letters[] = "-EWIDT";

static void log_write(int fd, const char *buf, size_t len)
{
	ssize_t n;

	if (fd < 0 || !xs_real.write)
		return;
	while (len > 0) {
		n = xs_real.write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void log_remember(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0) {
		log_dev = st.st_dev;
		log_ino = st.st_ino;
	}
}

bool xs_log_stderr_ok(void)
{
	struct stat st;

	return stderr_valid && fstat(STDERR_FILENO, &st) == 0 &&
	       st.st_dev == stderr_dev && st.st_ino == stderr_ino;
}

/* Open the log file on a high, close-on-exec fd; -1 on failure. */
static int log_open(const char *path)
{
	struct rlimit rl;
	int fd, high, low = 64;

	/* O_NONBLOCK: a FIFO without a reader fails instead of blocking. */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK,
		  0600);
	if (fd < 0)
		return -1;
	/* Keep clear of the low numbers the application will be handed. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 256)
		low = (int)(rl.rlim_cur > 4096 ? 4096 : rl.rlim_cur) - 64;
	high = xs_real.fcntl ? xs_real.fcntl(fd, F_DUPFD_CLOEXEC, low) : -1;
	if (high >= 0) {
		xs_real.close(fd);
		fd = high;
	}
	return fd;
}

/*
 * The fd to write a line to, or -1. A log file whose fd now refers to
 * something else is reopened; an fd 2 that is no longer the stderr the
 * process started with (closed, its number reused) is skipped.
 */
static int log_checked_fd(void)
{
	struct stat st;
	int fd;

	if (!log_path)
		return xs_log_stderr_ok() ? STDERR_FILENO : -1;
	pthread_mutex_lock(&log_lock);
	fd = atomic_load(&log_fd);
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == log_dev &&
	    st.st_ino == log_ino)
		goto out_unlock;
	fd = log_open(log_path);
	atomic_store(&log_fd, fd);
	if (fd >= 0)
		log_remember(fd);
out_unlock:
	pthread_mutex_unlock(&log_lock);
	return fd;
}

void xs_log_lock(void)
{
	pthread_mutex_lock(&log_lock);
}

void xs_log_unlock(void)
{
	pthread_mutex_unlock(&log_lock);
}

void xs_log_emit(int level, const char *module, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	int saved = errno;
	va_list ap;
	int n, m;

	if (level < XS_LOG_ERROR || level > XS_LOG_TRACE)
		level = XS_LOG_ERROR;
	n = snprintf(line, sizeof(line), "xsock[%d.%d] %c %s: ", (int)getpid(),
		     (int)gettid(), log_letters[level], module);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m > 0)
		n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	log_write(log_checked_fd(), line, (size_t)n);
	errno = saved;
}

int xs_log_init(const struct xs_config *cfg)
{
	struct stat st;
	int fd;

	if (fstat(STDERR_FILENO, &st) == 0) {
		stderr_valid = true;
		stderr_dev = st.st_dev;
		stderr_ino = st.st_ino;
	}
	xs_log_cur = (int)cfg->log_level;
	if (cfg->log_level == XS_LOG_OFF || cfg->log_path[0] == '\0')
		return 0;
	fd = log_open(cfg->log_path);
	if (fd < 0) {
		int rc = -errno;

		xs_err("log", "cannot open log file %s: %s; logging to stderr",
		       cfg->log_path, strerror(-rc));
		return rc;
	}
	log_path = cfg->log_path;
	log_remember(fd);
	atomic_store(&log_fd, fd);
	return 0;
}

void xs_log_config_error(const char *msg)
{
	static atomic_flag done = ATOMIC_FLAG_INIT;
	static const char tail[] = " (all sockets use kernel TCP)\n";
	char line[LOG_LINE_MAX];
	int saved = errno;
	size_t n = 0, i;

	if (atomic_flag_test_and_set(&done))
		return;
	memcpy(line, "xsock: ", 7);
	n = 7;
	/* One line, whatever a path or a rules file holds: escape controls. */
	for (i = 0; msg[i] && n + 4 + sizeof(tail) < sizeof(line); i++) {
		unsigned char ch = (unsigned char)msg[i];

		if (ch >= 0x20 && ch != 0x7f)
			line[n++] = (char)ch;
		else
			n += (size_t)snprintf(line + n, sizeof(line) - n,
					      "\\x%02x", ch);
	}
	memcpy(line + n, tail, sizeof(tail) - 1);
	n += sizeof(tail) - 1;
	log_write(STDERR_FILENO, line, n);
	errno = saved;
}

void xs_log_fd_closed(int fd)
{
	int expected = fd;

	/* A plain load first: close() of any fd lands here. stderr is
	 * judged by its identity at the next line instead. */
	if (fd != STDERR_FILENO &&
	    atomic_load_explicit(&log_fd, memory_order_relaxed) == fd)
		atomic_compare_exchange_strong(&log_fd, &expected, -1);
}

void xs_log_fd_closed_range(unsigned int first, unsigned int last)
{
	int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);

	if (fd >= 0 && (unsigned int)fd >= first && (unsigned int)fd <= last)
		xs_log_fd_closed(fd);
}
