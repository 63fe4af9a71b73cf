# hlokit - one entry point: make, make test, make bench, make install.
#
# make            build/libhlokit.so, build/hlokit, build/plugins/*.so
# make test       Check suites (normal and ASan/UBSan builds) + conformance
# make bench      benchmarks (scripts/bench.sh)
# make install    PREFIX=/usr/local
# BUILD=dir       build into another folder (e.g. to build in parallel)

CC       ?= cc
BUILD    ?= build
PREFIX   ?= /usr/local
SAN      ?=
OPT      ?= -O2 -g
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC $(OPT) \
              -Iabi -Iabi/hlokit -Ihost
JSONC_CFLAGS := $(shell pkg-config --cflags json-c 2>/dev/null)
JSONC_LIBS   := $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)
ifneq ($(SAN),)
  CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS_SAN  = -fsanitize=address,undefined
endif
CFLAGS  := $(CFLAGS_BASE) $(JSONC_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  := $(JSONC_LIBS) -lm -lpthread -ldl

# LIB_DIRS / TESTS_ONLY restrict a build to some host folders / test files,
# so work in progress elsewhere in the tree does not stop it.
LIB_DIRS ?= $(filter-out cli,$(notdir $(patsubst %/,%,$(dir $(wildcard host/*/*.c)))))
LIB_SRC  := $(sort $(foreach d,$(LIB_DIRS),$(wildcard host/$(d)/*.c)))
CLI_SRC  := $(sort $(wildcard host/cli/*.c))
PLUGINS  := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard plugin/*/*.c)))))
PLUGINS  := $(filter-out examples,$(PLUGINS))
TESTS_ONLY ?=
TEST_SRC := $(sort $(if $(TESTS_ONLY),$(patsubst %,tests/%.c,$(TESTS_ONLY)),$(wildcard tests/test_*.c)))
HEADERS  := $(wildcard abi/hlokit/*.h) $(wildcard host/*/*.h)

LIB      := $(BUILD)/libhlokit.so
BIN      := $(BUILD)/hlokit
PLUGIN_SOS := $(patsubst %,$(BUILD)/plugins/%.so,$(PLUGINS))
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all test check-tests conformance bench install clean deps fuzz
all: $(LIB) $(BIN) $(PLUGIN_SOS)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libhlokit.so $(LDFLAGS_SAN) -o $@ $^ $(LDLIBS)

$(BIN): $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC)) $(LIB)
	$(CC) $(LDFLAGS_SAN) -o $@ $(filter %.o,$^) -L$(BUILD) -lhlokit -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)

# Each plugin folder becomes one .so; it resolves hk_* from libhlokit.so.
.SECONDEXPANSION:
$(BUILD)/plugins/%.so: $$(patsubst %.c,$(BUILD)/obj/%.o,$$(wildcard plugin/$$*/*.c)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_SAN) -o $@ $(filter %.o,$^) -L$(BUILD) -lhlokit $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< -L$(BUILD) -lhlokit -Wl,-rpath,'$$ORIGIN/..' $(CHECK_LIBS) $(LDLIBS)

check-tests: $(TESTS)
	@scripts/run-checks.sh $(BUILD) $(TESTS)

# The README's test command: deps, normal + sanitizer Check suites, conformance.
test:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory all check-tests
	@$(MAKE) --no-print-directory BUILD=build/san SAN=1 OPT="-O1 -g" all check-tests
	@scripts/conformance.sh $(BUILD)

conformance: all
	@scripts/conformance.sh $(BUILD)

bench: all
	@scripts/bench.sh $(BUILD)

install: all
	install -d $(PREFIX)/bin $(PREFIX)/lib/hlokit/plugins $(PREFIX)/include/hlokit $(PREFIX)/lib/pkgconfig
	install -m 755 $(BIN) $(PREFIX)/bin/hlokit
	install -m 755 $(LIB) $(PREFIX)/lib/libhlokit.so
	for p in $(PLUGIN_SOS); do install -m 755 $$p $(PREFIX)/lib/hlokit/plugins/; done
	install -m 644 abi/hlokit/*.h $(PREFIX)/include/hlokit/
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/hlokit.pc.in > $(PREFIX)/lib/pkgconfig/hlokit.pc

clean:
	rm -rf build
