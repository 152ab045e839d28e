// Tests of the CPU reference network (src/reference/ref_net.*), its construction and its passes:
// parameters, one-hot labels and shape errors; forward, loss and backward against naive
// long-double loops and finite differences, float against double, extreme logits, predictions.
// The update, the split-batch identity the MPI trainer relies on and training on synthetic
// clusters: test_ref_net_training.cpp. GoogleTest, no main here; both files run in ~20 ms.
#include "ref_net_util.h"

namespace {

// Straight-from-the-definition long-double implementation (no max shift: the logits in these
// tests are O(1), where the plain formula is exact enough and independent of ours).
// Armadillo has no long double matrices: a minimal column-major one.
struct LMat {
  arma::uword n_rows = 0, n_cols = 0, n_elem = 0;
  std::vector<long double> v;
  void zeros(arma::uword r, arma::uword c) {
    n_rows = r;
    n_cols = c;
    n_elem = r * c;
    v.assign(n_elem, 0.0L);
  }
  long double& operator()(arma::uword i, arma::uword j) { return v[i + j * n_rows]; }
  long double& operator()(arma::uword i) { return v[i]; }
  long double operator()(arma::uword i) const { return v[i]; }
};
struct Naive {
  LMat a1, yhat, W1, b1, W2, b2;  // grads in W1..b2
  long double J = 0;
};
template <class T>
Naive naive(const Params<T>& p, const arma::Mat<T>& X, const std::vector<std::uint8_t>& y, long double reg,
            long double scale_B) {
  const arma::uword D = X.n_rows, B = X.n_cols, H = p.W1.n_rows, C = p.W2.n_rows;
  Naive n;
  n.a1.zeros(H, B);
  n.yhat.zeros(C, B);
  for (arma::uword j = 0; j < B; ++j) {
    for (arma::uword h = 0; h < H; ++h) {
      long double z = p.b1(h);
      for (arma::uword d = 0; d < D; ++d) z += (long double)p.W1(h, d) * X(d, j);
      n.a1(h, j) = 1.0L / (1.0L + std::exp(-z));
    }
    long double s = 0;
    for (arma::uword k = 0; k < C; ++k) {
      long double z = p.b2(k);
      for (arma::uword h = 0; h < H; ++h) z += (long double)p.W2(k, h) * n.a1(h, j);
      n.yhat(k, j) = std::exp(z);
      s += n.yhat(k, j);
    }
    for (arma::uword k = 0; k < C; ++k) n.yhat(k, j) /= s;
    n.J -= std::log(n.yhat(y[j], j)) / (long double)B;
  }
  long double sq = 0;
  for (arma::uword i = 0; i < p.W1.n_elem; ++i) sq += (long double)p.W1(i) * p.W1(i);
  for (arma::uword i = 0; i < p.W2.n_elem; ++i) sq += (long double)p.W2(i) * p.W2(i);
  n.J += reg / 2 * sq;
  // Backward, term by term.
  LMat dz2, dz1;
  dz2.zeros(C, B);
  dz1.zeros(H, B);
  for (arma::uword j = 0; j < B; ++j)
    for (arma::uword k = 0; k < C; ++k) dz2(k, j) = (n.yhat(k, j) - (y[j] == k ? 1.0L : 0.0L)) / scale_B;
  for (arma::uword j = 0; j < B; ++j)
    for (arma::uword h = 0; h < H; ++h) {
      long double da = 0;
      for (arma::uword k = 0; k < C; ++k) da += (long double)p.W2(k, h) * dz2(k, j);
      dz1(h, j) = da * n.a1(h, j) * (1 - n.a1(h, j));
    }
  n.W1.zeros(H, D);
  n.b1.zeros(H, 1);
  n.W2.zeros(C, H);
  n.b2.zeros(C, 1);
  for (arma::uword h = 0; h < H; ++h) {
    for (arma::uword d = 0; d < D; ++d) {
      for (arma::uword j = 0; j < B; ++j) n.W1(h, d) += dz1(h, j) * X(d, j);
      n.W1(h, d) += reg * p.W1(h, d);
    }
    for (arma::uword j = 0; j < B; ++j) n.b1(h) += dz1(h, j);
  }
  for (arma::uword k = 0; k < C; ++k) {
    for (arma::uword h = 0; h < H; ++h) {
      for (arma::uword j = 0; j < B; ++j) n.W2(k, h) += dz2(k, j) * n.a1(h, j);
      n.W2(k, h) += reg * p.W2(k, h);
    }
    for (arma::uword j = 0; j < B; ++j) n.b2(k) += dz2(k, j);
  }
  return n;
}

// Per-type tolerances, each justified where it is used.
template <class T>
struct Tol;
template <>
struct Tol<double> {
  static constexpr double naive = 1e-12, fd_eps = 1e-6, fd_tol = 1e-6, fd_floor = 1e-3;
};
template <>
struct Tol<float> {
  static constexpr double naive = 5e-5, fd_eps = 1e-2, fd_tol = 1e-2, fd_floor = 1e-2;
};

// ---------------------------------------------------------------- construction

TYPED_TEST(RefNet, MakeParamsIsInitParamsCast) {
  using T = TypeParam;
  const auto ip = nn::schedule::init_params(7, 5, 3, 42);
  const Params<T> p = make_params<T>(7, 5, 3, 42);
  ASSERT_EQ(p.W1.n_rows, 5u);
  ASSERT_EQ(p.W1.n_cols, 7u);
  ASSERT_EQ(p.W2.n_rows, 3u);
  ASSERT_EQ(p.W2.n_cols, 5u);
  for (std::size_t i = 0; i < ip.W1.size(); ++i) EXPECT_EQ(p.W1(i), static_cast<T>(ip.W1[i]));
  for (std::size_t i = 0; i < ip.W2.size(); ++i) EXPECT_EQ(p.W2(i), static_cast<T>(ip.W2[i]));
  EXPECT_TRUE(arma::all(p.b1 == T(0)));
  EXPECT_TRUE(arma::all(p.b2 == T(0)));
  ASSERT_EQ(p.b1.n_elem, 5u);
  ASSERT_EQ(p.b2.n_elem, 3u);
}

TEST(RefNetBasics, OneHot) {
  const std::vector<std::uint8_t> y = {3, 0, 2, 2, 1};
  const arma::mat Y = one_hot<double>(y, 1, 3, 4);  // labels 0, 2, 2
  ASSERT_EQ(Y.n_rows, 4u);
  ASSERT_EQ(Y.n_cols, 3u);
  const arma::mat expect = {{1, 0, 0}, {0, 0, 0}, {0, 1, 1}, {0, 0, 0}};
  EXPECT_TRUE(arma::approx_equal(Y, expect, "absdiff", 0.0));
  const std::vector<std::uint32_t> idx = {4, 0};
  const arma::fmat Z = one_hot<float>(y, std::span<const std::uint32_t>(idx), 4);  // labels 1, 3
  EXPECT_EQ(Z(1, 0), 1.0f);
  EXPECT_EQ(Z(3, 1), 1.0f);
  EXPECT_EQ(arma::accu(Z), 2.0f);
  EXPECT_THROW(one_hot<double>(y, 0, 5, 3), std::out_of_range);   // label 3 >= C
  EXPECT_THROW(one_hot<double>(y, 4, 2, 4), std::out_of_range);   // past the end
  const std::vector<std::uint32_t> bad = {5};
  EXPECT_THROW(one_hot<double>(y, std::span<const std::uint32_t>(bad), 4), std::out_of_range);
}

TEST(RefNetBasics, ShapeErrorsThrow) {
  Rng r = test_rng(1);
  Params<double> p = random_params<double>(5, 4, 3, r);
  EXPECT_THROW(forward(p, arma::mat(6, 2, arma::fill::zeros)), std::invalid_argument);
  p.b1.set_size(3);
  EXPECT_THROW(forward(p, arma::mat(5, 2, arma::fill::zeros)), std::invalid_argument);
}

// ---------------------------------------------------------------- forward / loss / backward

TYPED_TEST(RefNet, MatchesNaiveLongDoubleLoops) {
  // An independent transcription of the definitions in long double. Differences are pure
  // T rounding (u = 1.1e-16 double, 6e-8 float) amplified by cancellation in the gradient
  // sums for entries near the 1e-3 floor: measured max 1.4e-15 (double) and 4.4e-6 (float)
  // against tolerances 1e-12 and 5e-5.
  using T = TypeParam;
  const Tiny<T> t(2);
  const Naive n = naive(t.p, t.X, t.y, (long double)t.reg, (long double)Tiny<T>::B);
  const Cache<T> c = forward(t.p, t.X);
  const double tol = Tol<T>::naive;
  EXPECT_LT(max_rel_err(c.a1, n.a1, 1e-3), tol);
  EXPECT_LT(max_rel_err(c.yhat, n.yhat, 1e-3), tol);
  EXPECT_TRUE(arma::approx_equal(arma::sum(c.yhat, 0), arma::Row<T>(t.X.n_cols, arma::fill::ones), "absdiff",
                                 T(4) * std::numeric_limits<T>::epsilon()));
  EXPECT_NEAR(double(loss(t.p, c, t.Y, t.reg)) / double(n.J), 1.0, tol);
  const Grads<T> g = backward(t.p, c, t.X, t.Y, t.reg);
  EXPECT_LT(max_rel_err(g.W1, n.W1, 1e-3), tol);
  EXPECT_LT(max_rel_err(g.b1, n.b1, 1e-3), tol);
  EXPECT_LT(max_rel_err(g.W2, n.W2, 1e-3), tol);
  EXPECT_LT(max_rel_err(g.b2, n.b2, 1e-3), tol);
}

TYPED_TEST(RefNet, FiniteDifferencesEveryParameter) {
  // Centered differences (J(p+h) - J(p-h)) / (2h) of the full J for all 39 parameters.
  // Error = truncation h^2 |J'''| / 6 + roundoff ~ u |J| / h, with J ~ 1.5 and |J'''| = O(1):
  //  double (u = 1.1e-16), h = 1e-6: 2e-13 + ~2e-10 absolute -> ~2e-7 relative once the
  //    denominator is floored at 1e-3 (gradients here are O(0.1)); measured 8.5e-8; tol 1e-6.
  //  float  (u = 6e-8), h = 1e-2: the two terms balance (h ~ (3u)^(1/3) ~ 6e-3):
  //    ~2e-5 + ~1e-5 absolute, i.e. <= ~3e-3 relative with the denominator floored at 1e-2
  //    (measured 7.9e-4); tolerance 1e-2.
  // The step actually taken, (p+h) - (p-h) in double, is used, since p +/- h rounds in T.
  using T = TypeParam;
  const Tiny<T> t(3);
  const Grads<T> g = backward(t.p, forward(t.p, t.X), t.X, t.Y, t.reg);
  const auto gb = blocks(g);
  Params<T> q = t.p;
  const auto qb = blocks(q);
  double worst = 0.0;
  int checked = 0;
  for (std::size_t b = 0; b < qb.size(); ++b) {
    for (arma::uword i = 0; i < qb[b]->n_elem; ++i) {
      T& v = (*qb[b])(i);
      const T orig = v;
      const T hi = orig + T(Tol<T>::fd_eps), lo = orig - T(Tol<T>::fd_eps);
      v = hi;
      const double Jp = t.J(q);
      v = lo;
      const double Jm = t.J(q);
      v = orig;
      const double fd = (Jp - Jm) / (double(hi) - double(lo));
      const double an = double((*gb[b])(i));
      worst = std::max(worst, std::abs(fd - an) / std::max({std::abs(an), std::abs(fd), Tol<T>::fd_floor}));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 5 + 4 + 3 * 4 + 3);
  EXPECT_LT(worst, Tol<T>::fd_tol);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", worst);
  ::testing::Test::RecordProperty("max_rel_err", buf);
}

TEST(RefNetBasics, FloatGradientsAgreeWithDouble) {
  // Same inputs (double values rounded to float): float gradients carry only float rounding,
  // ~1e-7 relative per op; 1e-5 against the largest entry leaves ample margin.
  const Tiny<double> t(4);
  const Params<float> pf{arma::conv_to<arma::fmat>::from(t.p.W1), arma::conv_to<arma::fmat>::from(t.p.W2),
                         arma::conv_to<arma::fvec>::from(t.p.b1), arma::conv_to<arma::fvec>::from(t.p.b2)};
  const arma::fmat Xf = arma::conv_to<arma::fmat>::from(t.X), Yf = arma::conv_to<arma::fmat>::from(t.Y);
  const Grads<double> gd = backward(t.p, forward(t.p, t.X), t.X, t.Y, t.reg);
  const Grads<float> gf = backward(pf, forward(pf, Xf), Xf, Yf, float(t.reg));
  const auto bd = blocks(gd);
  const auto bf = blocks(gf);
  for (std::size_t b = 0; b < bd.size(); ++b) {
    const double scale = arma::abs(*bd[b]).max();
    EXPECT_LT(max_rel_err(*bf[b], *bd[b], scale), 1e-5) << "block " << b;
  }
}

TEST(RefNetBasics, HugeLogitsStayFinite) {
  // Logits of +-1e4 overflow exp in float (max ~88.7) without the max shift; the hidden
  // pre-activations of +-1e4 would overflow a naive exp(-z) sigmoid.
  const int H = 2, C = 3;
  Params<float> p;
  p.W1 = {{1e4f, 1e4f}, {-1e4f, -1e4f}};
  p.b1 = {0.0f, 0.0f};
  p.W2.zeros(C, H);
  p.b2 = {1e4f, -1e4f, 0.0f};
  const arma::fmat X = {{0.5f, 1.0f, 0.25f}, {0.5f, 0.0f, 0.75f}};
  const std::vector<std::uint8_t> y = {1, 0, 2};  // class 1 sits at -1e4: CE = 2e4
  const arma::fmat Y = one_hot<float>(y, 0, 3, C);
  const Cache<float> c = forward(p, X);
  EXPECT_TRUE(c.a1.is_finite());
  EXPECT_TRUE(c.yhat.is_finite());
  EXPECT_TRUE(arma::all(arma::vectorise(c.a1) >= 0.0f) && arma::all(arma::vectorise(c.a1) <= 1.0f));
  EXPECT_EQ(c.a1(0, 0), 1.0f);
  EXPECT_EQ(c.a1(1, 0), 0.0f);
  EXPECT_EQ(c.yhat(0, 0), 1.0f);
  const float J = loss(p, c, Y, 0.0f);
  EXPECT_TRUE(std::isfinite(J));
  EXPECT_NEAR(J, (2e4f + 0.0f + 1e4f) / 3.0f, 1.0f);
  const Grads<float> g = backward(p, c, X, Y, 1e-4f);
  for (const arma::fmat* m : blocks(g)) EXPECT_TRUE(m->is_finite());
}

TYPED_TEST(RefNet, PerfectPredictionLossIsRegTerm) {
  // Logit margins of 60: CE = log(1 + 2 e^-60) ~ 2e-26, below the ulp of anything here.
  using T = TypeParam;
  Rng r = test_rng(5);
  Params<T> p = random_params<T>(4, 3, 3, r);
  p.W2.zeros();
  p.b2 = {T(60), T(0), T(0)};
  arma::Mat<T> X(4, 5);
  fill_uniform(X, r, 0.0, 1.0);
  const arma::Mat<T> Y = one_hot<T>(std::vector<std::uint8_t>(5, 0), 0, 5, 3);
  const Cache<T> c = forward(p, X);
  EXPECT_LT(double(loss(p, c, Y, T(0))), 1e-20);
  const T reg = T(0.01);
  const double expect = 0.5 * 0.01 * double(arma::accu(arma::square(p.W1)));
  EXPECT_NEAR(double(loss(p, c, Y, reg)) / expect, 1.0, 10 * double(std::numeric_limits<T>::epsilon()));
}

TEST(RefNetBasics, PredictTiesTakeLowestIndex) {
  Rng r = test_rng(6);
  Params<double> p = random_params<double>(4, 3, 4, r);
  p.W2.zeros();  // logits = b2 for every column
  arma::mat X(4, 3);
  fill_uniform(X, r, 0.0, 1.0);
  const std::vector<std::uint8_t> y = {1, 1, 2};
  p.b2 = {1.0, 3.0, 3.0, 2.0};
  EXPECT_TRUE(arma::all(predict(p, X) == 1u));
  EXPECT_DOUBLE_EQ(accuracy(p, X, y, 0), 2.0 / 3.0);
  p.b2 = {5.0, 5.0, 5.0, 5.0};
  EXPECT_TRUE(arma::all(predict(p, X) == 0u));
  p.b2 = {0.0, 0.0, 0.0, 1e-12};
  EXPECT_TRUE(arma::all(predict(p, X) == 3u));
  const std::vector<std::uint8_t> y4 = {0, 3, 3, 3};
  EXPECT_DOUBLE_EQ(accuracy(p, X, y4, 1), 1.0);  // labels from index 1 on
  EXPECT_THROW(accuracy(p, X, y4, 2), std::out_of_range);
}

}  // namespace
