// Small helpers the training code shares: the clock, a number as the user typed it, and an
// owning FILE*. Internal to src/train.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace nn::train {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
