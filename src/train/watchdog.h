// The step timeout (--timeout SEC, docs/usage.md#step-timeout). A stalled rank -- stopped,
// swapping, its GPU hung, its filesystem stuck -- would otherwise keep every other rank
// waiting in a collective until the job's wall-clock limit, silently. Each rank runs one
// Watchdog thread: the training loop marks its progress (watch() before every step and every
// epoch end); when a mark is not followed by the next one within its allowance, the rank
// prints one line (the step, how long, the MPI call it waits in and, for a point-to-point
// receive, the rank it waits for) and the whole job ends with kExitTimeout
// (src/app/exit_codes.h): a second later, so that the other ranks that can still act print
// their line too. Setup (loading, scattering) and the first step get a larger allowance.
// Tested by tests/train/test_watchdog.cpp and, end to end with a SIGSTOPped rank,
// tests/cli/hung_rank.sh.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "comm/comm.h"

namespace nn::train {

// The allowance of setup and of the first step, for a step allowance of step_s seconds.
double setup_allowance(double step_s);

// The line a rank prints when `what` did not complete within limit_s seconds; `w` is the MPI
// call it is in (comm::waiting_in). Pure, for the tests.
std::string timeout_line(int rank, const std::string& host, const std::string& what, double limit_s,
                         const comm::Waiting& w, int exit_code);

// The line a rank prints when its own watchdog thread did not run for `seconds` (the whole
// process was stopped or starved): the stalled rank itself, once it runs again.
std::string frozen_line(int rank, const std::string& host, double seconds);

class Watchdog {
 public:
  // on_timeout runs on the watchdog's thread with each line: once for the timeout, and for
  // each time the process was frozen. The default prints the line to stderr and, after a
  // timeout, waits a second and ends the process with exit_code.
  using Handler = std::function<void(const std::string& line)>;
  Watchdog(double step_s, int rank, std::string host, int exit_code, Handler on_timeout = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `what` must complete within `seconds` from now (replaces the previous mark).
  void arm(std::string what, double seconds);
  void disarm();
  double step_seconds() const { return step_s_; }
  bool fired() const;

 private:
  void loop();
  using Clock = std::chrono::steady_clock;
  const double step_s_;
  const int rank_;
  const std::string host_;
  const int exit_code_;
  Handler on_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string what_;
  double limit_s_ = 0;
  Clock::time_point deadline_{};
  bool armed_ = false, quit_ = false, fired_ = false;
  std::thread thread_;  // last: started once everything above exists
};

// The process's watchdog, if one runs (run_training starts it; tests may install their own).
// The training loop's marks: watch(what, setup) arms it with the setup allowance for setup
// work and the first step, else the step allowance; unwatch() disarms it (the final
// verification and report are not timed). Both do nothing without a watchdog.
void set_watchdog(Watchdog* w);
void watch(const std::string& what, bool setup);
void unwatch();

}  // namespace nn::train
