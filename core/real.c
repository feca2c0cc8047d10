/*
 * core/real.c - resolution of the real libc entry points.
 *
 * Owns the struct xs_real table. Everything is driven by real_syms.def, so
 * the table, the resolver and the list of names cannot drift apart.
 * Context: xs_real_resolve() runs once under pthread_once with the
 * reentrancy guard raised; the table is read-only afterwards.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "real.h"

struct xs_real xs_real;

static const char *const real_names[] = {
#define XS_SYM(ret, name, params, args, required) #name,
#include "real_syms.def"
#undef XS_SYM
};

static void *real_lookup(const char *name)
{
	void *sym;

	dlerror();
	sym = dlsym(RTLD_NEXT, name);
	if (dlerror() != NULL)
		return NULL;
	return sym;
}

int xs_real_resolve(char *missing, size_t missing_len)
{
	int rc = 0;

#define XS_SYM(ret, name, params, args, required)                              \
	xs_real.name = (ret(*) params)real_lookup(#name);                      \
	if (!xs_real.name && (required) && rc == 0) {                          \
		snprintf(missing, missing_len, "%s", #name);                   \
		rc = -ENOENT;                                                  \
	}
#include "real_syms.def"
#undef XS_SYM
	return rc;
}

size_t xs_real_nr_syms(void)
{
	return sizeof(real_names) / sizeof(real_names[0]);
}

const char *xs_real_sym_name(size_t i)
{
	return i < xs_real_nr_syms() ? real_names[i] : NULL;
}
