// --comm nccl's communicator (src/comm/nccl.h) at every rank count make test runs: its sums of
// device memory (float, double, 64-bit integers; on a stream, and through the host for --exact's
// words) against the known totals and, at two ranks, against MPI_Allreduce's bits; the refusal of
// two ranks on one GPU; one communicator at a time. The emulator build runs the emulator's NCCL
// (sim/docs/nccl.md; make test gives each rank a device of its own: SIM_DEVICES), the CUDA build
// NVIDIA's: on one GPU at one rank (a one-rank trainer skips the exchange, so this is where the
// real all-reduce is checked), and its refusal at more ranks than GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "common/errors.h"

namespace nn::comm {
namespace {

// Selects this rank's device as the trainer does (node-local rank modulo the node's devices);
// true when every rank of the node has one of its own.
bool own_device() {
  if (!nccl_support().empty()) return false;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) return false;
  EXPECT_EQ(cudaSetDevice(local_rank() % count), cudaSuccess);
  return all_ok(local_size() <= count);
}

// A device copy of v, summed by the communicator on a stream of the test's, copied back.
template <class V>
std::vector<V> summed_on_device(Nccl& nccl, const std::vector<V>& v) {
  V* d = nullptr;
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(V)), cudaSuccess);
  EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(d, v.data(), v.size() * sizeof(V), cudaMemcpyHostToDevice, s), cudaSuccess);
  nccl.sum_on(d, v.size(), s);
  nccl.wait(s);
  std::vector<V> out(v.size());
  EXPECT_EQ(cudaMemcpy(out.data(), d, v.size() * sizeof(V), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  return out;
}

// Rank r's value i: small integers, so every sum is exact whatever the order.
template <class V>
std::vector<V> ranked(std::size_t n) {
  std::vector<V> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = V((rank() + 1) * int(i % 11 + 1));
  return v;
}
template <class V>
V total(std::size_t i) {
  return V(size() * (size() + 1) / 2 * int(i % 11 + 1));
}

template <class V>
void expect_sums(Nccl& nccl, std::size_t n) {
  const std::vector<V> out = summed_on_device(nccl, ranked<V>(n));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += out[i] != total<V>(i);
  EXPECT_EQ(bad, 0u) << n << " values";
}

TEST(Nccl, SumsDeviceMemoryOverTheRanks) {
  if (!nccl_support().empty()) GTEST_SKIP() << nccl_support();
  if (!own_device()) {
    try {
      Nccl::open();
      ADD_FAILURE() << "two ranks on one GPU were accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("share the GPU"), std::string::npos) << e.what();
    }
    return;
  }
  auto nccl = Nccl::open();
  expect_sums<float>(*nccl, 1000);
  expect_sums<double>(*nccl, 77);
  expect_sums<std::uint64_t>(*nccl, 300'001);
  expect_sums<float>(*nccl, 1);
  // --exact's words: 64-bit integers add modulo 2^64, through the communicator's device buffer.
  std::vector<std::uint64_t> w(513);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = ~std::uint64_t(0) - i + std::uint64_t(rank()) * 3;
  nccl_reduction<std::uint64_t>().now(w.data(), w.size());
  const std::uint64_t p = std::uint64_t(size()), tri = p * (p - 1) / 2;
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], (~std::uint64_t(0) - i) * p + 3 * tri) << i;
}

TEST(Nccl, TwoRanksGiveMpiAllreducesBits) {
  if (!own_device()) GTEST_SKIP() << "ranks share a GPU (the refusal is SumsDeviceMemoryOverTheRanks')";
  std::mt19937 gen(unsigned(17 + rank()));
  std::normal_distribution<float> dist(0.f, 1e-3f);
  std::vector<float> v(4099);
  for (float& x : v) x = dist(gen);
  std::vector<float> mpi = v;
  allreduce_sum(mpi.data(), mpi.size());
  auto nccl = Nccl::open();
  const std::vector<float> out = summed_on_device(*nccl, v);
  if (size() <= 2) {  // one addition a value (or none): the same bits whichever library adds
    EXPECT_EQ(std::memcmp(out.data(), mpi.data(), v.size() * sizeof(float)), 0);
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(out[i], mpi[i], 1e-8f) << i;
  }
}

TEST(Nccl, OneCommunicatorAtATimeAndItsVersion) {
  if (!own_device()) GTEST_SKIP() << "ranks share a GPU";
  EXPECT_EQ(nccl_support(), "");
  const std::string v = nccl_version();
  EXPECT_EQ(v.find_first_not_of("0123456789."), std::string::npos) << v;
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  auto nccl = Nccl::open();
  EXPECT_THROW(Nccl::open(), std::logic_error);  // every rank refuses before any collective
  nccl.reset();
  auto again = Nccl::open();  // closed, a new one opens
  expect_sums<double>(*again, 5);
}

}  // namespace
}  // namespace nn::comm
