// The fused layer-2 pass of the data-parallel CPU step (cpu::layer2_block, cpu_kernels.h;
// CpuModel::layer2_fused): every output against a float64 recomputation from its definition,
// at heights that leave vector tails and with fewer classes than the chunk holds, outputs
// overwritten whatever they held; in place and out of place alike; bad sizes refused. The
// model over several blocks and threads against the reference: test_cpu_model.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "model/cpu_kernels.h"
#include "model/cpu_model.h"
#include "schedule/rng.h"

namespace nn::model {
namespace {

// Uniform in [lo, hi) from the test stream `s`.
template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi, std::uint32_t s) {
  schedule::Rng rng(schedule::derive_seed(31, schedule::Stream::kTest, s));
  std::vector<T> v(n);
  for (auto& x : v) x = T(lo + (hi - lo) * double(rng.below(1u << 24)) / double(1u << 24));
  return v;
}

struct Want {  // float64, from the definitions in cpu_kernels.h
  std::vector<double> A, Z, dW2p, dZ1, db1p;
  double loss = 0;
  std::uint64_t hits = 0;
};

template <class T>
Want recompute(const std::vector<T>& A0, const std::vector<T>& b1, const std::vector<T>& W2t,
               const std::vector<T>& b2, const std::vector<std::uint8_t>& y, int H, int C, int n, double inv_B) {
  Want w;
  w.A.resize(std::size_t(H) * n);
  w.Z.resize(std::size_t(C) * n);
  w.dW2p.assign(std::size_t(C) * H, 0.0);
  w.dZ1.resize(std::size_t(H) * n);
  w.db1p.assign(std::size_t(H), 0.0);
  for (int j = 0; j < n; ++j) {
    for (int h = 0; h < H; ++h) {
      const double z = double(A0[std::size_t(j) * H + h]) + double(b1[std::size_t(h)]);
      w.A[std::size_t(j) * H + h] = 1.0 / (1.0 + std::exp(-z));
    }
    std::vector<double> z(static_cast<std::size_t>(C));
    int best = 0;
    for (int c = 0; c < C; ++c) {
      double s = double(b2[std::size_t(c)]);
      for (int h = 0; h < H; ++h) s += double(W2t[std::size_t(c) * H + h]) * w.A[std::size_t(j) * H + h];
      z[std::size_t(c)] = s;
      if (s > z[std::size_t(best)]) best = c;
    }
    double sum = 0;
    for (int c = 0; c < C; ++c) sum += std::exp(z[std::size_t(c)] - z[std::size_t(best)]);
    w.loss += std::log(sum) - (z[y[std::size_t(j)]] - z[std::size_t(best)]);
    w.hits += best == y[std::size_t(j)];
    for (int c = 0; c < C; ++c)
      w.Z[std::size_t(j) * C + c] =
          (std::exp(z[std::size_t(c)] - z[std::size_t(best)]) / sum - (c == y[std::size_t(j)] ? 1.0 : 0.0)) * inv_B;
  }
  for (int j = 0; j < n; ++j)
    for (int h = 0; h < H; ++h) {
      const double a = w.A[std::size_t(j) * H + h];
      double s = 0;
      for (int c = 0; c < C; ++c) {
        const double d = w.Z[std::size_t(j) * C + c];
        w.dW2p[std::size_t(c) * H + h] += d * a;
        s += double(W2t[std::size_t(c) * H + h]) * d;
      }
      const double v = s * a * (1 - a);
      w.dZ1[std::size_t(j) * H + h] = v;
      w.db1p[std::size_t(h)] += v;
    }
  return w;
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, std::size_t n, double scale,
                  const char* what) {
  const double tol = (std::is_same_v<T, float> ? 2e-6 : 1e-14) * scale;
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(double(got[i]), want[i], tol) << what << " [" << i << "]";
}

template <class T>
class Layer2Block : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Layer2Block, Precisions);

TYPED_TEST(Layer2Block, EveryOutputMatchesItsDefinitionInFloat64) {
  using T = TypeParam;
  std::uint32_t stream = 0;
  // H: below one vector, a vector tail, one and two whole vectors, a 2-vector tail, odd.
  for (const int H : {1, 7, 16, 24, 33, 64, 100})
    for (const int C : {10, 3})  // 3: the class chunk padded with zero rows
      for (const int n : {1, 5, cpu::kColumnBlock}) {
        ++stream;
        const int Cp = cpu::kClassChunk;
        const std::vector<T> A0 = uniform<T>(std::size_t(H) * n, -6, 6, stream);
        const std::vector<T> b1 = uniform<T>(std::size_t(H), -1, 1, stream + 1000);
        std::vector<T> W2t = uniform<T>(std::size_t(Cp) * H, -1, 1, stream + 2000);
        for (std::size_t i = std::size_t(C) * H; i < W2t.size(); ++i) W2t[i] = T(0);
        const std::vector<T> b2 = uniform<T>(std::size_t(C), -1, 1, stream + 3000);
        std::vector<std::uint8_t> y(static_cast<std::size_t>(n));
        for (int j = 0; j < n; ++j) y[std::size_t(j)] = std::uint8_t((j * 7 + H) % C);
        const T inv_B = T(1) / T(2 * n + 1);
        const Want w = recompute(A0, b1, W2t, b2, y, H, C, n, double(inv_B));

        // Outputs hold garbage first: every one must be overwritten (loss and hits added to).
        const T junk = T(1e30);
        std::vector<T> A = A0, Z(std::size_t(C) * n, junk), dZ1(std::size_t(H) * n, junk),
            dW2p(std::size_t(C) * H, junk), db1p(static_cast<std::size_t>(H), junk);
        double loss = 0;
        std::uint64_t hits = 0;
        cpu::layer2_block(A.data(), b1.data(), W2t.data(), b2.data(), y.data(), H, C, n, inv_B, Z.data(),
                          dZ1.data(), dW2p.data(), db1p.data(), &loss, &hits);
        SCOPED_TRACE("H " + std::to_string(H) + " C " + std::to_string(C) + " n " + std::to_string(n));
        expect_close(A, w.A, A.size(), 1.0, "sigmoid");
        // Tolerances: a few roundings of each term's size (|z| <= 1 + H, so the scores' error
        // grows with sqrt-ish H; dW2 and db1 sum n terms of size inv_B).
        const double zs = 1 + std::sqrt(double(H));
        expect_close(Z, w.Z, Z.size(), double(inv_B) * zs, "dZ2");
        expect_close(dW2p, w.dW2p, dW2p.size(), double(inv_B) * zs * std::sqrt(double(n)), "dW2");
        expect_close(dZ1, w.dZ1, dZ1.size(), double(inv_B) * zs, "dZ1");
        expect_close(db1p, w.db1p, db1p.size(), double(inv_B) * zs * std::sqrt(double(n)), "db1");
        EXPECT_NEAR(loss, w.loss, (std::is_same_v<T, float> ? 1e-5 : 1e-12) * (1 + std::abs(w.loss)));
        EXPECT_EQ(hits, w.hits);

        // In place (dZ1 over A, as the model calls it): the same bits.
        std::vector<T> A2 = A0, Z2(std::size_t(C) * n, -junk), dW2q(std::size_t(C) * H, -junk),
            db1q(static_cast<std::size_t>(H), -junk);
        double loss2 = 7;
        std::uint64_t hits2 = 3;
        cpu::layer2_block(A2.data(), b1.data(), W2t.data(), b2.data(), y.data(), H, C, n, inv_B, Z2.data(),
                          A2.data(), dW2q.data(), db1q.data(), &loss2, &hits2);
        EXPECT_EQ(A2, dZ1);
        EXPECT_EQ(Z2, Z);
        EXPECT_EQ(dW2q, dW2p);
        EXPECT_EQ(db1q, db1p);
        EXPECT_EQ(loss2, loss + 7);
        EXPECT_EQ(hits2, hits + 3);
      }
}

TEST(Layer2Fused, MoreClassesOrColumnsThanItHoldsAreRefused) {
  EXPECT_THROW(CpuModel<float>(784, 8, cpu::kClassChunk + 1, 4), std::invalid_argument);
  EXPECT_NO_THROW(CpuModel<float>(784, 8, cpu::kClassChunk, 4));
  const int H = 4, n = cpu::kColumnBlock + 1;
  std::vector<float> A(std::size_t(H) * n), b1(H), W2t(std::size_t(cpu::kClassChunk) * H), b2(11), Z(11 * n),
      dW2p(11 * H), db1p(H);
  std::vector<std::uint8_t> y(static_cast<std::size_t>(n));
  double loss = 0;
  std::uint64_t hits = 0;
  const auto call = [&](int C, int cols) {
    cpu::layer2_block(A.data(), b1.data(), W2t.data(), b2.data(), y.data(), H, C, cols, 0.1f, Z.data(), A.data(),
                      dW2p.data(), db1p.data(), &loss, &hits);
  };
  EXPECT_THROW(call(cpu::kClassChunk + 1, 4), std::invalid_argument);
  EXPECT_THROW(call(10, n), std::invalid_argument);
  EXPECT_THROW(call(10, 0), std::invalid_argument);
  EXPECT_NO_THROW(call(10, n - 1));
}

}  // namespace
}  // namespace nn::model
