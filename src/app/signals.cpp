// The stop signals' handlers (signals.h): each only sets the stop flag.
#include "app/signals.h"

#include <csignal>

#include "train/stop.h"

namespace nn::app {

using namespace ::nn::train;  // the training side's names: Config and its enums, train_on, the stop flag

namespace {
struct sigaction g_old_term, g_old_usr1;
bool g_signals_installed = false;

extern "C" void on_stop_signal(int) { request_stop(); }
}  // namespace

void install_stop_signals() {
  if (g_signals_installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a save's write/fsync is not cut short
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGUSR1, &sa, &g_old_usr1);
  g_signals_installed = true;
}

void restore_stop_signals() {
  if (!g_signals_installed) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_signals_installed = false;
}

}  // namespace nn::app
