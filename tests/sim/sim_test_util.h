// Helpers shared by the SIMT-emulator tests in tests/sim/*.cu: CUDA status assertions, an RAII
// device buffer, the SimTest fixture (saves and restores the emulator's schedule, workers and
// fault mode) and for_each_schedule(), which reruns a check under every emulator thread order.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gemm/gemm.h"  // nn::gemm_release_workspaces before each reset

#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#else
#include <cuda_runtime.h>
#endif

namespace simtest {

inline ::testing::AssertionResult cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " returned " << static_cast<int>(e) << " (" << cudaGetErrorString(e) << ")";
}

}  // namespace simtest

#define ASSERT_CUDA_OK(expr) ASSERT_TRUE(::simtest::cuda_ok((expr), #expr))
#define EXPECT_CUDA_OK(expr) EXPECT_TRUE(::simtest::cuda_ok((expr), #expr))
// After a launch: the launch was accepted and the kernel ran to completion without error.
#define ASSERT_LAUNCH_OK()                   \
  do {                                       \
    ASSERT_CUDA_OK(cudaGetLastError());      \
    ASSERT_CUDA_OK(cudaDeviceSynchronize()); \
  } while (0)

namespace simtest {

// The current schedule in words, for assertion messages.
inline std::string schedule() {
#ifdef SIM_EMULATOR
  return sim::describe_schedule();
#else
  return "real GPU";
#endif
}

#ifdef SIM_EMULATOR
// Every thread order the emulator offers; random with two seeds.
inline const std::vector<std::pair<sim::Order, unsigned long long>>& all_orders() {
  static const std::vector<std::pair<sim::Order, unsigned long long>> orders = {
      {sim::Order::Forward, 1ULL},
      {sim::Order::Reverse, 1ULL},
      {sim::Order::Random, 7ULL},
      {sim::Order::Random, 20240611ULL},
  };
  return orders;
}
#endif

// Calls fn(description) once per emulator schedule (the fixture restores the order
// afterwards); on a real GPU it calls fn("real GPU") once.
template <class Fn>
void for_each_schedule(Fn&& fn) {
#ifdef SIM_EMULATOR
  for (const auto& [order, seed] : all_orders()) {
    sim::set_order(order, seed);
    fn(sim::describe_schedule());
    if (::testing::Test::HasFatalFailure()) return;
  }
#else
  fn(std::string("real GPU"));
#endif
}

// Every test: emulator state saved in SetUp and restored in TearDown (fault mode back to
// Abort, order, seed and workers as they were, sim::reset()). Tests run in FaultMode::Record,
// so an unexpected fault fails the one test (TearDown reports it) instead of aborting the run.
class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The project's cached device state (variant 4's scratch, variant 0's cuBLAS handle) must
    // not outlive a reset, the emulator's below or a test's own cudaDeviceReset (on a GPU too).
    nn::gemm_release_workspaces();
#ifdef SIM_EMULATOR
    saved_order_ = sim::order();
    saved_seed_ = sim::seed();
    saved_workers_ = sim::workers();
    sim::reset();
    sim::set_fault_mode(sim::FaultMode::Record);
#endif
    (void)cudaGetLastError();
  }
  void TearDown() override {
#ifdef SIM_EMULATOR
    EXPECT_EQ(sim::last_fault(), "") << "unexpected emulator fault (" << sim::describe_schedule() << ")";
    sim::set_fault_mode(sim::FaultMode::Abort);
    sim::set_order(saved_order_, saved_seed_);
    if (sim::workers() != saved_workers_) sim::set_workers(saved_workers_);
#endif
    nn::gemm_release_workspaces();
#ifdef SIM_EMULATOR
    sim::reset();
#endif
    (void)cudaGetLastError();
  }

#ifdef SIM_EMULATOR
  sim::Order saved_order_ = sim::Order::Forward;
  unsigned long long saved_seed_ = 1;
  int saved_workers_ = 1;
#endif
};

// n elements of T in device memory, freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    status_ = cudaMalloc(&p, n * sizeof(T));
    p_ = status_ == cudaSuccess ? static_cast<T*>(p) : nullptr;
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (p_ != nullptr) status_ = upload(host);
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  cudaError_t status() const { return status_; }

  cudaError_t upload(const std::vector<T>& host) {
    return cudaMemcpy(p_, host.data(), std::min(host.size(), n_) * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    (void)cudaMemcpy(host.data(), p_, bytes(), cudaMemcpyDeviceToHost);
    return host;
  }
  cudaError_t fill_bytes(int byte) { return cudaMemset(p_, byte, bytes()); }

 private:
  std::size_t n_ = 0;
  T* p_ = nullptr;
  cudaError_t status_ = cudaSuccess;
};

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<int> random_ints(std::size_t n, unsigned seed, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline std::uint64_t bits_of(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// How many elements differ bit for bit (NaN payloads and signed zeros included).
template <class T>
std::size_t count_bit_mismatches(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) ++n;
  return n;
}

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace simtest
