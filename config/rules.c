/*
 * config/rules.c - the rules file: which sockets go over RDMA.
 *
 * Owns the parser and the matcher; applying "set" lines is config.c's job.
 * Grammar, one directive per line, '#' starts a comment, blank lines are
 * ignored, fields are separated by spaces or tabs:
 *
 *   set  XSOCK_NAME  VALUE
 *   ACTION  PROGRAM  ROLE  ADDRESS[/PREFIX]:PORT[-PORT]
 *
 *   ACTION   rdma | tcp
 *   PROGRAM  fnmatch(3) pattern on the program's short name, or *
 *   ROLE     server (local address of a listener) | client (remote address
 *            of a connect) | *
 *   ADDRESS  * | dotted IPv4 | [IPv6]; PREFIX defaults to the full length
 *   PORT     * | N | N-M (0..65535)
 *
 * The first matching rule wins (as in libvma.conf); no match means RDMA
 * where possible. Errors name path:line:col. Context: init only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xs_config.h"

#define RULES_FILE_MAX (4u << 20) /* bytes */

struct rules_cursor {
	const char *path;
	const char *line; /* start of the current line */
	size_t len;	  /* its length, newline excluded */
	size_t pos;	  /* next byte to read */
	unsigned int lineno;
	char *err;
	size_t errlen;
};

static int rules_error(struct rules_cursor *c, size_t col, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "%s:%u:%zu: %s", c->path, c->lineno,
		 col + 1, msg);
	return -EINVAL;
}

static bool rules_is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r';
}

/* Next field of the line: sets *start and *flen; false at end of line. */
static bool rules_next_field(struct rules_cursor *c, size_t *start,
			     size_t *flen)
{
	while (c->pos < c->len && rules_is_space(c->line[c->pos]))
		c->pos++;
	if (c->pos >= c->len || c->line[c->pos] == '#')
		return false;
	*start = c->pos;
	while (c->pos < c->len && !rules_is_space(c->line[c->pos]) &&
	       c->line[c->pos] != '#')
		c->pos++;
	*flen = c->pos - *start;
	return true;
}

static bool rules_field_is(struct rules_cursor *c, size_t start, size_t flen,
			   const char *word)
{
	return strlen(word) == flen && memcmp(c->line + start, word, flen) == 0;
}

/* Parse a decimal number of at most 10 digits into [0, max]. */
static int rules_parse_uint(const char *s, size_t n, unsigned long max,
			    unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 10)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int rules_parse_ports(struct rules_cursor *c, size_t at, const char *s,
			     size_t n, struct xs_rule *r)
{
	const char *dash = memchr(s, '-', n);
	unsigned long lo, hi;

	if (n == 1 && s[0] == '*') {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (!dash) {
		if (rules_parse_uint(s, n, 65535, &lo))
			return rules_error(c, at, "bad port '%.*s' (0-65535)",
					   (int)n, s);
		hi = lo;
	} else {
		size_t n1 = (size_t)(dash - s);

		if (rules_parse_uint(s, n1, 65535, &lo) ||
		    rules_parse_uint(dash + 1, n - n1 - 1, 65535, &hi))
			return rules_error(
				c, at, "bad port range '%.*s' (N-M, 0-65535)",
				(int)n, s);
		if (lo > hi)
			return rules_error(c, at,
					   "port range '%.*s' is reversed",
					   (int)n, s);
	}
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

/*
 * An IPv4-mapped IPv6 rule (::ffff:a.b.c.d/96+n) is the IPv4 rule
 * a.b.c.d/n: sockets' mapped addresses are matched as IPv4 too.
 */
static void rules_unmap_v4(struct xs_rule *r)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0,	0,
					      0, 0, 0, 0, 0xff, 0xff };

	if (r->family != AF_INET6 || r->prefix < 96 ||
	    memcmp(r->addr, v4mapped, sizeof(v4mapped)) != 0)
		return;
	memmove(r->addr, r->addr + 12, 4);
	memset(r->addr + 4, 0, 12);
	r->family = AF_INET;
	r->prefix -= 96;
}

/* ADDRESS[/PREFIX]:PORT[-PORT] */
static int rules_parse_endpoint(struct rules_cursor *c, size_t start,
				size_t flen, struct xs_rule *r)
{
	const char *f = c->line + start;
	const char *colon = NULL, *slash, *addr_end;
	char text[INET6_ADDRSTRLEN + 1];
	size_t addr_len, i;
	unsigned long prefix;
	unsigned int max_prefix;

	if (flen > 0 && f[0] == '[') {
		const char *close = memchr(f, ']', flen);

		if (!close)
			return rules_error(c, start,
					   "missing ']' after IPv6 address");
		if ((size_t)(close - f) + 1 >= flen ||
		    (close[1] != ':' && close[1] != '/'))
			return rules_error(c, start + (size_t)(close - f) + 1,
					   "expected ':PORT' after ']'");
		for (i = (size_t)(close - f); i < flen; i++)
			if (f[i] == ':') {
				colon = f + i;
				break;
			}
	} else {
		colon = memchr(f, ':', flen);
	}
	if (!colon)
		return rules_error(c, start,
				   "expected ADDRESS:PORT, got '%.*s'",
				   (int)flen, f);
	slash = memchr(f, '/', (size_t)(colon - f));
	addr_end = slash ? slash : colon;

	if (addr_end - f == 1 && f[0] == '*') {
		if (slash)
			return rules_error(c, start, "'*' takes no prefix");
		r->family = AF_UNSPEC;
		r->prefix = 0;
	} else {
		bool v6 = f[0] == '[';

		addr_len = (size_t)(addr_end - f) - (v6 ? 2 : 0);
		if (v6 && addr_end[-1] != ']')
			return rules_error(c, start, "malformed IPv6 address");
		if (addr_len == 0 || addr_len >= sizeof(text))
			return rules_error(c, start, "bad address '%.*s'",
					   (int)(addr_end - f), f);
		memcpy(text, f + (v6 ? 1 : 0), addr_len);
		text[addr_len] = '\0';
		r->family = v6 ? AF_INET6 : AF_INET;
		if (inet_pton(r->family, text, r->addr) != 1)
			return rules_error(c, start, "bad %s address '%s'",
					   v6 ? "IPv6" : "IPv4", text);
		max_prefix = v6 ? 128 : 32;
		r->prefix = max_prefix;
		if (slash) {
			size_t at = start + (size_t)(slash - f) + 1;

			if (rules_parse_uint(slash + 1,
					     (size_t)(colon - slash - 1),
					     max_prefix, &prefix))
				return rules_error(c, at,
						   "bad prefix length (0-%u)",
						   max_prefix);
			r->prefix = (unsigned int)prefix;
		}
		rules_unmap_v4(r);
	}
	return rules_parse_ports(c, start + (size_t)(colon - f) + 1, colon + 1,
				 flen - (size_t)(colon - f) - 1, r);
}

static int rules_parse_set(struct rules_cursor *c, struct xs_rule_set *set)
{
	size_t start, flen, vstart, vlen;

	if (!rules_next_field(c, &start, &flen))
		return rules_error(c, c->pos, "'set' needs a XSOCK_* name");
	if (flen >= sizeof(set->name) || flen < 7 ||
	    memcmp(c->line + start, "XSOCK_", 6) != 0)
		return rules_error(c, start, "'%.*s' is not a XSOCK_* name",
				   (int)flen, c->line + start);
	memcpy(set->name, c->line + start, flen);
	set->name[flen] = '\0';
	if (!rules_next_field(c, &vstart, &vlen))
		return rules_error(c, c->pos, "'set %s' needs a value",
				   set->name);
	memcpy(set->value, c->line + vstart, vlen);
	set->value[vlen] = '\0';
	if (rules_next_field(c, &start, &flen))
		return rules_error(c, start, "unexpected '%.*s' after value",
				   (int)flen, c->line + start);
	set->line = c->lineno;
	return 0;
}

static int rules_parse_rule(struct rules_cursor *c, size_t astart, size_t alen,
			    struct xs_rule *r)
{
	size_t start, flen;
	int rc;

	memset(r, 0, sizeof(*r));
	r->line = c->lineno;
	if (rules_field_is(c, astart, alen, "rdma"))
		r->action = XS_ACTION_RDMA;
	else if (rules_field_is(c, astart, alen, "tcp"))
		r->action = XS_ACTION_TCP;
	else
		return rules_error(
			c, astart,
			"unknown directive '%.*s' (expected rdma, tcp or set)",
			(int)alen, c->line + astart);

	if (!rules_next_field(c, &start, &flen))
		return rules_error(c, c->pos, "missing PROGRAM field");
	if (flen >= sizeof(r->program))
		return rules_error(c, start,
				   "program pattern longer than %d bytes",
				   XS_RULES_PROGRAM_MAX - 1);
	memcpy(r->program, c->line + start, flen);
	r->program[flen] = '\0';

	if (!rules_next_field(c, &start, &flen))
		return rules_error(c, c->pos,
				   "missing ROLE field (server, client or *)");
	if (rules_field_is(c, start, flen, "server"))
		r->role = XS_ROLE_SERVER;
	else if (rules_field_is(c, start, flen, "client"))
		r->role = XS_ROLE_CLIENT;
	else if (rules_field_is(c, start, flen, "*"))
		r->role = XS_ROLE_ANY;
	else
		return rules_error(
			c, start,
			"unknown role '%.*s' (expected server, client or *)",
			(int)flen, c->line + start);

	if (!rules_next_field(c, &start, &flen))
		return rules_error(c, c->pos, "missing ADDRESS:PORT field");
	rc = rules_parse_endpoint(c, start, flen, r);
	if (rc)
		return rc;
	if (rules_next_field(c, &start, &flen))
		return rules_error(c, start,
				   "unexpected '%.*s' after ADDRESS:PORT",
				   (int)flen, c->line + start);
	return 0;
}

/* Grow *v (of *nr entries of @size bytes) by one; returns the new slot. */
static void *rules_push(void **v, size_t *nr, size_t size)
{
	void *grown;

	/* Capacity is 4, 8, 16, ...: grow when full. */
	if (*nr == 0 || (*nr >= 4 && (*nr & (*nr - 1)) == 0)) {
		grown = realloc(*v, (*nr ? *nr * 2 : 4) * size);
		if (!grown)
			return NULL;
		*v = grown;
	}
	return (char *)*v + (*nr)++ * size;
}

void xs_rules_free(struct xs_rules *rules)
{
	free(rules->rules);
	free(rules->sets);
	memset(rules, 0, sizeof(*rules));
}

int xs_rules_parse(struct xs_rules *rules, const char *path, const char *buf,
		   size_t len, char *err, size_t errlen)
{
	struct rules_cursor c = { .path = path, .err = err, .errlen = errlen };
	size_t off = 0, start, flen;
	int rc = 0;

	xs_rules_free(rules);
	while (off < len && rc == 0) {
		const char *nl = memchr(buf + off, '\n', len - off);
		const char *nul;

		c.line = buf + off;
		c.len = nl ? (size_t)(nl - c.line) : len - off;
		c.pos = 0;
		c.lineno++;
		off += c.len + (nl ? 1 : 0);

		nul = memchr(c.line, '\0', c.len);
		if (nul) {
			rc = rules_error(&c, (size_t)(nul - c.line),
					 "NUL byte in line");
			break;
		}
		if (c.len > XS_RULES_LINE_MAX) {
			rc = rules_error(&c, XS_RULES_LINE_MAX,
					 "line longer than %d bytes",
					 XS_RULES_LINE_MAX);
			break;
		}
		if (!rules_next_field(&c, &start, &flen))
			continue;
		if (rules->nr_rules + rules->nr_sets >= XS_RULES_MAX) {
			rules_error(&c, start, "more than %d directives",
				    XS_RULES_MAX);
			rc = -E2BIG;
			break;
		}
		if (rules_field_is(&c, start, flen, "set")) {
			struct xs_rule_set *set;

			set = rules_push((void **)&rules->sets, &rules->nr_sets,
					 sizeof(*set));
			if (!set) {
				rc = -ENOMEM;
				snprintf(err, errlen, "%s: out of memory",
					 path);
				break;
			}
			rc = rules_parse_set(&c, set);
		} else {
			struct xs_rule *r;

			r = rules_push((void **)&rules->rules, &rules->nr_rules,
				       sizeof(*r));
			if (!r) {
				rc = -ENOMEM;
				snprintf(err, errlen, "%s: out of memory",
					 path);
				break;
			}
			rc = rules_parse_rule(&c, start, flen, r);
		}
	}
	if (rc)
		xs_rules_free(rules);
	return rc;
}

/*
 * The file is read with calls that libxsock does not interpose. read() and
 * close() are names of core/real_syms.def: from inside the library they
 * would land in its own wrappers, not in libc. config/ cannot use core/'s
 * xs_real table: it depends on libc alone, and the fuzzers link it without
 * core/. A hook that core/ sets before loading would leave those programs
 * without one, and make config/ call back into the layer above. pread(2) is not
 * interposed; close has no such twin in libc, so its system call is made
 * directly. Both behave as read/close do for a regular file (the only
 * kind loaded). tests/check-symbols keeps config/ clear of every
 * interposed name.
 */
static ssize_t rules_read_at(int fd, char *buf, size_t len, size_t off)
{
	return pread(fd, buf, len, (off_t)off);
}

static void rules_close(int fd)
{
	(void)syscall(SYS_close, fd);
}

int xs_rules_load(struct xs_rules *rules, const char *path, char *err,
		  size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t n;
	int fd, rc;

	fd = open(path,
		  O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO never blocks */
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open rules file: %s", path,
			 strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: fstat: %s", path, strerror(-rc));
		goto out_close;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		snprintf(err, errlen, "%s: is a directory, not a rules file",
			 path);
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		/* A FIFO, tty or device could block or never end. */
		rc = -ENXIO;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out_close;
	}
	buf = malloc(RULES_FILE_MAX + 1);
	if (!buf) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out_close;
	}
	/* Read up to one byte past the limit to tell "too big" apart. */
	while (got <= RULES_FILE_MAX) {
		n = rules_read_at(fd, buf + got, RULES_FILE_MAX + 1 - got, got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: pread: %s", path,
				 strerror(-rc));
			goto out_free;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > RULES_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errlen, "%s: rules file larger than %u bytes",
			 path, RULES_FILE_MAX);
		goto out_free;
	}
	rc = xs_rules_parse(rules, path, buf, got, err, errlen);
out_free:
	free(buf);
out_close:
	rules_close(fd);
	return rc;
}

/* Compare the first @bits bits of two addresses in network byte order. */
static bool rules_prefix_eq(const uint8_t *a, const uint8_t *b,
			    unsigned int bits)
{
	unsigned int bytes = bits / 8, rest = bits % 8;
	uint8_t mask;

	if (memcmp(a, b, bytes) != 0)
		return false;
	if (rest == 0)
		return true;
	mask = (uint8_t)(0xff << (8 - rest));
	return (a[bytes] & mask) == (b[bytes] & mask);
}

enum xs_rule_action xs_rules_match(const struct xs_rules *rules,
				   const char *program, enum xs_role role,
				   const struct sockaddr *addr, socklen_t len,
				   unsigned int *line)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0,	0,
					      0, 0, 0, 0, 0xff, 0xff };
	uint8_t ip[16];
	int family;
	uint16_t port;
	size_t i;

	if (line)
		*line = 0;
	if (addr && addr->sa_family == AF_INET &&
	    len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const void *)addr;

		family = AF_INET;
		memcpy(ip, &sin->sin_addr, 4);
		port = ntohs(sin->sin_port);
	} else if (addr && addr->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const void *)addr;

		family = AF_INET6;
		memcpy(ip, &sin6->sin6_addr, 16);
		port = ntohs(sin6->sin6_port);
		if (memcmp(ip, v4mapped, sizeof(v4mapped)) == 0) {
			family = AF_INET;
			memmove(ip, ip + 12, 4);
		}
	} else {
		return XS_ACTION_NONE;
	}

	for (i = 0; i < rules->nr_rules; i++) {
		const struct xs_rule *r = &rules->rules[i];

		if (r->role != XS_ROLE_ANY && r->role != role)
			continue;
		if (port < r->port_lo || port > r->port_hi)
			continue;
		if (r->family != AF_UNSPEC &&
		    (r->family != family ||
		     !rules_prefix_eq(r->addr, ip, r->prefix)))
			continue;
		if (fnmatch(r->program, program ? program : "", 0) != 0)
			continue;
		if (line)
			*line = r->line;
		return r->action;
	}
	return XS_ACTION_NONE;
}
