# make test-cluster: the build on a simulated cluster login node, without root, with the libraries
# only in module prefixes (tests/cluster/run.sh; the node's image: tests/cluster/image.sh, cached
# in ~/.cache/nn-cluster). Root. Not in .ci/run (tens of minutes: two full builds); run it before
# every change to the build (Makefile, make/, .ci/deps*.sh, .ci/setup.sh). docs/cluster.md says more.
.PHONY: test-cluster
test-cluster:
	@echo "== tests/cluster/run.sh: a non-root user on a simulated login node, EasyBuild- and Spack-style modules =="
	@bash tests/cluster/run.sh

# make test-cuda12: the CUDA build compiled by CUDA 12.4 (Debian 13's nvidia-cuda-toolkit, fetched
# and unpacked into ~/.cache/nn-cuda12 without installing it), for sm_70 (V100, which CUDA 13
# dropped) 75 80 90 unless CUDA_ARCH says otherwise, into build/cuda12 unless BUILD does. No GPU;
# not in make test or CI (the first run fetches about 1.3 GB). docs/cluster.md says more.
# CUDA_ARCH given on the command line is passed on (cuda_arch.mk overrides it, so make no longer
# exports it); from the environment, and BUILD either way, it reaches the script by itself.
.PHONY: test-cuda12
test-cuda12:
	@echo "== tests/cluster/cuda12.sh: make cuda with a CUDA 12 nvcc (sm_70 included) =="
	@$(if $(filter CUDA_ARCH=%,$(MAKEOVERRIDES)),CUDA_ARCH='$(CUDA_ARCH)') bash tests/cluster/cuda12.sh
