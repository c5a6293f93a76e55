# tupe: the one build.
#
#   make                      build libtupe.a and every program (CUDA=auto, MPI=auto)
#   make check                build and run every test; ends with "N passed, N failed, N skipped"
#   make check-cuemu          the CUDA backend on the CPU-emulated GPU (tests/cuemu/README.md)
#   make check-cuemu-mutants  deliberately broken kernels, each of which check-cuemu must catch
#   make bench                benchmarks, each against its competitor in the same run
#   make demo                 the whole pipeline on the bundled sample corpus
#   make install / uninstall  PREFIX=/usr/local DESTDIR=
#   make deps                 install the Debian packages the build and the tests need (as root)
#   make clean
#
# Options: CUDA=auto|0|1|emu  MPI=auto|0|1  SANITIZE=address,undefined  DEBUG=1  MARCH=native
#          NODEPS=1 (skip the Debian package check: a machine without dpkg's view of them)

SHELL       := /bin/bash
comma       := ,
TOP         := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
VERSION     := $(shell cat $(TOP)/VERSION)
PREFIX      ?= /usr/local
DESTDIR     ?=
CUDA        ?= auto
NODEPS      ?= 0
MPI         ?= auto
SANITIZE    ?=
DEBUG       ?= 0
MARCH       ?= native
CUDA_HOME   ?= /usr/local/cuda
NVCC        ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH   ?= 80 90
MPICC       ?= mpicc
TUPE_DATA   ?= $(abspath $(TOP)/../shared/data)
PKG_CONFIG  ?= pkg-config

# ---- the Debian packages first ---------------------------------------------------------------
# What this file asks pkg-config and nvcc holds only once the packages are installed, and make
# reads it before anything is. So checking them is the rule for build/config.mk, which every
# build includes: when that file is missing or older than dpkg's database or this Makefile,
# make runs deps-check (as root it installs what is missing; otherwise it prints the apt-get
# line and stops), tries nvcc, writes the file, and then reads this Makefile again from the
# start, with the packages in place.
CONF := $(TOP)/build/config.mk
CUDA_TOOLKIT := $(shell test -x $(NVCC) && test -e $(CUDA_HOME)/lib64/libcublasLt.so && test -e $(CUDA_HOME)/lib64/libcudart.so && echo 1 || echo 0)
CONF_FOR := $(NVCC) $(CUDA_HOME) toolkit=$(CUDA_TOOLKIT) nodeps=$(NODEPS)
ifneq ($(filter-out clean deps deps-check uninstall,$(or $(MAKECMDGOALS),all)),)
  include $(CONF)
  ifneq ($(CONF_FOR_WAS),$(CONF_FOR))
    $(CONF): FORCE
  endif
endif

# ---- what this machine can build -------------------------------------------------------------
ifeq ($(CUDA),auto)
  HAVE_CUDA := $(if $(filter 1,$(CUDA_TOOLKIT)),$(CUDA_WORKS),0)
else ifeq ($(CUDA),1)
  HAVE_CUDA := 1
else ifeq ($(CUDA),emu)
  # The CUDA backend built for cuemu, the CPU emulation of a GPU (tests/cuemu/): a test build.
  HAVE_CUDA := 1
  CUEMU     := 1
else
  HAVE_CUDA := 0
endif
ifeq ($(MPI),auto)
  HAVE_MPI := $(shell $(PKG_CONFIG) --exists ompi-c 2>/dev/null && echo 1 || echo 0)
else ifeq ($(MPI),1)
  HAVE_MPI := 1
else
  HAVE_MPI := 0
endif

# One build directory per configuration, so that `make check` and
# `make check SANITIZE=address,undefined` do not overwrite each other.
CFG := cpu
ifeq ($(HAVE_CUDA),1)
  CFG := $(if $(CUEMU),cuemu,cuda)
endif
ifeq ($(HAVE_MPI),1)
  CFG := $(CFG)-mpi
endif
ifneq ($(SANITIZE),)
  CFG := $(CFG)-$(subst $(comma),-,$(SANITIZE))
endif
ifeq ($(DEBUG),1)
  CFG := $(CFG)-debug
endif
B       ?= $(TOP)/build/$(CFG)
BIN     := $(B)/bin
OBJ     := $(B)/obj

# ---- flags -----------------------------------------------------------------------------------
PKGS     := jansson libzstd libarchive openblas libpng libxxhash cairo libprotobuf-c libcrypto
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-unused-parameter
ifeq ($(DEBUG),1)
  OPT    := -O0 -g3
else
  OPT    := -O2 -g
endif
ifneq ($(MARCH),)
  OPT    += -march=$(MARCH)
endif
SANFLAGS :=
ifneq ($(SANITIZE),)
  SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
  ifneq ($(DEBUG),1)
    OPT  := -O1 -g
  endif
endif
CPPFLAGS += -D_GNU_SOURCE -DTUPE_VERSION='"$(VERSION)"' -I$(TOP)/lib -I$(OBJ)/gen $(PKG_CFLAGS)
CFLAGS   ?=
CFLAGS   += -std=c11 $(OPT) $(WARN) -pthread -fopenmp $(SANFLAGS) -MMD -MP
LDFLAGS  += -pthread -fopenmp $(SANFLAGS) -Wl,--as-needed
LDLIBS   += $(PKG_LIBS) -ldnnl -lm

ifeq ($(CUEMU),1)
  # emu-nvcc makes the .cu file C++ for the emulator, whose runtime is libcuemu.a. The backend
  # opens NCCL as it does on a GPU machine, and finds cuemu's (libnccl.so.2, beside libcuemu.a,
  # through the runpath); that library reaches the runtime through cuemu_bridge_get, which the
  # programs export.
  CUEMU_DIR  := $(TOP)/tests/cuemu
  NVCC       := $(CUEMU_DIR)/emu-nvcc
  CUEMU_LIB  := $(B)/cuemu/libcuemu.a
  CUEMU_NCCL := $(B)/cuemu/libnccl.so.2
  CPPFLAGS   += -DTUPE_HAVE_CUDA=1
  CUDA_LIBS  := -Wl,-u,cuemu_bridge_get -Wl,--export-dynamic-symbol=cuemu_bridge_get \
                $(CUEMU_LIB) -lboost_context -lopenblas -lstdc++ -ldl -Wl,-rpath,$(B)/cuemu
  LDLIBS     += $(CUDA_LIBS)
  NVFLAGS    := $(OPT) -I$(TOP)/lib -I$(TOP)/kernels -DTUPE_HAVE_NCCL=1 -Wall $(SANFLAGS)
else ifeq ($(HAVE_CUDA),1)
  CPPFLAGS += -DTUPE_HAVE_CUDA=1 -I$(CUDA_HOME)/include
  # NCCL is opened at run time, when ranks on GPUs first need it (kernels/collectives.cu).
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -ldl -lstdc++
  LDLIBS   += $(CUDA_LIBS) -Wl,-rpath,$(CUDA_HOME)/lib64
  NVFLAGS  := -std=c++17 -O2 -g -I$(TOP)/lib -I$(TOP)/kernels --expt-relaxed-constexpr \
              $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH)) \
              -Xcompiler -Wall,-fPIC
endif
ifeq ($(HAVE_MPI),1)
  CPPFLAGS += -DTUPE_HAVE_MPI=1 $(shell $(PKG_CONFIG) --cflags ompi-c)
  MPI_LIBS := $(shell $(PKG_CONFIG) --libs ompi-c)
  LDLIBS   += $(MPI_LIBS)
endif

# Quiet build lines ("  CC lib/x.c"); V=1 shows the full commands.
ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(patsubst $(TOP)/%,%,$(2))
endif

# ---- sources: discovered, so that a new module is a new file and nothing else -----------------
# lib/ has one folder per layer (lib/README.md); its headers are included as "layer/name.h".
LIB_SRC   := $(sort $(wildcard $(TOP)/lib/*/*.c))
CU_SRC    := $(if $(filter 1,$(HAVE_CUDA)),$(sort $(wildcard $(TOP)/kernels/*.cu)))
CMD_SRC   := $(sort $(wildcard $(TOP)/cmd/tupe-*.c))
UNIT_SRC  := $(sort $(wildcard $(TOP)/tests/unit/test_*.c))
TOOL_SRC  := $(sort $(wildcard $(TOP)/tests/tools/*.c))
BENCH_SRC := $(sort $(wildcard $(TOP)/tests/bench/*.c))

PROTO_SRC := $(sort $(wildcard $(TOP)/lib/*/*.proto))
PROTO_GEN := $(patsubst $(TOP)/lib/%.proto,$(OBJ)/gen/%.pb-c.c,$(PROTO_SRC))
LIB_OBJ   := $(patsubst $(TOP)/lib/%.c,$(OBJ)/lib/%.o,$(LIB_SRC)) \
             $(patsubst $(TOP)/kernels/%.cu,$(OBJ)/kernels/%.o,$(CU_SRC)) \
             $(PROTO_GEN:.c=.o)
PROGS     := $(patsubst $(TOP)/cmd/%.c,$(BIN)/%,$(CMD_SRC))
UNITS     := $(patsubst $(TOP)/tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
TOOLS     := $(patsubst $(TOP)/tests/tools/%.c,$(B)/tests/%,$(TOOL_SRC))
BENCHES   := $(patsubst $(TOP)/tests/bench/%.c,$(B)/bench/%,$(BENCH_SRC))
LIBTUPE   := $(B)/libtupe.a
MANPAGES  := $(sort $(wildcard $(TOP)/man/*.[157]))
PROGNAMES := $(notdir $(PROGS))

.PHONY: check-cuemu check-cuemu-mutants cuemu-mutants-run
.PHONY: all check bench demo install uninstall clean deps deps-check tests tools info fuzz fuzz-build FORCE
.DEFAULT_GOAL := all
.SECONDARY:

all: deps-check $(LIBTUPE) $(PROGS)

info:
	@echo "tupe $(VERSION): build $(B)"
	@echo "  CUDA=$(CUDA) -> $(HAVE_CUDA)   MPI=$(MPI) -> $(HAVE_MPI)   SANITIZE=$(SANITIZE)   DEBUG=$(DEBUG)"
	@echo "  programs: $(PROGNAMES)"

# The CPU backend's AdamW and LayerNorm loops vectorize only when sqrt need not set errno.
$(OBJ)/lib/backend/backend_cpu.o: CFLAGS += -fno-math-errno

# Protocol buffers (TensorBoard's event files): C from protoc-c, generated before any module
# that might include it.
$(OBJ)/gen/%.pb-c.c $(OBJ)/gen/%.pb-c.h: $(TOP)/lib/%.proto
	@mkdir -p $(@D)
	$(call say,PROTOC,$<)
	$(Q)protoc-c --proto_path=$(TOP)/lib --c_out=$(OBJ)/gen $<

$(OBJ)/gen/%.pb-c.o: $(OBJ)/gen/%.pb-c.c
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(filter-out -Wmissing-prototypes,$(CFLAGS)) -c $< -o $@

$(OBJ)/lib/%.o: $(TOP)/lib/%.c | $(PROTO_GEN)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OBJ)/kernels/%.o: $(TOP)/kernels/%.cu
	@mkdir -p $(@D)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVFLAGS) -DTUPE_HAVE_CUDA=1 -MMD -MP -c $< -o $@

$(LIBTUPE): $(LIB_OBJ) $(CUEMU_LIB) $(CUEMU_NCCL)
	@mkdir -p $(@D)
	$(Q)rm -f $@
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $(LIB_OBJ)

$(OBJ)/cmd/%.o: $(TOP)/cmd/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BIN)/%: $(OBJ)/cmd/%.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $< $(LIBTUPE) $(LDLIBS) -o $@

$(OBJ)/tests/%.o: $(TOP)/tests/unit/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -I$(TOP)/tests/unit $(CFLAGS) -c $< -o $@

$(OBJ)/tools/%.o: $(TOP)/tests/tools/%.c | $(PROTO_GEN)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OBJ)/bench/%.o: $(TOP)/tests/bench/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(OBJ)/tests/unit.o: $(TOP)/tests/unit/unit.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -I$(TOP)/tests/unit $(CFLAGS) -c $< -o $@

$(B)/tests/test_%: $(OBJ)/tests/test_%.o $(OBJ)/tests/unit.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $< $(OBJ)/tests/unit.o $(LIBTUPE) $(LDLIBS) -o $@

$(B)/tests/%: $(OBJ)/tools/%.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $< $(LIBTUPE) $(LDLIBS) -o $@

$(B)/bench/%: $(OBJ)/bench/%.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $< $(LIBTUPE) $(LDLIBS) -o $@

# ---- fuzzing --------------------------------------------------------------------------------------
# tests/fuzz/fuzz_T.c is target T. `make check` builds each with the replay driver (gcc, no
# libFuzzer) as $(B)/tests/fuzz-T and replays the committed corpora (tests/cli/fuzz.sh);
# `make fuzz FUZZ_SECONDS=N` builds them with clang and libFuzzer in build/fuzz and runs each
# for N seconds (tests/fuzz/run).
FUZZ_SRC     := $(sort $(wildcard $(TOP)/tests/fuzz/fuzz_*.c))
FUZZ_NAMES   := $(patsubst $(TOP)/tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_REPLAYS := $(patsubst %,$(B)/tests/fuzz-%,$(FUZZ_NAMES))
FUZZ_SECONDS ?= 60
FUZZ_B       := $(TOP)/build/fuzz

$(OBJ)/fuzz/%.o: $(TOP)/tests/fuzz/%.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -I$(TOP)/tests/fuzz $(CFLAGS) -c $< -o $@

$(B)/tests/fuzz-%: $(OBJ)/fuzz/fuzz_%.o $(OBJ)/fuzz/fuzz.o $(OBJ)/fuzz/replay.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# In the clang build (FUZZ_BUILD=1) the library is instrumented for libFuzzer and each target
# links its engine instead of the replay driver.
ifeq ($(FUZZ_BUILD),1)
  CFLAGS += -fsanitize=fuzzer-no-link -Wno-pass-failed
endif
$(B)/fuzz/%: $(OBJ)/fuzz/fuzz_%.o $(OBJ)/fuzz/fuzz.o $(LIBTUPE)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer $^ $(LDLIBS) -o $@

fuzz-build: $(patsubst %,$(B)/fuzz/%,$(FUZZ_NAMES))

fuzz: deps-check
	@$(MAKE) --no-print-directory CC=clang CUDA=0 MPI=0 MARCH= SANITIZE=address,undefined \
	  FUZZ_BUILD=1 B=$(FUZZ_B) fuzz-build
	@TUPE_SRC=$(TOP) $(TOP)/tests/fuzz/run $(FUZZ_B)/fuzz $(FUZZ_SECONDS) $(FUZZ_NAMES)

# ---- the CPU-emulated GPU (tests/cuemu/README.md) ------------------------------------------------
# CUDA=emu builds the CUDA backend for cuemu in build/cuemu (build/cuemu-SANITIZERS); its runtime
# is libcuemu.a, and cuemu-selftest runs its own tests (every misuse reported, correct kernels
# right under every schedule). check-cuemu builds both configurations and runs
# tests/cuemu/run.sh; check-cuemu-mutants builds deliberately broken copies of the kernels and
# shows that check-cuemu fails on each (tests/cuemu/mutants.sh).
CUEMU_SRC   := $(filter-out %/nccl.cpp,$(sort $(wildcard $(TOP)/tests/cuemu/src/*.cpp)))
CUEMU_TESTS := $(if $(CUEMU),$(B)/tests/cuemu-selftest $(B)/tests/cuemu-nccltest)
# MPI as the plain build has it: the multi-rank parts run under mpirun too (skipped without).
CUEMU_MPI   := $(HAVE_MPI)
CUEMU_B     := $(TOP)/build/cuemu$(if $(filter 1,$(CUEMU_MPI)),-mpi)
CUEMU_SAN_B := $(TOP)/build/cuemu-address-undefined
# The two builds in parallel even under a plain `make check-cuemu` (a -j of the caller wins).
CUEMU_J      = $(if $(filter -j% --jobserver%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))

$(OBJ)/cuemu/%.o: $(TOP)/tests/cuemu/src/%.cpp
	@mkdir -p $(@D)
	$(call say,CXX,$@)
	$(Q)$(CXX) -std=c++17 $(OPT) -Wall -Wextra -fopenmp $(SANFLAGS) -I$(TOP)/tests/cuemu/include \
	  -MMD -MP -c $< -o $@

$(CUEMU_LIB): $(patsubst $(TOP)/tests/cuemu/src/%.cpp,$(OBJ)/cuemu/%.o,$(CUEMU_SRC))
	@mkdir -p $(@D)
	$(Q)rm -f $@
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(OBJ)/cuemu/selftest.o: $(TOP)/tests/cuemu/selftest.cu $(TOP)/tests/cuemu/emu-nvcc
	@mkdir -p $(@D)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(B)/tests/cuemu-selftest: $(OBJ)/cuemu/selftest.o $(CUEMU_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CXX) $(LDFLAGS) $< $(CUDA_LIBS) -o $@

# cuemu's NCCL, a shared library as the real one is (the programs dlopen it).
$(CUEMU_NCCL): $(TOP)/tests/cuemu/src/nccl.cpp $(TOP)/tests/cuemu/include/nccl.h $(TOP)/tests/cuemu/src/bridge.h
	@mkdir -p $(@D)
	$(call say,CXX,$@)
	$(Q)$(CXX) -std=c++17 $(OPT) -Wall -Wextra -fPIC -shared $(SANFLAGS) -I$(TOP)/tests/cuemu/include \
	  -Wl,-soname,libnccl.so.2 $< -o $@ -pthread -ldl

$(OBJ)/cuemu/nccltest.o: $(TOP)/tests/cuemu/nccltest.cu $(TOP)/tests/cuemu/emu-nvcc
	@mkdir -p $(@D)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(B)/tests/cuemu-nccltest: $(OBJ)/cuemu/nccltest.o $(CUEMU_LIB) $(CUEMU_NCCL)
	@mkdir -p $(@D)
	$(call say,LD,$@)
	$(Q)$(CXX) $(LDFLAGS) $< $(CUEMU_NCCL) $(CUDA_LIBS) -o $@

check-cuemu: deps-check
	@$(MAKE) $(CUEMU_J) --no-print-directory CUDA=emu MPI=$(CUEMU_MPI) SANITIZE= B=$(CUEMU_B) all \
	  $(CUEMU_B)/tests/tupe-parity $(CUEMU_B)/tests/cuemu-selftest $(CUEMU_B)/tests/cuemu-nccltest \
	  $(CUEMU_B)/tests/tupe-commtest \
	  $(CUEMU_B)/tests/tupe-testtool >/dev/null
	@$(MAKE) $(CUEMU_J) --no-print-directory CUDA=emu MPI=0 SANITIZE=address,undefined B=$(CUEMU_SAN_B) \
	  $(CUEMU_SAN_B)/tests/tupe-parity $(CUEMU_SAN_B)/tests/cuemu-selftest >/dev/null
	@TUPE_SRC=$(TOP) TUPE_DATA=$(TUPE_DATA) CUEMU_BUILD=$(CUEMU_B) CUEMU_SAN_BUILD=$(CUEMU_SAN_B) \
	  $(TOP)/tests/cuemu/run.sh

check-cuemu-mutants: deps-check
	@$(MAKE) $(CUEMU_J) --no-print-directory CUDA=emu MPI=$(CUEMU_MPI) SANITIZE= B=$(CUEMU_B) \
	  $(CUEMU_B)/tests/tupe-parity
	@$(MAKE) --no-print-directory CUDA=emu MPI=$(CUEMU_MPI) SANITIZE= B=$(CUEMU_B) cuemu-mutants-run

# (in the CUDA=emu configuration: the mutants are compiled and linked as its kernels are)
cuemu-mutants-run:
	@TUPE_SRC=$(TOP) CUEMU_BUILD=$(B) NVCC="$(NVCC)" NVFLAGS="$(NVFLAGS)" CC="$(CC)" \
	  LDFLAGS="$(LDFLAGS)" LDLIBS="$(LDLIBS)" $(TOP)/tests/cuemu/mutants.sh

tests: all $(UNITS) $(TOOLS) $(FUZZ_REPLAYS) $(CUEMU_TESTS)

# The runner prints one line per test and exactly one summary line "N passed, N failed,
# N skipped" last.
check: deps-check tests
	@TUPE_BUILD=$(B) TUPE_BIN=$(BIN) TUPE_SRC=$(TOP) TUPE_DATA=$(TUPE_DATA) TUPE_SANITIZE=$(SANITIZE) \
	  $(TOP)/tests/run

bench: deps-check all $(BENCHES) $(TOOLS)
	@TUPE_BUILD=$(B) TUPE_BIN=$(BIN) TUPE_SRC=$(TOP) TUPE_DATA=$(TUPE_DATA) $(TOP)/tests/bench/run

demo: deps-check all
	@TUPE_BIN=$(BIN) TUPE_SRC=$(TOP) $(TOP)/share/tupe/demo/run.sh

# ---- Debian dependencies ------------------------------------------------------------------------
# Build: compiler, libraries (libprotobuf-c and protoc-c: TensorBoard event files; OpenBLAS and
# oneDNN, whose sgemm does the CPU's single-precision products: lib/backend/blas.h), Open MPI (the
# data-parallel build, and mpirun for its tests), g++ (nvcc's host compiler, and the compiler of
# the emulated GPU). Test: zstd (corpus), mount (the full-disk tests' tmpfs), man-db/groff (man
# page checks), bash-completion
# and zsh (the completions, driven as an interactive shell drives them),
# xz-utils/bzip2/zip (the compressed and archived inputs of the tokenizer tests); demo:
# gnuplot-nox (the loss curve, share/tupe/plot-loss.gp);
# bench: time and bc (tests/bench/shard.sh); fuzz: clang with its sanitizer and libFuzzer
# runtimes and its OpenMP (make fuzz); check-cuemu: g++ and boost.context (the emulated GPU's
# compiler and its fibers); TensorBoard event files: protobuf-c; the proof that a connection
# comes from a rank of the job (HMAC-SHA256, lib/train/jobauth.c): libssl-dev (libcrypto).
DEB_PKGS := gcc g++ make pkg-config libjansson-dev libzstd-dev libarchive-dev libopenblas-dev libdnnl-dev \
            libpng-dev zlib1g-dev libxxhash-dev libcairo2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev \
            fonts-dejavu-core zstd man-db \
            groff-base bash-completion zsh xz-utils bzip2 zip time bc clang libclang-rt-dev libomp-dev \
            gnuplot-nox libboost-context-dev openmpi-bin libopenmpi-dev mount

# Fast check run before every build: one dpkg-query call. Installs (as root) or explains.
deps-check:
	@if [ "$(NODEPS)" != 1 ] && command -v dpkg-query >/dev/null 2>&1; then \
	  missing=$$(dpkg-query -W -f='$${Package} $${db:Status-Abbrev}\n' $(DEB_PKGS) 2>/dev/null | awk '$$2 != "ii" {print $$1}'); \
	  for p in $(DEB_PKGS); do dpkg-query -W -f='$${db:Status-Abbrev}' $$p 2>/dev/null | grep -q '^ii' || missing="$$missing $$p"; done; \
	  missing=$$(echo $$missing | tr ' ' '\n' | sort -u | tr '\n' ' '); \
	  if [ -n "$${missing// /}" ]; then $(MAKE) --no-print-directory deps DEPS_MISSING="$$missing"; fi; \
	fi

deps:
	@missing="$(DEPS_MISSING)"; [ -n "$$missing" ] || missing="$(DEB_PKGS)"; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "tupe: installing Debian packages: $$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
	    { echo "tupe: apt-get install failed" >&2; exit 1; }; \
	else \
	  echo "tupe: these Debian packages are missing; install them as root, then run make again:" >&2; \
	  echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $$(echo $$missing)" >&2; \
	  exit 1; \
	fi

# What deps-check cannot ask dpkg: whether nvcc compiles here (its host compiler included).
$(CONF): $(TOP)/Makefile $(wildcard /var/lib/dpkg/status)
	@$(MAKE) --no-print-directory deps-check
	@mkdir -p $(@D)/probe
	@works=0; \
	if [ $(CUDA_TOOLKIT) = 1 ]; then \
	  printf '__global__ void tupe_probe(void) {}\n' >$(@D)/probe/probe.cu; \
	  if $(NVCC) -std=c++17 -c $(@D)/probe/probe.cu -o $(@D)/probe/probe.o 2>$(@D)/probe/err; then works=1; \
	  elif [ "$(CUDA)" = auto ]; then \
	    echo "tupe: $(NVCC) cannot compile here, so the build leaves the CUDA backend out:" >&2; \
	    head -n 3 $(@D)/probe/err | sed 's/^/  /' >&2; \
	  fi; \
	fi; \
	rm -rf $(@D)/probe; \
	printf '# Written by make (see the Makefile): what this machine can build.\nCONF_FOR_WAS := %s\nCUDA_WORKS := %s\n' \
	  '$(CONF_FOR)' $$works >$@.tmp && mv $@.tmp $@

FORCE:

# ---- install ------------------------------------------------------------------------------------
BINDIR   := $(DESTDIR)$(PREFIX)/bin
LIBDIR   := $(DESTDIR)$(PREFIX)/lib
INCDIR   := $(DESTDIR)$(PREFIX)/include/tupe
MANDIR   := $(DESTDIR)$(PREFIX)/share/man
SHAREDIR := $(DESTDIR)$(PREFIX)/share/tupe
BASHDIR  := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR   := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
PCDIR    := $(LIBDIR)/pkgconfig

# The public headers: those the programs include, and what they include in turn (the compiler
# lists them), installed in their layer folders as in lib/. The others are the library's own.
PUBLIC_HDR = $(sort $(patsubst $(TOP)/lib/%,%,$(filter $(TOP)/lib/%,\
               $(shell $(CC) $(CPPFLAGS) -MM $(CMD_SRC) | tr -s ' \\' '\n\n'))))

# Written at install time, so that it always carries the PREFIX of this install.
define write_pc
	@{ echo "prefix=$(PREFIX)"; echo 'libdir=$${prefix}/lib'; echo 'includedir=$${prefix}/include'; echo; \
	   echo "Name: tupe"; echo "Description: TUPE pre-training toolkit core library (libtupe)"; \
	   echo "Version: $(VERSION)"; \
	   echo 'Cflags: -I$${includedir} -I$${includedir}/tupe -fopenmp -pthread'; \
	   echo 'Libs: -L$${libdir} -ltupe $(strip $(PKG_LIBS) -lm $(CUDA_LIBS) $(MPI_LIBS)) -fopenmp -pthread'; } > $(1)
endef

install: all
	install -d $(BINDIR) $(LIBDIR) $(INCDIR) $(PCDIR) $(SHAREDIR) $(BASHDIR) $(ZSHDIR) \
	  $(MANDIR)/man1 $(MANDIR)/man5 $(MANDIR)/man7
	$(if $(PROGS),install -m 755 $(PROGS) $(BINDIR)/)
	install -m 644 $(LIBTUPE) $(LIBDIR)/
	for h in $(PUBLIC_HDR); do install -D -m 644 $(TOP)/lib/$$h $(INCDIR)/$$h; done
	$(call write_pc,$(PCDIR)/tupe.pc)
	for m in $(MANPAGES); do install -m 644 $$m $(MANDIR)/man$${m##*.}/; done
	cp -R $(TOP)/share/tupe/. $(SHAREDIR)/
	install -m 644 $(TOP)/completions/tupe.bash $(BASHDIR)/tupe
	for p in $(PROGNAMES); do ln -sf tupe $(BASHDIR)/$$p; done
	install -m 644 $(TOP)/completions/_tupe $(ZSHDIR)/_tupe

uninstall:
	rm -f $(addprefix $(BINDIR)/,$(PROGNAMES)) $(LIBDIR)/libtupe.a $(PCDIR)/tupe.pc
	rm -rf $(INCDIR) $(SHAREDIR)
	for m in $(notdir $(MANPAGES)); do rm -f $(MANDIR)/man$${m##*.}/$$m; done
	rm -f $(BASHDIR)/tupe $(addprefix $(BASHDIR)/,$(PROGNAMES)) $(ZSHDIR)/_tupe

clean:
	rm -rf $(TOP)/build

-include $(shell test -d $(OBJ) && find $(OBJ) -name '*.d' 2>/dev/null)
