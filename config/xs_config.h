/*
 * config/xs_config.h - configuration: XSOCK_* knobs and the rules file.
 *
 * Depends only on libc. Everything is parsed once at init into a
 * struct xs_config that is read-only afterwards; errors come back as one
 * "where: message" string and the caller decides (passthrough mode).
 */
#ifndef XS_CONFIG_XS_CONFIG_H
#define XS_CONFIG_XS_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest accepted line of a rules file, in bytes, newline excluded. */
#define XS_RULES_LINE_MAX 1024
/* Most rules (and "set" lines) one rules file may hold. */
#define XS_RULES_MAX 4096
/* Longest program pattern of a rule, in bytes. */
#define XS_RULES_PROGRAM_MAX 128
/* Longest error message, "path:line:col: message" included. */
#define XS_CFG_ERR_MAX (PATH_MAX + 256)

enum xs_mode {
	XS_MODE_OFF,  /* pure passthrough: nothing is tracked */
	XS_MODE_TCP,  /* sockets tracked, every connection on kernel TCP */
	XS_MODE_AUTO, /* RDMA where rules and a device allow it */
};

enum xs_log_level {
	XS_LOG_OFF,
	XS_LOG_ERROR,
	XS_LOG_WARN,
	XS_LOG_INFO,
	XS_LOG_DEBUG,
	XS_LOG_TRACE,
};

enum xs_stats_mode {
	XS_STATS_OFF,
	XS_STATS_STDERR,
	XS_STATS_FILE,
};

enum xs_rule_action {
	XS_ACTION_NONE, /* no rule matched */
	XS_ACTION_RDMA,
	XS_ACTION_TCP,
};

enum xs_role {
	XS_ROLE_ANY,
	XS_ROLE_SERVER, /* matched against the local (bound) address */
	XS_ROLE_CLIENT, /* matched against the remote (connected) address */
};

/* One "rdma|tcp PROGRAM ROLE ADDRESS[/PREFIX]:PORT[-PORT]" line. */
struct xs_rule {
	enum xs_rule_action action;
	enum xs_role role;
	char program[XS_RULES_PROGRAM_MAX]; /* fnmatch(3) pattern */
	int family;		   /* AF_INET, AF_INET6, or AF_UNSPEC = any */
	uint8_t addr[16];	   /* network byte order */
	unsigned int prefix;	   /* bits compared from addr */
	uint16_t port_lo, port_hi; /* inclusive, host byte order */
	unsigned int line;	   /* where it came from */
};

/* One "set XSOCK_NAME VALUE" line, applied by config.c. */
struct xs_rule_set {
	char name[64];
	char value[XS_RULES_LINE_MAX];
	unsigned int line;
};

struct xs_rules {
	struct xs_rule *rules;
	size_t nr_rules;
	struct xs_rule_set *sets;
	size_t nr_sets;
};

struct xs_config {
	enum xs_log_level log_level;
	char log_path[PATH_MAX]; /* empty: stderr */
	enum xs_mode mode;
	char rules[PATH_MAX];
	uint64_t eager_limit;	     /* bytes */
	uint64_t rndv_chunk;	     /* bytes */
	uint64_t rndv_threshold;     /* bytes */
	uint64_t inline_max;	     /* bytes */
	uint64_t recv_bufs;	     /* receive buffers (credits) */
	uint64_t pool_mb;	     /* MiB */
	uint64_t spin_us;	     /* microseconds */
	uint64_t connect_timeout_ms; /* milliseconds */
	uint64_t rdma_retry_ms;	     /* milliseconds */
	char device[64];
	enum xs_stats_mode stats;
	char stats_path[PATH_MAX];
	uint64_t publish;	  /* 0 or 1 */
	struct xs_rules rule_set; /* parsed XSOCK_RULES file */
};

/* Description of one knob, from options.def. */
struct xs_opt_info {
	const char *env;
	const char *type;
	const char *def;
	uint64_t min, max;
	const char *unit;
	const char *doc;
};

/**
 * xs_cfg_getenv_fn - how the loader reads a variable
 * @name: XSOCK_* name
 * @ctx:  caller's context
 * Return: the value, or NULL when unset.
 */
typedef const char *(*xs_cfg_getenv_fn)(const char *name, void *ctx);

/*
 * The rules file xs_cfg_load() reads when XSOCK_RULES is unset and the file
 * exists (set empty, XSOCK_RULES reads none): SYSCONFDIR/xsock.rules of the
 * build, "" for none. A variable so that tests can point it elsewhere.
 */
extern const char *xs_cfg_rules_default;

/**
 * xs_cfg_load() - build the configuration from defaults, rules file and env
 * @cfg:    filled on success; on failure left in the all-default state
 *          with mode XS_MODE_OFF, so nothing is half-applied
 * @getenv: reader of XSOCK_* variables; NULL uses secure_getenv(3)
 * @ctx:    passed to @getenv
 * @err:    receives "where: message" on failure (XS_CFG_ERR_MAX bytes is
 *          always enough); "where" is "path:line:col" for the rules file and
 *          the variable's name for the environment
 * @errlen: size of @err in bytes
 *
 * Precedence: built-in default < rules file "set" line < environment.
 * Source: config/options.def.
 *
 * Context: any; allocates the rules with malloc (release with xs_cfg_fini()).
 * Return: 0, -EINVAL for an invalid value or rule, -ENOENT/-EACCES/-EISDIR
 *         for a rules file that cannot be read, -ENOMEM.
 */
int xs_cfg_load(struct xs_config *cfg, xs_cfg_getenv_fn getenv, void *ctx,
		char *err, size_t errlen);

/**
 * xs_cfg_fini() - release what xs_cfg_load() allocated
 * @cfg: configuration; may be all zero
 */
void xs_cfg_fini(struct xs_config *cfg);

/**
 * xs_cfg_nr_opts() - number of knobs in options.def
 * Return: the count.
 */
size_t xs_cfg_nr_opts(void);

/**
 * xs_cfg_opt() - description of knob @i
 * @i: index below xs_cfg_nr_opts()
 * Return: the description, or NULL when @i is out of range.
 */
const struct xs_opt_info *xs_cfg_opt(size_t i);

/**
 * xs_rules_parse() - parse the text of a rules file
 * @rules:  output; freed and zeroed first, freed again on failure
 * @path:   name used in error messages
 * @buf:    file contents; may hold NUL bytes (reported as an error)
 * @len:    bytes in @buf
 * @err:    receives "path:line:col: message" on failure
 * @errlen: size of @err in bytes
 *
 * Grammar (also in README.md), one directive per line, '#' to end of line
 * is a comment:
 *   set  XSOCK_NAME  VALUE
 *   rdma|tcp  PROGRAM  server|client|*  ADDRESS[/PREFIX]:PORT[-PORT]
 * ADDRESS is '*', a dotted IPv4 address or a bracketed IPv6 address; PORT is
 * '*', a number or a range. First matching rule wins.
 *
 * Return: 0, -EINVAL on a syntax error, -E2BIG past XS_RULES_MAX entries,
 *         -ENOMEM.
 */
int xs_rules_parse(struct xs_rules *rules, const char *path, const char *buf,
		   size_t len, char *err, size_t errlen);

/**
 * xs_rules_load() - read and parse a rules file
 * @rules, @err, @errlen: as for xs_rules_parse()
 * @path: file to read (at most 4 MiB)
 *
 * Return: as xs_rules_parse(), or the negative errno of open/read, -EFBIG
 *         for a file over 4 MiB, -ENXIO for anything but a regular file (a
 *         FIFO or device could block or never end).
 */
int xs_rules_load(struct xs_rules *rules, const char *path, char *err,
		  size_t errlen);

/**
 * xs_rules_free() - release a parsed rule set; leaves it empty
 * @rules: rule set; may be all zero
 */
void xs_rules_free(struct xs_rules *rules);

/**
 * xs_rules_match() - first rule matching a socket
 * @rules:   parsed rules
 * @program: short program name (basename of argv[0])
 * @role:    XS_ROLE_SERVER (match @addr = local address) or
 *           XS_ROLE_CLIENT (match @addr = remote address)
 * @addr:    AF_INET or AF_INET6 address; an IPv4-mapped IPv6 address also
 *           matches IPv4 rules
 * @len:     size of @addr in bytes
 * @line:    if not NULL, receives the matching rule's line (0 if none)
 *
 * Return: the action of the first matching rule, or XS_ACTION_NONE.
 */
enum xs_rule_action xs_rules_match(const struct xs_rules *rules,
				   const char *program, enum xs_role role,
				   const struct sockaddr *addr, socklen_t len,
				   unsigned int *line);

#endif /* XS_CONFIG_XS_CONFIG_H */
