# Which GPUs the CUDA build has code for (CUDA_ARCH: compute capabilities without the dot).
# Default: the visible GPUs' own (nvidia-smi, as `native` would), else 75 80 90 (T4, A100,
# H100/H200; other GPUs of those generations run the nearest older code), each checked against
# what the nvcc in use targets (nvcc --list-gpu-arch, in build/deps.mk): one line and a stop
# when one is missing (CUDA 13 dropped sm_70: V100 needs CUDA 12). PTX of the oldest listed
# architecture rides along, so a newer GPU (Blackwell) JIT-compiles the portable kernels.
# Tested by tests/build/check_graph.py (the -gencode flags per object) and tests/cluster/.
CUDA_ARCH_NATIVE := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -un | tr '\n' ' ')
CUDA_ARCH ?= $(or $(strip $(CUDA_ARCH_NATIVE)),75 80 90)
override CUDA_ARCH := $(if $(filter native,$(CUDA_ARCH)),$(or $(strip $(CUDA_ARCH_NATIVE)),75 80 90),$(CUDA_ARCH))
CUDA_ARCH_BAD := $(if $(DEPS_CUDA_ARCHS),$(filter-out $(DEPS_CUDA_ARCHS),$(CUDA_ARCH)))
CUDA_PTX_ARCH := $(firstword $(sort $(CUDA_ARCH)))
CUDA_GENCODE := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX_ARCH),code=compute_$(CUDA_PTX_ARCH)
# TF32 tensor cores (mma.sync, wmma tf32) exist from sm_80: the files that use them unguarded
# (tests, bench/tc_peak.cu) are built for the listed architectures from 80 on (sm_80 when none is).
CUDA_TF32_ARCH := $(or $(foreach a,$(CUDA_ARCH),$(if $(shell [ $(a) -ge 80 ] && echo y),$(a))),80)
# The stamp every CUDA object waits for: the architectures checked once.
$(BUILD)/.need-cuda: $(BUILD)/.cuda-arch-$(subst $(space),_,$(strip $(CUDA_ARCH)))
$(BUILD)/.cuda-arch-%: $(DEPS_MK)
	@$(if $(CUDA_ARCH_BAD),echo "cuda: CUDA_ARCH has $(CUDA_ARCH_BAD)$(comma) which nvcc (CUDA $(DEPS_CUDA_VERSION)) cannot target: it targets $(strip $(DEPS_CUDA_ARCHS))$(if $(filter 70 72,$(CUDA_ARCH_BAD)),; sm_70 (V100) needs CUDA 12 (module load cuda/12)); set CUDA_ARCH" >&2; exit 1)
	@mkdir -p $(dir $@) && touch $@
