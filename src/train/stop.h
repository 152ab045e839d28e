// The stop protocol between a signal and the training loop. SIGTERM and SIGUSR1 (handlers in
// src/app/signals.cpp) only call request_stop; after each step the ranks OR their flags in
// the step's small allreduce (src/train/epoch.cpp, agree_after_step), so all of them stop after
// the same step even if only some were signalled, save the state, and train_on returns with
// TrainResult::stopped (exit code kExitStopped, src/app/exit_codes.h). A second signal
// changes nothing. Tested by tests/train/test_resume.cpp and tests/cli/resume_signal.sh.
#pragma once
#include <cstdint>

namespace nn::train {

void request_stop();        // async-signal-safe: what the handlers do
bool stop_requested();      // the flag
void clear_stop_request();  // the loop has acted on it

// Tests only: called on every rank after each step's device work with the run's step number
// (1-based, counted from the start of the run, across restarts), before the ranks agree on
// stopping; e.g. to raise a signal on one rank at step N. Returns the previous hook.
using StepHook = void (*)(std::uint64_t step);
StepHook set_step_hook(StepHook hook);
void call_step_hook(std::uint64_t step);  // the loop's side: calls the hook if one is set

}  // namespace nn::train
