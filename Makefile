# brigade: build, test, demo, bench.  See README.md.
CC      ?= cc
PKGS    := libzmq libzstd libsodium openblas zlib
PREFIX  ?= /usr/local
BUILD   ?= build
# One portable binary: the default build targets baseline x86-64, and the
# kernels that gain from newer instructions (SSE4.1, AVX2, AVX-512) are
# picked at run time (compress/cpu.h; BRIGADE_CPU=generic turns them off).
# `make OPT=-march=native` builds for this machine only.
MARCH   := $(if $(filter x86_64-%,$(shell $(CC) -dumpmachine)),-march=x86-64 -mtune=generic)
OPT     ?= $(MARCH)
SAN     ?=
CFLAGS  ?= -O2 $(OPT) -fno-omit-frame-pointer -g
# -fno-math-errno: no math function sets errno, so loops calling sqrtf vectorize
CFLAGS  += -std=c11 -fno-math-errno -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-format-truncation -pthread -I. $(SAN)
CFLAGS  += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread $(SAN)

# A plain `make` installs nothing: with a library missing it stops with one
# line saying what to run, not a compiler error about zstd.h.  The targets
# that install what they need (tests/deps.sh) go on.
ifeq ($(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes),)
ifneq ($(filter-out deps test demo bench asan tsan simfuzz clean,$(or $(MAKECMDGOALS),all)),)
$(error the libzmq/zstd/sodium/OpenBLAS/zlib headers are missing: run 'make deps' as root (or 'sh tests/deps.sh' for the apt-get line))
endif
endif

LIB_SRC := $(wildcard compress/*.c) $(wildcard net/*.c) $(wildcard node/engine/*.c) \
           $(wildcard node/runtime/*.c) $(wildcard node/runtime/*/*.c) \
           $(filter-out node/cli/main.c,$(wildcard node/cli/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# each fuzz target linked with tests/fuzz/replay.c: its corpus replayed by the plain compiler
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps check test test-bins asan tsan simfuzz demo bench fuzz man install deb clean
all: $(BUILD)/brigade

deps:
	@sh tests/deps.sh

$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# attention's register-blocked kernels want their multiply-adds fused
$(BUILD)/node/engine/attention.o: CFLAGS += -ffp-contract=fast
# the matrix product keeps -O2 in the -O1 sanitizer builds (its 28
# accumulators stay in registers only when optimized)
$(BUILD)/node/engine/gemm.o: CFLAGS += -O2

$(BUILD)/libbrigade.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/brigade: $(BUILD)/node/cli/main.o $(BUILD)/libbrigade.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The release (`brigade version`, the Debian package's version): 0.1.<commits>.
# version.h is rewritten only when it changes, so main.o is rebuilt only then.
VERSION ?= 0.1.$(shell git rev-list --count HEAD 2>/dev/null || echo 0)
$(BUILD)/version.h: FORCE
	@mkdir -p $(@D)
	@echo '#define BRIGADE_VERSION "$(VERSION)"' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/node/cli/main.o: $(BUILD)/version.h
$(BUILD)/node/cli/main.o: CFLAGS += -I$(BUILD)
FORCE:

$(BUILD)/tests/%: tests/%.c $(BUILD)/libbrigade.a tests/check.h tests/json_valid.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbrigade.a $(LDLIBS)

$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_CORPUS='"tests/fuzz/corpus/$*"' -o $@ $< tests/fuzz/replay.c $(BUILD)/libbrigade.a $(LDLIBS)

$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbrigade.a $(LDLIBS)

# The builds of check and test use every core unless make was given -j.
JOBS     = $(if $(filter -j% --jobserver%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))

# For every edit (under a minute): the unit tests, the fuzz corpora and a few
# dozen simulated swarms (tests/sim/check.sh); ends with "N passed, M failed".
check:
	@$(MAKE) --no-print-directory $(JOBS) test-bins
	@BUILD=$(BUILD) TESTS=tests/sim/check.sh sh tests/run.sh

# Everything (CI): every unit test binary, the fuzz corpora and every
# integration script; ends with "N passed, M failed".  PyTorch (Debian's
# python3-torch) is installed for the parity checks of tests/integration/realmodels.sh.
test:
	@sh tests/deps.sh python3-torch
	@$(MAKE) --no-print-directory $(JOBS) test-bins
	@BUILD=$(BUILD) sh tests/run.sh

# what both tiers run: the binary, the unit tests, the fuzz corpus replays
test-bins: $(BUILD)/brigade $(TEST_BIN) $(FUZZ_BIN)
	@:

# The same tests built with AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	@$(MAKE) --no-print-directory test BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"

# The unit tests and small swarms (tests/tsan/swarm.sh: training, engine
# threads, kill, join, move) built with ThreadSanitizer; any report (in a
# test binary or in a node process) counts as a failure.
tsan: deps
	@$(MAKE) --no-print-directory $(BUILD)-tsan/brigade BUILD=$(BUILD)-tsan OPT="-O1 -fno-omit-frame-pointer" SAN="-fsanitize=thread"
	@$(MAKE) --no-print-directory $(patsubst $(BUILD)/%,$(BUILD)-tsan/%,$(TEST_BIN)) BUILD=$(BUILD)-tsan \
	  OPT="-O1 -fno-omit-frame-pointer" SAN="-fsanitize=thread"
	@BUILD=$(BUILD)-tsan SAN_REPORTS=ThreadSanitizer TESTS=tests/tsan/swarm.sh sh tests/run.sh

# brigade sim on SEEDS (default 10000) random fault plans: make simfuzz SEEDS=N
SEEDS ?= 10000
simfuzz: deps
	@$(MAKE) --no-print-directory $(BUILD)/brigade
	@BRIGADE=$(BUILD)/brigade sh tests/sim/simfuzz.sh 1 $(SEEDS)

demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/brigade
	@sh examples/demo.sh

# bench_portable.sh compares the default build with $(BUILD)-native (-march=native)
bench:
	@sh tests/deps.sh python3-torch || { echo "make bench: going on without PyTorch (its engine comparison is skipped)" >&2; sh tests/deps.sh; }
	@$(MAKE) --no-print-directory $(BUILD)/brigade $(BENCH_BIN)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)-native OPT=-march=native $(BUILD)-native/brigade \
	  $(BENCH_BIN:$(BUILD)/%=$(BUILD)-native/%)
	@BUILD=$(BUILD) sh tests/bench/run.sh

fuzz:
	@sh tests/fuzz/run.sh

# The manual page (options from the binary's --help, the metrics schema):
# man build/brigade.1
man: $(BUILD)/brigade.1
$(BUILD)/brigade.1: $(BUILD)/brigade examples/debian/brigade.1.in examples/debian/manpage.sh
	@sh examples/debian/manpage.sh $(BUILD)/brigade $(VERSION) >$@.tmp && mv $@.tmp $@

install: $(BUILD)/brigade
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/brigade $(DESTDIR)$(PREFIX)/bin/brigade

# The Debian package (dpkg-deb) of a portable binary, built apart in
# build-deb/ so that an OPT=-march=native build never ends up in it.
deb:
	@$(MAKE) --no-print-directory build-deb/brigade BUILD=build-deb OPT="$(MARCH)"
	@sh examples/debian/build-deb.sh build-deb/brigade build-deb $(VERSION)

clean:
	rm -rf build build-asan build-tsan build-fuzz build-deb build-native

-include $(LIB_OBJ:.o=.d) $(BUILD)/node/cli/main.d
