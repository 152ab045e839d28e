// Shared by the tests of the emulator's per-access checks, tests/sim/test_sim_checks_*.cu: the
// SimChecks fixture (racecheck and initcheck on for every test), a fill and an in-order sum kernel
// (valid CUDA, both builds) and, in the emulator build, the skip under ASan, the "file:line" a
// fault message names, the runner of a faulting launch and the faulting kernels that more than one
// of those files launches (each file uses some: [[maybe_unused]]).
#pragma once

#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "sim_test_util.h"

// One class for every file (gtest requires one fixture per suite), so not in an anonymous
// namespace.
class SimChecks : public simtest::SimTest {
 protected:
#ifdef SIM_EMULATOR
  // Both checks on for every test (whatever SIM_RACECHECK/SIM_INITCHECK said), restored after.
  // The race check covers every launch here, not only the first 3 of each configuration (the
  // default), so that a test does not depend on how often its kernels ran before.
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_racecheck_ = sim::racecheck();
    saved_initcheck_ = sim::initcheck();
    sim::set_racecheck_all();
    sim::set_initcheck(true);
  }
  void TearDown() override {
    sim::set_racecheck(saved_racecheck_);
    sim::set_initcheck(saved_initcheck_);
    simtest::SimTest::TearDown();
  }
  bool saved_racecheck_ = true;
  bool saved_initcheck_ = true;
#endif
};

namespace {

using simtest::DeviceBuffer;

[[maybe_unused]] __global__ void fill_kernel(float* p, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

// One thread sums p[lo..hi) in order (so the first bad element is the one a fault names).
[[maybe_unused]] __global__ void sum_range_kernel(const float* p, int lo, int hi, float* out) {
  if (threadIdx.x != 0) return;
  float s = 0.0f;
  for (int i = lo; i < hi; ++i) s += p[i];
  out[0] = s;
}

}  // namespace

#ifdef SIM_EMULATOR

namespace {

using simtest::contains;

// Without the instrumentation (the ASan build: simcc leaves -fsanitize=kernel-address out, and
// ASan itself reports shared and red-zone accesses), the per-access checks do not exist. GCC
// defines __SANITIZE_ADDRESS__ for -fsanitize=kernel-address too, so the macro cannot tell the
// two apart; the ASan runtime can: only a -fsanitize=address build links __asan_init.
extern "C" void __asan_init() __attribute__((weak));
inline bool asan_build() { return &__asan_init != nullptr; }
#define SKIP_WITHOUT_CHECKS()                                                                 \
  do {                                                                                       \
    if (asan_build()) GTEST_SKIP() << "no per-access checks under ASan (simcc leaves them out)"; \
  } while (0)

// A line of a source file, for a fault message check where the access is in this header.
struct SourceLine {
  const char* file;
  int line;
  constexpr operator int() const { return line; }
};

// "<file>:<line>" for a message check: the file (without its directory) of the caller of at(),
// or the one a SourceLine was taken in.
inline std::string at(int line, const char* file = __builtin_FILE()) {
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}
inline std::string at(SourceLine l) { return at(l.line, l.file); }

// ---- faulting kernels of several files (the constants after each are the lines of its accesses) ----

[[maybe_unused]] __global__ void shared_oob_dynamic_kernel(float* out) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = dyn[0];
}

[[maybe_unused]] __global__ void read_at_kernel(const float* p, long long i, float* out) {
  if (threadIdx.x == 0) out[0] = p[i];
}
constexpr SourceLine kReadAtLine{__FILE__, __LINE__ - 2};  // named by two files' tests

// ---- running a faulting launch ----

struct Fault {
  cudaError_t error;  // what cudaDeviceSynchronize (or cudaGetLastError) returned
  std::string msg;    // sim::last_fault()
  cudaError_t again;  // the same call once more: faults are sticky
};
// Runs body() (which makes its own buffers, launches and returns the status of the call that
// reports the fault), records the fault, and clears it with sim::reset(). The reset frees every
// allocation, so buffers used afterwards must be made afterwards: body's own die before the
// reset (their cudaFree is refused with the sticky error and the reset frees them).
template <class Body>
Fault run_faulting(Body&& body) {
  Fault f{};
  f.error = body();
  f.msg = sim::last_fault();
  f.again = cudaDeviceSynchronize();
  sim::reset();
  (void)cudaGetLastError();
  return f;
}

inline std::string addr_of(const void* p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

}  // namespace

#endif  // SIM_EMULATOR
