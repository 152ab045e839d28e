// The persistent training step (kernels/ops/persistent_step.cu) against float64 SGD computed
// from the definition (forward, softmax cross-entropy, backward, the L2 term, the step), over a
// run whose last batch is short; the same bits for any grid and for any split of the steps into
// launches (what a resumed run relies on); the epoch's loss, hits and step counts; a non-finite
// loss recorded at its step; bad arguments refused. Every emulator schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/device_buffer.h"
#include "device_vectors.h"
#include "ops/persistent_step.h"
#include "schedules.h"

namespace {

using nn::test::to_device;
using nn::test::to_host;

struct Data {
  int D, H, C, n, B;
  std::vector<std::uint8_t> images, labels;
  std::vector<std::uint32_t> order;
  std::vector<double> P;  // [W1 | b1 | W2 | b2]
  Data(int D_, int H_, int C_, int n_, int B_, unsigned seed) : D(D_), H(H_), C(C_), n(n_), B(B_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-0.3, 0.3);
    images.resize(std::size_t(D) * n);
    for (auto& v : images) v = std::uint8_t(rng() % 256);
    labels.resize(n);
    for (auto& v : labels) v = std::uint8_t(rng() % unsigned(C));
    order.resize(n);
    for (int i = 0; i < n; ++i) order[i] = std::uint32_t((i * 7 + 3) % n);  // a permutation (gcd(7, n) = 1)
    P.resize(std::size_t(H) * D + H + std::size_t(C) * H + C);
    for (auto& v : P) v = u(rng);
  }
  // One SGD step of the parameters from a batch of b columns: its inputs X, activations A and the
  // loss's gradients dz1, dz2 at the hidden and output pre-activations.
  void sgd(int b, const std::vector<double>& X, const std::vector<double>& A, const std::vector<double>& dz1,
           const std::vector<double>& dz2, double lr, double reg) {
    double* W1 = P.data();
    double* b1 = W1 + std::size_t(H) * D;
    double* W2 = b1 + H;
    double* b2 = W2 + std::size_t(C) * H;
    for (int d = 0; d < D; ++d)
      for (int h = 0; h < H; ++h) {
        double g = 0;
        for (int j = 0; j < b; ++j) g += dz1[std::size_t(j) * H + h] * X[std::size_t(j) * D + d];
        double& w = W1[std::size_t(d) * H + h];
        w -= lr * (g + reg * w);
      }
    for (int h = 0; h < H; ++h) {
      double g = 0;
      for (int j = 0; j < b; ++j) g += dz1[std::size_t(j) * H + h];
      b1[h] -= lr * g;
      for (int c = 0; c < C; ++c) {
        double gw = 0;
        for (int j = 0; j < b; ++j) gw += dz2[std::size_t(j) * C + c] * A[std::size_t(j) * H + h];
        double& w = W2[std::size_t(h) * C + c];
        w -= lr * (gw + reg * w);
      }
    }
    for (int c = 0; c < C; ++c) {
      double g = 0;
      for (int j = 0; j < b; ++j) g += dz2[std::size_t(j) * C + c];
      b2[c] -= lr * g;
    }
  }
  // steps SGD steps from offset 0 in float64; loss and hits summed over them.
  void reference(int steps, double lr, double reg, double* loss, unsigned* hits) {
    double* W1 = P.data();
    double* b1 = W1 + std::size_t(H) * D;
    double* W2 = b1 + H;
    double* b2 = W2 + std::size_t(C) * H;
    for (int s = 0; s < steps; ++s) {
      const int off = s * B, b = std::min(B, n - off);
      std::vector<double> X(std::size_t(D) * b), A(std::size_t(H) * b), dz2(std::size_t(C) * b), dz1(std::size_t(H) * b);
      for (int j = 0; j < b; ++j)
        for (int d = 0; d < D; ++d) X[std::size_t(j) * D + d] = images[std::size_t(order[off + j]) * D + d] / 255.0;
      for (int j = 0; j < b; ++j) {
        for (int h = 0; h < H; ++h) {
          double z = b1[h];
          for (int d = 0; d < D; ++d) z += W1[std::size_t(d) * H + h] * X[std::size_t(j) * D + d];
          A[std::size_t(j) * H + h] = 1 / (1 + std::exp(-z));
        }
        std::vector<double> z(C);
        int arg = 0;
        for (int c = 0; c < C; ++c) {
          z[c] = b2[c];
          for (int h = 0; h < H; ++h) z[c] += W2[std::size_t(h) * C + c] * A[std::size_t(j) * H + h];
          if (z[c] > z[arg]) arg = c;
        }
        double m = z[arg], sum = 0;
        for (int c = 0; c < C; ++c) sum += std::exp(z[c] - m);
        const int label = labels[order[off + j]];
        *loss += m + std::log(sum) - z[label];
        *hits += arg == label ? 1u : 0u;
        for (int c = 0; c < C; ++c) dz2[std::size_t(j) * C + c] = (std::exp(z[c] - m) / sum - (c == label)) / b;
        for (int h = 0; h < H; ++h) {
          double da = 0;
          for (int c = 0; c < C; ++c) da += W2[std::size_t(h) * C + c] * dz2[std::size_t(j) * C + c];
          const double a = A[std::size_t(j) * H + h];
          dz1[std::size_t(j) * H + h] = da * a * (1 - a);
        }
      }
      sgd(b, X, A, dz1, dz2, lr, reg);
    }
  }
};

// The device side of one run: buffers sized for the plan, steps run in launches of the given
// lengths; the parameters, the loss sum and the three counts come back.
template <class T>
struct Outcome {
  std::vector<T> P;
  double loss = 0;
  unsigned counts[3] = {0, 0, 0};
};
template <class T>
Outcome<T> run_device(const Data& d, const std::vector<T>& P0, nn::PersistentPlan plan, const std::vector<int>& launches,
                  T lr, T reg) {
  auto images = to_device(d.images), labels = to_device(d.labels);
  auto order = to_device(d.order);
  auto P = to_device(P0);
  nn::DeviceBuffer<T> scratch(plan.scratch), A1(std::size_t(d.H) * d.B), dZ1(std::size_t(d.H) * d.B),
      dZ2(std::size_t(d.C) * d.B);
  nn::DeviceBuffer<double> loss_cols(std::size_t(d.B)), stats(1);
  nn::DeviceBuffer<unsigned> hit_cols(std::size_t(d.B)), counts(3);
  const double zero = 0;
  const unsigned zeros[3] = {0, 0, 0};
  stats.upload(&zero, 1);
  counts.upload(zeros, 3);
  int done = 0;
  for (const int steps : launches) {
    nn::PersistentShape<T> a;
    a.D = d.D, a.H = d.H, a.C = d.C, a.B = d.B, a.steps = steps, a.n = unsigned(d.n);
    a.offset = static_cast<unsigned long long>(done) * d.B, a.lr = lr, a.reg = reg;
    a.tile_d = plan.tile_d, a.slices = plan.slices;
    nn::persistent_steps<T>(plan, a, images.get(), labels.get(), order.get(), P.get(), scratch.get(), A1.get(),
                            dZ1.get(), dZ2.get(), loss_cols.get(), hit_cols.get(), stats.get(), counts.get());
    done += steps;
  }
  Outcome<T> r;
  r.P = to_host(P);
  stats.download(&r.loss, 1);
  counts.download(r.counts, 3);
  return r;
}

nn::PersistentPlan plan_with(int D, int H, int B, int blocks, int tile_d) {
  nn::PersistentPlan p;
  p.blocks = blocks;
  p.tile_d = tile_d;
  p.slices = (D + tile_d - 1) / tile_d;
  p.tiles = (H + nn::kPersistentTileH - 1) / nn::kPersistentTileH * p.slices;
  p.scratch = std::size_t(p.slices) * H * B;
  return p;
}

template <class T>
void matches_reference(double tol) {
  Data d(50, 70, 10, 37, 16, 11);  // 3 steps: 16, 16 and a short 5
  const std::vector<T> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan<T>(d.D, d.H, d.B);
  ASSERT_GT(plan.blocks, 0);
  ASSERT_EQ(plan.slices, (d.D + plan.tile_d - 1) / plan.tile_d);
  double loss = 0;
  unsigned hits = 0;
  Data ref = d;
  ref.P.assign(P0.begin(), P0.end());
  ref.reference(3, 0.5, 1e-3, &loss, &hits);
  nn::test::for_each_schedule([&] {
    const Outcome<T> r = run_device<T>(d, P0, plan, {3}, T(0.5), T(1e-3));
    double worst = 0;
    for (std::size_t i = 0; i < r.P.size(); ++i) worst = std::max(worst, std::abs(double(r.P[i]) - ref.P[i]));
    EXPECT_LT(worst, tol);
    EXPECT_NEAR(r.loss, loss, tol * 100 * (1 + std::abs(loss)));
    EXPECT_EQ(r.counts[0], hits);
    EXPECT_EQ(r.counts[1], 3u);  // steps
    EXPECT_EQ(r.counts[2], 0u);  // no non-finite loss
  });
}

TEST(PersistentStep, MatchesFloat64SgdOverAShortLastBatch) { matches_reference<float>(2e-5); }
TEST(PersistentStep, DoubleMatchesFloat64Sgd) { matches_reference<double>(1e-12); }

TEST(PersistentStep, SameBitsForAnyGridTileAndSplitIntoLaunches) {
  Data d(50, 70, 10, 37, 16, 5);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan base = plan_with(d.D, d.H, d.B, 1, 32);
  const Outcome<float> one = run_device<float>(d, P0, base, {3}, 0.5f, 1e-3f);
  nn::test::for_each_schedule([&] {
    for (const int blocks : {2, 3}) {
      const Outcome<float> r = run_device<float>(d, P0, plan_with(d.D, d.H, d.B, blocks, 32), {3}, 0.5f, 1e-3f);
      EXPECT_EQ(r.P, one.P) << blocks << " blocks";
      EXPECT_EQ(r.loss, one.loss);
    }
    const Outcome<float> split = run_device<float>(d, P0, base, {1, 2}, 0.5f, 1e-3f);
    EXPECT_EQ(split.P, one.P) << "launches of 1 and 2 steps";
    EXPECT_EQ(split.loss, one.loss);
    EXPECT_EQ(split.counts[1], 3u);
  });
  // Another tile width changes the forward sums' grouping (other roundings), not the result.
  const Outcome<float> other = run_device<float>(d, P0, plan_with(d.D, d.H, d.B, 2, 12), {3}, 0.5f, 1e-3f);
  for (std::size_t i = 0; i < one.P.size(); ++i) EXPECT_NEAR(other.P[i], one.P[i], 1e-5) << i;
}

TEST(PersistentStep, NonFiniteLossRecordedAtItsStep) {
  Data d(20, 30, 10, 24, 8, 3);
  const nn::PersistentPlan plan = nn::persistent_plan<float>(d.D, d.H, d.B);
  // A huge step sends the scores to infinity in the second step at the latest.
  std::vector<float> P0(d.P.begin(), d.P.end());
  P0[std::size_t(d.H) * d.D + d.H] = std::numeric_limits<float>::infinity();  // W2(0, 0)
  const Outcome<float> r = run_device<float>(d, P0, plan, {3}, 0.5f, 0.0f);
  EXPECT_EQ(r.counts[1], 3u);
  EXPECT_EQ(r.counts[2], 1u);  // the first step's loss is already not finite
  EXPECT_FALSE(std::isfinite(r.loss));
}

TEST(PersistentStep, BadArgumentsAreRefused) {
  Data d(20, 30, 10, 24, 8, 3);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan<float>(d.D, d.H, d.B);
  EXPECT_THROW(run_device<float>(d, P0, plan, {4}, 0.5f, 0.0f), std::invalid_argument);  // past the shard
  nn::PersistentPlan wrong = plan;
  wrong.tile_d = plan.tile_d == 8 ? 12 : 8;  // the shape's cut is not the plan's
  nn::PersistentShape<float> a;
  a.D = d.D, a.H = d.H, a.C = 11, a.B = d.B, a.steps = 1, a.n = unsigned(d.n), a.tile_d = plan.tile_d,
  a.slices = plan.slices;
  EXPECT_THROW(nn::persistent_steps<float>(plan, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);  // 11 classes
  a.C = d.C;
  EXPECT_THROW(nn::persistent_steps<float>(wrong, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
