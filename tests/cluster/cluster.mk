# make test-cluster: the build on a simulated cluster login node, without root, with the libraries
# only in module prefixes (tests/cluster/run.sh; the node's image: tests/cluster/image.sh, cached
# in ~/.cache/nn-cluster). Root. Not in .ci/run (tens of minutes: two full builds); run it before
# every change to the build (Makefile, make/, .ci/deps*.sh, .ci/setup.sh). docs/cluster.md says more.
.PHONY: test-cluster
test-cluster:
	@echo "== tests/cluster/run.sh: a non-root user on a simulated login node, EasyBuild- and Spack-style modules =="
	@bash tests/cluster/run.sh
