// The whole nn_train run after MPI init and option parsing (src/app/main.cpp): rank 0 loads
// the IDX files (src/io/idx.h), every rank trains (src/train/trainer.h), rank 0 reports on
// `out` (stdout by default). Returns the same exit code on every rank (exit_codes.h); a user
// error is one line on rank 0; internal faults (CUDA errors) print on the failing rank and
// abort the job. Tested through tests/train/test_train.cpp and tests/cli.
#pragma once
#include <cstdio>

#include "train/config.h"

namespace nn::app {

using train::Config;

int run_training(const Config& cfg);
int run_training(const Config& cfg, std::FILE* out);

}  // namespace nn::app
