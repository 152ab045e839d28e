// The trainer's entry point, train_on: rank 0's data scattered once, every rank trains its
// slice of each global batch (data parallelism: the gradients are summed over the ranks in
// src/train/step.cpp; --strategy model splits the hidden units instead), reports, saves and
// verifies. src/app/run.cpp calls it on the loaded IDX files; the tests call it on in-memory
// data. Tested by tests/train (every strategy, 1-4 ranks, both models).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/host_data.h"
#include "train/result.h"

namespace nn::train {

// Trains with T = float or double (both are instantiated, whatever nn_real is). Collective:
// every rank calls it with the same cfg. A user error (bad sizes, unreadable checkpoint,
// unwritable --save / --metrics / --report path, --gemm 0 in the emulator build) is thrown
// as the same nn::UserError on every rank. Prints the report on `out` on rank 0 unless null.
// With cfg.report, rank 0 also writes the JSON performance report (report.h) at the end;
// the path's directory is checked before training.
template <class T>
TrainResult train_on(const Config& cfg, const HostData& data, std::FILE* out);


}  // namespace nn::train
