# `make test-multinode`: MPI and Slurm across two simulated nodes on this one machine (root;
# network + UTS + mount namespaces, tests/multinode/nodes.sh). 4 ranks, 2 per node, through
# tests/multinode/launch.sh (mpirun with an nsenter agent instead of ssh): the suite's collective
# tests (tests/comm, tests/train; MULTINODE_GTEST_FILTER= runs them all),
# every strategy x --device with --verify and --save cmp-identical to one node, the veth byte
# counters, the per-node device mapping (SIM_DEVICES=4 --report), a node's ranks (and a whole
# node) SIGKILLed mid-run then --resume'd to a cmp-identical result, a rank on node-b
# SIGSTOPped, and a two-node Slurm cluster (slurm/train.sbatch, slurm/test.sbatch with -N 2
# --ntasks-per-node=2; --exact on's weights there identical to -N 1 x 4 ranks). About 3-4
# minutes on a 2-core machine. docs/multinode.md.
# Included by the Makefile (uses CPU_TRAIN, CPU_TESTS, MPI_ENV, BUILD; setup-multinode when
# .ci/setup.sh has that component).
#   make test-multinode MULTINODE_GTEST_FILTER='Comm*:*Strateg*' MULTINODE_SLURM=0
MULTINODE_DIR          := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
MULTINODE_GTEST_FILTER ?= $(RANK_FILTER)
MULTINODE_SLURM        ?= 1
MULTINODE_SLURM_FILTER ?= Comm*:Strategies*

.PHONY: test-multinode
test-multinode: cpu data $(if $(filter multinode,$(SETUP_COMPONENTS)),setup-multinode)
	@echo "== $(MULTINODE_DIR)/run.sh: 4 ranks over 2 simulated nodes (namespaces): gtest, strategies, devices, node faults, hung rank, Slurm =="
	@$(MPI_ENV) NN_TRAIN=$(CPU_TRAIN) NN_TESTS=$(CPU_TESTS) NN_DATA=data/current MN_OUT=$(BUILD)/multinode \
	  MN_GTEST_FILTER="$(MULTINODE_GTEST_FILTER)" MULTINODE_SLURM=$(MULTINODE_SLURM) \
	  SLURM_TEST_FILTER="$(MULTINODE_SLURM_FILTER)" bash $(MULTINODE_DIR)/run.sh
