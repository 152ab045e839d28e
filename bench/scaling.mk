# `make scaling`: how many GPUs pay (docs/scaling.md). The scaling model (bench/scaling_model.py)
# with its parameters (bench/scaling_params.json, fitted to committed measurements), its
# predictions beside every measured run (bench/scaling_fit.py check) and its plots, strong and
# weak scaling from 1 to 64 GPUs with the measured points; nothing is built or run ->
#   $(SCALING_MODEL_OUT)/{verdict.txt,table.txt,pipeline.txt,check.md,check.csv} and
#   $(SCALING_MODEL_OUT)/scaling_model_{strong,weak,cpu}.png
# SCALING_SESSIONS: folders of tests/cuda/gpu_session.sh's scalcal_* logs; given, the parameters
# are refitted with them first (into $(SCALING_MODEL_OUT)/params.json):
#   make scaling SCALING_SESSIONS=bench/results/h200-<date>/scalcal
# `make scaling-study`: the scaling study on this machine (bench/scaling.sh: nn_train at 1 2 4
# ranks x strategies, strong and weak; the CUDA build when a GPU is visible, else the emulator
# build), its plots (bench/scaling_plot.py), then the model's. Included by the Makefile, which
# defines BUILD, CPU_TRAIN, CUDA_TRAIN, HAVE_NVCC, GPU_VISIBLE, MPI_ENV, PYTHON and PLOTS_PYTHON;
# setup-scaling (.ci/setup.sh scaling) installs matplotlib for the plots. bench/scaling.sh's
# environment passes through (NP, STRATEGIES, B, B0, QUICK, HIDDEN, EPOCHS, ...); SCALING_ARGS
# are extra nn_train options:
#   make scaling-study NP='1 2' STRATEGIES=allreduce SCALING_ARGS='--gemm 3'
#   make scaling-study SCALING_ARGS='--device cpu'     # the host backend -> $(BUILD)/scaling-cpu
# `make scaling-check`: the model / measured of every committed multi-rank run, exit 1 on a miss.
# `make test-scaling-model`: the model's algebra and fits (tests/bench; part of make test-build).
SCALING_OUT       ?= $(BUILD)/scaling$(if $(findstring --device cpu,$(SCALING_ARGS)),-cpu)
SCALING_MODEL_OUT ?= $(BUILD)/scaling/model
SCALING_ARGS      ?=
SCALING_SESSIONS  ?=
SCALING_GPU        = $(and $(HAVE_NVCC),$(GPU_VISIBLE))
SCALING_PARAMS     = $(if $(strip $(SCALING_SESSIONS)),$(SCALING_MODEL_OUT)/params.json,bench/scaling_params.json)
.PHONY: scaling scaling-check scaling-study test-scaling-model
scaling-check: setup
	$(PYTHON) bench/scaling_check.py
scaling: setup-scaling
	@mkdir -p $(SCALING_MODEL_OUT)
	$(if $(strip $(SCALING_SESSIONS)),$(PYTHON) bench/scaling_fit.py fit $(SCALING_SESSIONS:%=--gpu-session %) --out $(SCALING_PARAMS))
	$(PYTHON) bench/scaling_model.py verdict --params $(SCALING_PARAMS) | tee $(SCALING_MODEL_OUT)/verdict.txt
	$(PYTHON) bench/scaling_model.py table --params $(SCALING_PARAMS) > $(SCALING_MODEL_OUT)/table.txt
	$(PYTHON) bench/scaling_model.py pipeline --params $(SCALING_PARAMS) > $(SCALING_MODEL_OUT)/pipeline.txt
	$(PYTHON) bench/scaling_fit.py check --markdown --params $(SCALING_PARAMS) $(SCALING_SESSIONS:%=--gpu-session %) \
	  --csv $(SCALING_MODEL_OUT)/check.csv > $(SCALING_MODEL_OUT)/check.md
	$(PLOTS_PYTHON) bench/scaling_model_plot.py --params $(SCALING_PARAMS) --out $(SCALING_MODEL_OUT) \
	  $(SCALING_SESSIONS:%=--gpu-session %)
	@echo "scaling: $(SCALING_MODEL_OUT)/scaling_model_strong.png scaling_model_weak.png scaling_model_cpu.png;" \
	  "tables: verdict.txt table.txt pipeline.txt check.md"
scaling-study: setup-scaling $(CPU_TRAIN) data $(if $(SCALING_GPU),$(CUDA_TRAIN))
	$(MPI_ENV) NN_BIN=$(if $(SCALING_GPU),$(CUDA_TRAIN),$(CPU_TRAIN)) OUT=$(SCALING_OUT) \
	  bash bench/scaling.sh $(SCALING_ARGS)
	$(PLOTS_PYTHON) bench/scaling_plot.py $(SCALING_OUT)
	@$(MAKE) --no-print-directory scaling
	@echo "scaling-study: $(SCALING_OUT)/scaling_strong.png $(SCALING_OUT)/scaling_weak.png $(SCALING_OUT)/variants.png"
test-scaling-model: setup
	$(PYTHON) -m unittest discover -s tests/bench -p 'test_*.py'
