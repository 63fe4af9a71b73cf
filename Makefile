# hlokit - one entry point: make, make test, make bench, make install.
#
# make            build/libhlokit.so, build/hlokit, build/plugins/*.so
# make test       deps, Check suites (normal, ASan/UBSan, valgrind) + conformance
#                 + scripts/test-mpi.sh (MPI back end; skipped without Open MPI)
# make valgrind   the Check suites of $(BUILD) under valgrind (no leaks)
# make conformance  scripts/conformance.sh: pass rates against the floors
# make bench      benchmarks (scripts/bench.sh)
# make fuzz       libFuzzer run of the HLO parser (needs clang; FUZZ_TIME=60)
# make fuzz-pipeline  libFuzzer run of parse/verify/propagate/partition/evaluate
# make install    PREFIX=/usr/local
# BUILD=dir       build into another folder (e.g. to build in parallel)

CC       ?= cc
BUILD    ?= build
PREFIX   ?= /usr/local
SAN      ?=
OPT      ?= -O2 -g
# -fvisibility=hidden: libhlokit.so exports what the ABI headers declare
# and nothing else (abi/hlokit/export.h); abi/hlokit.map versions it.
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden $(OPT) \
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
PLUGIN_HEADERS := $(wildcard plugin/*/*.h)

VERSION  := $(shell sed -n 's/^\#define HK_VERSION_STRING "\(.*\)"/\1/p' abi/hlokit/hlokit.h)
LIB      := $(BUILD)/libhlokit.so
BIN      := $(BUILD)/hlokit
PLUGIN_SOS := $(patsubst %,$(BUILD)/plugins/%.so,$(PLUGINS))
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# Tools built from scripts/*.c, linked against libhlokit.so (not part of `all`,
# so a restricted LIB_DIRS build does not need json/analysis).
TOOLS    := $(BUILD)/hk-conformance $(BUILD)/hk-gen-mlp $(BUILD)/hk-bench-parse $(BUILD)/hk-bench-pipeline \
            $(BUILD)/hk-bench-partition $(BUILD)/hk-gen-transformer

.PHONY: all test check-tests valgrind conformance tools bench install clean deps fuzz fuzz-pipeline
all: $(LIB) $(BIN) $(PLUGIN_SOS)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Plugin objects also depend on their plugins' private headers.
$(BUILD)/obj/plugin/%.o: plugin/%.c $(HEADERS) $(PLUGIN_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

LIB_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
VERSION_SCRIPT := abi/hlokit.map
$(LIB): $(LIB_OBJ) $(VERSION_SCRIPT)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libhlokit.so -Wl,--version-script=$(VERSION_SCRIPT) $(LDFLAGS_SAN) \
	  -o $@ $(LIB_OBJ) $(LDLIBS)

$(BIN): $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC)) $(LIB)
	$(CC) $(LDFLAGS_SAN) -o $@ $(filter %.o,$^) -L$(BUILD) -lhlokit -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)

# Each plugin folder becomes one .so; it resolves hk_* from libhlokit.so.
# Objects reached through the plugin rule are "intermediate" to make: keep
# them (.PRECIOUS), but do not use .SECONDARY, which would also let make
# skip rebuilding a missing object of an up-to-date libhlokit.so.
.PRECIOUS: $(BUILD)/obj/%.o $(BUILD)/obj/plugin/%.o
.SECONDEXPANSION:
$(BUILD)/plugins/%.so: $$(addprefix $(BUILD)/obj/,$$(subst .c,.o,$$(wildcard plugin/$$*/*.c))) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_SAN) -o $@ $(filter %.o,$^) -L$(BUILD) -lhlokit $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< -L$(BUILD) -lhlokit -Wl,-rpath,'$$ORIGIN/..' $(CHECK_LIBS) $(LDLIBS)

# Suites that test the library's insides (arena, intern table, metadata)
# link its objects instead of libhlokit.so, which exports only the ABI.
# They load no plugin (a plugin would see a second copy of the library).
INTERNAL_TESTS := $(BUILD)/tests/test_arena $(BUILD)/tests/test_ir $(BUILD)/tests/test_sharding
$(INTERNAL_TESTS): $(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests $(LDFLAGS_SAN) -o $@ $< $(LIB_OBJ) $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/hk-%: scripts/%.c $(LIB) $(HEADERS)
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD) -lhlokit -Wl,-rpath,'$$ORIGIN' $(LDFLAGS_SAN) $(LDLIBS)

tools: $(TOOLS)

# The Open MPI collective back end (backend/mpi/): its own shared object,
# dlopened by hlokit only for --backend=mpi; skipped when mpicc is missing.
MPICC  ?= $(shell command -v mpicc 2>/dev/null)
MPI_SO := $(if $(MPICC),$(BUILD)/backends/mpi.so)
all: $(MPI_SO)
$(BUILD)/backends/mpi.so: $(wildcard backend/mpi/*.c backend/mpi/*.h) $(HEADERS) $(LIB)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -shared -o $@ $(filter %.c,$^) -L$(BUILD) -lhlokit $(LDFLAGS_SAN) $(LDLIBS)

deps:
	@bash scripts/deps.sh

# Suites see HLOKIT_SAN=1 in a sanitizer build (and HLOKIT_VALGRIND=1 under
# valgrind) so a long corpus sweep can shorten itself there.
# Tests run the binary and the plugins, so (unless LIB_DIRS restricts the
# build) everything is built before any test runs, also under -j.
FULL_BUILD := $(if $(filter command line,$(origin LIB_DIRS)),,all)
check-tests: $(TESTS) | $(FULL_BUILD)
	@$(if $(SAN),HLOKIT_SAN=1 )bash scripts/run-checks.sh $(BUILD) $(TESTS)

valgrind: $(TESTS) | $(FULL_BUILD)
	@VALGRIND=1 bash scripts/run-checks.sh $(BUILD) $(TESTS)

NPROC := $(shell nproc 2>/dev/null || echo 2)

# The README's test command: deps, normal + sanitizer + valgrind Check
# suites, then the conformance runner against its floors.
test:
	@bash scripts/deps.sh
	@echo "== build and Check suites ($(BUILD))"
	@$(MAKE) --no-print-directory -j$(NPROC) all tools check-tests
	@echo "== ASan/UBSan build and Check suites (build/san)"
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build/san SAN=1 OPT="-O1 -g" all check-tests
	@echo "== Check suites under valgrind ($(BUILD))"
	@$(MAKE) --no-print-directory -j$(NPROC) valgrind
	@echo "== conformance ($(BUILD))"
	@bash scripts/conformance.sh $(BUILD)
	@echo "== MPI back end against the thread back end ($(BUILD))"
	@bash scripts/test-mpi.sh $(BUILD)

conformance: all tools
	@bash scripts/conformance.sh $(BUILD)

bench: all tools
	@bash scripts/bench.sh $(BUILD)

# libFuzzer target for the parser: the library sources compiled into the
# fuzzer with coverage, seeded from fixtures/, the fuzz regressions and every
# module of the conformance corpus (FUZZ_CORPUS_SRC; skipped when absent).
# Needs clang.  FUZZ_FLAGS adds libFuzzer options (e.g. -jobs=1).
FUZZ_TIME ?= 60
FUZZ_CC   ?= clang
FUZZ_SRC  ?= scripts/fuzz_parser.c
FUZZ_DIRS ?= ir text sharding analysis
FUZZ_CORPUS_SRC ?= ../shared/conformance
FUZZ_FLAGS ?=
fuzz:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang ($(FUZZ_CC) not found)"; exit 2; }
	@mkdir -p $(BUILD)/fuzz/corpus $(BUILD)/fuzz/seeds
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -Iabi -Iabi/hlokit -Ihost $(JSONC_CFLAGS) -o $(BUILD)/fuzz/fuzz_parser \
	  $(FUZZ_SRC) $(sort $(foreach d,$(FUZZ_DIRS),$(wildcard host/$(d)/*.c))) $(LDLIBS)
	$(CC) -std=c11 -D_GNU_SOURCE -O1 $(JSONC_CFLAGS) -o $(BUILD)/fuzz/fuzz_seeds scripts/fuzz_seeds.c $(JSONC_LIBS)
	cp fixtures/*.hlo tests/fuzz_regressions/*.hlo $(BUILD)/fuzz/seeds/
	@if ls $(FUZZ_CORPUS_SRC)/*.jsonl >/dev/null 2>&1; then \
	  $(BUILD)/fuzz/fuzz_seeds $(BUILD)/fuzz/seeds $(FUZZ_CORPUS_SRC)/*.jsonl; \
	else echo "fuzz: no corpus at $(FUZZ_CORPUS_SRC); seeding from fixtures only"; fi
	$(BUILD)/fuzz/fuzz_parser -max_total_time=$(FUZZ_TIME) -max_len=65536 $(FUZZ_FLAGS) \
	  -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus $(BUILD)/fuzz/seeds

# libFuzzer target for the whole pipeline (scripts/fuzz_pipeline.c): the
# library and the plugins built by clang with sanitizers and coverage into
# $(FUZZ_PL), seeded as `make fuzz` is (fixtures, fuzz regressions, the
# conformance modules); FUZZ_TIME and FUZZ_FLAGS as there.
FUZZ_PL = $(BUILD)/fuzz-pipeline
fuzz-pipeline:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz-pipeline needs clang ($(FUZZ_CC) not found)"; exit 2; }
	$(MAKE) --no-print-directory BUILD=$(FUZZ_PL) CC=$(FUZZ_CC) SAN=1 OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link -Wno-unused-command-line-argument" \
	  $(FUZZ_PL)/libhlokit.so $(patsubst $(BUILD)/%,$(FUZZ_PL)/%,$(PLUGIN_SOS))
	$(FUZZ_CC) -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	  -Iabi -Iabi/hlokit -Ihost $(JSONC_CFLAGS) -o $(FUZZ_PL)/fuzz_pipeline scripts/fuzz_pipeline.c \
	  -L$(FUZZ_PL) -lhlokit -Wl,-rpath,'$$ORIGIN' $(LDLIBS)
	@mkdir -p $(FUZZ_PL)/corpus $(FUZZ_PL)/seeds
	$(CC) -std=c11 -D_GNU_SOURCE -O1 $(JSONC_CFLAGS) -o $(FUZZ_PL)/fuzz_seeds scripts/fuzz_seeds.c $(JSONC_LIBS)
	cp fixtures/*.hlo tests/fuzz_regressions/*.hlo $(FUZZ_PL)/seeds/
	@if ls $(FUZZ_CORPUS_SRC)/*.jsonl >/dev/null 2>&1; then \
	  $(FUZZ_PL)/fuzz_seeds $(FUZZ_PL)/seeds $(FUZZ_CORPUS_SRC)/*.jsonl; fi
	$(FUZZ_PL)/fuzz_pipeline -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=120 -rss_limit_mb=3072 \
	  -artifact_prefix=$(FUZZ_PL)/ $(FUZZ_FLAGS) $(FUZZ_PL)/corpus $(FUZZ_PL)/seeds

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/hlokit/plugins \
	  $(DESTDIR)$(PREFIX)/include/hlokit $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/hlokit
	install -m 755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libhlokit.so
	for p in $(PLUGIN_SOS); do install -m 755 $$p $(DESTDIR)$(PREFIX)/lib/hlokit/plugins/; done
	$(if $(MPI_SO),install -d $(DESTDIR)$(PREFIX)/lib/hlokit/backends && install -m 755 $(MPI_SO) $(DESTDIR)$(PREFIX)/lib/hlokit/backends/)
	install -m 644 abi/hlokit/*.h $(DESTDIR)$(PREFIX)/include/hlokit/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' scripts/hlokit.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hlokit.pc

clean:
	rm -rf build
