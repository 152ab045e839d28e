// The project's two error kinds, with no CUDA, MPI or Armadillo in sight, so host-only code
// (options, IDX, checkpoints, the CPU model) includes this and nothing else. Thrown by
// CUDA_CHECK (check.h) and by every validating function; main (src/app/main.cpp) and
// run_training (src/app/run.cpp) turn them into exit codes.
#pragma once
#include <stdexcept>

namespace nn {

// An internal fault (a CUDA or library error): the job aborts, unlike a user error.
struct InternalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A user error (bad file, bad flag): one clear line on rank 0, non-zero exit everywhere.
struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace nn
