// The data-parallel trainer: rank 0 loads and scatters the shards once, every rank trains
// its slice of each global batch on its GPU, gradients are summed with one MPI_Allreduce.
// Tested by tests/train/test_train.cpp (in-memory data, every rank count 1-4).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "train/config.h"

namespace nn::train {

// Exit codes of run_training.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 1;     // bad file, bad option, ... (one line on rank 0)
inline constexpr int kExitVerifyFailed = 3;  // --verify found the reference too far away
inline constexpr int kExitInternal = 4;      // internal fault (CUDA, MPI): the job is aborted
inline constexpr int kExitDiverged = 5;      // a non-finite loss stopped the training
// SIGTERM or SIGUSR1: every rank finished the same step, the state was saved to --save (if
// given) and the run stopped; the same command with --resume continues it (EX_TEMPFAIL).
inline constexpr int kExitStopped = 75;
// (2, bad options, is main's: src/app/main.cpp.)

// The whole nn_train run after MPI init and option parsing: load (rank 0), scatter, train,
// report on `out` (rank 0; stdout by default). Returns the same exit code on every rank.
// Internal faults (CUDA errors) print on the failing rank and abort the job.
int run_training(const Config& cfg);
int run_training(const Config& cfg, std::FILE* out);

// Stop signals (nn_train's main installs them first thing): SIGTERM and SIGUSR1 only set a
// flag (request_stop); after each step the ranks OR their flags in the step's small
// allreduce, so all of them stop after the same step even if only some were signalled, save
// the state, and train_on returns with TrainResult::stopped. A second signal changes nothing.
void install_stop_signals();
void restore_stop_signals();  // the handlers from before install_stop_signals (tests)
void request_stop();          // async-signal-safe: what the handlers do
// Tests only: called on every rank after each step's device work with the run's step number
// (1-based, counted from the start of the run, across restarts), before the ranks agree on
// stopping; e.g. to raise a signal on one rank at step N. Returns the previous hook.
using StepHook = void (*)(std::uint64_t step);
StepHook set_step_hook(StepHook hook);

// ---- lower level: in-memory data, used by run_training and by the tests ----

// A split as loaded: D x n uint8 column-major images (one image per column) and n labels.
struct HostSplit {
  std::vector<std::uint8_t> images, labels;
  std::size_t size() const { return labels.size(); }
};
// Significant on rank 0 only (other ranks pass empty splits: rank 0 scatters).
struct HostData {
  HostSplit train;     // all training images; --train-size and the validation tail applied here
  HostSplit test;      // --test-size applied here
  std::string source;  // where they came from, for the header
};

struct EpochStats {
  int epoch = 0;           // 1-based, as printed
  double loss = 0;         // mean cross-entropy of the epoch's forward passes + (reg/2)|W|^2 at its end
  double train_acc = 0;    // hits of those forward passes (before each update) / n_fit
  double val_acc = 0;      // after the epoch; 0 without a validation set
  double seconds = 0;      // wall time of the epoch's batches (validation excluded); 0 for an
                           // epoch restored from a saved state
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
  std::size_t saves = 0;  // checkpoints written during training (epoch ends, --save-every)
  double save_seconds = 0;  // their total wall time on rank 0 (gathering included)
};

// Trains with T = float or double (both are instantiated, whatever nn_real is). Collective:
// every rank calls it with the same cfg. A user error (bad sizes, unreadable checkpoint,
// unwritable --save / --metrics / --report path, --gemm 0 in the emulator build) is thrown
// as the same nn::UserError on every rank. Prints the report on `out` on rank 0 unless null.
// With cfg.report, rank 0 also writes the JSON performance report (report.h) at the end;
// the path's directory is checked before training.
template <class T>
TrainResult train_on(const Config& cfg, const HostData& data, std::FILE* out);

// The --verify tolerance on the relative errors for precision T (see trainer.cpp for the
// measurements behind it).
double verify_tolerance(bool is_double);

}  // namespace nn::train
