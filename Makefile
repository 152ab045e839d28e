# Two builds of the same sources:
#   CPU build  (build/cpu*):  every .cu through the SIMT emulator (sim/simcc);
#                             always built; this is what `make test` runs without a GPU.
#   CUDA build (build/cuda*): .cu through nvcc, linked with cudart and cuBLAS; built
#                             whenever nvcc is found (GPU or not), run only on a GPU.
#   Both link the host-only objects (build/host*): the C++ sources that see neither CUDA's
#   headers nor the emulator's, compiled once (HOST_ONLY_SRCS).
# Targets: all (default), trainer, test, run, data, setup, clean. `make help` lists them.
# Variables: CXX MPICXX NVCC CUDA_HOME CUDA_ARCH USE_DOUBLE=1 DEBUG=1 SANITIZE=1 NP_LIST DNNL
#   CPPFLAGS LDFLAGS and <DEP>_ROOT (build/deps.mk, written by .ci/deps.sh: where each
#   dependency is; each target checks only the dependencies it uses: the .need-ROLE stamps).
#   NCCL (--comm nccl, the CUDA build only, optional): NCCL_ROOT / EBROOTNCCL, pkg-config, or
#   pip's nvidia-nccl-cu<N> wheel (VIRTUAL_ENV, the user's site-packages, $(BUILD)/pip).

SHELL := /bin/bash
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
# Build in parallel by default (2-core CI machines; nvcc is slow). `make -jN` overrides.
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)

# ---- toolchain --------------------------------------------------------------
CXX       ?= g++
MPICXX    ?= mpicxx
PYTHON    ?= python3
# Every launch gets an Open MPI session directory of its own (slurm/mpirun.sh says why), so
# concurrent runs never collide; NN_MPIRUN names the real mpirun. SINGLETON: the same for a
# program started without mpirun (one rank).
MPIRUN    ?= $(CURDIR)/slurm/mpirun.sh
SINGLETON := NN_MPIRUN=env $(CURDIR)/slurm/mpirun.sh
NP_LIST   ?= 1 2 3 4
# CUDA: from CUDA_HOME, else from the nvcc on PATH. Nothing absolute is assumed.
NVCC_ON_PATH := $(shell command -v nvcc 2>/dev/null)
CUDA_HOME ?= $(if $(NVCC_ON_PATH),$(patsubst %/bin/nvcc,%,$(NVCC_ON_PATH)),)
NVCC      ?= $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc,nvcc)
HAVE_NVCC := $(if $(wildcard $(NVCC)),yes,$(if $(shell command -v $(NVCC) 2>/dev/null),yes,))
NVTX_DIR  := $(if $(CUDA_HOME),$(wildcard $(CUDA_HOME)/include/nvtx3),)
BUILD     ?= build
include make/deps.mk

# ---- output: one short line per step (`  CC    cpu  src/app/main.cpp`); V=1 prints the commands ----
# Compiler messages and errors always show in full; `make V=1` shows each command line too.
ifeq ($(V),1)
  step =
else
  step = @printf '  %-5s %s\n' '$(1)' '$(if $(2),$(2)  )$(3)';
endif

# oneDNN: --device cpu's other GEMM library (--cpu-gemm onednn, src/model/cpu_gemm.cpp), with
# its OpenMP runtime; setup installs libdnnl-dev on Debian. DNNL=0 builds without it (a cluster
# without oneDNN): --cpu-gemm onednn is then refused with one line. Use it from a clean build.
# DNNL=auto (the default): with oneDNN where build/deps.mk found it, else without; DNNL=1 requires it.
DNNL ?= auto
DNNL_ON := $(if $(filter 1,$(DNNL_ON)),1,$(if $(filter 0,$(DNNL)),0,$(if $(filter onednn,$(DEPS_HAVE)),1,0)))
export NN_DNNL := $(DNNL_ON)

# ---- configuration -> build directory (configurations never share objects) ----
CONFIG_TAG := $(if $(filter 1,$(USE_DOUBLE)),-double)$(if $(filter 1,$(DEBUG)),-debug)$(if $(filter 1,$(SANITIZE)),-san)
CPU_DIR   := $(BUILD)/cpu$(CONFIG_TAG)
CUDA_DIR  := $(BUILD)/cuda$(CONFIG_TAG)
# make cpu-gemm-lab's programs (plain g++, no project libraries: the lab loads each BLAS itself).
CPU_GEMM_DIR := $(BUILD)/cpu_gemm
OPENBLAS_SO  := $(firstword $(wildcard /usr/lib/$(shell $(CXX) -print-multiarch 2>/dev/null)/libopenblas.so.0) libopenblas.so.0)

DEFS     := -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 $(if $(filter 1,$(USE_DOUBLE)),-DUSE_DOUBLE) $(if $(filter 1,$(DEBUG)),-DNN_DEBUG) \
            $(if $(NVTX_DIR),-DNN_HAVE_NVTX) $(if $(filter 1,$(DNNL_ON)),-DNN_HAVE_DNNL)
# SANITIZE=1 compiles at -O1, as the sanitizers advise: under ASan + UBSan -O2 takes about twice as
# long to compile, for tests that run in a minute either way; and with -g1, the line tables and
# functions their reports name (full -g took 30-40 % longer to compile: 27 s against 16 s for
# variant 4's kernel file; the whole build 282 s on 2 cores).
OPT      := $(if $(filter 1,$(DEBUG)),-O0 -g,$(if $(filter 1,$(SANITIZE)),-O1 -g1,-O2 -g))
comma    := ,
empty    :=
space    := $(empty) $(empty)
SANFLAGS := $(if $(filter 1,$(SANITIZE)),-fsanitize=address$(comma)undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
WARN     := -Wall -Wextra
INCLUDES := -Isrc -Ikernels
CXXFLAGS_COMMON := -std=c++20 $(OPT) $(WARN) $(DEFS) $(INCLUDES) $(DEPS_CPPFLAGS) $(CPPFLAGS) -MMD -MP
# Every library directory outside the system's has an rpath (build/deps.mk); DT_RPATH rather than
# RUNPATH, so that a library's own dependencies in a module prefix are found without LD_LIBRARY_PATH.
LINK_DIRS := $(LDFLAGS) $(DEPS_LDFLAGS) -Wl,--disable-new-dtags
LIBS     := $(LINK_DIRS) $(DEPS_ARMA_LIBS) -lz $(if $(filter 1,$(DNNL_ON)),-ldnnl -lgomp) -pthread
# The --device cpu model splits its elementwise passes over oneDNN's OpenMP threads
# (src/model/cpu_model.cpp, CpuModel::split); without oneDNN they stay on one thread.
CPU_MODEL_OMP := $(if $(filter 1,$(DNNL_ON)),-fopenmp)

# ---- sources --------------------------------------------------------------------
HOST_SRCS   := $(sort $(filter-out src/app/main.cpp,$(wildcard src/*/*.cpp src/*.cpp)))
KERNEL_SRCS := $(sort $(wildcard kernels/*/*.cu))
TEST_SRCS   := $(sort $(filter-out tests/nvtx/% tests/fuzz/%,$(wildcard tests/*.cpp tests/*/*.cpp)))
TEST_CU     := $(sort $(wildcard tests/*/*.cu))
BENCH_SRCS  := $(sort $(wildcard bench/*.cpp bench/*.cu))
SIM_SRCS    := $(sort $(wildcard sim/runtime/*.cpp))

obj = $(addprefix $(1)/obj/,$(addsuffix .o,$(basename $(2))))

# ---- host-only objects (build/host*), shared by both builds ------------------------------
# C++ sources whose whole include tree has no CUDA or emulator header and never tests
# SIM_EMULATOR, __CUDACC__ or __CUDA_ARCH__: their code is the same in both builds (the same
# preprocessed text), so they are compiled once, without either build's include paths or
# defines, and linked into both (44 of the 77 .cpp files: a fifth of the CUDA build's
# compile time). tests/build/check_host_only.py proves it from the dependency files the
# compiler writes. A source not listed is compiled in each build, as any .cu is.
HOST_ONLY_SRCS := $(sort $(wildcard src/io/*.cpp src/schedule/*.cpp src/reference/*.cpp src/model/cpu_*.cpp \
                    tests/io/*.cpp tests/schedule/*.cpp tests/reference/*.cpp tests/model/*.cpp \
                    $(filter-out tests/comm/test_nccl.cpp,$(wildcard tests/comm/*.cpp))) \
                    src/app/main.cpp src/app/config_file.cpp src/app/run.cpp src/app/option_values.cpp src/app/signals.cpp \
                    src/train/verify.cpp src/train/watchdog.cpp src/train/resume.cpp src/train/stop.cpp src/comm/node_shared.cpp \
                    tests/train/test_cpu_train.cpp tests/train/test_resume.cpp tests/train/test_fused.cpp \
                    tests/train/test_persistent.cpp tests/train/test_watchdog.cpp)
HOST_DIR     := $(BUILD)/host$(CONFIG_TAG)
HOST_CXXFLAGS := $(CXXFLAGS_COMMON) $(if $(NVTX_DIR),-I$(HOST_DIR)/nvtx-include) $(SANFLAGS)
# objs DIR,SOURCES: the objects of SOURCES for the build in DIR, host-only ones from HOST_DIR.
objs = $(call obj,$(1),$(filter-out $(HOST_ONLY_SRCS),$(2))) $(call obj,$(HOST_DIR),$(filter $(HOST_ONLY_SRCS),$(2)))

$(HOST_DIR)/nvtx-include/nvtx3:
	@mkdir -p $(dir $@) && ln -sfn $(abspath $(NVTX_DIR)) $@
$(HOST_DIR)/obj/src/model/cpu_model.o: HOST_CXXFLAGS += $(CPU_MODEL_OMP)
$(HOST_DIR)/obj/%.o: %.cpp | $(call need,trainer) $(if $(NVTX_DIR),$(HOST_DIR)/nvtx-include/nvtx3)
	@mkdir -p $(dir $@)
	$(call step,CC,host,$<)$(MPICXX) $(HOST_CXXFLAGS) -c $< -o $@

# ---- CPU (emulator) build ----------------------------------------------------------
SIMCC        := sim/simcc
CPU_NVTX_INC := $(if $(NVTX_DIR),-I$(CPU_DIR)/nvtx-include)
CPU_CXXFLAGS := $(CXXFLAGS_COMMON) -DSIM_EMULATOR=1 -Isim/include $(CPU_NVTX_INC) $(SANFLAGS)
CPU_HOST_OBJ := $(call objs,$(CPU_DIR),$(HOST_SRCS))
CPU_KERN_OBJ := $(call obj,$(CPU_DIR),$(KERNEL_SRCS))
CPU_TEST_OBJ := $(call objs,$(CPU_DIR),$(TEST_SRCS) $(TEST_CU))
CPU_SIM_OBJ  := $(call obj,$(CPU_DIR),$(SIM_SRCS))
CPU_LIB      := $(CPU_DIR)/libnn.a
CPU_SIMLIB   := $(CPU_DIR)/libsim.a
CPU_TRAIN    := $(CPU_DIR)/bin/nn_train
CPU_TESTS    := $(CPU_DIR)/bin/nn_tests
# -lopenblas: the emulated cuBLAS (sim/runtime/cublas.cpp) computes on OpenBLAS's CBLAS.
CPU_LDLIBS   := $(LIBS) -lopenblas -lboost_context $(SANFLAGS)

# The emulator's view of NVTX: only the header-only nvtx3 directory, never the rest of
# the CUDA include tree (its cuda_runtime.h must not shadow the emulator's).
$(CPU_DIR)/nvtx-include/nvtx3:
	@mkdir -p $(dir $@) && ln -sfn $(abspath $(NVTX_DIR)) $@

$(CPU_DIR)/obj/%.o: %.cpp | $(call need,trainer emulator) $(if $(NVTX_DIR),$(CPU_DIR)/nvtx-include/nvtx3)
	@mkdir -p $(dir $@)
	$(call step,CC,cpu,$<)$(MPICXX) $(CPU_CXXFLAGS) -c $< -o $@

# tests/sim/test_sim_fence.cu tests what backs up the per-access checks (red zones scanned after
# each kernel, guard pages): built without them, or they would catch its accesses first.
$(CPU_DIR)/obj/tests/sim/test_sim_fence.o: CPU_CXXFLAGS += -fno-sanitize=kernel-address
$(CPU_DIR)/obj/src/model/cpu_model.o: CPU_CXXFLAGS += $(CPU_MODEL_OMP)
$(CPU_DIR)/obj/%.o: %.cu $(SIMCC) | $(call need,trainer emulator) $(if $(NVTX_DIR),$(CPU_DIR)/nvtx-include/nvtx3)
	@mkdir -p $(dir $@)
	$(call step,SIMCC,cpu,$<)CXX="$(MPICXX)" $(PYTHON) $(SIMCC) $(CPU_CXXFLAGS) -c $< -o $@

$(CPU_SIM_OBJ): $(CPU_DIR)/obj/%.o: %.cpp | $(call need,trainer emulator)
	@mkdir -p $(dir $@)
	$(call step,CC,cpu,$<)$(CXX) $(CPU_CXXFLAGS) -c $< -o $@

# The emulated NCCL (sim/runtime/nccl*.cpp) runs over MPI: compiled with mpicxx for its headers.
$(call obj,$(CPU_DIR),$(wildcard sim/runtime/nccl*.cpp)): CXX := $(MPICXX)

$(CPU_LIB): $(CPU_HOST_OBJ) $(CPU_KERN_OBJ)
	$(call step,AR,cpu,$(notdir $@))rm -f $@ && ar rcs $@ $^
$(CPU_SIMLIB): $(CPU_SIM_OBJ)
	$(call step,AR,cpu,$(notdir $@))rm -f $@ && ar rcs $@ $^

$(CPU_TRAIN): $(call objs,$(CPU_DIR),src/app/main.cpp) $(CPU_LIB) $(CPU_SIMLIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cpu,$(notdir $@))$(MPICXX) $^ $(CPU_LDLIBS) -o $@

# Each bench/*.cpp or bench/*.cu is one program, linked with the project library.
CPU_BENCH := $(patsubst bench/%,$(CPU_DIR)/bin/%,$(basename $(BENCH_SRCS)))
$(CPU_BENCH): $(CPU_DIR)/bin/%: $(CPU_DIR)/obj/bench/%.o $(CPU_LIB) $(CPU_SIMLIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cpu,$(notdir $@))$(MPICXX) $^ $(CPU_LDLIBS) -o $@

$(CPU_TESTS): $(CPU_TEST_OBJ) $(CPU_LIB) $(CPU_SIMLIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cpu,$(notdir $@))$(MPICXX) $^ -lgtest $(CPU_LDLIBS) -o $@

# NVTX range test (tests/nvtx): an NVTX injection library, plain C++ without CUDA, that
# the trainer's NVTX3 loads through NVTX_INJECTION64_PATH; only where nvtx3 exists.
NVTX_RECORDER := $(CPU_DIR)/lib/libnvtx_recorder.so
$(NVTX_RECORDER): tests/nvtx/nvtx_recorder.cpp | $(call need,toolchain) $(CPU_DIR)/nvtx-include/nvtx3
	@mkdir -p $(dir $@)
	$(call step,CC,cpu,$<)$(CXX) -std=c++20 -O2 -Wall -Wextra -fPIC -shared -I$(CPU_DIR)/nvtx-include $< -o $@

# ---- CUDA build ----------------------------------------------------------------------
include make/cuda_arch.mk
# NCCL (--comm nccl), where build/deps.mk found it: the CUDA build alone compiles with
# -DNN_HAVE_NCCL and links libnccl (never the emulator build nor the host-only objects). Its -I and
# -L/rpath come before CUDA's, so that a CUDA with an nccl.h and libnccl of its own does not shadow
# the NCCL found. Every CUDA object depends on $(CUDA_NCCL_STAMP), rewritten when these flags change.
CUDA_NCCL_CPP   := $(if $(DEPS_NCCL_VERSION),-DNN_HAVE_NCCL $(DEPS_NCCL_CPP))
CUDA_NCCL_LD    := $(if $(DEPS_NCCL_VERSION),$(DEPS_NCCL_LD))
CUDA_NCCL_STAMP := $(CUDA_DIR)/.nccl-flags
ifneq ($(DEPS_HAVE),)
  ifneq ($(file <$(CUDA_NCCL_STAMP)),$(strip $(CUDA_NCCL_CPP) $(CUDA_NCCL_LD)))
    ifneq ($(CUDA_NCCL_CPP)$(wildcard $(CUDA_NCCL_STAMP)),)
      $(shell mkdir -p $(CUDA_DIR))
      $(file >$(CUDA_NCCL_STAMP),$(strip $(CUDA_NCCL_CPP) $(CUDA_NCCL_LD)))
    endif
  endif
endif
CUDA_CXXFLAGS := $(CXXFLAGS_COMMON) $(CUDA_NCCL_CPP) $(or $(DEPS_CUDA_INC),-I$(CUDA_HOME)/include)
# The dependencies' headers as g++ gets them (-isystem for a prefix, build/deps.mk): nvcc then finds
# them without CPATH (Spack-style modules) and prints no warnings from their macros (GoogleTest's
# TEST gave warning #177-D once per test where CPATH made it an ordinary include directory).
NVCCFLAGS     := -std=c++20 $(if $(filter 1,$(DEBUG)),-G -O0,-O3 -lineinfo) $(DEFS) $(INCLUDES) $(DEPS_CPPFLAGS) $(CPPFLAGS) \
                 $(CUDA_NCCL_CPP) $(or $(DEPS_CUDA_INC),-I$(CUDA_HOME)/include) $(CUDA_GENCODE) -ccbin $(CXX) -MMD -MP \
                 -Xcompiler "$(WARN)" $(NVCC_EXTRA)
# SANITIZE=1 instruments the host-only objects, not the CUDA build: it then compiles its own.
cuda_objs = $(if $(filter 1,$(SANITIZE)),$(call obj,$(CUDA_DIR),$(1)),$(call objs,$(CUDA_DIR),$(1)))
CUDA_HOST_OBJ := $(call cuda_objs,$(HOST_SRCS))
CUDA_KERN_OBJ := $(call obj,$(CUDA_DIR),$(KERNEL_SRCS))
CUDA_TEST_OBJ := $(call cuda_objs,$(TEST_SRCS) $(TEST_CU))
CUDA_LIB      := $(CUDA_DIR)/libnn.a
CUDA_TRAIN    := $(CUDA_DIR)/bin/nn_train
CUDA_TESTS    := $(CUDA_DIR)/bin/nn_tests
CUDA_LDLIBS   := $(CUDA_NCCL_LD) $(or $(DEPS_CUDA_LD),-L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64) -lcublas -lcudart $(LIBS) -lopenblas

$(CUDA_DIR)/obj/%.o: %.cpp $(wildcard $(CUDA_NCCL_STAMP)) | $(call need,trainer cuda)
	@mkdir -p $(dir $@)
	$(call step,CC,cuda,$<)$(MPICXX) $(CUDA_CXXFLAGS) -c $< -o $@
$(CUDA_DIR)/obj/src/model/cpu_model.o: CUDA_CXXFLAGS += $(CPU_MODEL_OMP)

$(CUDA_DIR)/obj/%.o: %.cu $(wildcard $(CUDA_NCCL_STAMP)) | $(call need,trainer cuda)
	@mkdir -p $(dir $@)
	$(call step,NVCC,cuda,$<)$(NVCC) $(NVCCFLAGS) -c $< -o $@
# TF32 tensor-core code (GEMM variant 5, its test, bench/tc_peak.cu) is built as machine code
# (SASS) only, no PTX: GPGPU-Sim parses every PTX of a binary at start and knows no TF32 wmma or
# cvt, so one such PTX would stop it for every kernel (tests/gpgpusim/README.md). A GPU newer
# than CUDA_ARCH then needs a build with its own CUDA_ARCH for variant 5 (and tc_peak).
CUDA_SASS_ONLY := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a))
# The same for the cooperative grid barrier (the persistent step and the emulator's grid-barrier
# tests): cooperative_groups' grid.sync() compiles to PTX (atom.add.release.gpu) that GPGPU-Sim
# cannot parse; the second persistent kernel's cp.async too, and the emulator's PDL test
# (griddepcontrol, in its sm_90 code).
# Variant 5's kernel guards its tensor-core instructions (mma_tf32.h: a trap before sm_80, and
# --gemm 5 is refused on such a GPU), so it builds for every CUDA_ARCH; its test, the emulator's
# WMMA test and tc_peak use TF32 wmma unguarded and build for the TF32 architectures alone, and so
# do the second persistent kernel and the emulator's async-copy test (cp.async exists from sm_80;
# without code for the GPU, the persistent step's plan falls back to the first kernel).
# The fourth persistent kernel (clusters) too: its body exists in sm_90 code alone (older code traps,
# and its plan refuses a device below 9.0).
$(CUDA_DIR)/obj/kernels/gemm/5_tf32x3.o $(CUDA_DIR)/obj/kernels/ops/persistent_step4.o \
$(CUDA_DIR)/obj/kernels/ops/persistent_step.o $(CUDA_DIR)/obj/tests/sim/test_sim_coop.o \
$(CUDA_DIR)/obj/tests/sim/test_sim_pdl.o: \
  NVCCFLAGS := $(filter-out $(CUDA_GENCODE),$(NVCCFLAGS)) $(CUDA_SASS_ONLY)
$(CUDA_DIR)/obj/tests/kernels/test_gemm_tf32x3.o $(CUDA_DIR)/obj/tests/sim/test_sim_wmma.o $(CUDA_DIR)/obj/bench/tc_peak.o \
$(CUDA_DIR)/obj/kernels/ops/persistent_step2.o $(CUDA_DIR)/obj/tests/sim/test_sim_async_copy.o: \
  NVCCFLAGS := $(filter-out $(CUDA_GENCODE),$(NVCCFLAGS)) $(foreach a,$(CUDA_TF32_ARCH),-gencode arch=compute_$(a),code=sm_$(a))
# Programmatic dependent launch (kernels/common/pdl.h) in the fused step's kernels: griddepcontrol
# exists from compute capability 9.0 and GPGPU-Sim's parser does not know it. These objects embed
# SASS for each CUDA_ARCH (sm_90's with it) and PTX of the oldest architecture below 9.0 (80 when
# none is listed), which has none: GPGPU-Sim runs it and a newer GPU compiles it; common/pdl.cu
# turns PDL on only where the running code came from compute_90 or later.
CUDA_PDL_PTX := $(if $(shell [ $(CUDA_PTX_ARCH) -lt 90 ] && echo y),$(CUDA_PTX_ARCH),80)
CUDA_PDL_GENCODE := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                    -gencode arch=compute_$(CUDA_PDL_PTX),code=compute_$(CUDA_PDL_PTX)
$(CUDA_DIR)/obj/kernels/common/pdl.o $(CUDA_DIR)/obj/kernels/ops/ops.o $(CUDA_DIR)/obj/kernels/ops/layer2.o \
$(CUDA_DIR)/obj/kernels/gemm/4_warptile.o: \
  NVCCFLAGS := $(filter-out $(CUDA_GENCODE),$(NVCCFLAGS)) $(CUDA_PDL_GENCODE)

# Thread block clusters (the emulator's cluster tests: __cluster_dims__, cluster_group) exist from
# compute capability 9.0: SASS for sm_90 alone, and the tests skip on an older GPU.
$(CUDA_DIR)/obj/tests/sim/test_sim_cluster.o $(CUDA_DIR)/obj/tests/sim/test_sim_cluster_faults.o: \
  NVCCFLAGS := $(filter-out $(CUDA_GENCODE),$(NVCCFLAGS)) -gencode arch=compute_90,code=sm_90

# Hopper's warpgroup MMA (variant 5's wgmma kernel and its test) exists only in sm_90a code,
# which runs on compute capability 9.0 alone (H100, H200); built for it whatever CUDA_ARCH says,
# SASS only, and launched only where gemm_tuning::tf32_wgmma_available().
CUDA_SM90A := -gencode arch=compute_90a,code=sm_90a
$(CUDA_DIR)/obj/kernels/gemm/5_tf32x3_wgmma.o $(CUDA_DIR)/obj/tests/kernels/test_gemm_wgmma.o: \
  NVCCFLAGS := $(filter-out $(CUDA_GENCODE),$(NVCCFLAGS)) $(CUDA_SM90A)

$(CUDA_LIB): $(CUDA_HOST_OBJ) $(CUDA_KERN_OBJ)
	$(call step,AR,cuda,$(notdir $@))rm -f $@ && ar rcs $@ $^

$(CUDA_TRAIN): $(call cuda_objs,src/app/main.cpp) $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cuda,$(notdir $@))$(MPICXX) $^ $(CUDA_LDLIBS) -o $@

CUDA_BENCH := $(patsubst bench/%,$(CUDA_DIR)/bin/%,$(basename $(BENCH_SRCS)))
$(CUDA_BENCH): $(CUDA_DIR)/bin/%: $(CUDA_DIR)/obj/bench/%.o $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cuda,$(notdir $@))$(MPICXX) $^ $(CUDA_LDLIBS) -o $@

# The test suite's objects also need GoogleTest.
$(CPU_TEST_OBJ) $(CUDA_TEST_OBJ): | $(call need,tests)

$(CUDA_TESTS): $(CUDA_TEST_OBJ) $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(call step,LINK,cuda,$(notdir $@))$(MPICXX) $^ -lgtest $(CUDA_LDLIBS) -o $@

# ---- top-level targets -----------------------------------------------------------------
.PHONY: all trainer cpu cpu-test-bins cuda test test-more sanitize-build test-sanitize test-build test-cpu test-gpu-grid test-cuda sanitize-gpu test-sim-examples test-nvtx run data setup clean help bench

# `make trainer`: the one nn_train a cluster job runs: the CUDA build's where nvcc exists (it needs
# MPI, CUDA, Armadillo, a BLAS, zlib, CLI11, nlohmann-json), else the emulator build's (which adds
# Boost.Context and runs --device cpu or the emulator). No tests, no benches.
TRAINER := $(if $(HAVE_NVCC),$(CUDA_TRAIN),$(CPU_TRAIN))
trainer: $(TRAINER)
	@echo "trainer: $(TRAINER)"
cpu: cpu-test-bins $(CPU_BENCH)
# What the test targets run from the emulator build (no bench programs): all make test-sanitize builds.
cpu-test-bins: $(CPU_TRAIN) $(CPU_TESTS) $(if $(NVTX_DIR),$(NVTX_RECORDER))
cuda: $(CUDA_TRAIN) $(CUDA_TESTS) $(CUDA_BENCH)
# The CUDA build is part of `all` whenever nvcc exists, so CI proves it compiles and links.
all: cpu $(if $(HAVE_NVCC),cuda)
	@$(if $(HAVE_NVCC),,echo "note: nvcc not found (set CUDA_HOME or PATH): CUDA build skipped, emulator build only")

# Setup checks every dependency once (and installs what is missing on Debian as root);
# the stamp makes a second run do nothing until the script changes.
SETUP_STAMP := $(BUILD)/.setup-done
setup: $(SETUP_STAMP)
$(SETUP_STAMP): .ci/setup.sh .ci/deps.sh .ci/deps_lib.sh
	$(call step,SETUP,,.ci/setup.sh: checking the dependencies)NN_DNNL=$(DNNL) NN_BUILD=$(BUILD) bash .ci/setup.sh
	@mkdir -p $(dir $@) && touch $@
# Targets that need more than the base build depend on setup-COMPONENT (plots, scaling, peer,
# fuzz, slurm, gpgpusim, multinode): the same script checks and installs that component's part
# (.ci/setup.sh says what each needs), after the base setup, once per change of the script.
SETUP_COMPONENTS := $(filter-out base,$(shell bash .ci/setup.sh --list))
SETUP_COMPONENT_STAMPS := $(SETUP_COMPONENTS:%=$(BUILD)/.setup-%)
.PHONY: $(SETUP_COMPONENTS:%=setup-%)
$(SETUP_COMPONENTS:%=setup-%): setup-%: $(BUILD)/.setup-%
$(SETUP_COMPONENT_STAMPS): $(BUILD)/.setup-%: .ci/setup.sh | setup
	$(call step,SETUP,,.ci/setup.sh $*: checking what it needs)PLOTS_PYTHON=$(PLOTS_PYTHON) bash .ci/setup.sh $*
	@mkdir -p $(dir $@) && touch $@

# Open MPI refuses root without these, and needs --oversubscribe for 4 ranks on 2 cores.
MPI_ENV := $(if $(filter 0,$(shell id -u)),OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
MPIRUN_FLAGS ?= --oversubscribe
# SANITIZE=1: LeakSanitizer runs at 1 rank only; with several ranks Open MPI's transport
# plugins (unloaded at finalize, so unsuppressible by name) leak 32 bytes per peer. What
# MPI_Init/MPI_Finalize allocate is ignored by src/comm/comm.cpp (__lsan_disable).
# intercept_strchr=0: GCC 12's libasan symbolizes Open MPI's libraries through libbacktrace,
# whose strrchr on a symlink path trips ASan's own interceptor; the report then deadlocks
# on the symbolizer's lock (seen with Open MPI 4.1.4 on Debian 12).
SAN_ENV = ASAN_OPTIONS=intercept_strchr=0:detect_leaks=
# Each rank count runs under a different emulator thread order, so one `make test`
# covers forward, reverse and seeded-random schedules; the 1-rank run uses two emulator
# workers (blocks on two OS threads, as `make run` does on a 2-core machine) (tests that depend on the order
# also loop over all three themselves). The 2-rank run turns programmatic dependent launch on
# (NN_PDL=1; off by default, kernels/common/pdl.cu), so the trainer's PDL launches run under the
# emulator's hazard checks too.
# Every run uses the emulator's default lazy streams (sim/runtime/lazy.cpp): work on
# created streams runs only when a wait or sync forces it, so a missing one shows as wrong
# data, and event/stream queries answer "not ready" while work is pending. SIM_STREAMS=sync
# (set it in the environment of make) turns that off for debugging. Every rank has an emulated
# device of its own (SIM_DEVICES = the rank count), as one GPU a rank: --comm nccl needs it.
GPU_VISIBLE := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)

# make test: what every change must pass, in about 3 minutes on 2 cores once built: the emulator
# build's suite at 1 rank (every test) and 2 (the collective ones), the kernels at GPU grid
# sizes, the NVTX ranges, the CLI's bad-input, device-map and resume checks, the build checks;
# on a machine with a GPU, the CUDA build's suite on it. Without a GPU the CUDA build is not
# made here (nothing of it could run): make test-more compiles it.
# make test-more: the rest of what needs neither a GPU nor root (.ci/run runs both): the
# collective tests at 3 and 4 ranks, the emulator's standalone programs, the CLI's killed,
# stalled and core-binding checks, the CUDA build compiled for every CUDA_ARCH, and the docs'
# commands that want the whole build (tests/docs/commands.sh built: make, make trainer, ...).
# Each part in order even under -j.
test: cpu-test-bins $(if $(GPU_VISIBLE),$(if $(HAVE_NVCC),cuda))
	@$(MAKE) --no-print-directory -j1 test-cpu NP_LIST='$(TEST_NP_LIST)'
	@$(MAKE) --no-print-directory -j1 test-gpu-grid
	@$(MAKE) --no-print-directory -j1 test-nvtx
	@$(MAKE) --no-print-directory -j1 CLI_SCRIPTS='$(CLI_QUICK)' test-cli
	@$(MAKE) --no-print-directory -j1 test-build
	@$(if $(GPU_VISIBLE),$(if $(HAVE_NVCC),$(MAKE) --no-print-directory -j1 test-cuda))
test-more: all
	@$(MAKE) --no-print-directory -j1 NP_LIST='$(filter-out $(TEST_NP_LIST),$(NP_LIST))' RANKS_ALL=none test-cpu
	@$(MAKE) --no-print-directory -j1 test-sim-examples
	@$(MAKE) --no-print-directory -j1 CLI_SCRIPTS='$(filter-out $(CLI_QUICK),$(CLI_ALL))' test-cli
	@echo "== tests/docs/commands.sh built: the build commands the docs show (make, make trainer, make cuda data), each up to date =="
	@bash tests/docs/commands.sh built
TEST_NP_LIST := 1 2
# The suite's collective tests (tests/comm, tests/exchange, tests/train and the emulated NCCL's: their results depend on the rank count)
# run at every count of NP_LIST; the others (options, IDX, checkpoints, the reference, schedules,
# the CPU model, every kernel and the emulator's own tests, which loop over the emulator's thread
# orders themselves) once, at the first count. TEST_ARGS' own --gtest_filter comes last and wins.
lparen := (
rparen := )
RANK_SUITES := $(sort $(shell sed -nE 's/^TEST[_FP]*[$(lparen)]$(lparen)[A-Za-z0-9_]+$(rparen),.*/\1/p' tests/comm/*.cpp tests/exchange/*.cpp tests/train/*.cpp tests/sim/test_sim_nccl*.cu))
RANK_FILTER := $(subst $(space),:,$(RANK_SUITES:%=%.*))
# What ASan and UBSan add to make test (.ci/run's last phase): the emulator build under both
# sanitizers, its suite at 1 and 2 ranks (the collective tests at 2), the GPU-grid kernel
# tests, the NVTX ranges and make test's CLI checks. The emulator's standalone checks
# (sim/examples/verify.sh builds its own ASan variants) and the build checks do not depend on
# the compiler's flags: make test runs them.
# sanitize-build is its build alone (.ci/run starts it early, at the lowest priority, beside
# make test and test-slurm).
sanitize-build: setup
	@$(MAKE) --no-print-directory SANITIZE=1 HAVE_NVCC= cpu-test-bins
test-sanitize: sanitize-build
	@$(MAKE) --no-print-directory -j1 SANITIZE=1 HAVE_NVCC= NP_LIST='1 2' CLI_SCRIPTS='$(CLI_QUICK)' test-cpu test-gpu-grid test-nvtx test-cli
# RANKS_ALL: the rank count that runs every test (default the first of NP_LIST; none: only the
# collective tests, at every count).
RANKS_ALL ?= $(firstword $(NP_LIST))
test-cpu: $(CPU_TESTS)
	@set -e; first=$(RANKS_ALL); for np in $(NP_LIST); do \
	  case $$np in 1) order=forward;; 2) order=reverse;; *) order=random;; esac; \
	  workers=$$( [ $$np = 1 ] && echo 2 || echo 1 ); \
	  pdl=$$( [ $$np = 2 ] && echo 1 || echo 0 ); \
	  if [ $$np = $$first ]; then which="every test"; filter=; \
	  else which="the collective tests (tests/comm, tests/exchange, tests/train, tests/sim/test_sim_nccl*)"; filter="--gtest_filter=$(RANK_FILTER)"; fi; \
	  echo "== $(CPU_TESTS) (emulator), $$which, at $$np MPI rank(s), SIM_ORDER=$$order SIM_SEED=$$np SIM_WORKERS=$$workers SIM_STREAMS=$${SIM_STREAMS:-lazy} NN_PDL=$$pdl SIM_DEVICES=$$np =="; \
	  $(MPI_ENV) SIM_ORDER=$$order SIM_SEED=$$np SIM_WORKERS=$$workers NN_PDL=$$pdl SIM_DEVICES=$$np $(if $(filter 1,$(SANITIZE)),$(SAN_ENV)$$((np == 1))) \
	    $(MPIRUN) $(MPIRUN_FLAGS) -np $$np $(CPU_TESTS) $$filter $(TEST_ARGS); \
	done
# The elementwise and reduction kernels (tests/kernels/test_ops*.cpp) once more, with the CUDA
# build's grid sizes (up to 2048 blocks instead of the emulator's 8; nn::use_gpu_grids), so
# the many-block paths run as on a GPU; OpsGrid checks that they really launch that many.
test-gpu-grid: $(CPU_TESTS)
	@echo "== $(CPU_TESTS) --gtest_filter='Ops*' (emulator) with the CUDA build's grid sizes, NN_TEST_GPU_GRIDS=1 =="
	@$(MPI_ENV) NN_TEST_GPU_GRIDS=1 $(if $(filter 1,$(SANITIZE)),$(SAN_ENV)1) \
	  $(MPIRUN) $(MPIRUN_FLAGS) -np 1 $(CPU_TESTS) --gtest_filter='Ops*'
# NVTX ranges at 2 ranks on the emulator build: present, nested as intended, balanced.
test-nvtx: $(CPU_TRAIN) $(if $(NVTX_DIR),$(NVTX_RECORDER))
ifneq ($(NVTX_DIR),)
	@set -e; for step in separate fused; do \
	  echo "== tests/nvtx/check_nvtx.sh: NVTX ranges recorded by an injection library, 2 ranks, the $$step step =="; \
	  $(MPI_ENV) $(if $(filter 1,$(SANITIZE)),$(SAN_ENV)0) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" NVTX_STEP=$$step \
	    bash tests/nvtx/check_nvtx.sh $(NVTX_RECORDER) $(CPU_TRAIN) synthetic 2; \
	done
else
	@echo "== NVTX headers not found (CUDA_HOME/include/nvtx3): NVTX range test skipped =="
endif

# The emulator's standalone checks: simcc builds plain CUDA programs, faults in the default
# abort mode end the process with the right message, ASan sees out-of-bounds kernel writes.
test-sim-examples: setup
	@echo "== sim/examples/verify.sh (standalone simcc programs, abort-mode faults, ASan) =="
	@SIMCC_CACHE_DIR=$(abspath $(BUILD))/simcc-cache bash sim/examples/verify.sh $(BUILD)/sim-examples
# The build and the layout (tests/build): file and function sizes in src/, the Markdown links
# and paths, the GEMM registry against --help, kernels/gemm/README.md and the bench; the
# dependency graph from make's own database (setup before everything, `make run` builds only
# what it runs, `make` both builds); the shared host-only objects free of CUDA and the emulator;
# each setup component before the targets that need it;
# simultaneous launches through slurm/mpirun.sh, which must never collide; make cpu-gemm-lab's
# two programs at a small size; tc_peak --quick on the emulator (its kernels' results checked);
# every command README.md and docs/ show, run by a test or tagged (check_doc_commands.py), and the
# cheap ones run as written (tests/docs/commands.sh quick: make run, make help, ...).
test-build: $(CPU_TRAIN) $(CPU_DIR)/bin/gemm_bench data $(CPU_GEMM_DIR)/bin/cpu_gemm_lab $(CPU_GEMM_DIR)/bin/fma_peak \
            $(CPU_DIR)/bin/tc_peak
	@echo "== tests/build/check_sizes.py: every file of src/, kernels/ and tests/ at most 400 lines, every function at most 60 (a kernel that says why, 120) =="
	@$(PYTHON) tests/build/check_sizes.py src kernels tests
	@echo "== tests/slurm/pick_build.sh: the build and device a job script picks (a visible GPU never means the emulator by surprise) =="
	@bash tests/slurm/pick_build.sh
	@echo "== tests/build/check_links.py: every link and repository path in the Markdown files exists =="
	@$(PYTHON) tests/build/check_links.py
	@echo "== tests/build/check_docs.py: usage.md has every option, the GEMM table every variant, no journal phrases, narration, dates or commit hashes outside provenance lines =="
	@$(PYTHON) tests/build/check_docs.py --self-test
	@$(PYTHON) tests/build/check_docs.py
	@echo "== tests/build/check_figures.py: a figure stated in several places (CI target, CUDA_ARCH, chunk size, exchange pieces, GPU-step ratios, make targets' times) has one value =="
	@$(PYTHON) tests/build/check_figures.py --self-test
	@$(PYTHON) tests/build/check_figures.py
	@echo "== tests/build/check_doc_commands.py: every command README.md and docs/ show is run as written by CI (tests/docs/commands.txt) or tagged as needing a GPU or a cluster =="
	@$(PYTHON) tests/build/check_doc_commands.py --self-test
	@$(PYTHON) tests/build/check_doc_commands.py
	@echo "== tests/build/check_gemm_registry.py: the GEMM registry, --help, kernels/gemm/README.md and the bench agree =="
	@$(MPI_ENV) $(PYTHON) tests/build/check_gemm_registry.py $(CPU_TRAIN) $(CPU_DIR)/bin/gemm_bench
	@echo "== bench/auto_table.py: kernels/gemm/auto_table.h (--gemm auto, --persistent auto) holds what the committed measurements give =="
	@$(PYTHON) bench/auto_table.py --self-test
	@$(PYTHON) bench/auto_table.py --check
	@echo "== tests/build/check_graph.py: setup before every step, make run builds only what it runs =="
	@$(PYTHON) tests/build/check_graph.py $(MAKE)
	@echo "== tests/build/check_host_only.py: the objects both builds share ($(HOST_DIR)) include nothing of CUDA or the emulator =="
	@$(PYTHON) tests/build/check_host_only.py $(HOST_DIR) $(HOST_ONLY_SRCS)
	@echo "== tests/build/check_data.sh: make data offline: a user's own IDX files used, never deleted; one-line errors =="
	@bash tests/build/check_data.sh
	@echo "== tests/build/check_setup.py: setup components (.ci/setup.sh plots, fuzz, ...) run before the targets that need them =="
	@$(PYTHON) tests/build/check_setup.py $(MAKE)
	@echo "== make cpu-gemm-lab's programs, small: OpenBLAS's five step GEMMs checked against float64 sums; the FMA loop runs =="
	@$(CPU_GEMM_DIR)/bin/cpu_gemm_lab --lib openblas=$(OPENBLAS_SO) --shapes 16:8,33:7 --procs 1,2 --seconds 0.01 >/dev/null
	@$(CPU_GEMM_DIR)/bin/fma_peak --threads 1 --seconds 0.02 --repeats 1 | grep -q '^peak, 1 thread: '
	@echo "== tc_peak --quick (emulator): the WMMA TF32 and FP32 FMA peak kernels run and store exact results =="
	@$(if $(filter 1,$(SANITIZE)),$(SAN_ENV)1 )$(CPU_DIR)/bin/tc_peak --quick > $(BUILD)/tc_peak_quick.txt || { cat $(BUILD)/tc_peak_quick.txt; exit 1; }
	@echo "== tests/bench: the scaling model's algebra and fits (bench/scaling_model.py; make test-scaling-model) =="
	@$(MAKE) --no-print-directory test-scaling-model
	@echo "== tests/build/concurrent_runs.sh: simultaneous launches, each with its own Open MPI session directory =="
	@$(MPI_ENV) $(if $(filter 1,$(SANITIZE)),$(SAN_ENV)0) bash tests/build/concurrent_runs.sh $(CPU_TRAIN) data/current
	@echo "== tests/docs/commands.sh quick: the commands the docs show, run as written (make run, make help, the scaling model, ...) =="
	@bash tests/docs/commands.sh quick
test-cuda: cuda
	@if [ "$(GPU_VISIBLE)" = yes ]; then \
	  for np in $(NP_LIST); do echo "== $(CUDA_TESTS) (GPU) at $$np MPI rank(s) =="; \
	    $(MPI_ENV) $(MPIRUN) $(MPIRUN_FLAGS) -np $$np $(CUDA_TESTS) $(TEST_ARGS) || exit 1; done; \
	else echo "== no GPU visible: CUDA test binary built ($(CUDA_TESTS)) but not run =="; fi
# compute-sanitizer memcheck, racecheck, synccheck on the CUDA build's kernel and training tests.
sanitize-gpu: cuda
	@bash tests/cuda/compute_sanitizer.sh $(CUDA_TESTS)

# `make run`: train on whatever `make data` found (MNIST, or Fashion-MNIST offline). It builds
# only the trainer it runs: with a GPU (and nvcc) the CUDA build's, on the GPU; without one the
# emulator build's with --device cpu (the host's cores through BLAS, no emulator: what a
# laptop user expects from a trainer, and seconds instead of minutes); nothing else (no tests,
# no benches, no nvcc without a GPU). The last --device wins: RUN_ARGS='--device gpu' runs the
# CUDA kernels on the SIMT emulator instead.
RUN_ARGS ?=
RUN_ON_GPU := $(and $(HAVE_NVCC),$(GPU_VISIBLE))
RUN_TRAIN  := $(if $(RUN_ON_GPU),$(CUDA_TRAIN),$(CPU_TRAIN))
RUN_DEVICE := $(if $(RUN_ON_GPU),,--device cpu)
run: $(RUN_TRAIN) data
	@$(if $(RUN_ON_GPU),echo "== GPU visible: the CUDA build on the GPU (hint: make run RUN_ARGS='--device cpu' trains on this machine's cores instead) ==",echo "== no GPU visible: --device cpu, the host's cores with BLAS (hint: make run RUN_ARGS='--device gpu' runs our CUDA kernels on the SIMT emulator instead, about 30x slower) ==")
	@echo "== $(strip $(RUN_TRAIN) --data data/current $(RUN_DEVICE) $(RUN_ARGS)) =="
	@$(MPI_ENV) SIM_WORKERS=$${SIM_WORKERS:-0} $(SINGLETON) $(RUN_TRAIN) --data data/current $(RUN_DEVICE) $(RUN_ARGS)

# No library: get_mnist.sh needs bash, curl (optional) and gzip. As root on Debian the probe
# that every other goal starts with has installed the offline Fashion-MNIST package first.
data:
	$(call step,DATA,,data/get_mnist.sh)bash data/get_mnist.sh

# `make bench`: the GEMM lab (every variant validated, then timed; CSV), the emulator's
# own speed (tiled SGEMM 512^3, barrier cost) and the IDX loader against zcat.
# On a GPU the CUDA build's full-size GEMM lab runs; otherwise emulator figures only.
BENCH_OUT ?= $(BUILD)/bench
SIM_BENCH := $(CPU_DIR)/bin/sim_bench_tiled
$(SIM_BENCH): sim/examples/bench_tiled.cu $(CPU_SIMLIB) | $(call need,trainer emulator)
	@mkdir -p $(dir $@)
	$(call step,SIMCC,cpu,$<)$(PYTHON) $(SIMCC) -O2 $(SANFLAGS) --no-sim-runtime $(DEPS_CPPFLAGS) $(CPPFLAGS) $< $(CPU_SIMLIB) $(LINK_DIRS) -lboost_context -pthread -o $@
bench: all $(SIM_BENCH)
	@mkdir -p $(BENCH_OUT)
	@if [ "$(HAVE_NVCC)" = yes ] && [ "$(GPU_VISIBLE)" = yes ]; then \
	  echo "== GEMM lab on the GPU (CUDA build) =="; \
	  $(CUDA_DIR)/bin/gemm_bench --configs --repeats 50 --csv $(BENCH_OUT)/gemm_gpu.csv; \
	fi
	@echo "== GEMM lab on the emulator (CPU wall time, not GPU performance) =="
	$(CPU_DIR)/bin/gemm_bench --quick --csv $(BENCH_OUT)/gemm_emulator.csv
	@echo "== emulator speed: 16x16 tiled SGEMM and barrier cost (CPU) =="
	$(SIM_BENCH)
	@echo "== IDX loader vs zcat =="
	IDX_LOAD_BENCH=$(CPU_DIR)/bin/idx_load_bench bash bench/idx_load_vs_zcat.sh

# ---- plots, parameter sweep, peer baseline (bench/README.md "Plots / sweep / peer") ----
# `make plots`: a quick emulator sweep (bench/sweep.sh GRID=quick), a short --metrics run, the
# GEMM lab's CSV when missing, then bench/plots.py -> $(PLOTS_OUT)/{roofline,training,gemm,phases}.png
# `make peer`: bench/peer_compare.sh, our code against the same network in PyTorch (Debian's,
# and PyTorch 2, JAX and TensorFlow from PyPI in venvs it creates under $(BUILD): bench/peer_venvs.sh).
PLOTS_OUT    ?= $(BUILD)/plots
PLOTS_PYTHON ?= /usr/bin/python3
.PHONY: plots peer
plots: setup-plots $(CPU_TRAIN) $(CPU_DIR)/bin/gemm_bench data
	@mkdir -p $(PLOTS_OUT) $(BENCH_OUT)
	GRID=quick NP="1 2" NN_BIN=$(CPU_TRAIN) OUT=$(PLOTS_OUT)/sweep bash bench/sweep.sh
	$(MPI_ENV) SIM_WORKERS=$${SIM_WORKERS:-0} $(SINGLETON) $(CPU_TRAIN) --data data/current --hidden 64 --batch 100 \
	  --epochs 5 --train-size 5000 --test-size 1000 --metrics $(PLOTS_OUT)/metrics.csv --report $(PLOTS_OUT)/metrics.json
	@test -s $(BENCH_OUT)/gemm_emulator.csv || $(CPU_DIR)/bin/gemm_bench --quick --csv $(BENCH_OUT)/gemm_emulator.csv
	$(PLOTS_PYTHON) bench/plots.py all --sweep $(PLOTS_OUT)/sweep --metrics $(PLOTS_OUT)/metrics.csv \
	  --report $(PLOTS_OUT)/metrics.json --gemm $(BENCH_OUT)/gemm_emulator.csv --out $(PLOTS_OUT)
	@echo "plots: $(PLOTS_OUT)/roofline.png $(PLOTS_OUT)/training.png $(PLOTS_OUT)/gemm.png $(PLOTS_OUT)/phases.png$(if $(wildcard $(BUILD)/peer/peer_cpu.csv), $(PLOTS_OUT)/peer.png)"
peer: setup-peer $(CPU_TRAIN) $(CPU_GEMM_DIR)/bin/fma_peak data $(if $(and $(HAVE_NVCC),$(GPU_VISIBLE)),$(CUDA_TRAIN))
	CPU_DIR=$(CPU_DIR) CUDA_DIR=$(CUDA_DIR) PYTHON=$(PLOTS_PYTHON) FMA_PEAK=$(CPU_GEMM_DIR)/bin/fma_peak \
	  VENVS=$(BUILD) bash bench/peer_compare.sh

# `make cpu-gemm-lab`: which CPU GEMM is fastest at the trainer's --device cpu shapes: OpenBLAS,
# BLIS, oneDNN and Intel MKL (PyPI, into $(BUILD)/venv-mkl) at 1 and 2 threads, every result
# checked, and the machine's FMA peak (bench/cpu_gemm/lab.sh; CSV and summary in $(BUILD)/cpu_gemm).
# Plain g++ builds, without the project's libraries: the lab loads each BLAS itself.
$(CPU_GEMM_DIR)/bin/cpu_gemm_lab: bench/cpu_gemm/lab.cpp | $(call need,toolchain)
	@mkdir -p $(dir $@)
	$(call step,CC,host,$<)$(CXX) -std=c++20 -O2 $(WARN) $< -ldl -o $@
$(CPU_GEMM_DIR)/bin/fma_peak: bench/cpu_gemm/fma_peak.cpp | $(call need,toolchain)
	@mkdir -p $(dir $@)
	$(call step,CC,host,$<)$(CXX) -std=c++20 -O2 $(WARN) -pthread $< -o $@
.PHONY: cpu-gemm-lab
cpu-gemm-lab: setup-gemmlab $(CPU_GEMM_DIR)/bin/cpu_gemm_lab $(CPU_GEMM_DIR)/bin/fma_peak
	OUT=$(CPU_GEMM_DIR) VENV=$(BUILD)/venv-mkl bash bench/cpu_gemm/lab.sh $(CPU_GEMM_DIR)/bin/cpu_gemm_lab $(CPU_GEMM_DIR)/bin/fma_peak

# Fragments: the local Slurm cluster test, CLI bad-input tests, fuzzing, the scaling study.
include tests/slurm/slurm.mk
include tests/fuzz/fuzz.mk
include tests/cli/cli.mk
include tests/gpgpusim/gpgpusim.mk
include bench/scaling.mk
include tests/multinode/multinode.mk
include tests/nsys/nsys.mk
include tests/cluster/cluster.mk

clean:
	rm -rf $(BUILD)

help:
	@echo "make [all]   build the emulator (CPU) build, and the CUDA build if nvcc exists"
	@echo "make test    the gtest suite at 1 MPI rank, its collective tests at 2-4; NVTX, CLI, emulator and build checks (emulator; also CUDA on a GPU)"
	@echo "make test-sanitize  the suite (1-2 ranks), NVTX and CLI checks under ASan + UBSan (emulator build, -O1)"
	@echo "make sanitize-build its build alone (SANITIZE=1 make cpu-test-bins)"
	@echo "make test-gpu-grid  the Ops kernel tests on the emulator with the CUDA build's grid sizes (part of make test)"
	@echo "make run     get data and train (RUN_ARGS='--epochs 3 ...')"
	@echo "make data    download MNIST, or fall back to Debian's Fashion-MNIST offline"
	@echo "make bench   GEMM lab (validate + time every variant), emulator speed, loader speed"
	@echo "make plots   roofline, training curves, GEMM bars, phase breakdown (PNG, build/plots/)"
	@echo "make peer    our reference vs PyTorch on the same network (and our GPU build vs PyTorch on a GPU)"
	@echo "make cpu-gemm-lab  OpenBLAS vs BLIS, oneDNN, MKL at the --device cpu GEMM shapes, 1 and 2 threads; the FMA peak"
	@echo "make scaling how many GPUs pay: the scaling model's tables and plots from committed measurements (build/scaling/model/)"
	@echo "make scaling-study strong/weak scaling x strategies + variant ratios on this machine (CSV, PNG in build/scaling/)"
	@echo "make test-build  sizes of src/ files and functions, Markdown links, GEMM registry agreement, the dependency graph, simultaneous launches, the docs' commands"
	@echo "make test-cli    bad input (every corrupt IDX class, bad options, bad checkpoints) and a killed rank, end to end"
	@echo "make test-slurm  a local one-node Slurm cluster (root): submit slurm/*.sbatch, check COMPLETED"
	@echo "make test-nsys   nsys.sh under Debian's Nsight Systems (root): 2 ranks, each rank's NVTX ranges and counts checked"
	@echo "make test-cluster  a non-root user builds and tests on a simulated login node, modules in both styles (root)"
	@echo "make trainer the one nn_train a job runs: the CUDA build's where nvcc exists, else the emulator build's"
	@echo "make test-multinode  2 simulated nodes (root; namespaces): mpirun and sbatch -N 2, device mapping, node faults, hung rank"
	@echo "make sanitize-gpu  compute-sanitizer memcheck/racecheck/synccheck on the CUDA tests (GPU only)"
	@echo "make gpgpusim      build GPGPU-Sim (pinned commit + tests/gpgpusim/gpgpu-sim.patch), cached in ~/.cache/nn-gpgpusim"
	@echo "make test-gpgpusim the CUDA build (nvcc's code) on GPGPU-Sim: kernel tests, nn_train at 2 ranks (root in CI)"
	@echo "make bench-gpgpusim modeled GEMM cycles on GPGPU-Sim's QV100 and RTX 3070 models (slow; not a GPU measurement)"
	@echo "make fuzz    libFuzzer on the IDX parser and checkpoint reader, FUZZ_SECONDS=60 each (clang)"
	@echo "make setup   check/install dependencies (make setup-plots, setup-peer, ...: what one target needs beyond the build)"
	@echo "make clean   remove $(BUILD)/"
	@echo "variables: V=1 (print the commands) USE_DOUBLE=1 DEBUG=1 SANITIZE=1 CUDA_HOME= CUDA_ARCH='75 80 90'|native NP_LIST='1 2' DNNL=auto|0|1 CPPFLAGS= LDFLAGS= <DEP>_ROOT="

-include $(shell find $(CPU_DIR) $(CUDA_DIR) $(HOST_DIR) -name '*.d' 2>/dev/null)
