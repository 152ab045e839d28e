# `make test-slurm`: a real one-node Slurm cluster on this machine (slurm-wlm and munge from
# Debian, installed if missing by setup-slurm: .ci/setup.sh slurm; root), private config, ports
# and directories, CPUs only; submits slurm/test.sbatch (the suite's collective tests, those of
# tests/comm and tests/train, at SLURM_NP_LIST ranks: what depends on how the ranks were started;
# make test runs every test), slurm/train.sbatch (srun and mpirun) and slurm/profile.sbatch with
# the emulator build, checks every job ends COMPLETED with the expected output, and stops every
# daemon it started.
# Included by the Makefile (uses CPU_TRAIN, CPU_TESTS, MPI_ENV, BUILD).
#   make test-slurm SLURM_NP_LIST='1 2' SLURM_TRAIN_ARGS='--epochs 1 ...' SLURM_TIMEOUT=900
#   make test-slurm SLURM_TEST_ARGS=     (the test job runs the whole suite)
SLURM_NP_LIST    ?= 1 2
SLURM_TEST_ARGS  ?= --gtest_filter=$(RANK_FILTER)
SLURM_TRAIN_ARGS ?= --epochs 1 --train-size 2000 --test-size 500 --hidden 32
SLURM_TIMEOUT    ?= 900

.PHONY: test-slurm
test-slurm: setup-slurm cpu data
	@echo "== tests/slurm/run_local_slurm.sh: local Slurm cluster, slurm/*.sbatch with the emulator build =="
	@$(MPI_ENV) NN_TRAIN=$(CPU_TRAIN) NN_TESTS=$(CPU_TESTS) NN_DATA=data/current \
	  NP_LIST="$(SLURM_NP_LIST)" TEST_ARGS="$(SLURM_TEST_ARGS)" TRAIN_ARGS="$(SLURM_TRAIN_ARGS)" TIMEOUT=$(SLURM_TIMEOUT) \
	  SLURM_TEST_OUT=$(BUILD)/slurm bash tests/slurm/run_local_slurm.sh
