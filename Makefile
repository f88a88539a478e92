# SPDX-License-Identifier: MIT
# tensorfs: one GNU Makefile. Knobs: CC, CFLAGS, CPPFLAGS, LDFLAGS, PREFIX, DESTDIR, SANITIZE=1,
# CUDA=0|1. `make demo` and `make test` first install what is missing (packaging/deps.sh).

# The version, in one place: the VERSION file. The binary, the Python package, the man pages, the
# pkg-config files and the Debian package all take it from here.
VERSION  := $(shell cat VERSION)

CC       ?= cc
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
SBINDIR  ?= /sbin
SYSCONFDIR ?= /etc
LIBDIR   ?= $(PREFIX)/lib
INCDIR   ?= $(PREFIX)/include
MANDIR   ?= $(PREFIX)/share/man
DESTDIR  ?=
PYTHON   ?= /usr/bin/python3
PKG_CONFIG ?= pkg-config
CFLAGS   ?= -O2 -g
SANITIZE ?= 0

TSAN     ?= 0

ifeq ($(SANITIZE),1)
BUILD    ?= build/san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(TSAN),1)
# ThreadSanitizer: `make TSAN=1 tsan-test` (suppressions, for third-party code only, in
# tests/tsan.supp, each with its reason).
BUILD    ?= build/tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
BUILD    ?= build/rel
SANFLAGS :=
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
# core/ builds against these alone (no FUSE, no CUDA: the layering rule, kept by the flags);
# fs/ and mount/ add FUSE. Quiet when the packages are not there yet: `make demo` installs them,
# then builds in a sub-make.
CORE_DEPS := libzstd libxxhash libcrypto libcurl inih libjpeg libpng jansson libarchive sqlite3 \
	     openblas
# FFmpeg's libraries are compiled against but not linked: core/fflib.c opens them when media is
# first decoded (with their dependencies they cost 30 ms of every start when linked).
FFMPEG_DEPS := libavformat libavcodec libswscale libswresample libavutil
DEPCFLAGS := $(shell $(PKG_CONFIG) --cflags $(CORE_DEPS) $(FFMPEG_DEPS) 2>/dev/null)
FUSE_CFLAGS := $(shell $(PKG_CONFIG) --cflags fuse3 2>/dev/null)
DEPLIBS  := $(shell $(PKG_CONFIG) --libs fuse3 $(CORE_DEPS) 2>/dev/null) -lm
# CUDA: the cuda staging backend is built when the toolkit is found ($(CUDA_HOME), default
# /usr/local/cuda) unless CUDA=0 (CUDA=1 insists). The runtime is linked statically: the binary
# runs anywhere, and `cuda:N` is a clear error reply where no driver or device is present.
CUDA_HOME ?= /usr/local/cuda
ifeq ($(CUDA),0)
HAVE_CUDA :=
else
HAVE_CUDA := $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h)
ifeq ($(CUDA)$(HAVE_CUDA),1)
$(error CUDA=1 but no $(CUDA_HOME)/include/cuda_runtime_api.h; set CUDA_HOME)
endif
endif
ifneq ($(HAVE_CUDA),)
CUDA_CFLAGS := -DTFS_HAVE_CUDA -isystem $(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
endif
ALL_CFLAGS = -std=gnu11 $(WARN) $(CPPFLAGS) $(CFLAGS) $(SANFLAGS) -D_GNU_SOURCE -pthread -MMD -MP \
	     -Icore $(DEPCFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS) -pthread

CORE_SRC := $(wildcard core/*.c)
FS_SRC   := $(wildcard fs/*.c)
GPU_SRC  := $(wildcard gpu/*.c)
MOUNT_SRC := $(wildcard mount/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
FS_OBJ   := $(FS_SRC:%.c=$(BUILD)/%.o)
GPU_OBJ  := $(GPU_SRC:%.c=$(BUILD)/%.o)
MOUNT_OBJ := $(MOUNT_SRC:%.c=$(BUILD)/%.o)
# The vector index (mount/vindex.cc) is FAISS's, a static library from Debian, through one C++
# file: the tensorfs command's alone (the daemon and core/ do not link it).
MOUNT_CXX_SRC := $(wildcard mount/*.cc)
MOUNT_OBJ += $(MOUNT_CXX_SRC:%.cc=$(BUILD)/%.o)
FAISS_LIBS := -lfaiss -fopenmp -lstdc++
# The gather kernel (gpu/gather_kernel.cu), compiled by nvcc when the toolkit is there: machine code
# for the Ampere and Hopper generations, and PTX that later ones compile at load.
ifneq ($(HAVE_CUDA),)
GPU_OBJ  += $(BUILD)/gpu/gather_kernel.o
endif
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)


CORE_LIB := $(BUILD)/libtensorfs-core.a
BIN      := $(BUILD)/tensorfs

# Files made from the VERSION file: the Python package's _version.py and the man pages.
PYVERSION := packaging/python/tensorfs/_version.py
MAN_SRC  := $(wildcard packaging/man/*.[1-8])
MAN_OUT  := $(MAN_SRC:packaging/man/%=build/man/%)

.PHONY: all clean install test unit integration demo bench deps deps-test deb tsan-test valgrind soak
all: $(BIN) tensorfs $(PYVERSION) $(MAN_OUT)

# What the targets need, installed when missing (a no-op when everything is there). demo and
# test build in a sub-make so that the pkg-config flags are read after the install.
deps:
	packaging/deps.sh build
deps-test:
	packaging/deps.sh test

# The top-level ./tensorfs is always the regular build; sanitizer builds stay in build/san.
tensorfs: $(BIN)
ifneq ($(SANITIZE)$(TSAN),00)
	@true
else
	cp $(BIN) $@.tmp && mv -f $@.tmp $@
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# The layering, enforced by include paths: fs/ and gpu/ see core/ only; mount/ sees everything.
$(BUILD)/fs/%.o: ALL_CFLAGS += -Ifs $(FUSE_CFLAGS)
$(BUILD)/gpu/%.o: ALL_CFLAGS += -Igpu -Ipackaging/include
$(BUILD)/gpu/%.o: ALL_CFLAGS += $(CUDA_CFLAGS)
# gpu/ objects are rebuilt when the CUDA setting changes (the stamp holds it).
CUDA_STAMP := $(BUILD)/gpu/cuda.flags
$(shell mkdir -p $(BUILD)/gpu && (echo '$(CUDA_CFLAGS)' | cmp -s - $(CUDA_STAMP) || \
	echo '$(CUDA_CFLAGS)' > $(CUDA_STAMP)))
$(GPU_OBJ): $(CUDA_STAMP)
$(BUILD)/mount/%.o: ALL_CFLAGS += -Ifs -Igpu -Ipackaging/include $(FUSE_CFLAGS) \
	-DTFS_VERSION_STRING='"$(VERSION)"'
$(MOUNT_OBJ): VERSION

# Image resampling (core/resize.c) is written for the vectoriser, which -O2 leaves out.
$(BUILD)/core/resize.o: ALL_CFLAGS += -O3

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ifneq ($(HAVE_CUDA),)
NVCC     ?= $(CUDA_HOME)/bin/nvcc
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	     -gencode arch=compute_90,code=compute_90
$(BUILD)/gpu/gather_kernel.o: gpu/gather_kernel.cu gpu/gather_kernel.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(NVCC_ARCH) -Igpu -Xcompiler -Wall,-Wextra,-Werror -c $< -o $@
endif

# `tensorfs top` draws with curses; only mount/ uses it.
CURSES_CFLAGS := $(shell $(PKG_CONFIG) --cflags ncursesw 2>/dev/null)
CURSES_LIBS := $(shell $(PKG_CONFIG) --libs ncursesw 2>/dev/null)
$(BUILD)/mount/%.o: ALL_CFLAGS += $(CURSES_CFLAGS)

$(BIN): $(MOUNT_OBJ) $(FS_OBJ) $(GPU_OBJ) $(CORE_LIB)
	$(CC) $(ALL_LDFLAGS) -o $@ $(MOUNT_OBJ) $(FS_OBJ) $(GPU_OBJ) $(CORE_LIB) $(FAISS_LIBS) \
		$(DEPLIBS) -lm $(CUDA_LIBS) $(CURSES_LIBS)

CXX ?= g++
$(BUILD)/mount/%.o: mount/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Wextra -Werror $(CPPFLAGS) $(CXXFLAGS) $(SANFLAGS) -O2 -g \
		-fopenmp -pthread -MMD -MP -Imount -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(CORE_LIB) $(DEPLIBS) \
		$(shell $(PKG_CONFIG) --cflags --libs cmocka) -lm

# The file system's unit tests link the fs/ objects (FUSE, no mount).
FS_TESTS := $(filter $(BUILD)/tests/test_fs_%,$(UNIT_BIN))
$(FS_TESTS): $(BUILD)/tests/%: tests/unit/%.c $(CORE_LIB) $(FS_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Ifs $(FUSE_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(FS_OBJ) $(CORE_LIB) \
		$(DEPLIBS) $(shell $(PKG_CONFIG) --cflags --libs cmocka) -lm

# Staging unit tests link the gpu/ objects (and the CUDA runtime when built with it).
STAGING_TESTS := $(filter $(BUILD)/tests/test_staging%,$(UNIT_BIN))
$(STAGING_TESTS): $(BUILD)/tests/%: tests/unit/%.c $(CORE_LIB) $(GPU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Igpu $(CUDA_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(GPU_OBJ) $(CORE_LIB) \
		$(DEPLIBS) $(shell $(PKG_CONFIG) --cflags --libs cmocka) -lm $(CUDA_LIBS)

# The C client library of the control file, and the program the integration tests drive it with.
CLIENT_OBJ := $(BUILD)/packaging/client/tfs_client.o $(BUILD)/packaging/client/tfs_rows.o
CLIENT_LIB := $(BUILD)/libtensorfs-client.a
CTL_CLIENT := $(BUILD)/tests/ctl_client
$(CLIENT_OBJ): ALL_CFLAGS += -Ipackaging/include
$(CLIENT_LIB): $(CLIENT_OBJ)
	rm -f $@
	$(AR) rcs $@ $^
$(CTL_CLIENT): tests/integration/ctl_client.c $(CLIENT_LIB) packaging/include/tensorfs/control.h \
		packaging/include/tensorfs/client.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Ipackaging/include $(ALL_LDFLAGS) -o $@ $< $(CLIENT_LIB)
all: $(CLIENT_LIB)

# Test helpers built from tests/unit that are not cmocka suites (the botocore test runs this one).
SIGV4_CLI := $(BUILD)/tests/sigv4_cli
$(SIGV4_CLI): tests/unit/sigv4_cli.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(CORE_LIB) $(DEPLIBS) -lm

# The image decoder alone, for bench.py's case 9 (not run by the tests).
DECODE_RATE := $(BUILD)/tests/decode_rate
$(DECODE_RATE): tests/bench/decode_rate.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(CORE_LIB) $(DEPLIBS) -lm
bench: $(DECODE_RATE)

# What registering the cache's arena with the CUDA driver costs, with and without its pages
# committed first (tests/gpu/device_run.sh's register step; says SKIP without a device).
ifneq ($(HAVE_CUDA),)
REGISTER_RATE := $(BUILD)/tests/register_rate
$(REGISTER_RATE): tests/bench/register_rate.c $(CORE_LIB) $(GPU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Igpu $(CUDA_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(GPU_OBJ) $(CORE_LIB) \
		$(DEPLIBS) -lm $(CUDA_LIBS)
all: $(REGISTER_RATE)
endif

# Every fuzz target's seed corpus and regression inputs, replayed without libFuzzer
# (tests/fuzz/replay.c) by the regular build: under ASan+UBSan with SANITIZE=1.
REPLAY_BIN := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/tests/replay_%,\
	$(wildcard tests/fuzz/fuzz_*.c))
REPLAY_GPU := $(BUILD)/tests/replay_ctl

$(filter-out $(REPLAY_GPU),$(REPLAY_BIN)): $(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c \
		tests/fuzz/replay.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< tests/fuzz/replay.c $(CORE_LIB) $(DEPLIBS) -lm

$(REPLAY_GPU): $(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(CORE_LIB) \
		$(GPU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Igpu -Ipackaging/include $(CUDA_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
		tests/fuzz/replay.c $(GPU_OBJ) $(CORE_LIB) $(DEPLIBS) -lm $(CUDA_LIBS)

unit: $(UNIT_BIN) $(REPLAY_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done
	@set -e; for r in $(REPLAY_BIN); do n=$${r##*/replay_}; $$r tests/fuzz/corpus/$$n; done

integration: $(BIN) $(SIGV4_CLI) $(CTL_CLIENT) $(MAN_OUT)
	TENSORFS_BIN=$(abspath $(BIN)) TENSORFS_SANITIZE=$(SANITIZE) \
		TENSORFS_CTL_CLIENT=$(abspath $(CTL_CLIENT)) \
		TENSORFS_SIGV4_CLI=$(abspath $(SIGV4_CLI)) $(PYTHON) -m pytest -q tests/integration
	# CUDA staging on a real device; each test says SKIP, with the reason, without one.
	TENSORFS_BIN=$(abspath $(BIN)) TENSORFS_SANITIZE=$(SANITIZE) \
		$(PYTHON) -m pytest -q -rs tests/gpu

# After deps-test every tool is there: a test that finds one missing fails instead of skipping.
test: deps-test
	$(MAKE) unit
	TENSORFS_REQUIRE_S3=1 TENSORFS_REQUIRE_TOOLS=1 $(MAKE) integration

# The soak (tests/soak/soak.py): concurrent readers under faults, eviction and a remount, every
# byte checked; SECONDS long (a short one runs in make test).
SECONDS ?= 180
soak: $(BIN)
	TENSORFS_BIN=$(abspath $(BIN)) $(PYTHON) tests/soak/soak.py --seconds $(SECONDS)

# valgrind's memcheck over the unit tests and the fuzz corpus replays (the regular build): any
# invalid access, use of an uninitialised value or definite leak fails.
VALGRIND := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
	--suppressions=$(abspath tests/valgrind.supp)
valgrind: $(UNIT_BIN) $(REPLAY_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== valgrind $$t"; $(VALGRIND) $$t > $$t.vg.log 2>&1 \
		|| { tail -60 $$t.vg.log; exit 1; }; done
	@set -e; for r in $(REPLAY_BIN); do n=$${r##*/replay_}; echo "== valgrind $$r"; \
		$(VALGRIND) $$r tests/fuzz/corpus/$$n; done

# ThreadSanitizer over the unit tests and the integration tests that run the most threads at once
# (concurrent readers, prefetch under eviction, staging sessions, the tier's writer, S3 faults).
TSAN_TESTS := tests/integration/test_concurrent.py tests/integration/test_cache.py \
	tests/integration/test_control.py tests/integration/test_control_sessions.py \
	tests/integration/test_cluster.py \
	tests/integration/test_frames.py tests/integration/test_views.py tests/integration/test_s3.py \
	tests/integration/test_import_threads.py tests/integration/test_jsonl_kinds.py \
	tests/integration/test_source_fetch.py tests/integration/test_url_sources.py \
	tests/integration/test_media_fetch.py tests/integration/test_source_check.py \
	tests/integration/test_pack.py \
	tests/integration/test_mix.py tests/integration/test_knn.py
tsan-test: deps-test
	$(MAKE) TSAN=1 all build/tsan/tests/ctl_client build/tsan/tests/sigv4_cli
	TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)" $(MAKE) TSAN=1 unit
	TSAN_OPTIONS="suppressions=$(abspath tests/tsan.supp)" \
		TENSORFS_BIN=$(abspath build/tsan/tensorfs) TENSORFS_SANITIZE=1 \
		TENSORFS_CTL_CLIENT=$(abspath build/tsan/tests/ctl_client) \
		TENSORFS_SIGV4_CLI=$(abspath build/tsan/tests/sigv4_cli) \
		TENSORFS_REQUIRE_S3=1 TENSORFS_REQUIRE_TOOLS=1 $(PYTHON) -m pytest -q $(TSAN_TESTS)

demo: deps
	$(MAKE) all
	./tests/demo.sh

bench: all
	TENSORFS_BIN=$(abspath $(BIN)) $(PYTHON) tests/bench/bench.py
	TENSORFS_BIN=$(abspath $(BIN)) $(PYTHON) tests/bench/bench_shuffle.py
	TENSORFS_BIN=$(abspath $(BIN)) $(PYTHON) tests/bench/bench_epoch.py
	TENSORFS_BIN=$(abspath $(BIN)) $(PYTHON) tests/bench/bench_evict.py

# Fuzzing (not part of all or test; needs clang with libFuzzer): every tests/fuzz/fuzz_*.c is
# linked with the core sources, all built with ASan+UBSan, and run for FUZZ_SECONDS on its seed
# corpus (tests/fuzz/corpus/NAME, kept read-only; new inputs go to build/fuzz/corpus/NAME) with
# tests/fuzz/NAME.dict when there is one. Any crash or broken invariant fails; the input that
# caused it is left in build/fuzz/artifacts/NAME/. tests/fuzz/mkcorpus.py regenerates the seeds.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_BUILD   := build/fuzz
FUZZ_DEPS    := $(CORE_DEPS)
FUZZ_CFLAGS_DEPS := $(shell $(PKG_CONFIG) --cflags $(CORE_DEPS) $(FFMPEG_DEPS))
FUZZ_CFLAGS  := -std=gnu11 $(WARN) -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	       -D_GNU_SOURCE -pthread -MMD -MP -Icore $(FUZZ_CFLAGS_DEPS)
FUZZ_LIBS    := $(shell $(PKG_CONFIG) --libs $(FUZZ_DEPS)) -lm
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_CORE_OBJ := $(CORE_SRC:%.c=$(FUZZ_BUILD)/%.o)
# The control file's target (fuzz_ctl) links the gpu/ objects too (host staging; no CUDA).
FUZZ_GPU_OBJ := $(GPU_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_GPU_TARGETS := $(FUZZ_BUILD)/fuzz_ctl

.PHONY: fuzz
$(FUZZ_CORE_OBJ): $(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

$(FUZZ_GPU_OBJ): $(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Igpu -Ipackaging/include -fsanitize=fuzzer-no-link,address,undefined \
		-c $< -o $@

$(filter-out $(FUZZ_GPU_TARGETS),$(FUZZ_BIN)): $(FUZZ_BUILD)/%: tests/fuzz/%.c $(FUZZ_CORE_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_CORE_OBJ) \
		$(FUZZ_LIBS)

$(FUZZ_GPU_TARGETS): $(FUZZ_BUILD)/%: tests/fuzz/%.c $(FUZZ_CORE_OBJ) $(FUZZ_GPU_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Igpu -Ipackaging/include -fsanitize=fuzzer,address,undefined \
		-o $@ $< $(FUZZ_GPU_OBJ) $(FUZZ_CORE_OBJ) $(FUZZ_LIBS)

fuzz: $(FUZZ_BIN)
	@fail=; for f in $(FUZZ_BIN); do n=$${f##*/fuzz_}; \
		mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/artifacts/$$n; \
		dict=; [ -f tests/fuzz/$$n.dict ] && dict=-dict=tests/fuzz/$$n.dict; \
		echo "== $$f ($(FUZZ_SECONDS)s)"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 $$dict \
			-artifact_prefix=$(FUZZ_BUILD)/artifacts/$$n/ \
			$(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n \
			> $(FUZZ_BUILD)/$$n.log 2>&1 || fail="$$fail $$n"; \
		grep -E '[[:space:]]DONE[[:space:]]|^stat::(average_exec_per_sec|peak_rss_mb)' \
			$(FUZZ_BUILD)/$$n.log; \
	done; \
	if [ -n "$$fail" ]; then \
		for n in $$fail; do echo "== fuzz_$$n FAILED (log: $(FUZZ_BUILD)/$$n.log)"; \
			grep -E '^(==[0-9]+==ERROR|SUMMARY|.*invariant violated|.*runtime error)' \
				$(FUZZ_BUILD)/$$n.log | head -5; done; \
		exit 1; \
	fi

-include $(FUZZ_CORE_OBJ:.o=.d) $(FUZZ_GPU_OBJ:.o=.d) $(FUZZ_BIN:=.d)

$(PYVERSION): VERSION
	printf '# Written by make from the VERSION file.\n__version__ = "%s"\n' '$(VERSION)' > $@

build/man/%: packaging/man/% VERSION
	@mkdir -p $(dir $@)
	sed -e 's|@VERSION@|$(VERSION)|g' $< > $@

# tensorfs(1)'s COMMANDS section is the usage text (mount/help.c), rendered by the binary: the
# page and `tensorfs --help` cannot tell different stories.
build/man/tensorfs.1: packaging/man/tensorfs.1 VERSION $(BIN)
	@mkdir -p $(dir $@)
	$(BIN) help --man > $@.commands
	sed -e 's|@VERSION@|$(VERSION)|g' -e '/^@COMMANDS@$$/{r $@.commands' -e 'd}' $< > $@.tmp
	rm -f $@.commands
	mv -f $@.tmp $@

# PYTHONDIR: where /usr/bin/python3 finds packages (dist-packages for a Debian install).
PYTHONDIR ?= $(PREFIX)/lib/python3/dist-packages
SUBST    = sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCDIR@|$(INCDIR)|; s|@VERSION@|$(VERSION)|'

install: all
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/tensorfs
	install -d $(DESTDIR)$(SBINDIR)
	ln -sf $(BINDIR)/tensorfs $(DESTDIR)$(SBINDIR)/mount.tensorfs
	install -D -m 0644 $(CORE_LIB) $(DESTDIR)$(LIBDIR)/libtensorfs-core.a
	install -D -m 0644 $(CLIENT_LIB) $(DESTDIR)$(LIBDIR)/libtensorfs-client.a
	for m in $(MAN_OUT); do s=$${m##*.}; \
		install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done
	install -d $(DESTDIR)$(INCDIR)/tensorfs/core
	install -m 0644 $(wildcard core/*.h) $(DESTDIR)$(INCDIR)/tensorfs/core/
	install -m 0644 packaging/include/tensorfs/control.h packaging/include/tensorfs/client.h \
		$(DESTDIR)$(INCDIR)/tensorfs/
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig
	$(SUBST) packaging/tensorfs-core.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tensorfs-core.pc
	$(SUBST) packaging/tensorfs-client.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tensorfs-client.pc
	install -D -m 0644 packaging/examples/tensorfs.ini $(DESTDIR)$(SYSCONFDIR)/tensorfs/tensorfs.ini.example
	install -d $(DESTDIR)$(PYTHONDIR)/tensorfs
	install -m 0644 packaging/python/tensorfs/*.py $(DESTDIR)$(PYTHONDIR)/tensorfs/

# The Debian package, tensorfs_$(VERSION)_ARCH.deb, built by dpkg-buildpackage from
# packaging/debian/ in a copy of the tree (packaging/mkdeb.sh says how).
deb:
	packaging/mkdeb.sh

clean:
	rm -rf build tensorfs $(PYVERSION) tensorfs_*.deb

-include $(CORE_OBJ:.o=.d) $(FS_OBJ:.o=.d) $(GPU_OBJ:.o=.d) $(MOUNT_OBJ:.o=.d) $(UNIT_BIN:=.d) $(CLIENT_OBJ:.o=.d)
