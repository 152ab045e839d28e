# GPGPU-Sim: the code nvcc makes, executed on the CPU (tests/gpgpusim/README.md). Included by the
# Makefile; uses its NVCC, CUDA_HOME, CUDA_GENCODE, CUDA_DIR, MPI_ENV, MPIRUN, MPIRUN_FLAGS.
#   make gpgpusim        build the simulator once (cached outside the tree; ~3 min, ~1 MB from PyPI);
#                        its build tools from Debian come first: setup-gpgpusim (.ci/setup.sh gpgpusim)
#   make test-gpgpusim   the fixes' programs, the CUDA build's kernel tests, nn_train at 2 ranks
#   make bench-gpgpusim  modeled cycles of the GEMM variants (cycle models; not in CI)
GPGPUSIM_TESTS := tests/gpgpusim
GPGPUSIM_OUT   := $(BUILD)/gpgpusim
GPGPUSIM_PROGS := $(patsubst $(GPGPUSIM_TESTS)/programs/%.cu,$(GPGPUSIM_OUT)/bin/%,$(sort $(wildcard $(GPGPUSIM_TESTS)/programs/*.cu)))

.PHONY: gpgpusim test-gpgpusim bench-gpgpusim
gpgpusim: setup-gpgpusim
	@$(if $(HAVE_NVCC),CUDA_HOME=$(CUDA_HOME) bash $(GPGPUSIM_TESTS)/build.sh,echo "error: make gpgpusim needs the CUDA toolkit (nvcc and ptxas; set CUDA_HOME)" >&2; exit 1)

# Standalone programs, with the CUDA build's code generation; the shared cudart is what lets
# the simulator stand in for it.
$(GPGPUSIM_OUT)/bin/%: $(GPGPUSIM_TESTS)/programs/%.cu | setup
	@mkdir -p $(dir $@)
	$(call step,NVCC,cuda,$<)$(NVCC) -std=c++20 -O3 -lineinfo $(CUDA_GENCODE) -ccbin $(CXX) -cudart shared $< -o $@

test-gpgpusim: setup-gpgpusim gpgpusim $(GPGPUSIM_PROGS) $(CUDA_TESTS) $(CUDA_TRAIN) data
	@echo "== $(GPGPUSIM_TESTS)/test.sh: the CUDA build on GPGPU-Sim (functional): simulator fixes, kernel tests, nn_train at 2 ranks =="
	@$(MPI_ENV) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" \
	  bash $(GPGPUSIM_TESTS)/test.sh $(CUDA_DIR)/bin $(GPGPUSIM_OUT)/bin data/current

BENCH_GPGPUSIM_OUT ?= $(BUILD)/bench-gpgpusim
bench-gpgpusim: setup-gpgpusim setup-plots gpgpusim $(CUDA_DIR)/bin/gemm_cycles $(CUDA_TRAIN) data
	@$(MPI_ENV) PLOTS_PYTHON=$(PLOTS_PYTHON) NN_TRAIN=$(CUDA_TRAIN) DATA=data/current \
	  bash bench/gpgpusim_cycles.sh $(CUDA_DIR)/bin/gemm_cycles $(BENCH_GPGPUSIM_OUT)
