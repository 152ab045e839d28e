// Tests of the softmax and reduction kernels (kernels/ops/ops.cu) against straightforward CPU
// computations in double, for float and double, each under every emulator thread order
// (schedules.h): softmax, large magnitudes, the fused softmax + cross-entropy + gradient, correct
// counts with ties, row sums (also without columns or rows).
#include "ops_test_util.h"

namespace {

// ---- score matrices and their CPU softmax / CE / argmax ---------------------------------

// C x b scores in [lo, hi]; every third column gets a tied maximum at two rows, labelled
// with the lower row in one tie column and the higher in the next (so argmax must pick the
// lowest index). Other columns are labelled with their argmax half the time.
template <class T>
void make_scores(int C, int b, double lo, double hi, std::uint64_t seed, std::vector<T>& Z,
                 std::vector<std::uint8_t>& labels) {
  Z = uniform<T>(std::size_t(C) * b, lo, hi, seed);
  labels.assign(std::size_t(b), 0);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (int j = 0; j < b; ++j) {
    T* z = &Z[std::size_t(j) * C];
    if (C >= 2 && j % 3 == 0) {
      const int k1 = int(rng() % unsigned(C - 1));
      const int k2 = k1 + 1 + int(rng() % unsigned(C - 1 - k1));
      const T top = *std::max_element(z, z + C);
      z[k1] = z[k2] = top;
      labels[j] = std::uint8_t((j / 3) % 2 ? k2 : k1);
    } else if (rng() % 2) {
      labels[j] = std::uint8_t(std::max_element(z, z + C) - z);  // first maximum
    } else {
      labels[j] = std::uint8_t(rng() % unsigned(C));
    }
  }
}

struct SoftmaxRef {
  std::vector<double> y;      // softmax, C x b
  std::vector<double> y_tol;  // per-element tolerance for a T computation of y
  std::vector<int> arg;       // lowest-index argmax per column
  std::vector<double> ce;     // cross-entropy per column (when labels are given)
  std::vector<double> ce_tol;
};

// Error model of a T computation: z - m rounds with relative eps (so exp picks up a
// relative error of |z - m| eps), exp itself a couple of ulps, the sum of C terms about
// C eps more; the loss's difference max - z[label] is formed in double by the kernel.
template <class T>
SoftmaxRef softmax_ref(const std::vector<T>& Z, int C, int b, const std::uint8_t* labels) {
  SoftmaxRef r;
  r.y.resize(Z.size());
  r.y_tol.resize(Z.size());
  r.arg.resize(std::size_t(b));
  r.ce.resize(std::size_t(b));
  r.ce_tol.resize(std::size_t(b));
  for (int j = 0; j < b; ++j) {
    const T* z = &Z[std::size_t(j) * C];
    int arg = 0;
    for (int k = 1; k < C; ++k)
      if (z[k] > z[arg]) arg = k;
    const double m = z[arg];
    double s = 0, range = 0;
    for (int k = 0; k < C; ++k) {
      s += std::exp(double(z[k]) - m);
      range = std::max(range, std::min(m - double(z[k]), 64.0));
    }
    for (int k = 0; k < C; ++k) {
      const std::size_t e = std::size_t(j) * C + k;
      r.y[e] = std::exp(double(z[k]) - m) / s;
      r.y_tol[e] = (std::abs(double(z[k]) - m) + C + 4) * kEps<T> * r.y[e] + kTiny<T>;
    }
    r.arg[j] = arg;
    if (labels) {
      const double zl = z[labels[j]];
      r.ce[j] = m + std::log(s) - zl;
      r.ce_tol[j] = (range + C + 4) * kEps<T> + kEps<T> * (m - zl) + 1e-15 * r.ce[j];
    }
  }
  return r;
}

// ---- softmax ---------------------------------------------------------------------------------

template <class T>
void expect_softmax_matches(const std::vector<T>& got, const SoftmaxRef& ref, int C, int b) {
  for (int j = 0; j < b; ++j) {
    double col = 0;
    for (int k = 0; k < C; ++k) {
      const std::size_t e = std::size_t(j) * C + k;
      ASSERT_TRUE(std::isfinite(double(got[e]))) << "column " << j << " row " << k;
      ASSERT_NEAR(double(got[e]), ref.y[e], ref.y_tol[e]) << "column " << j << " row " << k;
      col += got[e];
    }
    ASSERT_NEAR(col, 1.0, 2.0 * (C + 4) * kEps<T>) << "column " << j;
  }
}

TYPED_TEST(OpsTest, SoftmaxColumnsMatchesCpu) {
  using T = TypeParam;
  // C = 10 is the network; 3 and 1 narrow groups; 37 and 70 take more than 32 rows per group.
  for (const auto& cb : {std::array{10, 1}, std::array{10, 7}, std::array{10, 1000},
                            std::array{3, 50}, std::array{1, 5}, std::array{37, 9},
                            std::array{70, 3}}) {
    const int C = cb[0], b = cb[1];
    std::vector<T> Z;
    std::vector<std::uint8_t> labels;
    make_scores(C, b, -8.0, 8.0, std::uint64_t(C) * 7919 + b, Z, labels);
    const SoftmaxRef ref = softmax_ref(Z, C, b, nullptr);
    auto d_Z = to_device(Z);
    nn::DeviceBuffer<T> d_Y(Z.size());
    nn::test::for_each_schedule([&] {
      SCOPED_TRACE("C=" + std::to_string(C) + " b=" + std::to_string(b));
      nn::softmax_columns(d_Z.get(), C, b, d_Y.get());
      expect_softmax_matches(to_host(d_Y), ref, C, b);
      auto d_W = to_device(Z);  // in place
      nn::softmax_columns(d_W.get(), C, b, d_W.get());
      expect_softmax_matches(to_host(d_W), ref, C, b);
      if (b < 100) {  // the fused kernel with only yhat wanted needs no labels
        nn::softmax_xent(d_Z.get(), nullptr, C, b, T(1), d_Y.get(), (T*)nullptr, nullptr, nullptr);
        expect_softmax_matches(to_host(d_Y), ref, C, b);
      }
    });
  }
}

// Max subtraction: huge scores neither overflow nor produce NaN. Near-ties at +-1e4 give
// non-trivial probabilities; equal huge entries split evenly.
TYPED_TEST(OpsTest, SoftmaxLargeMagnitudeIsFinite) {
  using T = TypeParam;
  const double huge = std::is_same_v<T, float> ? 1e30 : 1e300;
  const int C = 10, b = 8;
  std::vector<T> Z(std::size_t(C) * b);
  for (int k = 0; k < C; ++k) {
    const double s = (k % 2) ? 1.0 : -1.0;
    Z[0 * C + k] = T(s * 1e4);                    // +-1e4
    Z[1 * C + k] = T(1e4 + 0.5 * k);              // near-ties at 1e4
    Z[2 * C + k] = T(-1e4 - 0.25 * k);            // near-ties at -1e4
    Z[3 * C + k] = T(s * huge);                   // +-huge
    Z[4 * C + k] = T(huge);                       // all equal, huge
    Z[5 * C + k] = T(-huge);                      // all equal, -huge
    Z[6 * C + k] = T(k == 7 ? huge : -huge);      // one huge winner
    Z[7 * C + k] = T(k * huge / C - huge / 2);    // spread over the whole range
  }
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(b));
  for (int j = 0; j < b; ++j) labels[j] = std::uint8_t((3 * j + 1) % C);
  const SoftmaxRef ref = softmax_ref(Z, C, b, labels.data());
  auto d_Z = to_device(Z);
  auto d_lab = to_device(labels);
  nn::DeviceBuffer<T> d_Y(Z.size()), d_Y2(Z.size());
  nn::DeviceBuffer<double> d_loss(1);
  nn::test::for_each_schedule([&] {
    nn::softmax_columns(d_Z.get(), C, b, d_Y.get());
    expect_softmax_matches(to_host(d_Y), ref, C, b);
    d_loss.zero();
    nn::softmax_xent(d_Z.get(), d_lab.get(), C, b, T(1) / T(b), d_Y2.get(), (T*)nullptr,
                     d_loss.get(), nullptr);
    expect_softmax_matches(to_host(d_Y2), ref, C, b);
    const double loss = scalar_of(d_loss);
    double want = 0, tol = 0;
    for (int j = 0; j < b; ++j) {
      want += ref.ce[j];
      tol += ref.ce_tol[j];
    }
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_NEAR(loss, want, tol + 1e-12 * std::abs(want));
  });
}

// ---- fused softmax + cross-entropy + gradient ------------------------------------------------

TYPED_TEST(OpsTest, SoftmaxXentMatchesCpu) {
  using T = TypeParam;
  for (const auto& cb : {std::array{10, 1}, std::array{10, 7}, std::array{10, 1000},
                            std::array{37, 20}}) {
    const int C = cb[0], b = cb[1];
    SCOPED_TRACE("C=" + std::to_string(C) + " b=" + std::to_string(b));
    std::vector<T> Z;
    std::vector<std::uint8_t> labels;
    make_scores(C, b, -6.0, 6.0, std::uint64_t(C) * 31 + b, Z, labels);
    const T inv_B = T(1) / T(3 * b + 2);  // the global batch, not this slice's column count
    const SoftmaxRef ref = softmax_ref(Z, C, b, labels.data());
    std::vector<double> dref(Z.size()), dtol(Z.size());
    double loss_ref = 0, loss_tol = 0;
    unsigned correct_ref = 0;
    for (int j = 0; j < b; ++j) {
      for (int k = 0; k < C; ++k) {
        const std::size_t e = std::size_t(j) * C + k;
        const double d = ref.y[e] - (k == labels[j] ? 1.0 : 0.0);
        dref[e] = d * double(inv_B);
        dtol[e] = double(inv_B) * (ref.y_tol[e] + 2 * kEps<T> * std::abs(d)) + kTiny<T>;
      }
      loss_ref += ref.ce[j];
      loss_tol += ref.ce_tol[j];
      correct_ref += ref.arg[j] == labels[j];
    }
    auto d_Z = to_device(Z);
    auto d_lab = to_device(labels);
    nn::DeviceBuffer<T> d_y(Z.size()), d_d(Z.size());
    nn::DeviceBuffer<double> d_loss(1);
    nn::DeviceBuffer<unsigned> d_cor(1);
    const double loss0 = 1.25;  // outputs accumulate
    const unsigned cor0 = 3;
    nn::test::for_each_schedule([&] {
      d_loss.upload(&loss0, 1);
      d_cor.upload(&cor0, 1);
      nn::softmax_xent(d_Z.get(), d_lab.get(), C, b, inv_B, d_y.get(), d_d.get(), d_loss.get(),
                       d_cor.get());
      expect_softmax_matches(to_host(d_y), ref, C, b);
      const auto dz = to_host(d_d);
      for (std::size_t e = 0; e < dz.size(); ++e) ASSERT_NEAR(double(dz[e]), dref[e], dtol[e]) << e;
      EXPECT_NEAR(scalar_of(d_loss) - loss0, loss_ref, loss_tol);
      EXPECT_EQ(scalar_of(d_cor) - cor0, correct_ref);

      // Each output alone; dZ2 written in place over a copy of Z.
      auto d_W = to_device(Z);
      d_loss.zero();
      d_cor.zero();
      nn::softmax_xent(d_W.get(), d_lab.get(), C, b, inv_B, (T*)nullptr, d_W.get(), nullptr,
                       nullptr);
      const auto dz2 = to_host(d_W);
      for (std::size_t e = 0; e < dz2.size(); ++e) ASSERT_NEAR(double(dz2[e]), dref[e], dtol[e]) << e;
      nn::softmax_xent(d_Z.get(), d_lab.get(), C, b, inv_B, (T*)nullptr, (T*)nullptr,
                       d_loss.get(), nullptr);
      nn::softmax_xent(d_Z.get(), d_lab.get(), C, b, inv_B, (T*)nullptr, (T*)nullptr, nullptr,
                       d_cor.get());
      EXPECT_NEAR(scalar_of(d_loss), loss_ref, loss_tol);
      EXPECT_EQ(scalar_of(d_cor), correct_ref);
    });
  }
}

TYPED_TEST(OpsTest, CountCorrectMatchesCpuWithTies) {
  using T = TypeParam;
  for (const auto& cb : {std::array{10, 1}, std::array{10, 7}, std::array{10, 1000},
                            std::array{2, 33}, std::array{40, 17}}) {
    const int C = cb[0], b = cb[1];
    SCOPED_TRACE("C=" + std::to_string(C) + " b=" + std::to_string(b));
    std::vector<T> Z;
    std::vector<std::uint8_t> labels;
    make_scores(C, b, -3.0, 3.0, std::uint64_t(C) * 101 + b, Z, labels);
    const SoftmaxRef ref = softmax_ref(Z, C, b, nullptr);
    unsigned want = 0;
    for (int j = 0; j < b; ++j) want += ref.arg[j] == labels[j];
    auto d_Z = to_device(Z);
    auto d_lab = to_device(labels);
    nn::DeviceBuffer<unsigned> d_cor(1);
    nn::test::for_each_schedule([&] {
      const unsigned start = 11;
      d_cor.upload(&start, 1);
      nn::count_correct(d_Z.get(), d_lab.get(), C, b, d_cor.get());
      EXPECT_EQ(scalar_of(d_cor), start + want);
    });
  }
}

// A batch larger than one grid covers (2048 blocks x 16 columns): the column loop strides.
// One run in the default order (it is the emulator's slowest test): the same loop runs
// under every order in the tests above.
TEST(OpsLarge, SoftmaxXentStridesOverFullTrainingSet) {
  const int C = 10, b = 60000;
  std::vector<float> Z;
  std::vector<std::uint8_t> labels;
  make_scores(C, b, -5.0, 5.0, 424242, Z, labels);
  const SoftmaxRef ref = softmax_ref(Z, C, b, labels.data());
  double loss_ref = 0, loss_tol = 0;
  unsigned correct_ref = 0;
  for (int j = 0; j < b; ++j) {
    loss_ref += ref.ce[j];
    loss_tol += ref.ce_tol[j];
    correct_ref += ref.arg[j] == labels[j];
  }
  auto d_Z = to_device(Z);
  auto d_lab = to_device(labels);
  nn::DeviceBuffer<float> d_y(Z.size());
  nn::DeviceBuffer<double> d_loss(1);
  nn::DeviceBuffer<unsigned> d_cor(1), d_cor2(1);
  d_loss.zero();
  d_cor.zero();
  d_cor2.zero();
  nn::softmax_xent(d_Z.get(), d_lab.get(), C, b, 1.0f / b, d_y.get(), (float*)nullptr, d_loss.get(),
                   d_cor.get());
  nn::count_correct(d_Z.get(), d_lab.get(), C, b, d_cor2.get());
  expect_softmax_matches(to_host(d_y), ref, C, b);
  EXPECT_NEAR(scalar_of(d_loss), loss_ref, loss_tol);
  EXPECT_EQ(scalar_of(d_cor), correct_ref);
  EXPECT_EQ(scalar_of(d_cor2), correct_ref);
}

// ---- row sums --------------------------------------------------------------------------------

TYPED_TEST(OpsTest, RowSumsMatchesCpu) {
  using T = TypeParam;
  struct Case {
    int M, n, lda;
    double beta;
  };
  // db2 (10 x b), db1 (H x b), lda > M, beta != 0, a single row / column, M not a tile multiple.
  for (const Case c : {Case{10, 1000, 10, 0.0}, Case{200, 37, 200, 0.0}, Case{37, 129, 45, 0.5},
                       Case{1, 1, 1, 1.0}, Case{13, 3, 16, -2.0}, Case{3, 700, 5, 1.0}}) {
    SCOPED_TRACE("M=" + std::to_string(c.M) + " n=" + std::to_string(c.n) +
                 " lda=" + std::to_string(c.lda) + " beta=" + std::to_string(c.beta));
    const std::vector<T> A = uniform<T>(std::size_t(c.lda) * c.n, -1.0, 1.0, c.M * 7 + c.n);
    const std::vector<T> out0 = uniform<T>(std::size_t(c.M), -3.0, 3.0, c.M + 1);
    std::vector<double> want(std::size_t(c.M)), tol(std::size_t(c.M));
    for (int i = 0; i < c.M; ++i) {
      double s = 0, sabs = 0;
      for (int j = 0; j < c.n; ++j) {
        s += A[std::size_t(j) * c.lda + i];
        sabs += std::abs(double(A[std::size_t(j) * c.lda + i]));
      }
      const double prior = c.beta == 0 ? 0.0 : c.beta * double(out0[i]);
      want[i] = prior + s;
      tol[i] = (c.n + 2) * kEps<T> * (sabs + std::abs(prior)) + kTiny<T>;
    }
    auto d_A = to_device(A);
    nn::DeviceBuffer<T> d_out(static_cast<std::size_t>(c.M));
    nn::test::for_each_schedule([&] {
      if (c.beta == 0) {
        // beta = 0 must not read out: NaN there must not leak into the result.
        const std::vector<T> nans(std::size_t(c.M), std::numeric_limits<T>::quiet_NaN());
        d_out.upload(nans.data(), nans.size());
      } else {
        d_out.upload(out0.data(), out0.size());
      }
      nn::row_sums(d_A.get(), c.M, c.n, c.lda, d_out.get(), T(c.beta));
      const auto got = to_host(d_out);
      for (int i = 0; i < c.M; ++i) ASSERT_NEAR(double(got[i]), want[i], tol[i]) << "row " << i;
    });
  }
}

// No columns (a rank with an empty slice) follows BLAS: out = beta * out, so beta = 0 gives
// zeros; no rows leaves out untouched.
TYPED_TEST(OpsTest, RowSumsWithoutColumnsOrRows) {
  using T = TypeParam;
  const std::vector<T> out0 = {T(1.5), T(-2), T(4)};
  auto d_A = to_device(std::vector<T>(6, T(1)));
  nn::DeviceBuffer<T> d_out(3);
  nn::test::for_each_schedule([&] {
    d_out.upload(out0.data(), 3);
    nn::row_sums(d_A.get(), 3, 0, 3, d_out.get(), T(0));
    EXPECT_EQ(to_host(d_out), std::vector<T>(3, T(0)));
    d_out.upload(out0.data(), 3);
    nn::row_sums(d_A.get(), 3, 0, 3, d_out.get(), T(2));
    EXPECT_EQ(to_host(d_out), (std::vector<T>{T(3), T(-4), T(8)}));
    d_out.upload(out0.data(), 3);
    nn::row_sums(d_A.get(), 0, 2, 3, d_out.get(), T(0));
    EXPECT_EQ(to_host(d_out), out0);
  });
}

}  // namespace
