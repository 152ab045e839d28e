#!/usr/bin/env bash
# tests/cli/nccl.sh at 3 and 4 ranks (make test-more; make test runs nccl.sh at 1 and 2).
#   tests/cli/nccl_more.sh NN_TRAIN DATA_DIR
NP_LIST="3 4" NAME=nccl_more exec bash "$(dirname "$0")/nccl.sh" "$@"
