/*
 * tests/unit/test_config.c - XSOCK_* knobs: defaults, bounds, precedence
 * (default < rules file < environment) and hostile values.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../config/xs_config.h"
#include "xt.h"

#define ENV_MAX 16

/* A fake environment: pairs of name, value. */
struct fake_env {
	const char *kv[ENV_MAX * 2];
	int n;
};

static const char *fake_get(const char *name, void *ctx)
{
	struct fake_env *e = ctx;
	int i;

	for (i = 0; i < e->n; i++)
		if (strcmp(e->kv[2 * i], name) == 0)
			return e->kv[2 * i + 1];
	return NULL;
}

static struct xs_config cfg;
static char err[XS_CFG_ERR_MAX];
/* What load() takes for the installed rules file: none unless a test says
 * so, whatever this machine has installed. */
static const char *installed_rules = "";

/* The end of load()'s list: a null pointer of the arguments' own type, not
 * a bare NULL, which may be an int in a variadic call. */
#define LOAD_END ((const char *)NULL)

/* Load with the given LOAD_END-terminated name/value list. */
static int load(const char *first, ...)
{
	struct fake_env e = { .n = 0 };
	const char *name;
	va_list ap;

	va_start(ap, first);
	for (name = first; name; name = va_arg(ap, const char *)) {
		e.kv[2 * e.n] = name;
		e.kv[2 * e.n + 1] = va_arg(ap, const char *);
		e.n++;
	}
	va_end(ap);
	err[0] = '\0';
	xs_cfg_fini(&cfg);
	xs_cfg_rules_default = installed_rules;
	return xs_cfg_load(&cfg, fake_get, &e, err, sizeof(err));
}

static void expect_invalid(const char *name, const char *value, const char *msg)
{
	if (load(name, value, LOAD_END) == 0)
		xt_fail(__FILE__, __LINE__, "%s=\"%s\" accepted", name, value);
	XT_ASSERT_CONTAINS(err, name);
	XT_ASSERT_CONTAINS(err, msg);
	/* never half-applied: defaults everywhere, and passthrough */
	XT_ASSERT_EQ(cfg.mode, XS_MODE_OFF);
	XT_ASSERT_EQ(cfg.eager_limit, 4096);
	XT_ASSERT_EQ(cfg.pool_mb, 1024);
	XT_ASSERT_EQ(cfg.log_level, XS_LOG_OFF);
}

/* Write @text to a temp file; returns its path (static buffer). */
static const char *rules_file(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/xs_test_rules.XXXXXX");
	fd = mkstemp(path);
	XT_ASSERT(fd >= 0);
	XT_ASSERT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
	close(fd);
	return path;
}

XT_TEST(defaults)
{
	XT_ASSERT_EQ(load(NULL), 0);
	XT_ASSERT_EQ(cfg.mode, XS_MODE_AUTO);
	XT_ASSERT_EQ(cfg.log_level, XS_LOG_OFF);
	XT_ASSERT_STREQ(cfg.log_path, "");
	XT_ASSERT_STREQ(cfg.rules, "");
	XT_ASSERT_EQ(cfg.eager_limit, 4096);
	XT_ASSERT_EQ(cfg.rndv_threshold, 32768);
	XT_ASSERT_EQ(cfg.inline_max, 256);
	XT_ASSERT_EQ(cfg.pool_mb, 1024);
	XT_ASSERT_EQ(cfg.spin_us, 1000);
	XT_ASSERT_EQ(cfg.connect_timeout_ms, 3000);
	XT_ASSERT_STREQ(cfg.device, "");
	XT_ASSERT_EQ(cfg.stats, XS_STATS_OFF);
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 0);
}

XT_TEST(every_option_documented)
{
	size_t i;

	XT_ASSERT(xs_cfg_nr_opts() >= 10);
	for (i = 0; i < xs_cfg_nr_opts(); i++) {
		const struct xs_opt_info *o = xs_cfg_opt(i);

		XT_ASSERT(strncmp(o->env, "XSOCK_", 6) == 0);
		XT_ASSERT(strlen(o->doc) > 20);
		XT_ASSERT(strlen(o->unit) > 0);
		XT_ASSERT(o->min <= o->max);
	}
	XT_ASSERT(xs_cfg_opt(xs_cfg_nr_opts()) == NULL);
}

XT_TEST(numbers_and_bounds)
{
	XT_ASSERT_EQ(load("XSOCK_POOL_MB", "1", "XSOCK_SPIN_US", "0",
			  "XSOCK_EAGER_LIMIT", "1048576",
			  "XSOCK_CONNECT_TIMEOUT_MS", "10", LOAD_END),
		     0);
	XT_ASSERT_EQ(cfg.pool_mb, 1);
	XT_ASSERT_EQ(cfg.spin_us, 0);
	XT_ASSERT_EQ(cfg.eager_limit, 1048576);
	XT_ASSERT_EQ(cfg.connect_timeout_ms, 10);
	expect_invalid("XSOCK_POOL_MB", "0", "out of range");
	expect_invalid("XSOCK_EAGER_LIMIT", "1048577", "out of range");
	expect_invalid("XSOCK_CONNECT_TIMEOUT_MS", "9", "out of range");
}

XT_TEST(hostile_numbers)
{
	expect_invalid("XSOCK_POOL_MB", "abc", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "-1", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "+5", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", " 5", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "5 ", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "0x10", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "1e3", "expected a decimal number");
	expect_invalid("XSOCK_POOL_MB", "18446744073709551615", "out of range");
	expect_invalid("XSOCK_POOL_MB", "18446744073709551616", "out of range");
	expect_invalid("XSOCK_POOL_MB", "99999999999999999999999999999999",
		       "out of range");
}

XT_TEST(control_characters_quoted_in_message)
{
	expect_invalid("XSOCK_MODE", "a\x1b[2Jb",
		       "invalid value \"a\\x1b[2Jb\"");
	/* a very long value is cut, the message stays bounded */
	{
		char big[5000];

		memset(big, 'z', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		expect_invalid("XSOCK_DEVICE", big, "...");
		XT_ASSERT(strlen(err) < 300);
	}
}

XT_TEST(log_values)
{
	XT_ASSERT_EQ(load("XSOCK_LOG", "debug", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.log_level, XS_LOG_DEBUG);
	XT_ASSERT_STREQ(cfg.log_path, "");
	XT_ASSERT_EQ(load("XSOCK_LOG", "info:/tmp/xsock.log", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.log_level, XS_LOG_INFO);
	XT_ASSERT_STREQ(cfg.log_path, "/tmp/xsock.log");
	XT_ASSERT_EQ(load("XSOCK_LOG", "trace:a:b", LOAD_END), 0);
	XT_ASSERT_STREQ(cfg.log_path, "a:b");
	expect_invalid("XSOCK_LOG", "loud", "expected off, error, warn");
	expect_invalid("XSOCK_LOG", "debug:", "must not be empty");
	expect_invalid("XSOCK_LOG", "DEBUG", "expected off");
	expect_invalid("XSOCK_LOG", ":/tmp/x", "expected off");
}

XT_TEST(mode_stats_device)
{
	XT_ASSERT_EQ(load("XSOCK_MODE", "off", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.mode, XS_MODE_OFF);
	XT_ASSERT_EQ(load("XSOCK_MODE", "tcp", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.mode, XS_MODE_TCP);
	expect_invalid("XSOCK_MODE", "AUTO", "expected off, tcp or auto");
	expect_invalid("XSOCK_MODE", "rdma ", "expected off, tcp or auto");

	XT_ASSERT_EQ(load("XSOCK_STATS", "1", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.stats, XS_STATS_STDERR);
	XT_ASSERT_EQ(load("XSOCK_STATS", "/tmp/s.txt", LOAD_END), 0);
	XT_ASSERT_EQ(cfg.stats, XS_STATS_FILE);
	XT_ASSERT_STREQ(cfg.stats_path, "/tmp/s.txt");
	expect_invalid("XSOCK_STATS", "yes", "expected 0, 1 or a path");

	XT_ASSERT_EQ(load("XSOCK_DEVICE", "mlx5_0", LOAD_END), 0);
	XT_ASSERT_STREQ(cfg.device, "mlx5_0");
	expect_invalid("XSOCK_DEVICE", "rxe 0", "expected a device name");
	expect_invalid("XSOCK_DEVICE", "../../etc", "expected a device name");
	{
		char name[80];

		memset(name, 'a', 64);
		name[64] = '\0';
		expect_invalid("XSOCK_DEVICE", name, "too long");
	}
}

XT_TEST(installed_rules_file_read_when_rules_unset)
{
	char path[64];

	snprintf(path, sizeof(path), "%s",
		 rules_file("tcp * * *:22\nset XSOCK_SPIN_US 7\n"));
	installed_rules = path;
	XT_ASSERT_EQ(load(NULL), 0);
	XT_ASSERT_STREQ(cfg.rules, path);
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 1);
	XT_ASSERT_EQ(cfg.spin_us, 7);
	/* XSOCK_RULES set empty: no rules file at all */
	XT_ASSERT_EQ(load("XSOCK_RULES", "", LOAD_END), 0);
	XT_ASSERT_STREQ(cfg.rules, "");
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 0);
	XT_ASSERT_EQ(cfg.spin_us, 1000);
	/* XSOCK_RULES set: that file, not the installed one */
	XT_ASSERT_EQ(load("XSOCK_RULES", "/nonexistent/other.rules", LOAD_END),
		     -ENOENT);
	XT_ASSERT_CONTAINS(err, "/nonexistent/other.rules");
	/* none installed: no rules, and no error */
	installed_rules = "/nonexistent/xsock.rules";
	XT_ASSERT_EQ(load(NULL), 0);
	XT_ASSERT_STREQ(cfg.rules, "");
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 0);
	unlink(path);
	installed_rules = "";
}

XT_TEST(rules_file_sets_and_env_precedence)
{
	const char *path = rules_file("set XSOCK_SPIN_US 7\n"
				      "set XSOCK_POOL_MB 3\n"
				      "tcp * * *:22\n");

	XT_ASSERT_EQ(load("XSOCK_RULES", path, LOAD_END), 0);
	XT_ASSERT_EQ(cfg.spin_us, 7);
	XT_ASSERT_EQ(cfg.pool_mb, 3);
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 1);
	/* the environment overrides the rules file */
	XT_ASSERT_EQ(load("XSOCK_RULES", path, "XSOCK_SPIN_US", "9", LOAD_END),
		     0);
	XT_ASSERT_EQ(cfg.spin_us, 9);
	XT_ASSERT_EQ(cfg.pool_mb, 3);
	unlink(path);
}

XT_TEST(rules_file_errors)
{
	const char *path;
	char want[128];

	path = rules_file("tcp * * *:22\nset XSOCK_NOPE 1\n");
	XT_ASSERT_EQ(load("XSOCK_RULES", path, LOAD_END), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: unknown option 'XSOCK_NOPE'", path);
	XT_ASSERT_CONTAINS(err, want);
	XT_ASSERT_EQ(cfg.mode, XS_MODE_OFF);
	XT_ASSERT_EQ(cfg.rule_set.nr_rules, 0);
	unlink(path);

	path = rules_file("set XSOCK_POOL_MB 0\n");
	XT_ASSERT_EQ(load("XSOCK_RULES", path, LOAD_END), -EINVAL);
	snprintf(want, sizeof(want),
		 "%s:1: XSOCK_POOL_MB: invalid value \"0\": out of range",
		 path);
	XT_ASSERT_CONTAINS(err, want);
	unlink(path);

	path = rules_file("set XSOCK_RULES /etc/passwd\n");
	XT_ASSERT_EQ(load("XSOCK_RULES", path, LOAD_END), -EINVAL);
	XT_ASSERT_CONTAINS(err, "XSOCK_RULES cannot be set from a rules file");
	unlink(path);

	path = rules_file("rdma * * *:22\ngarbage\n");
	XT_ASSERT_EQ(load("XSOCK_RULES", path, LOAD_END), -EINVAL);
	snprintf(want, sizeof(want), "%s:2:1: unknown directive 'garbage'",
		 path);
	XT_ASSERT_CONTAINS(err, want);
	unlink(path);

	XT_ASSERT_EQ(load("XSOCK_RULES", "/nonexistent.rules", LOAD_END),
		     -ENOENT);
	XT_ASSERT_CONTAINS(err, "/nonexistent.rules: cannot open rules file");
	XT_ASSERT_EQ(cfg.mode, XS_MODE_OFF);
}

XT_TEST(env_error_wins_over_good_rules)
{
	const char *path = rules_file("set XSOCK_SPIN_US 7\n");

	XT_ASSERT_EQ(
		load("XSOCK_RULES", path, "XSOCK_EAGER_LIMIT", "1", LOAD_END),
		-EINVAL);
	XT_ASSERT_CONTAINS(
		err, "XSOCK_EAGER_LIMIT: invalid value \"1\": out of range");
	XT_ASSERT_EQ(cfg.spin_us,
		     1000); /* the good part is not applied either */
	unlink(path);
}

/* The README row that documents knob @o (Markdown; '|' escaped). */
static void readme_row(const struct xs_opt_info *o, char *row, size_t size)
{
	char range[64] = "-", unit[64];
	size_t i, u = 0;

	if (strcmp(o->type, "UINT") == 0)
		snprintf(range, sizeof(range), "%llu-%llu",
			 (unsigned long long)o->min,
			 (unsigned long long)o->max);
	for (i = 0; o->unit[i] && u + 2 < sizeof(unit); i++) {
		if (o->unit[i] == '|')
			unit[u++] = '\\';
		unit[u++] = o->unit[i];
	}
	unit[u] = '\0';
	snprintf(row, size, "| `%s` | `%s` | %s | %s | %s |", o->env, o->def,
		 range, unit, o->doc);
}

XT_TEST(readme_knob_table_matches_options_def)
{
	FILE *f = fopen(XS_SRCDIR "/README.md", "r");
	static char text[1 << 16];
	char row[1024];
	size_t i, n;
	int missing = 0;

	XT_ASSERT(f != NULL);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	for (i = 0; i < xs_cfg_nr_opts(); i++) {
		readme_row(xs_cfg_opt(i), row, sizeof(row));
		if (!strstr(text, row)) {
			fprintf(stderr, "# README.md lacks this row:\n%s\n",
				row);
			missing++;
		}
	}
	XT_ASSERT_EQ(missing, 0);
}

XT_TEST(a_long_unprintable_value_is_quoted_within_its_buffer)
{
	char v[300];
	size_t k;

	/* every alignment of 4-byte escapes against the end of the quote
	 * buffer (ASan in the asan tier catches a write past it) */
	for (k = 0; k < 8; k++) {
		memset(v, 'a', k);
		memset(v + k, 0xff, sizeof(v) - 1 - k);
		v[sizeof(v) - 1] = '\0';
		expect_invalid("XSOCK_POOL_MB", v, "\\xff\\xff");
		XT_ASSERT_CONTAINS(err, "...");
	}
}
