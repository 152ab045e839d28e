// Small helpers the training code shares: the clock, a number as the user typed it, and an
// owning FILE*. Internal to src/train.
#pragma once
#include <chrono>
#include <ctime>
#include <cstdio>
#include <memory>
#include <string>

namespace nn::train {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// This process's CPU time so far, all its threads together (seconds).
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

inline std::string shown_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

struct FileCloser {
  void operator()(std::FILE* f) const { if (f) std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace nn::train
