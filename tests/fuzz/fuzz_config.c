/*
 * tests/fuzz/fuzz_config.c - libFuzzer target: the rules file parser
 * (xs_rules_parse) and the XSOCK_* variable parser (xs_cfg_load). The
 * input is a rules file; its first byte also picks a knob (any but
 * XSOCK_RULES) whose value is the rest of the input's first line. Neither parser may read past its input, leak or
 * crash; an error always comes with a message, and a failed load leaves
 * the passthrough configuration.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../config/xs_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_env {
	const char *name;
	const char *value;
};

static const char *fuzz_getenv(const char *name, void *ctx)
{
	const struct fuzz_env *e = ctx;

	return strcmp(name, e->name) == 0 ? e->value : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[XS_CFG_ERR_MAX], *value;
	struct xs_rules rules = { 0 };
	struct xs_config cfg;
	struct fuzz_env env;
	size_t n;
	int rc;

	err[0] = '\0';
	rc = xs_rules_parse(&rules, "fuzz.rules", (const char *)data, size, err,
			    sizeof(err));
	if (rc != 0 && err[0] == '\0')
		abort(); /* an error without a message */
	xs_rules_free(&rules);

	if (size == 0)
		return 0;
	for (n = 1; n < size && data[n] != '\n' && data[n] != '\0'; n++)
		;
	value = malloc(n);
	if (!value)
		return 0;
	memcpy(value, data + 1, n - 1);
	value[n - 1] = '\0';
	env.name = xs_cfg_opt(data[0] % xs_cfg_nr_opts())->env;
	/* a rules path would make the fuzzer open files of this machine
	 * (/proc/kmsg blocks): the rules parser is fuzzed above instead */
	if (strcmp(env.name, "XSOCK_RULES") == 0) {
		free(value);
		return 0;
	}
	env.value = value;
	err[0] = '\0';
	rc = xs_cfg_load(&cfg, fuzz_getenv, &env, err, sizeof(err));
	if (rc != 0 && (err[0] == '\0' || cfg.mode != XS_MODE_OFF))
		abort();
	xs_cfg_fini(&cfg);
	free(value);
	return 0;
}
