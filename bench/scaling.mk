# `make scaling`: the scaling study (bench/scaling.sh) and its plots (bench/scaling_plot.py)
# -> $(SCALING_OUT)/{scaling,variants,variants_runs}.csv and
#    $(SCALING_OUT)/{scaling_strong,scaling_weak,variants}.png
# Included by the Makefile, which defines BUILD, CPU_TRAIN, CUDA_TRAIN, HAVE_NVCC, GPU_VISIBLE,
# MPI_ENV and PLOTS_PYTHON; setup-scaling (.ci/setup.sh scaling) installs matplotlib for the
# plots. The CUDA build runs when a GPU is visible (and nvcc built it), else the emulator build. bench/scaling.sh's environment passes through (NP, STRATEGIES,
# B, B0, QUICK, HIDDEN, EPOCHS, ...); SCALING_ARGS are extra nn_train options:
#   make scaling NP='1 2' STRATEGIES=allreduce SCALING_ARGS='--gemm 3'
#   make scaling SCALING_ARGS='--device cpu'     # the host backend -> $(BUILD)/scaling-cpu
SCALING_OUT  ?= $(BUILD)/scaling$(if $(findstring --device cpu,$(SCALING_ARGS)),-cpu)
SCALING_ARGS ?=
SCALING_GPU   = $(and $(HAVE_NVCC),$(GPU_VISIBLE))
.PHONY: scaling
scaling: setup-scaling $(CPU_TRAIN) data $(if $(SCALING_GPU),$(CUDA_TRAIN))
	$(MPI_ENV) NN_BIN=$(if $(SCALING_GPU),$(CUDA_TRAIN),$(CPU_TRAIN)) OUT=$(SCALING_OUT) \
	  bash bench/scaling.sh $(SCALING_ARGS)
	$(PLOTS_PYTHON) bench/scaling_plot.py $(SCALING_OUT)
	@echo "scaling: $(SCALING_OUT)/scaling_strong.png $(SCALING_OUT)/scaling_weak.png $(SCALING_OUT)/variants.png"
