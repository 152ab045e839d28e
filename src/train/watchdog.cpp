// The step timeout's thread (watchdog.h).
#include "train/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "comm/nccl.h"

namespace nn::train {

double setup_allowance(double step_s) { return std::max(4 * step_s, 120.0); }

namespace {
std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 10 ? "%.1f s" : "%.0f s", s);
  return b;
}
}  // namespace

std::string timeout_line(int rank, const std::string& host, const std::string& what, double limit_s,
                         const comm::Waiting& w, int exit_code) {
  std::string line = "nn_train: timeout on rank " + std::to_string(rank) + " (" + host + "): " + what +
                     " did not complete within " + seconds_text(limit_s) + " (--timeout); ";
  if (!w.call)
    line += "this rank is not in an MPI call: its own work is stuck (device, filesystem, memory?)";
  else if (w.peer >= 0)
    line += "it has waited " + seconds_text(w.seconds) + " in " + w.call + " for rank " + std::to_string(w.peer) +
            ", which has not answered";
  else
    line += "it has waited " + seconds_text(w.seconds) + " in " + w.call +
            " for the ranks that have not reached it (stopped, hung or too slow)";
  return line + "; ending the job (exit code " + std::to_string(exit_code) + ")";
}

Watchdog::Watchdog(double step_s, int rank, std::string host, int exit_code, Handler on_timeout)
    : step_s_(step_s), rank_(rank), host_(std::move(host)), exit_code_(exit_code),
      on_timeout_(std::move(on_timeout)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(std::string what, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  what_ = std::move(what);
  limit_s_ = seconds;
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  armed_ = true;
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

namespace {
// write(2): no stdio lock that the stuck thread might hold.
void print_line(const std::string& line) {
  const std::string out = line + "\n";
  [[maybe_unused]] const ssize_t n = ::write(2, out.data(), out.size());
}
}  // namespace

std::string frozen_line(int rank, const std::string& host, double seconds) {
  return "nn_train: rank " + std::to_string(rank) + " (" + host + ") did not run at all for " +
         seconds_text(seconds) + " (stopped by a signal, or starved of CPU or memory)";
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto last = Clock::now();
  while (!quit_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    // A wake-up far later than asked: this whole process was frozen (SIGSTOP, swapping). It
    // is the stalled rank, not a waiting one: say so, and give it a fresh allowance (the
    // others are ending the job, or, resumed in time, it runs on).
    const auto now = Clock::now();
    const double gap = std::chrono::duration<double>(now - last).count();
    last = now;
    if (armed_ && !fired_ && gap > std::max(2.0, step_s_ / 2)) {
      deadline_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s_));
      const std::string line = frozen_line(rank_, host_, gap);
      lock.unlock();
      on_timeout_ ? on_timeout_(line) : print_line(line);
      lock.lock();
      continue;
    }
    if (quit_ || !armed_ || fired_ || now < deadline_) continue;
    fired_ = true;
    const std::string line = timeout_line(rank_, host_, what_, limit_s_, comm::waiting_in(), exit_code_);
    lock.unlock();
    if (on_timeout_) {
      on_timeout_(line);
    } else {
      // A second for the other ranks to print their own line before the launcher ends the job.
      // An NCCL communicator is aborted (never destroyed: that would wait for the hung peers),
      // on a thread of its own, so that even an abort that blocks cannot keep the job alive.
      print_line(line);
      std::thread(comm::abort_nccl).detach();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::_Exit(exit_code_);
    }
    lock.lock();
  }
}

namespace {
Watchdog* g_watchdog = nullptr;  // set and used by the training thread only
}  // namespace

void set_watchdog(Watchdog* w) {
  g_watchdog = w;
}

void watch(const std::string& what, bool setup) {
  if (!g_watchdog) return;
  const double s = g_watchdog->step_seconds();
  g_watchdog->arm(what, setup ? setup_allowance(s) : s);
}

void unwatch() {
  if (g_watchdog) g_watchdog->disarm();
}

}  // namespace nn::train
