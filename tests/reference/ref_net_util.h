// Shared by the reference network's tests, tests/reference/test_ref_net*.cpp: random parameters,
// labels and uniform fills from the test seed, the parameter blocks, a relative error, column
// slices, the tiny problem of the brief and the typed RefNet fixture (float and double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>

#include "schedule/init.h"
#include "schedule/rng.h"
#include "schedule/schedule.h"
#include "reference/ref_net.h"

// One class template for every file (gtest requires one fixture per suite), so not in an
// anonymous namespace.
template <class T>
class RefNet : public ::testing::Test {};

namespace {

using nn::schedule::Rng;
using namespace nn::ref;
using Reals = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RefNet, Reals);

// ---------------------------------------------------------------- helpers

inline Rng test_rng(std::uint32_t k) { return Rng(nn::schedule::derive_seed(2718, nn::schedule::Stream::kTest, k)); }

template <class T>
void fill_uniform(arma::Mat<T>& m, Rng& r, double lo, double hi) {
  for (arma::uword i = 0; i < m.n_elem; ++i) m(i) = static_cast<T>(lo + (hi - lo) * r.uniform());
}

// The four parameter blocks, as Mat (Col derives from Mat), in the order W1, b1, W2, b2.
template <class T>
std::vector<arma::Mat<T>*> blocks(Params<T>& p) {
  return {&p.W1, &p.b1, &p.W2, &p.b2};
}
template <class T>
std::vector<const arma::Mat<T>*> blocks(const Params<T>& p) {
  return {&p.W1, &p.b1, &p.W2, &p.b2};
}

// Every entry random (biases too, so their gradients are exercised away from zero).
template <class T>
Params<T> random_params(int D, int H, int C, Rng& r, double scale = 1.0) {
  Params<T> p;
  p.W1.set_size(H, D);
  p.b1.set_size(H);
  p.W2.set_size(C, H);
  p.b2.set_size(C);
  for (arma::Mat<T>* m : blocks(p)) fill_uniform(*m, r, -scale, scale);
  return p;
}

inline std::vector<std::uint8_t> random_labels(std::size_t n, int C, Rng& r) {
  std::vector<std::uint8_t> y(n);
  for (auto& v : y) v = static_cast<std::uint8_t>(r.below(std::uint64_t(C)));
  return y;
}

// max_i |got_i - ref_i| / max(|ref_i|, floor).
template <class A, class B>
double max_rel_err(const A& got, const B& ref, double floor) {
  double worst = 0.0;
  for (arma::uword i = 0; i < got.n_elem; ++i) {
    const double g = double(got(i)), f = double(ref(i));
    worst = std::max(worst, std::abs(g - f) / std::max(std::abs(f), floor));
  }
  return worst;
}

// Columns [begin, begin + count) of m; an empty slice is legal (Armadillo's cols() is not).
template <class T>
arma::Mat<T> cols(const arma::Mat<T>& m, std::size_t begin, std::size_t count) {
  return count ? arma::Mat<T>(m.cols(begin, begin + count - 1)) : arma::Mat<T>(m.n_rows, 0);
}

// The tiny problem of the brief: D=5, H=4, C=3, B=6, reg=0.1, X in [0,1).
template <class T>
struct Tiny {
  static constexpr int D = 5, H = 4, C = 3, B = 6;
  Params<T> p;
  arma::Mat<T> X, Y;
  std::vector<std::uint8_t> y;
  T reg = T(0.1);
  explicit Tiny(std::uint32_t k) {
    Rng r = test_rng(k);
    p = random_params<T>(D, H, C, r);
    X.set_size(D, B);
    fill_uniform(X, r, 0.0, 1.0);
    y = random_labels(B, C, r);
    Y = one_hot<T>(y, 0, B, C);
  }
  T J(const Params<T>& q) const { return loss(q, forward(q, X), Y, reg); }
};

}  // namespace
