// nn_train's exit codes, the same on every rank (docs/usage.md lists them for users).
#pragma once

namespace nn::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 1;     // bad file, bad option, ... (one line on rank 0)
inline constexpr int kExitBadOptions = 2;    // the command line or --config did not parse (main)
inline constexpr int kExitVerifyFailed = 3;  // --verify found the reference too far away
inline constexpr int kExitInternal = 4;      // internal fault (CUDA, MPI): the job is aborted
inline constexpr int kExitDiverged = 5;      // a non-finite loss stopped the training
inline constexpr int kExitTimeout = 6;       // --timeout: no step completed in time (a stalled rank)
// SIGTERM or SIGUSR1: every rank finished the same step, the state was saved to --save (if
// given) and the run stopped; the same command with --resume continues it (EX_TEMPFAIL).
inline constexpr int kExitStopped = 75;

}  // namespace nn::app
