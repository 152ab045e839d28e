# `make test-slurm`: a real one-node Slurm cluster on this machine (slurm-wlm and munge from
# Debian, installed if missing by setup-slurm: .ci/setup.sh slurm; root), private config, ports
# and directories, CPUs only; submits slurm/test.sbatch (at SLURM_NP_LIST ranks, the tests of
# what srun and PMIx change against mpirun: the MPI layer and the node, tests/comm's suites; each
# rank's device from its node-local rank, Devices; the gradient exchange strategies, Strategies.
# make test runs every collective suite at 1-4 ranks, every test at 1), slurm/train.sbatch (srun and mpirun) and slurm/profile.sbatch with
# the emulator build, checks every job ends COMPLETED with the expected output, and stops every
# daemon it started.
# Included by the Makefile (uses CPU_TRAIN, CPU_TESTS, MPI_ENV, BUILD).
#   make test-slurm SLURM_NP_LIST='1 2' SLURM_TRAIN_ARGS='--epochs 1 ...' SLURM_TIMEOUT=900
#   make test-slurm SLURM_TEST_ARGS=     (the test job runs the whole suite)
#   make test-slurm SLURM_TEST_ARGS=--gtest_filter='$(RANK_FILTER)'   (every collective suite)
SLURM_NP_LIST    ?= 1 2
SLURM_SUITES     := $(sort $(shell sed -nE 's/^TEST[_FP]*[$(lparen)]$(lparen)[A-Za-z0-9_]+$(rparen),.*/\1/p' tests/comm/*.cpp) Devices Strategies)
SLURM_TEST_ARGS  ?= --gtest_filter=$(subst $(space),:,$(SLURM_SUITES:%=%.*))
SLURM_TRAIN_ARGS ?= --epochs 1 --train-size 2000 --test-size 500 --hidden 32
SLURM_TIMEOUT    ?= 900

.PHONY: test-slurm
test-slurm: setup-slurm cpu data
	@echo "== tests/slurm/run_local_slurm.sh: local Slurm cluster, slurm/*.sbatch with the emulator build =="
	@$(MPI_ENV) NN_TRAIN=$(CPU_TRAIN) NN_TESTS=$(CPU_TESTS) NN_DATA=data/current \
	  NP_LIST="$(SLURM_NP_LIST)" TEST_ARGS="$(SLURM_TEST_ARGS)" TRAIN_ARGS="$(SLURM_TRAIN_ARGS)" TIMEOUT=$(SLURM_TIMEOUT) \
	  SLURM_TEST_OUT=$(BUILD)/slurm bash tests/slurm/run_local_slurm.sh
