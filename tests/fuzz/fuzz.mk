# `make fuzz`: libFuzzer targets for the IDX parser and the checkpoint reader (tests/fuzz/run.sh),
# included from the Makefile. Builds with clang into $(BUILD)/fuzz/ (setup-fuzz: .ci/setup.sh fuzz
# installs clang + libFuzzer with apt-get first when missing, as root on Debian/Ubuntu), replays
# tests/fuzz/regressions/, then fuzzes each target FUZZ_SECONDS (default 60) and fails on any
# crash, leak, UB or over-allocation.
# `make test` does not need clang: it only replays the regression files through the gtest suite.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
.PHONY: fuzz fuzz-setup
fuzz: setup-fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_TARGETS)
fuzz-setup: setup-fuzz
