#!/usr/bin/env bash
# tests/cli/exact.sh at 3 and 4 ranks, and a run saved at 2 ranks resumed at 3 (make test-more;
# make test runs exact.sh at 1 and 2).
#   tests/cli/exact_more.sh NN_TRAIN DATA_DIR
NP_LIST="1 3 4" RESUME=1 NAME=exact_more exec bash "$(dirname "$0")/exact.sh" "$@"
