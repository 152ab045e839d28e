# Where each dependency is: $(BUILD)/deps.mk, written by `.ci/deps.sh probe` (one line per
# dependency on the terminal), remade when the script or the environment that decides it changes
# (compilers, PATH, CPATH, LIBRARY_PATH, PKG_CONFIG_PATH, CMAKE_PREFIX_PATH, CPPFLAGS, LDFLAGS,
# every <NAME>_ROOT / <NAME>_DIR / EBROOT<NAME>, VIRTUAL_ENV), or when pip installs or removes
# NCCL's wheel (its nccl.h in VIRTUAL_ENV, the user's site-packages or $(BUILD)/pip). Each target asks only for what it uses through
# the stamps $(call need,ROLE...) (.ci/deps.sh need ROLE: one line per missing dependency).
# Tested by tests/build/check_graph.py (every step behind its stamps) and tests/cluster/.
DEPS_MK       := $(BUILD)/deps.mk
DEPS_ENV_FILE := $(BUILD)/deps.env
DEPS_ENV_VARS := CXX MPICXX NVCC CUDA_HOME DNNL CPPFLAGS LDFLAGS PATH CPATH LIBRARY_PATH PKG_CONFIG_PATH \
                 CMAKE_PREFIX_PATH VIRTUAL_ENV PYTHONUSERBASE $(sort $(foreach v,$(.VARIABLES),$(if $(filter environment%,$(origin $(v))),$(if \
                 $(filter %_ROOT %_DIR EBROOT%,$(v)),$(v)))))
# NCCL's wheel where pip puts it: appearing or going rewrites the env file, a newer one is newer.
DEPS_NCCL_WHEELS := $(wildcard $(addsuffix /nvidia/nccl/include/nccl.h,$(BUILD)/pip $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/lib/python3*/site-packages) \
                      $(or $(PYTHONUSERBASE),$(HOME)/.local)/lib/python3*/site-packages))
DEPS_ENV_NOW  := $(foreach v,$(DEPS_ENV_VARS),$(v)=$($(v));) NCCL wheels=$(DEPS_NCCL_WHEELS);
# Goals that need no dependency: no probe for them alone (test-cuda12 runs a make of its own;
# make test-cluster builds inside its login node, with that node's modules).
DEPS_FREE_GOALS := clean help data test-cuda12 test-cluster
# NN_NO_PROBE=1: the rules without the probe (tests/build/check_graph.py reads make's database).
ifneq ($(if $(filter 1,$(NN_NO_PROBE)),,$(filter-out $(DEPS_FREE_GOALS),$(or $(MAKECMDGOALS),all))),)
  $(shell mkdir -p $(BUILD))
  ifneq ($(file <$(DEPS_ENV_FILE)),$(DEPS_ENV_NOW))
    $(file >$(DEPS_ENV_FILE),$(DEPS_ENV_NOW))
  endif
  include $(DEPS_MK)
endif
# As root on Debian/Ubuntu, setup first installs what is missing (apt-get); elsewhere it
# installs nothing and fails nothing: the stamps below decide what each target needs.
$(DEPS_MK): .ci/deps.sh .ci/deps_lib.sh .ci/setup.sh $(DEPS_ENV_FILE) $(DEPS_NCCL_WHEELS)
	@mkdir -p $(dir $@)
	@NN_DNNL=$(DNNL) NN_BUILD=$(BUILD) bash .ci/setup.sh --auto >&2 || true
	@CXX="$(CXX)" MPICXX="$(MPICXX)" NVCC="$(if $(filter command line,$(origin NVCC)),$(NVCC))" DNNL=$(DNNL) \
	  bash .ci/deps.sh probe $@
$(DEPS_ENV_FILE):
	@mkdir -p $(dir $@) && touch $@

# $(call need,ROLE...): the stamps of these roles (toolchain trainer emulator tests cuda); the
# trainer's include oneDNN's when DNNL=1 asks for it. Where a goal builds a test binary, every
# step waits for GoogleTest's stamp too: a missing GoogleTest stops the build with its one line
# before anything compiles (under -j the library objects, which need only the trainer's stamps,
# would start beside the check). Tested by tests/build/check_graph.py and tests/cluster/.
TEST_BIN_GOALS := all cpu cpu-test-bins cuda test test-cpu test-gpu-grid test-cuda sanitize-gpu \
                  test-slurm test-multinode test-gpgpusim %/nn_tests
GOAL_NEEDS := $(if $(filter $(TEST_BIN_GOALS),$(or $(MAKECMDGOALS),all)),tests)
need = $(foreach r,$(1) $(if $(and $(filter trainer,$(1)),$(filter 1,$(DNNL))),onednn) $(GOAL_NEEDS),$(BUILD)/.need-$(r))
$(BUILD)/.need-%: $(DEPS_MK)
	@bash .ci/deps.sh need $* $(DEPS_MK)
	@touch $@
