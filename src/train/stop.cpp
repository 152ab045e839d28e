// The stop flag and the tests' step hook (stop.h).
#include "train/stop.h"

#include <csignal>

namespace nn::train {

namespace {
volatile std::sig_atomic_t g_stop_requested = 0;
StepHook g_step_hook = nullptr;
}  // namespace

void request_stop() { g_stop_requested = 1; }

bool stop_requested() { return g_stop_requested != 0; }

void clear_stop_request() { g_stop_requested = 0; }

StepHook set_step_hook(StepHook hook) {
  const StepHook old = g_step_hook;
  g_step_hook = hook;
  return old;
}

void call_step_hook(std::uint64_t step) {
  if (g_step_hook) g_step_hook(step);
}

}  // namespace nn::train
