// What a training run produces (trainer.h's train_on returns it): the epochs' statistics, the
// final parameters, the verification, and the run's counts; and Diverged, thrown when a loss is
// not finite. Internal to src/train and its callers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "io/checkpoint.h"

namespace nn::train {

// The checkpoint's names (src/io/checkpoint.h), as the training code uses them.
using io::check_writable;
using io::Checkpoint;
using io::EpochRecord;
using io::load_checkpoint;
using io::RunFingerprint;
using io::save_checkpoint;
using io::TrainState;

struct EpochStats {
  int epoch = 0;           // 1-based, as printed
  double loss = 0;         // mean cross-entropy of the epoch's forward passes + (reg/2)|W|^2 at its end
  double train_acc = 0;    // hits of those forward passes (before each update) / n_fit
  double val_acc = 0;      // after the epoch; 0 without a validation set
  double seconds = 0;      // wall time of the epoch's batches (validation excluded); 0 for an
                           // epoch restored from a saved state
  double cpu_seconds = 0;  // rank 0's process CPU time over the same span, all its threads
                           // (cpu_seconds / seconds = the cores it kept busy); 0 when restored
  double images_per_s = 0;
};

// Relative Frobenius errors ||X - X_ref|| / ||X_ref|| of the final parameters against the
// Armadillo reference replaying the same batches (absolute when ||X_ref|| == 0).
struct VerifyResult {
  bool ran = false;
  double W1 = 0, b1 = 0, W2 = 0, b2 = 0;
  double tolerance = 0;
  bool ok() const { return !ran || (W1 <= tolerance && b1 <= tolerance && W2 <= tolerance && b2 <= tolerance); }
};

// Thrown on every rank alike when a step's loss is not finite: what() names the epoch and
// the batch, and what --save holds (the weights after the last finished epoch, if any).
struct Diverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Everything below holds the same values on every rank.
struct TrainResult {
  Checkpoint params;  // final parameters
  std::vector<EpochStats> epochs;
  std::size_t n_fit = 0, n_val = 0, n_test = 0;
  double test_precision = 0;  // correct / n_test (0 without a test set)
  VerifyResult verify;
  // Overlap (data parallel, host-staged MPI): MPI_Test rounds the ranks made, summed, while
  // polling for layer 1's gradient copy; 0 when the copy was always done at the first look.
  std::uint64_t overlap_polls = 0;
  // A stop signal ended the run early (kExitStopped): params hold the weights at that step,
  // test_precision and verify are not computed. steps: the run's steps done (restarts included).
  bool stopped = false;
  std::uint64_t steps = 0;
  bool resumed = false;  // started from the state in --save (--resume)
  bool node_shared = false;  // --device cpu: the weights lived in the node's shared memory
  std::size_t saves = 0;  // checkpoints written during training (epoch ends, --save-every)
  double save_seconds = 0;  // their total wall time on rank 0 (gathering included)
};

}  // namespace nn::train
