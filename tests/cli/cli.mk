# End-to-end tests of nn_train's failure paths, included by the Makefile:
#   tests/cli/bad_input.sh  corrupt IDX files, bad option values, bad checkpoints, unwritable
#                           output paths, each at 1 and 3 ranks: one `error:` line, the
#                           documented exit status, no crash, no hang, nothing trained
#   tests/cli/kill_rank.sh  SIGKILL of one rank mid-training (2 and 3 ranks, rank 0 and
#                           another): mpirun exits non-zero within 10 s x the host's measured
#                           slowdown (tests/cli/slowdown.sh), no rank left behind
#   tests/cli/hung_rank.sh  SIGSTOP of one rank mid-training (2 and 3 ranks, both devices, the
#                           ps strategy once): --timeout 5 ends the job with exit code 6 within
#                           5 + 5 s x the slowdown, the timeout line from a live rank, none from
#                           the stopped one
#   tests/cli/device_map.sh  SIM_DEVICES=k: each rank's device is its node-local rank mod k,
#                           in the header and the --report JSON; bad SIM_DEVICES refused
#   tests/cli/resume_signal.sh  SIGUSR1 to mpirun mid-training, --resume until exit 0: the
#                           --save file is byte-identical to an uninterrupted run's
#   tests/cli/cores.sh      --device cpu threads on cores of their own: what
#                           slurm/mpirun.sh adds (--map-by slot:PE=t), 1 rank x 2 threads
#                           through it uses both cores (2 threads do the work, on 2 CPUs:
#                           /proc/PID/task, not CPU/wall), plain mpirun warns
#   tests/cli/exact.sh      --exact on: the weights byte-identical at 1 and 2 ranks (allreduce
#                           and ps), --device cpu and the emulator, --verify passing; without
#                           --exact they differ; exact_more.sh: the same at 3 and 4 ranks and a
#                           run saved at 2 ranks resumed at 3
#   tests/cli/nccl.sh       --comm nccl on the emulator's NCCL: --verify, the header's NCCL
#                           version, the report, at 1 and 2 ranks the weights of --comm host
#                           byte for byte, two ranks on one device refused; nccl_more.sh: 3 and 4
# No check here fails because the host is busy: docs/testing.md#timing-sensitive-checks.
# Uses the Makefile's CPU_TRAIN, MPI_ENV, MPIRUN, MPIRUN_FLAGS. About 3 minutes on a
# 2-core machine, all of them. Ends with `cli: N passed, M failed`; fails if M > 0.
CLI_TEST_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
CLI_DATA ?= data/current

# CLI_SCRIPTS: which of them (default all; make test runs CLI_QUICK, make test-more the rest).
CLI_ALL   := bad_input kill_rank hung_rank device_map resume_signal cores exact exact_more nccl nccl_more
CLI_QUICK := bad_input device_map resume_signal exact nccl
CLI_SCRIPTS ?= $(CLI_ALL)

.PHONY: test-cli
test-cli: $(CPU_TRAIN) data
	@echo "== $(CLI_TEST_DIR)/: $(CLI_SCRIPTS:%=%.sh) =="
	@out=$$(mktemp); passed=0; failed=0; \
	for script in $(CLI_SCRIPTS); do \
	  if [ $$script != bad_input ]; then extra="$(CLI_DATA)"; else extra=; fi; \
	  $(MPI_ENV) $(if $(filter 1,$(SANITIZE)),$(SAN_ENV)0) SIM_WORKERS=$${SIM_WORKERS:-1} \
	    MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(MPIRUN_FLAGS)" \
	    bash $(CLI_TEST_DIR)/$$script.sh $(CPU_TRAIN) $$extra 2>&1 | tee "$$out"; \
	  summary=$$(sed -n "s/^$$script: \([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed.*/\1 \2/p" "$$out" | tail -n 1); \
	  if [ -z "$$summary" ]; then \
	    echo "FAIL $$script.sh ended without its summary line"; failed=$$((failed + 1)); \
	  else \
	    set -- $$summary; passed=$$((passed + $$1)); failed=$$((failed + $$2)); \
	  fi; \
	done; \
	rm -f "$$out"; \
	echo "cli: $$passed passed, $$failed failed"; \
	[ $$failed -eq 0 ]
