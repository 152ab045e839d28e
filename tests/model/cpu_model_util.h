// Shared by the CpuModel tests, tests/model/test_cpu_model*.cpp: random images and their reference
// batch, the reference's parameters packed as the model holds them, a relative error and its
// tolerance per precision, a shuffled order, the model-parallel check (both GEMM libraries) and
// the typed CpuModelTest fixture (float and double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/ref_net.h"
#include "schedule/rng.h"
#include "model/cpu_kernels.h"
#include "model/cpu_model.h"
#include "train/model_parallel.h"

namespace nn::model {

// One class template for every file (gtest requires one fixture per suite), so not in an
// anonymous namespace.
template <class T>
class CpuModelTest : public ::testing::Test {};

namespace {

using Precisions = ::testing::Types<float, double>;
// Model parallelism's slices of the packed parameters (src/train/model_parallel.h).
using train::assemble_params;
using train::hidden_slice;
using train::HiddenSlice;
using train::slice_params;
TYPED_TEST_SUITE(CpuModelTest, Precisions);

constexpr int D = 784, C = 10;

// Random images (some saturated pixels, so sigmoid sees both signs) and labels.
inline CpuImages random_images(std::size_t n, std::uint32_t stream) {
  schedule::Rng rng(schedule::derive_seed(99, schedule::Stream::kTest, stream));
  std::vector<std::uint8_t> img(n * D), lab(n);
  for (auto& v : img) v = std::uint8_t(rng.below(4) == 0 ? 255 : rng.below(256));
  for (auto& v : lab) v = std::uint8_t(rng.below(C));
  return CpuImages(img.data(), lab.data(), n, D);
}

template <class T>
std::vector<T> pack(const ref::Params<T>& p) {
  std::vector<T> out;
  for (const arma::Mat<T>* m : {static_cast<const arma::Mat<T>*>(&p.W1), static_cast<const arma::Mat<T>*>(&p.b1),
                                static_cast<const arma::Mat<T>*>(&p.W2), static_cast<const arma::Mat<T>*>(&p.b2)})
    out.insert(out.end(), m->begin(), m->end());
  return out;
}

// The reference's view of columns idx of the images: X = v / 255 and one-hot Y.
template <class T>
void ref_batch(const CpuImages& im, std::span<const std::uint32_t> idx, arma::Mat<T>& X, arma::Mat<T>& Y) {
  X.set_size(D, idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j)
    for (int i = 0; i < D; ++i) X(i, j) = static_cast<T>(im.images[std::size_t(idx[j]) * D + i]) / T(255);
  Y = ref::one_hot<T>(im.labels, idx, C);
}


template <class T>
double rel_err(const T* a, const T* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

template <class T>
double tol() { return std::is_same_v<T, double> ? 1e-12 : 2e-5; }

inline std::vector<std::uint32_t> shuffled(std::size_t n, std::uint32_t stream) {
  std::vector<std::uint32_t> o(n);
  std::iota(o.begin(), o.end(), 0u);
  schedule::Rng rng(schedule::derive_seed(7, schedule::Stream::kTest, stream));
  for (std::size_t i = n; i > 1; --i) std::swap(o[i - 1], o[rng.below(i)]);
  return o;
}


// Model parallelism: each of p ranks holds a slice of H; the slices' gradients, assembled,
// equal the whole network's (within roundoff), and rank 0's loss and hits the whole's.
template <class T>
void expect_model_parallel_slices_sum_to_the_whole(CpuGemm lib) {
  for (const int H : {13, 2}) {  // H = 2 over 3 ranks: the last rank owns no hidden unit
    const int p = 3, b = 9;
    const CpuImages im = random_images(20, 5);
    const auto order = shuffled(20, 5);
    const std::vector<T> full = pack(ref::make_params<T>(D, H, C, 7));
    const T reg = T(0.01), inv_B = T(1) / T(b);
    CpuModel<T> whole(D, H, C, b, lib);
    whole.set_params(full);
    whole.set_train_data(CpuImages(im));
    whole.set_order(order);
    whole.forward_backward(4, b, inv_B, true, reg);

    std::vector<CpuModel<T>> parts;
    std::vector<T> scores(std::size_t(C) * b, T(0));
    const std::vector<double> full_d(full.begin(), full.end());
    for (int r = 0; r < p; ++r) {
      const HiddenSlice s = hidden_slice(H, p, r);
      const std::vector<double> mine = slice_params(full_d, D, H, C, s);
      parts.emplace_back(D, s.H, C, b, lib);
      parts.back().set_params(std::vector<T>(mine.begin(), mine.end()));
      parts.back().set_train_data(CpuImages(im));
      parts.back().set_order(order);
      parts.back().partial_scores_phase(4, b, r == 0);
      for (std::size_t i = 0; i < scores.size(); ++i) scores[i] += parts.back().scores()[i];
    }
    std::vector<double> grads;
    for (int r = 0; r < p; ++r) {
      parts[std::size_t(r)].upload_scores(scores.data(), b);
      parts[std::size_t(r)].model_backward_phase(b, inv_B, reg, r == 0);
      const std::vector<T> g = parts[std::size_t(r)].get_grads();
      grads.insert(grads.end(), g.begin(), g.end());
    }
    const std::vector<double> got = assemble_params(grads, D, H, C, p);
    const std::vector<T> want = whole.get_grads();
    ASSERT_EQ(got.size(), want.size());
    std::vector<T> got_t(got.begin(), got.end());
    EXPECT_LT(rel_err(got_t.data(), want.data(), want.size()), tol<T>()) << "H " << H;
    double l0 = 0, l1 = 0;
    std::uint64_t h0 = 0, h1 = 0;
    whole.read_stats(l0, h0);
    parts[0].read_stats(l1, h1);
    EXPECT_NEAR(l1, l0, 1e-5 * l0);
    EXPECT_EQ(h1, h0);
  }
}

}  // namespace
}  // namespace nn::model
