# `make test-nsys`: nsys.sh under a real Nsight Systems (Debian's nsight-systems from non-free,
# installed if missing by setup-nsys: .ci/setup.sh nsys; root). Two short trainings at 2 ranks
# with the emulator build (--device gpu on the SIMT emulator, --device cpu), each rank's NVTX
# summary checked against tests/nsys/check_ranges.py's table (ranges and counts), and nsys.sh's
# one-line errors without nsys and for a failing run (tests/nsys/check_nsys.sh). No GPU: no
# CUDA kernel or memcpy traces (docs/profiling.md). Included by the Makefile (uses CPU_TRAIN,
# MPI_ENV, MPIRUN, MPIRUN_FLAGS, NVTX_DIR).
#   make test-nsys NSYS_TEST_TIMEOUT=120
NSYS_TEST_TIMEOUT ?= 120

.PHONY: test-nsys
# Without the NVTX headers (CUDA_HOME/include/nvtx3) the trainer opens no ranges: skipped, as test-nvtx.
test-nsys: setup-nsys $(CPU_TRAIN) data
ifneq ($(NVTX_DIR),)
	@echo "== tests/nsys/check_nsys.sh: nsys.sh under Nsight Systems, 2 ranks, NVTX ranges from each rank's summary =="
	@$(MPI_ENV) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" NSYS_TEST_TIMEOUT=$(NSYS_TEST_TIMEOUT) \
	  bash tests/nsys/check_nsys.sh $(CPU_TRAIN) data/current
else
	@echo "== NVTX headers not found (CUDA_HOME/include/nvtx3): the trainer has no ranges, test-nsys skipped =="
endif
