// Shared by the trainer tests (test_train.cpp, test_strategies.cpp, test_cpu_train.cpp, ...): synthetic, separable
// data built on rank 0 only, a small configuration, and the two checks every training test
// makes (the --verify replay within tolerance; every rank holds the same parameters).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/comm.h"
#include "schedule/rng.h"
#include "common/nn_real.h"
#include "train/trainer.h"
#include "train/verify.h"

namespace nn::train {
namespace {

// Synthetic, linearly separable images: faint noise everywhere plus a bright band of rows
// that depends on the label (class c lights rows 2c .. 2c+2). Built on rank 0 only: the
// trainer must not need the data anywhere else.
[[maybe_unused]] HostSplit synth(std::size_t n, std::uint32_t stream) {
  HostSplit s;
  schedule::Rng rng(schedule::derive_seed(1234, schedule::Stream::kTest, stream));
  s.images.resize(n * kInputDim);
  s.labels.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    const int c = int(rng.below(kNumClasses));
    s.labels[j] = std::uint8_t(c);
    std::uint8_t* img = s.images.data() + j * kInputDim;
    for (int i = 0; i < kInputDim; ++i) {
      const int row = i / 28;
      const bool lit = row >= 2 * c && row < 2 * c + 3 && rng.below(4) != 0;
      img[i] = std::uint8_t(lit ? 160 + rng.below(96) : rng.below(48));
    }
  }
  return s;
}

[[maybe_unused]] HostData make_data(std::size_t n_train, std::size_t n_test) {
  HostData d;
  if (comm::rank() == 0) {
    d.train = synth(n_train, 1);
    d.test = synth(n_test, 2);
  }
  return d;
}

// Uniform random pixels and labels, nothing to learn: for tests of what a training reports, not of
// what it learns. Rank 0 only; `seed` and `stream` pick the data.
[[maybe_unused]] HostData noise_data(std::size_t n_train, std::size_t n_test, std::uint64_t seed,
                                     std::uint32_t stream) {
  HostData d;
  if (comm::rank() != 0) return d;
  schedule::Rng rng(schedule::derive_seed(seed, schedule::Stream::kTest, stream));
  for (auto* s : {&d.train, &d.test}) {
    const std::size_t n = s == &d.train ? n_train : n_test;
    s->images.resize(n * kInputDim);
    s->labels.resize(n);
    for (auto& px : s->images) px = std::uint8_t(rng.below(256));
    for (auto& l : s->labels) l = std::uint8_t(rng.below(kNumClasses));
  }
  return d;
}

// A whole file as a string ("" when it cannot be read).
[[maybe_unused]] std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

[[maybe_unused]] Config small_config(int H, std::size_t B, int epochs) {
  Config c;
  c.hidden = H;
  c.batch = B;
  c.epochs = epochs;
  c.lr = 0.5;
  c.reg = 1e-3;  // larger than the default, so a misplaced regulariser shows
  c.val_fraction = 0.1;
  c.seed = 5;
  c.verify = true;
  // The fused step, in every build (auto would run the persistent step on a GPU whose plan
  // predicts it faster); the persistent step's tests ask for it.
  c.persistent = Persistent::Off;
  return c;
}

template <class T>
void expect_verified(const TrainResult& r) {
  ASSERT_TRUE(r.verify.ran);
  const double tol = verify_tolerance(std::is_same_v<T, double>);
  EXPECT_EQ(r.verify.tolerance, tol);
  EXPECT_LE(r.verify.W1, tol);
  EXPECT_LE(r.verify.b1, tol);
  EXPECT_LE(r.verify.W2, tol);
  EXPECT_LE(r.verify.b2, tol);
  EXPECT_TRUE(r.verify.ok());
  if (comm::rank() == 0)
    std::printf("    [%s] relative errors W1 %.3g b1 %.3g W2 %.3g b2 %.3g\n",
                std::is_same_v<T, double> ? "double" : "float", r.verify.W1, r.verify.b1, r.verify.W2,
                r.verify.b2);
}

// The four tensors of a checkpoint in one vector, for bitwise comparisons of two runs.
[[maybe_unused]] std::vector<double> flat(const Checkpoint& ck) {
  std::vector<double> v = ck.W1;
  for (const auto* t : {&ck.b1, &ck.W2, &ck.b2}) v.insert(v.end(), t->begin(), t->end());
  return v;
}

// Every rank ends with bit-identical parameters (same reduced gradient, same update).
[[maybe_unused]] void expect_ranks_agree(const Checkpoint& ck) {
  std::vector<double> mine = ck.W1;
  mine.insert(mine.end(), ck.b1.begin(), ck.b1.end());
  mine.insert(mine.end(), ck.W2.begin(), ck.W2.end());
  mine.insert(mine.end(), ck.b2.begin(), ck.b2.end());
  std::vector<double> root = mine;
  comm::broadcast(root);
  EXPECT_TRUE(comm::all_ok(root == mine)) << "parameters differ between ranks";
}

}  // namespace
}  // namespace nn::train
