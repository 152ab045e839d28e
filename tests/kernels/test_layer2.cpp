// The fused step's layer-2 kernels (kernels/ops/layer2.cu) against float64 computed from
// their definition: dZ1 over A1, the per-tile parts, the loss / hit / step counts, the summed
// gradient with the L2 term and the in-place SGD step; the same bits for any grid; a
// non-finite loss recorded at its step; bad sizes refused. Every emulator schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "device_vectors.h"
#include "ops/layer2.h"
#include "ops/ops.h"
#include "schedules.h"

namespace {

template <class T>
std::vector<T> host_of(const nn::DeviceBuffer<T>& d) {
  return nn::test::to_host(d);
}
template <class T>
nn::DeviceBuffer<T> device_of(const std::vector<T>& h) {
  return nn::test::to_device(h);
}

// One problem: A1 (H x b) in (0, 1), W2, b2, labels of n_img images, the batch's columns.
template <class T>
struct Problem {
  int H, C, b;
  std::vector<T> A1, W2, b2;
  std::vector<std::uint8_t> labels;
  std::vector<std::uint32_t> cols;
  // float64 results
  std::vector<double> dZ1, tail_grad;  // tail: [db1 | dW2 | db2] without the L2 term
  double loss = 0;
  unsigned hits = 0;

  Problem(int H_, int C_, int b_, unsigned seed) : H(H_), C(C_), b(b_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1), a(0.02, 0.98);
    A1.resize(std::size_t(H) * b);
    for (auto& v : A1) v = T(a(rng));
    W2.resize(std::size_t(C) * H);
    for (auto& v : W2) v = T(u(rng));
    b2.resize(C);
    for (auto& v : b2) v = T(u(rng));
    const int n_img = 3 * b + 5;
    labels.resize(n_img);
    for (auto& v : labels) v = std::uint8_t(rng() % unsigned(C));
    cols.resize(b);
    for (auto& v : cols) v = std::uint32_t(rng() % unsigned(n_img));
    reference();
  }

  void reference() {
    dZ1.assign(std::size_t(H) * b, 0);
    tail_grad.assign(nn::layer2_part_size(H, C), 0);
    for (int j = 0; j < b; ++j) {
      const T* a = &A1[std::size_t(j) * H];
      std::vector<double> z(C), dz(C);
      for (int c = 0; c < C; ++c) {
        double s = double(b2[c]);
        for (int h = 0; h < H; ++h) s += double(W2[std::size_t(h) * C + c]) * double(a[h]);
        z[c] = s;
      }
      const int arg = int(std::max_element(z.begin(), z.end()) - z.begin());
      const double m = z[arg];
      double se = 0;
      for (double v : z) se += std::exp(v - m);
      const int label = labels[cols[j]];
      loss += m + std::log(se) - z[label];
      hits += arg == label;
      for (int c = 0; c < C; ++c) dz[c] = (std::exp(z[c] - m) / se - (c == label)) / double(b);
      for (int h = 0; h < H; ++h) {
        double da = 0;
        for (int c = 0; c < C; ++c) {
          da += double(W2[std::size_t(h) * C + c]) * dz[c];
          tail_grad[H + std::size_t(h) * C + c] += dz[c] * double(a[h]);
        }
        const double d1 = da * double(a[h]) * (1 - double(a[h]));
        dZ1[std::size_t(j) * H + h] = d1;
        tail_grad[h] += d1;
      }
      for (int c = 0; c < C; ++c) tail_grad[std::size_t(H) * (C + 1) + c] += dz[c];
    }
  }
};

// |got - want| within a few units of T's precision relative to the largest reference value
// of the same quantity (sums of b or H terms of mixed signs).
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, double terms, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  const double tol = 4 * terms * std::numeric_limits<T>::epsilon() * std::max(scale, 1e-30);
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), want[i], tol) << what << " entry " << i;
}

template <class T>
struct Outputs {
  std::vector<T> A1, G, P;
  double loss;
  std::vector<unsigned> counts;
};

// layer2_fused, then layer2_finish in gradient mode (G written) or step mode (P stepped).
template <class T>
Outputs<T> run(const Problem<T>& pr, T reg, T lr, bool step, const std::vector<T>& P0) {
  auto A1 = device_of(pr.A1);
  auto P = device_of(P0);
  auto labels = device_of(pr.labels);
  auto cols = device_of(pr.cols);
  const int tiles = nn::layer2_tiles(pr.b);
  nn::DeviceBuffer<T> parts(std::size_t(tiles) * nn::layer2_part_size(pr.H, pr.C)), G(P0.size());
  nn::DeviceBuffer<double> loss_parts(tiles), stats(1);
  nn::DeviceBuffer<unsigned> hit_parts(tiles), counts(3);
  stats.zero();
  counts.zero();
  G.zero();
  const std::size_t w2 = std::size_t(pr.H);  // W2 within the tail [b1 | W2 | b2]
  nn::layer2_fused<T>(A1.get(), pr.H, pr.C, pr.b, P.get() + w2, P.get() + w2 + std::size_t(pr.C) * pr.H,
                      labels.get(), cols.get(), T(1) / T(pr.b), parts.get(), loss_parts.get(), hit_parts.get());
  nn::layer2_finish<T>(parts.get(), tiles, pr.H, pr.C, reg, lr, P.get(), step ? nullptr : G.get(), loss_parts.get(),
                       hit_parts.get(), stats.get(), counts.get());
  return {host_of(A1), host_of(G), host_of(P), host_of(stats)[0], host_of(counts)};
}

// The tail [b1 | W2 | b2] holding the problem's W2 and b2 (b1 random: only stepped).
template <class T>
std::vector<T> tail_of(const Problem<T>& pr) {
  std::vector<T> P(nn::layer2_part_size(pr.H, pr.C));
  for (int h = 0; h < pr.H; ++h) P[h] = T(0.01 * (h % 7));
  std::copy(pr.W2.begin(), pr.W2.end(), P.begin() + pr.H);
  std::copy(pr.b2.begin(), pr.b2.end(), P.begin() + pr.H + std::ptrdiff_t(pr.W2.size()));
  return P;
}

template <class T>
void against_float64() {
  struct S { int H, C, b; };
  for (const S s : {S{1, 10, 5}, S{7, 10, 16}, S{33, 3, 17}, S{256, 10, 40}, S{100, 10, 1}}) {
    SCOPED_TRACE("H " + std::to_string(s.H) + " C " + std::to_string(s.C) + " b " + std::to_string(s.b));
    const Problem<T> pr(s.H, s.C, s.b, unsigned(s.H * 31 + s.b));
    const std::vector<T> P0 = tail_of(pr);
    const T reg = T(0.01), lr = T(0.5);
    nn::test::for_each_schedule([&] {
      const Outputs<T> g = run(pr, reg, lr, false, P0);
      expect_close(g.A1, pr.dZ1, double(s.C + 4), "dZ1");
      std::vector<double> want = pr.tail_grad;
      for (std::size_t i = 0; i < pr.W2.size(); ++i) want[s.H + i] += double(reg) * double(pr.W2[i]);
      expect_close(g.G, want, double(s.b + s.C + 4), "gradient [db1 | dW2 + reg W2 | db2]");
      EXPECT_TRUE(std::memcmp(g.P.data(), P0.data(), P0.size() * sizeof(T)) == 0) << "gradient mode changed P";
      EXPECT_NEAR(g.loss, pr.loss, (sizeof(T) == 4 ? 1e-4 : 1e-10) * std::max(1.0, pr.loss));
      EXPECT_EQ(g.counts[0], pr.hits);
      EXPECT_EQ(g.counts[1], 1u);
      EXPECT_EQ(g.counts[2], 0u);
      // Step mode: P - lr * g with the gradient just checked, element by element (within an
      // FMA's rounding: the device may contract the multiply-add, the host may not).
      const Outputs<T> st = run(pr, reg, lr, true, P0);
      const double eps = std::numeric_limits<T>::epsilon();
      for (std::size_t i = 0; i < P0.size(); ++i) {
        const double want = double(P0[i]) - double(lr) * double(g.G[i]);
        ASSERT_NEAR(double(st.P[i]), want, 2 * eps * (std::abs(double(P0[i])) + std::abs(want)) + 1e-300)
            << "step entry " << i;
      }
    });
  }
}

TEST(Layer2Fused, AgainstFloat64Float) { against_float64<float>(); }
TEST(Layer2Fused, AgainstFloat64Double) { against_float64<double>(); }

// Every output depends on its tile alone: the emulator's few blocks (tiles visited grid-
// stride) and the CUDA build's one block per tile give the same bits.
TEST(Layer2Fused, SameBitsForAnyGrid) {
  const Problem<float> pr(64, 10, 150, 5u);
  const std::vector<float> P0 = tail_of(pr);
  const bool was = nn::gpu_grids();
  nn::use_gpu_grids(false);
  const Outputs<float> few = run(pr, 0.01f, 0.5f, false, P0);
  nn::use_gpu_grids(true);
  const Outputs<float> many = run(pr, 0.01f, 0.5f, false, P0);
  nn::use_gpu_grids(was);
  EXPECT_TRUE(std::memcmp(few.A1.data(), many.A1.data(), few.A1.size() * sizeof(float)) == 0);
  EXPECT_TRUE(std::memcmp(few.G.data(), many.G.data(), few.G.size() * sizeof(float)) == 0);
  EXPECT_EQ(few.loss, many.loss);
}

// A NaN activation makes that step's loss NaN: the counts name the step (1-based), and a
// later finite step does not move it.
TEST(Layer2Fused, NonFiniteLossIsRecordedAtItsStep) {
  Problem<float> pr(16, 10, 20, 9u);
  auto labels = device_of(pr.labels);
  auto cols = device_of(pr.cols);
  const std::vector<float> P0 = tail_of(pr);
  auto P = device_of(P0);
  const int tiles = nn::layer2_tiles(pr.b);
  nn::DeviceBuffer<float> parts(std::size_t(tiles) * nn::layer2_part_size(pr.H, pr.C));
  nn::DeviceBuffer<double> loss_parts(tiles), stats(1);
  nn::DeviceBuffer<unsigned> hit_parts(tiles), counts(3);
  stats.zero();
  counts.zero();
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> a = pr.A1;
    if (step == 2) a[5] = std::numeric_limits<float>::quiet_NaN();
    auto A1 = device_of(a);
    nn::layer2_fused<float>(A1.get(), pr.H, pr.C, pr.b, P.get() + pr.H, P.get() + pr.H + pr.C * pr.H, labels.get(),
                            cols.get(), 0.05f, parts.get(), loss_parts.get(), hit_parts.get());
    nn::layer2_finish<float>(parts.get(), tiles, pr.H, pr.C, 0.0f, 0.0f, P.get(), nullptr, loss_parts.get(),
                             hit_parts.get(), stats.get(), counts.get());
  }
  const std::vector<unsigned> c = host_of(counts);
  EXPECT_EQ(c[1], 3u);
  EXPECT_EQ(c[2], 2u);
  EXPECT_TRUE(std::isnan(host_of(stats)[0]));
}

TEST(Layer2Fused, BadSizesAreRefused) {
  nn::DeviceBuffer<float> x(64);
  nn::DeviceBuffer<double> l(4);
  nn::DeviceBuffer<unsigned> h(4);
  nn::DeviceBuffer<std::uint8_t> lab(4);
  nn::DeviceBuffer<std::uint32_t> cols(4);
  EXPECT_THROW(nn::layer2_fused<float>(x.get(), 2, 11, 2, x.get(), x.get(), lab.get(), cols.get(), 1.0f, x.get(),
                                       l.get(), h.get()),
               std::invalid_argument);
  EXPECT_THROW(nn::layer2_fused<float>(x.get(), 0, 10, 2, x.get(), x.get(), lab.get(), cols.get(), 1.0f, x.get(),
                                       l.get(), h.get()),
               std::invalid_argument);
  EXPECT_THROW(nn::layer2_finish<float>(x.get(), -1, 2, 3, 0.0f, 0.0f, x.get(), x.get(), l.get(), h.get(), l.get(),
                                        h.get()),
               std::invalid_argument);
}

}  // namespace
