# brigade: build, test, demo, bench.  See README.md.
CC      ?= cc
PKGS    := libzmq libzstd libsodium openblas zlib
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2 -march=native -fno-omit-frame-pointer
SAN     ?=
CFLAGS  ?= $(OPT) -g
# -fno-math-errno: no math function sets errno, so loops calling sqrtf vectorize
CFLAGS  += -std=c11 -fno-math-errno -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-format-truncation -pthread -I. $(SAN)
CFLAGS  += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread $(SAN)

LIB_SRC := $(wildcard compress/*.c) $(wildcard net/*.c) $(wildcard node/engine/*.c) $(wildcard node/runtime/*.c) \
           $(filter-out node/cli/main.c,$(wildcard node/cli/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test asan demo bench fuzz install clean
all: $(BUILD)/brigade

deps:
	@sh tests/deps.sh

$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# attention's register-blocked kernels want their multiply-adds fused
$(BUILD)/node/engine/attention.o: CFLAGS += -ffp-contract=fast

$(BUILD)/libbrigade.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/brigade: $(BUILD)/node/cli/main.o $(BUILD)/libbrigade.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libbrigade.a tests/check.h tests/json_valid.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbrigade.a $(LDLIBS)

$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libbrigade.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbrigade.a $(LDLIBS)

# Every unit test binary and every integration script; ends with "N passed, M failed".
test: deps
	@$(MAKE) --no-print-directory $(BUILD)/brigade $(TEST_BIN)
	@BUILD=$(BUILD) sh tests/run.sh

# The same tests built with AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	@$(MAKE) --no-print-directory test BUILD=build-asan OPT="-O1 -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"

demo: deps
	@$(MAKE) --no-print-directory $(BUILD)/brigade
	@sh examples/demo.sh

bench: deps
	@$(MAKE) --no-print-directory $(BUILD)/brigade $(BENCH_BIN)
	@sh tests/bench/run.sh

fuzz:
	@sh tests/fuzz/run.sh

install: $(BUILD)/brigade
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/brigade $(DESTDIR)$(PREFIX)/bin/brigade

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJ:.o=.d) $(BUILD)/node/cli/main.d
