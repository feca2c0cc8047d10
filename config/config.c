/*
 * config/config.c - load the XSOCK_* knobs into one const struct xs_config.
 *
 * Owns option parsing and validation, driven by options.def; the rules file
 * itself is parsed by rules.c and only its "set" lines are applied here.
 * Nothing is half-applied: on any error the caller gets the defaults with
 * mode off and a one-line message. Context: init only, single-threaded.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xs_config.h"

/* The installed rules file: PREFIX/etc/xsock.rules, or what the build's
 * SYSCONFDIR says (the Debian package: /etc/xsock/xsock.rules). */
#ifndef XS_RULES_DEFAULT
#define XS_RULES_DEFAULT ""
#endif
const char *xs_cfg_rules_default = XS_RULES_DEFAULT;

enum cfg_type {
	CFG_UINT,
	CFG_MODE,
	CFG_LOG,
	CFG_PATH,
	CFG_NAME,
	CFG_STATS,
};

struct cfg_desc {
	struct xs_opt_info info;
	enum cfg_type type;
	size_t offset; /* of the field in struct xs_config */
};

static const struct cfg_desc cfg_table[] = {
#define XS_OPT(field, env, type, def, min, max, unit, doc)                     \
	{ { #env, #type, def, min, max, unit, doc },                           \
	  CFG_##type,                                                          \
	  offsetof(struct xs_config, field) },
#include "options.def"
#undef XS_OPT
};

#define CFG_NR (sizeof(cfg_table) / sizeof(cfg_table[0]))

static const char *const cfg_log_levels[] = {
	[XS_LOG_OFF] = "off",	  [XS_LOG_ERROR] = "error",
	[XS_LOG_WARN] = "warn",	  [XS_LOG_INFO] = "info",
	[XS_LOG_DEBUG] = "debug", [XS_LOG_TRACE] = "trace",
};

static const char *const cfg_modes[] = {
	[XS_MODE_OFF] = "off",
	[XS_MODE_TCP] = "tcp",
	[XS_MODE_AUTO] = "auto",
};

size_t xs_cfg_nr_opts(void)
{
	return CFG_NR;
}

const struct xs_opt_info *xs_cfg_opt(size_t i)
{
	return i < CFG_NR ? &cfg_table[i].info : NULL;
}

static int cfg_copy_str(char *dst, size_t size, const char *val, bool empty_ok,
			const char **why)
{
	size_t n = strlen(val);

	if (n == 0 && !empty_ok) {
		*why = "must not be empty";
		return -EINVAL;
	}
	if (n >= size) {
		*why = "too long";
		return -EINVAL;
	}
	memcpy(dst, val, n + 1);
	return 0;
}

static int cfg_parse_uint(const struct cfg_desc *d, const char *val,
			  uint64_t *out, const char **why)
{
	uint64_t v = 0;
	const char *p;

	if (*val == '\0') {
		*why = "expected a decimal number";
		return -EINVAL;
	}
	for (p = val; *p; p++) {
		if (*p < '0' || *p > '9') {
			*why = "expected a decimal number";
			return -EINVAL;
		}
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
			*why = "out of range";
			return -EINVAL;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < d->info.min || v > d->info.max) {
		*why = "out of range";
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int cfg_parse_enum(const char *const *names, size_t nr, const char *val,
			  size_t vlen, int *out)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if (strlen(names[i]) == vlen &&
		    memcmp(names[i], val, vlen) == 0) {
			*out = (int)i;
			return 0;
		}
	return -EINVAL;
}

static bool cfg_is_name(const char *val)
{
	const char *p;

	for (p = val; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
		      *p == '.'))
			return false;
	return true;
}

/* Parse @val into the field of @cfg that @d describes. */
static int cfg_apply(struct xs_config *cfg, const struct cfg_desc *d,
		     const char *val, const char **why)
{
	char *field = (char *)cfg + d->offset;
	const char *colon;
	int v;

	switch (d->type) {
	case CFG_UINT:
		return cfg_parse_uint(d, val, (uint64_t *)(void *)field, why);
	case CFG_MODE:
		if (cfg_parse_enum(cfg_modes, 3, val, strlen(val), &v)) {
			*why = "expected off, tcp or auto";
			return -EINVAL;
		}
		cfg->mode = (enum xs_mode)v;
		return 0;
	case CFG_LOG:
		colon = strchr(val, ':');
		if (cfg_parse_enum(cfg_log_levels, 6, val,
				   colon ? (size_t)(colon - val) : strlen(val),
				   &v)) {
			*why = "expected off, error, warn, info, debug or "
			       "trace, optionally followed by :path";
			return -EINVAL;
		}
		cfg->log_level = (enum xs_log_level)v;
		cfg->log_path[0] = '\0';
		if (colon)
			return cfg_copy_str(cfg->log_path,
					    sizeof(cfg->log_path), colon + 1,
					    false, why);
		return 0;
	case CFG_PATH:
		return cfg_copy_str(field, PATH_MAX, val, true, why);
	case CFG_NAME:
		if (!cfg_is_name(val)) {
			*why = "expected a device name of letters, digits, "
			       "'_', '-' and '.'";
			return -EINVAL;
		}
		return cfg_copy_str(field, sizeof(cfg->device), val, true, why);
	case CFG_STATS:
		cfg->stats_path[0] = '\0';
		if (strcmp(val, "0") == 0) {
			cfg->stats = XS_STATS_OFF;
			return 0;
		}
		if (strcmp(val, "1") == 0) {
			cfg->stats = XS_STATS_STDERR;
			return 0;
		}
		if (!strchr(val, '/')) {
			*why = "expected 0, 1 or a path containing '/'";
			return -EINVAL;
		}
		cfg->stats = XS_STATS_FILE;
		return cfg_copy_str(cfg->stats_path, sizeof(cfg->stats_path),
				    val, false, why);
	}
	*why = "unknown option type";
	return -EINVAL;
}

static const struct cfg_desc *cfg_find(const char *env)
{
	size_t i;

	for (i = 0; i < CFG_NR; i++)
		if (strcmp(cfg_table[i].info.env, env) == 0)
			return &cfg_table[i];
	return NULL;
}

static int cfg_set_defaults(struct xs_config *cfg)
{
	const char *why = NULL;
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < CFG_NR; i++)
		if (cfg_apply(cfg, &cfg_table[i], cfg_table[i].info.def, &why))
			return -EINVAL; /* a bad default is a build bug */
	return 0;
}

static const char *cfg_secure_getenv(const char *name, void *ctx)
{
	(void)ctx;
	return secure_getenv(name);
}

/* The printable form of a value for an error message, cut short. */
static void cfg_quote(char *out, size_t size, const char *val)
{
	size_t i, o = 0;

	/* room kept for the longest item ("\\xff"), "..." and the NUL */
	for (i = 0; val[i] && o + 8 <= size; i++) {
		unsigned char ch = (unsigned char)val[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '"')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
	}
	if (val[i] && o + 4 <= size) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

static int cfg_load(struct xs_config *cfg, xs_cfg_getenv_fn get, void *ctx,
		    char *err, size_t errlen)
{
	const char *env_val[CFG_NR];
	const char *why = NULL;
	char shown[80];
	size_t i;
	int rc;

	if (cfg_set_defaults(cfg)) {
		snprintf(err, errlen, "xsock: invalid built-in default");
		return -EINVAL;
	}
	for (i = 0; i < CFG_NR; i++)
		env_val[i] = get(cfg_table[i].info.env, ctx);

	/* The rules file first: its "set" lines rank below the environment.
	 * XSOCK_RULES unset (not empty): the installed file, if there is one. */
	for (i = 0; i < CFG_NR; i++) {
		const char *path = env_val[i];

		if (cfg_table[i].offset != offsetof(struct xs_config, rules))
			continue;
		if (!path && xs_cfg_rules_default && xs_cfg_rules_default[0] &&
		    access(xs_cfg_rules_default, F_OK) == 0)
			path = xs_cfg_rules_default;
		if (path && cfg_apply(cfg, &cfg_table[i], path, &why)) {
			cfg_quote(shown, sizeof(shown), path);
			snprintf(err, errlen, "%s: invalid value \"%s\": %s",
				 cfg_table[i].info.env, shown, why);
			return -EINVAL;
		}
	}
	if (cfg->rules[0]) {
		rc = xs_rules_load(&cfg->rule_set, cfg->rules, err, errlen);
		if (rc && rc != -EINVAL && rc != -E2BIG) {
			char cause[XS_CFG_ERR_MAX];

			snprintf(cause, sizeof(cause), "%s", err);
			snprintf(err, errlen, "XSOCK_RULES: %s", cause);
		}
		if (rc)
			return rc;
		for (i = 0; i < cfg->rule_set.nr_sets; i++) {
			const struct xs_rule_set *set = &cfg->rule_set.sets[i];
			const struct cfg_desc *d = cfg_find(set->name);

			if (!d) {
				snprintf(err, errlen,
					 "%s:%u: unknown option '%s'",
					 cfg->rules, set->line, set->name);
				return -EINVAL;
			}
			if (d->offset == offsetof(struct xs_config, rules)) {
				snprintf(err, errlen,
					 "%s:%u: XSOCK_RULES cannot be set "
					 "from a rules file",
					 cfg->rules, set->line);
				return -EINVAL;
			}
			if (cfg_apply(cfg, d, set->value, &why)) {
				cfg_quote(shown, sizeof(shown), set->value);
				snprintf(err, errlen,
					 "%s:%u: %s: invalid value \"%s\": %s",
					 cfg->rules, set->line, set->name,
					 shown, why);
				return -EINVAL;
			}
		}
	}
	for (i = 0; i < CFG_NR; i++) {
		if (!env_val[i] ||
		    cfg_table[i].offset == offsetof(struct xs_config, rules))
			continue;
		if (cfg_apply(cfg, &cfg_table[i], env_val[i], &why)) {
			cfg_quote(shown, sizeof(shown), env_val[i]);
			snprintf(err, errlen, "%s: invalid value \"%s\": %s",
				 cfg_table[i].info.env, shown, why);
			return -EINVAL;
		}
	}
	return 0;
}

int xs_cfg_load(struct xs_config *cfg, xs_cfg_getenv_fn get, void *ctx,
		char *err, size_t errlen)
{
	int rc;

	rc = cfg_load(cfg, get ? get : cfg_secure_getenv, ctx, err, errlen);
	if (rc) {
		xs_rules_free(&cfg->rule_set);
		cfg_set_defaults(cfg);
		cfg->mode = XS_MODE_OFF;
	}
	return rc;
}

void xs_cfg_fini(struct xs_config *cfg)
{
	xs_rules_free(&cfg->rule_set);
}
