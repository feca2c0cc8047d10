# xsock - LD_PRELOAD library carrying TCP sockets over RDMA RC queue pairs.
#
# make            build build/libxsock.so, the tools in build/bin/ (xsock,
#                 xsock-stat, xsock-check) and the test tools
# make check      install missing packages, build, run every test tier, each
#                 class of test sized to prove its claim (23 to 40 minutes)
# make check-long the same tiers, the Soft-RoCE one at full size and with
#                 topology one's files in two as well (about 35 minutes)
# make asan       the same library built with -fsanitize=address,undefined
# make bench      kernel TCP, xsock, rsocket and raw verbs side by side
#                 (bench/run: tables, CSV and charts in bench/results/)
# make bench-smoke  the same, every workload once and tiny (in make check)
# make bench-passthrough   redis-benchmark with and without the library
# make fuzz       every libFuzzer target for FUZZ_SECONDS (300) each; make
#                 check runs them for FUZZ_CHECK_SECONDS (20)
# make soak       the soak: redis under xsock for XSOCK_SOAK_SECONDS
#                 (300), every reply checked, BGSAVE every 30 s, with
#                 redis-benchmark beside it, in Soft-RoCE topology two
#                 (tests/softroce/soak.bats; not in make check)
# make deb        the Debian packages libxsock and xsock-tools (debian/),
#                 built with dpkg-buildpackage into build/deb/
# Variants and tooling: debug, asan, lint, format, install, uninstall, clean.

PREFIX ?= /usr/local
SYSCONFDIR ?= $(PREFIX)/etc
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=
B ?= build
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

CC ?= cc
OPT ?= -O2 -g
SAN ?=
WERROR ?= -Werror
CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -U_FORTIFY_SOURCE -fPIC \
	-fvisibility=hidden -Wall -Wextra -Wshadow -Wformat=2 \
	-Wmissing-prototypes $(WERROR) $(OPT) $(SAN) -MMD -MP
LDLIBS_LIB := -ldl -lpthread -libverbs -lrdmacm
# A distribution's flags (make deb: dpkg-buildflags' hardening) reach what
# make install ships: the library and the tools. The library keeps
# -U_FORTIFY_SOURCE after CPPFLAGS: it defines the names fortify wraps.
CPPFLAGS ?=
CFLAGS ?=
LDFLAGS ?=

LIB_SRCS := $(wildcard preload/*.c) $(wildcard core/*.c) $(wildcard config/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
CFG_OBJS := $(filter $(B)/obj/config/%,$(LIB_OBJS))
CORE_OBJS := $(filter $(B)/obj/core/%,$(LIB_OBJS))

TOOLS := $(patsubst tests/tools/%.c,$(B)/tools/%,$(wildcard tests/tools/*.c)) \
	$(patsubst bench/tools/%.c,$(B)/tools/%,$(wildcard bench/tools/*.c))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(B)/unit/%,$(wildcard tests/unit/test_*.c))
RDMA_TOOLS := $(patsubst tests/rdma/%.c,$(B)/rdma/%,$(wildcard tests/rdma/*.c))
# libFuzzer targets (clang): the wire decoders and the configuration parsers
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 300
FUZZ_CHECK_SECONDS ?= 20
# the soak's length; its run gets 10 minutes more for boot and checks
XSOCK_SOAK_SECONDS ?= 300
FUZZ := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
# What users run beside the library: xsock (launcher), xsock-stat, xsock-check
BIN := $(B)/bin/xsock $(patsubst tools/%.c,$(B)/bin/%,$(wildcard tools/*.c))
# Their manual pages, from man/ (xsock.7 and xsock.1 take the knobs of
# config/options.def).
MAN := $(B)/man/xsock.1 $(B)/man/xsock.7 $(B)/man/xsock-stat.8 \
	$(B)/man/xsock-check.8

.SECONDARY:

.PHONY: all check check-long check-tiers test check-deps check-unit check-bats check-softroce check-asan \
	check-symbols fuzz fuzz-build check-fuzz soak \
	debug asan install uninstall shipped deb clean lint format \
	bench-passthrough demo bench bench-smoke

all: $(B)/libxsock.so $(BIN) $(MAN) $(TOOLS) $(UNIT_TESTS) $(RDMA_TOOLS)

# What make install ships: the library, the tools and their manual pages.
shipped: $(B)/libxsock.so $(BIN) $(MAN)

# The exported names come from the same list as the real-function table.
$(B)/libxsock.map: core/real_syms.def
	@mkdir -p $(@D)
	$(Q){ echo '{'; echo '  global:'; \
	  sed -n 's/^XS_SYM([^,]*, *\([A-Za-z0-9_]*\),.*/    \1;/p' $<; \
	  echo '  local: *;'; echo '};'; } > $@

$(B)/libxsock.so: $(LIB_OBJS) $(B)/libxsock.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(SAN) $(LDFLAGS) -o $@ $(LIB_OBJS) \
		-Wl,--version-script=$(B)/libxsock.map -Wl,-z,defs $(LDLIBS_LIB)

# The rules file the library reads when XSOCK_RULES is unset.
$(B)/obj/config/config.o: CPPFLAGS += \
	-DXS_RULES_DEFAULT='"$(SYSCONFDIR)/xsock.rules"'

$(B)/obj/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS_BASE) $(CFLAGS) -c -o $@ $<

$(B)/tools/%: tests/tools/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -O1 -g $(SAN) \
		-o $@ $< -lpthread

# The rogue peer speaks the wire format on raw verbs, with core/proto.c's
# encoder and none of the library.
$(B)/tools/rogue_peer: tests/tools/rogue_peer.c core/proto.c core/proto.h
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
		-Wmissing-prototypes $(WERROR) -O1 -g $(SAN) -o $@ $< core/proto.c \
		-libverbs -lrdmacm

$(B)/tools/%: bench/tools/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
		-Wmissing-prototypes $(WERROR) -O2 -g $(SAN) -o $@ $< -lpthread \
		-Wl,--as-needed -libverbs -lrdmacm

$(B)/bin/%: tools/%.c core/xs_shm.h
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
		-Wmissing-prototypes $(WERROR) -O2 -g $(SAN) $(CFLAGS) $(LDFLAGS) \
		-o $@ $< -lm

# The launcher knows the knobs of config/options.def.
$(B)/bin/xsock: tools/xsock config/options.def
	@mkdir -p $(@D)
	@echo "  GEN     $@"
	$(Q)knobs=$$(sed -n 's/^XS_OPT([a-z_]*, *XSOCK_\([A-Z_]*\),.*/\1/p' \
		config/options.def | tr '\n' ' '); \
	  sed "s/@KNOBS@/$$knobs/" $< > $@.tmp && chmod 0755 $@.tmp && mv $@.tmp $@

# Manual pages: the install paths filled in; xsock.7 and xsock.1 also get
# the knobs of config/options.def in place of their KNOBS marker line.
MAN_SUBST = sed -e 's|@LIB@|$(PREFIX)/lib/libxsock.so|g' \
	-e 's|@RULES@|$(SYSCONFDIR)/xsock.rules|g'

$(B)/man/xsock.7: man/xsock.7.in man/gen-knobs config/options.def
	@mkdir -p $(@D)
	@echo "  GEN     $@"
	$(Q)man/gen-knobs config/options.def >$@.knobs
	$(Q)$(MAN_SUBST) -e '/^\.\\" @KNOBS@$$/{r $@.knobs' -e 'd' -e '}' $< >$@.tmp
	$(Q)rm -f $@.knobs && mv $@.tmp $@

$(B)/man/xsock.1: man/xsock.1.in man/gen-knobs config/options.def
	@mkdir -p $(@D)
	@echo "  GEN     $@"
	$(Q)man/gen-knobs --launcher config/options.def >$@.knobs
	$(Q)$(MAN_SUBST) -e '/^\.\\" @KNOBS@$$/{r $@.knobs' -e 'd' -e '}' $< >$@.tmp
	$(Q)rm -f $@.knobs && mv $@.tmp $@

$(B)/man/%.8: man/%.8
	@mkdir -p $(@D)
	@echo "  GEN     $@"
	$(Q)$(MAN_SUBST) $< >$@.tmp && mv $@.tmp $@

$(B)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c core/proto.c core/proto.h \
		config/config.c config/rules.c config/xs_config.h config/options.def
	@mkdir -p $(@D)
	@echo "  FUZZ    $<"
	$(Q)$(FUZZ_CC) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-o $@ $< core/proto.c config/config.c config/rules.c

# Unit tests link the modules they test (config/ and core/).
UNIT_DEPS := $(B)/obj/tests/unit/xt_main.o $(CFG_OBJS) $(CORE_OBJS)
$(B)/unit/%: $(B)/obj/tests/unit/%.o $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(SAN) -o $@ $^ -ldl -lpthread -libverbs -lrdmacm

# Programs that drive core/ on real verbs, run in the Soft-RoCE tier.
$(B)/rdma/%: $(B)/obj/tests/rdma/%.o $(CFG_OBJS) $(CORE_OBJS)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(SAN) -o $@ $^ -ldl -lpthread -libverbs -lrdmacm

$(B)/obj/tests/rdma/%.o: tests/rdma/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_BASE) -Wno-missing-prototypes -c -o $@ $<

$(B)/obj/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_BASE) -Wno-missing-prototypes -DXS_SRCDIR=\"$(CURDIR)\" \
		-c -o $@ $<

# --- tests -----------------------------------------------------------------
# Every tier writes TAP into $(B)/test-logs and prints its time;
# tests/summary counts them and prints the closing "N passed, N failed, N
# skipped" line with the whole run's time. make check runs each class of
# test sized to prove its claim (23 to 40 minutes on 2 cores); make
# check-long runs the same tiers with the Soft-RoCE one at full size
# (XSOCK_TEST_LONG=1: the 10,000-connection storm, the 1 GiB stream, the
# longer outages) and topology one's files in topology two as well
# (tests/softroce/check --long; about 35 minutes).
check: check-deps
	$(Q)$(MAKE) --no-print-directory check-tiers

check-long: check-deps
	$(Q)$(MAKE) --no-print-directory check-tiers \
		SOFTROCE_CHECK="tests/softroce/check --long"

SOFTROCE_CHECK ?= tests/softroce/check

check-tiers:
	$(Q)rm -rf $(B)/test-logs && mkdir -p $(B)/test-logs
	$(Q)date +%s.%N >$(B)/test-logs/start
	$(Q)$(MAKE) --no-print-directory all
	@# The packages, for the package tests of the bats and Soft-RoCE tiers:
	@# a failed build fails those (make deb removes the old ones first).
	-$(Q)$(MAKE) --no-print-directory deb
	-$(Q)tests/run-tier $(B)/test-logs/static.tap tests/static-tier $(B)/obj
	-$(Q)tests/run-tier $(B)/test-logs/unit.tap tests/unit/run $(B)/unit
	-$(Q)XSOCK_LIB=$(CURDIR)/$(B)/libxsock.so XSOCK_TOOLS=$(CURDIR)/$(B)/tools \
		tests/run-tier $(B)/test-logs/bats.tap bats --tap --timing tests/bats
	-$(Q)tests/run-tier $(B)/test-logs/asan.tap tests/asan-tier
	-$(Q)XSOCK_SOFTROCE_RAW_DIR=$(CURDIR)/$(B)/test-logs \
		tests/run-tier $(B)/test-logs/softroce.tap $(SOFTROCE_CHECK)
	@# The fuzzers run for a set time and the bench smoke asserts rows, not
	@# figures: side by side, their output one after the other.
	-$(Q)tests/run-tier $(B)/test-logs/fuzz.tap \
		$(MAKE) --no-print-directory -s check-fuzz \
		>$(B)/test-logs/fuzz.out 2>&1 & \
	tests/run-tier $(B)/test-logs/bench.tap bats --tap --timing tests/bench; \
	wait; cat $(B)/test-logs/fuzz.out
	$(Q)tests/summary $(B)/test-logs

test: check

check-deps:
	$(Q)tests/install-deps

check-unit: all
	$(Q)tests/unit/run $(B)/unit

check-bats: all deb
	$(Q)XSOCK_LIB=$(CURDIR)/$(B)/libxsock.so XSOCK_TOOLS=$(CURDIR)/$(B)/tools \
		bats tests/bats

check-softroce: all asan
	$(Q)tests/softroce/check

check-asan:
	$(Q)tests/asan-tier

# No core/ or config/ object calls an interposed name (nm -u), and no
# preload/ wrapper calls another by name: the library never re-enters itself.
check-symbols: all
	$(Q)tests/check-symbols $(B)/obj

fuzz-build: $(FUZZ)

# Each target for FUZZ_SECONDS (300), its corpus kept in build/fuzz/corpus.
fuzz: fuzz-build
	$(Q)tests/fuzz/run $(B)/fuzz $(FUZZ_SECONDS)

check-fuzz: fuzz-build
	$(Q)tests/fuzz/run $(B)/fuzz $(FUZZ_CHECK_SECONDS)

# The soak, on its own: redis for XSOCK_SOAK_SECONDS in topology two.
soak: check-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)XSOCK_SOAK_SECONDS=$(XSOCK_SOAK_SECONDS) tests/softroce/run --topology two \
		--timeout $$(($(XSOCK_SOAK_SECONDS) + 600)) -- bats --tap tests/softroce/soak.bats

# --- variants ----------------------------------------------------------------
debug:
	$(Q)$(MAKE) --no-print-directory B=build/debug OPT="-O0 -g" all

asan:
	$(Q)$(MAKE) --no-print-directory B=build/asan OPT="-O1 -g" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" all

# --- install -------------------------------------------------------------------
# The launcher and xsock-check find the library at ../lib/libxsock.so
# beside themselves: it goes to PREFIX/lib, the tools to PREFIX/bin.
# SYSCONFDIR (PREFIX/etc) takes the example rules file.
install: shipped
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(PREFIX)/share/doc/xsock \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(B)/libxsock.so $(DESTDIR)$(PREFIX)/lib/libxsock.so
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 config/xsock.rules $(DESTDIR)$(SYSCONFDIR)/xsock.rules
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/xsock/README.md
	install -m 0644 $(filter %.1,$(MAN)) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(filter %.7,$(MAN)) $(DESTDIR)$(MANDIR)/man7/
	install -m 0644 $(filter %.8,$(MAN)) $(DESTDIR)$(MANDIR)/man8/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libxsock.so \
		$(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(BIN))) \
		$(DESTDIR)$(SYSCONFDIR)/xsock.rules \
		$(DESTDIR)$(PREFIX)/share/doc/xsock/README.md \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(filter %.1,$(MAN)))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(filter %.7,$(MAN)))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(filter %.8,$(MAN))))

# --- packages --------------------------------------------------------------
# The Debian packages (debian/): dpkg-buildpackage in a copy of the tree
# (the files git tracks or would track), $(DEB)/xsock-VERSION, removed
# after, so that its clean and its products stay in $(DEB): the .debs
# (and -dbgsym .ddebs), the source package, .buildinfo and .changes. Its
# log is $(DEB)/build.log.
DEB := $(B)/deb

deb:
	$(Q)rm -rf $(DEB) && mkdir -p $(DEB)
	$(Q)v=$$(dpkg-parsechangelog -S Version) && src=$(DEB)/xsock-$$v && \
	  mkdir -p $$src && \
	  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	    git ls-files -z --cached --others --exclude-standard | \
	      tar --null -T - --ignore-failed-read -cf - 2>/dev/null; \
	  else tar --exclude=./build -cf - .; fi | tar -xf - -C $$src && \
	  echo "  DEB     $(DEB)/ (dpkg-buildpackage, log in $(DEB)/build.log)" && \
	  (cd $$src && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS \
	    dpkg-buildpackage -us -uc) >$(DEB)/build.log 2>&1 || \
	  { tail -n 40 $(DEB)/build.log; echo "deb: dpkg-buildpackage failed"; exit 1; }
	$(Q)rm -rf $(DEB)/xsock-*/
	$(Q)ls $(DEB)/*.deb

# --- tooling ---------------------------------------------------------------
# Every C source of the project: the library, its tools, the test and
# bench programs.
LINT_SRCS = $(wildcard preload/*.[ch] core/*.[ch] config/*.[ch] tools/*.c \
	tests/tools/*.c tests/unit/*.[ch] tests/rdma/*.c tests/fuzz/*.c \
	bench/tools/*.c)

lint:
	$(Q)! grep -n '#include "\.\./preload/' core/*.[ch] config/*.[ch] || \
		{ echo "lint: core/ or config/ includes preload/"; exit 1; }
	$(Q)! grep -n '#include "\.\./core/' config/*.[ch] || \
		{ echo "lint: config/ includes core/"; exit 1; }
	$(Q)! grep -n 'getenv' core/*.c preload/*.c || \
		{ echo "lint: getenv outside config/"; exit 1; }
	$(Q)clang-format --dry-run -Werror $(LINT_SRCS) \
		|| { echo "lint: clang-format differences: run make format"; exit 1; }
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--inconclusive --suppress=missingIncludeSystem -D_GNU_SOURCE \
		preload core config tools tests/tools tests/unit tests/rdma \
		tests/fuzz bench/tools
	@echo "lint: ok (layering, clang-format, cppcheck)"

format:
	clang-format -i $(LINT_SRCS)

# The main job: redis under xsock next to kernel TCP, in the Soft-RoCE guest
# unless this host has an RDMA device.
demo: check-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/softroce/run --topology one --timeout 900 -- bench/demo-redis

bench: check-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/run

bench-smoke: check-deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/run --smoke

bench-passthrough: all
	$(Q)XSOCK_LIB=$(CURDIR)/$(B)/libxsock.so bench/passthrough

clean:
	rm -rf build

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
