// CpuModel (src/model/cpu_model.h, --device cpu) on its own, float and double: gradients,
// loss and hits of a slice against the Armadillo reference and (double) centred finite
// differences, the two-phase split, empty slices, model-parallel slices, evaluation, SGD and
// bad input. Local to each rank (no collectives); the trainer tests run it under MPI.
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

namespace nn::train {
namespace {

constexpr int D = 784, C = 10;

// Random images (some saturated pixels, so sigmoid sees both signs) and labels.
CpuImages random_images(std::size_t n, std::uint32_t stream) {
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

std::vector<std::uint32_t> shuffled(std::size_t n, std::uint32_t stream) {
  std::vector<std::uint32_t> o(n);
  std::iota(o.begin(), o.end(), 0u);
  schedule::Rng rng(schedule::derive_seed(7, schedule::Stream::kTest, stream));
  for (std::size_t i = n; i > 1; --i) std::swap(o[i - 1], o[rng.below(i)]);
  return o;
}

template <class T>
class CpuModelTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuModelTest, Precisions);

TYPED_TEST(CpuModelTest, SliceGradientLossAndHitsMatchTheReference) {
  using T = TypeParam;
  const int H = 24;
  const CpuImages im = random_images(90, 1);
  const auto order = shuffled(90, 1);
  const ref::Params<T> P = ref::make_params<T>(D, H, C, 3);
  CpuModel<T> m(D, H, C, 80);
  m.set_params(pack(P));
  m.set_train_data(CpuImages(im));
  m.set_order(order);
  // Columns order[5 .. 75) of a global batch of 100: scaled by 1/100, with the regulariser;
  // 70 columns are two blocks of the fused layer-2 pass (64 and 6).
  const std::size_t off = 5;
  const int b = 70;
  const T reg = T(0.01);
  m.forward_backward(off, b, T(1) / T(100), true, reg);
  arma::Mat<T> X, Y;
  ref_batch<T>(im, std::span<const std::uint32_t>(order.data() + off, b), X, Y);
  const ref::Cache<T> cache = ref::forward(P, X);
  const std::vector<T> want = pack(ref::backward(P, cache, X, Y, reg, 100.0));
  const std::vector<T> got = m.get_grads();
  ASSERT_EQ(got.size(), want.size());
  const ParamLayout L = m.layout();
  EXPECT_LT(rel_err(got.data() + L.W1(), want.data() + L.W1(), L.b1() - L.W1()), tol<T>());
  EXPECT_LT(rel_err(got.data() + L.b1(), want.data() + L.b1(), L.W2() - L.b1()), tol<T>());
  EXPECT_LT(rel_err(got.data() + L.W2(), want.data() + L.W2(), L.b2() - L.W2()), tol<T>());
  EXPECT_LT(rel_err(got.data() + L.b2(), want.data() + L.b2(), L.total() - L.b2()), tol<T>());
  double loss = 0;
  std::uint64_t hits = 0;
  m.read_stats(loss, hits);
  EXPECT_NEAR(loss, ref::ce_sum(cache, Y), 1e-4 * std::abs(loss));
  const arma::uvec pred = ref::predict(P, X);
  std::uint64_t want_hits = 0;
  for (int j = 0; j < b; ++j) want_hits += pred(j) == im.labels[order[off + j]];
  EXPECT_EQ(hits, want_hits);
  m.reset_stats();
  m.read_stats(loss, hits);
  EXPECT_EQ(loss, 0.0);
  EXPECT_EQ(hits, 0u);
}

TYPED_TEST(CpuModelTest, TwoPhasesAndRepeatedStepsGiveTheSameBits) {
  using T = TypeParam;
  const int H = 16;
  const CpuImages im = random_images(30, 2);
  const ref::Params<T> P = ref::make_params<T>(D, H, C, 4);
  const auto order = shuffled(30, 2);
  CpuModel<T> a(D, H, C, 10), b(D, H, C, 10);
  for (CpuModel<T>* m : {&a, &b}) {
    m->set_params(pack(P));
    m->set_train_data(CpuImages(im));
    m->set_order(order);
  }
  a.forward_backward(20, 10, T(0.1), true, T(0.001));  // another batch first: nothing may linger
  a.forward_backward(3, 7, T(0.1), true, T(0.001));
  b.backward_layer2_phase(3, 7, T(0.1), true, T(0.001));
  b.backward_layer1_phase(7, true, T(0.001));
  EXPECT_EQ(a.get_grads(), b.get_grads());
}

TYPED_TEST(CpuModelTest, EmptySliceGivesZeroOrTheRegulariserAlone) {
  using T = TypeParam;
  const int H = 8;
  const ref::Params<T> P = ref::make_params<T>(D, H, C, 5);
  CpuModel<T> m(D, H, C, 4);
  m.set_params(pack(P));
  m.set_train_data(random_images(6, 3));
  m.set_order(shuffled(6, 3));
  m.forward_backward(2, 3, T(0.5), false, T(0));  // fill the gradient with something first
  m.forward_backward(6, 0, T(0.5), true, T(0.25));
  const std::vector<T> g = m.get_grads(), p = pack(P);
  const ParamLayout L = m.layout();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool weight = i < L.b1() || (i >= L.W2() && i < L.b2());
    ASSERT_EQ(g[i], weight ? T(0.25) * p[i] : T(0)) << "entry " << i;
  }
  m.forward_backward(6, 0, T(0.5), false, T(0.25));
  for (const T v : m.get_grads()) ASSERT_EQ(v, T(0));
}

TEST(CpuModel, GradientMatchesFiniteDifferencesInDouble) {
  const int H = 6;
  const CpuImages im = random_images(8, 4);
  std::vector<double> p = pack(ref::make_params<double>(D, H, C, 6));
  const double reg = 0.05;
  CpuModel<double> m(D, H, C, 8);
  m.set_train_data(CpuImages(im));
  m.set_order(shuffled(8, 4));
  const auto J = [&](const std::vector<double>& q) {  // the course's J of the whole batch
    m.set_params(q);
    m.reset_stats();
    m.forward_backward(0, 8, 1.0 / 8, true, reg);
    double loss = 0;
    std::uint64_t hits = 0;
    m.read_stats(loss, hits);
    return loss / 8 + 0.5 * reg * m.weight_sq_norm();
  };
  J(p);
  const std::vector<double> g = m.get_grads();
  const ParamLayout L = m.layout();
  // A few entries of each tensor: pixels that are lit in some image, so dW1 is not trivially 0.
  const std::size_t probes[] = {L.W1() + 3 + 300 * H, L.W1() + 5 + 400 * H, L.b1() + 2, L.b1() + 5,
                                L.W2() + 7, L.W2() + 3 + 2 * C, L.b2() + 0, L.b2() + 9};
  for (const std::size_t i : probes) {
    const double eps = 1e-5;
    std::vector<double> up = p, dn = p;
    up[i] += eps;
    dn[i] -= eps;
    const double fd = (J(up) - J(dn)) / (2 * eps);
    EXPECT_NEAR(g[i], fd, 1e-7 + 1e-6 * std::abs(fd)) << "entry " << i;
  }
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

TYPED_TEST(CpuModelTest, ModelParallelSlicesSumToTheWholeNetworksGradient) {
  expect_model_parallel_slices_sum_to_the_whole<TypeParam>(CpuGemm::OpenBLAS);
}

TYPED_TEST(CpuModelTest, EvaluateCountsTheReferencesCorrectPredictions) {
  using T = TypeParam;
  const int H = 20;
  const CpuImages im = random_images(50, 6);
  const ref::Params<T> P = ref::make_params<T>(D, H, C, 8);
  CpuModel<T> m(D, H, C, 16);  // 50 = 3 chunks of 16 and one of 2
  m.set_params(pack(P));
  std::vector<std::uint32_t> all(50);
  std::iota(all.begin(), all.end(), 0u);
  arma::Mat<T> X, Y;
  ref_batch<T>(im, all, X, Y);
  const arma::uvec pred = ref::predict(P, X);
  std::uint64_t want = 0;
  for (std::size_t j = 0; j < 50; ++j) want += pred(j) == im.labels[j];
  EXPECT_EQ(m.evaluate(im), want);
  EXPECT_GT(want, 0u);
}

TYPED_TEST(CpuModelTest, SgdStepSubtractsTheScaledGradient) {
  using T = TypeParam;
  const int H = 4;
  CpuModel<T> m(D, H, C, 4);
  const std::vector<T> p0 = pack(ref::make_params<T>(D, H, C, 9));
  m.set_params(p0);
  m.set_train_data(random_images(4, 7));
  m.set_order({3, 1, 0, 2});
  m.forward_backward(0, 4, T(0.25), true, T(0.1));
  const std::vector<T> g = m.get_grads();
  m.sgd_step(T(0.5));
  const std::vector<T> p1 = m.get_params();
  for (std::size_t i = 0; i < p0.size(); ++i) ASSERT_EQ(p1[i], T(p0[i] - T(0.5) * g[i])) << i;
}

TYPED_TEST(CpuModelTest, FusedW1StepMatchesTheSeparateStep) {
  using T = TypeParam;
  const int H = 12;
  const std::vector<T> p0 = pack(ref::make_params<T>(D, H, C, 10));
  const CpuImages im = random_images(20, 9);
  const auto order = shuffled(20, 9);
  CpuModel<T> plain(D, H, C, 10), fused(D, H, C, 10);
  fused.fuse_w1_step(true, T(0.5));
  for (CpuModel<T>* m : {&plain, &fused}) {
    m->set_params(p0);
    m->set_train_data(CpuImages(im));
    m->set_order(order);
    for (int k = 0; k < 2; ++k) {  // two steps: the second sees the first's fused update
      m->forward_backward(std::size_t(k) * 10, 10, T(0.1), true, T(0.01));
      m->sgd_step(T(0.5));
    }
  }
  const std::vector<T> a = plain.get_params(), f = fused.get_params();
  // (W1 - lr reg W1) - lr G rounds differently from W1 - lr (G + reg W1): close, not equal.
  const double close = std::is_same_v<T, double> ? 1e-13 : 1e-6;
  EXPECT_LT(rel_err(f.data(), a.data(), a.size()), close);
  EXPECT_NE(f, a);
  EXPECT_NE(f, p0);
  // Everything but W1 went through the same sgd pass from the same gradient.
  const ParamLayout L = plain.layout();
  EXPECT_LT(rel_err(f.data() + L.b1(), a.data() + L.b1(), L.total() - L.b1()), close);
}

// Both GEMM libraries (cpu_gemm.h) compute the same column-major C = alpha op(A) op(B) + beta C
// for every transpose pair, with leading dimensions larger than the rows (oneDNN is called
// row-major with its operands swapped, so a slip there shows here), against float64 sums.
TEST(CpuGemm, BothLibrariesMatchFloat64SumsForEveryTranspose) {
  if (!cpu_gemm_available(CpuGemm::OneDNN)) GTEST_SKIP() << "a make DNNL=0 build: no oneDNN";
  const int M = 7, N = 5, K = 9, pad = 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const CpuGemm lib : {CpuGemm::OpenBLAS, CpuGemm::OneDNN})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const int lda = (ta ? K : M) + pad, ldb = (tb ? N : K) + pad, ldc = M + pad;
        std::vector<float> A(std::size_t(lda) * (ta ? M : K)), B(std::size_t(ldb) * (tb ? K : N)),
            Cm(std::size_t(ldc) * N);
        for (float& x : A) x = u(rng);
        for (float& x : B) x = u(rng);
        for (float& x : Cm) x = u(rng);
        const std::vector<float> C0 = Cm;
        cpu_sgemm(lib, ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.0f, Cm.data(), ldc);
        for (int j = 0; j < N; ++j)
          for (int i = 0; i < ldc; ++i) {
            const std::size_t at = std::size_t(i) + std::size_t(j) * ldc;
            if (i >= M) {  // the padding rows stay as they were
              EXPECT_EQ(Cm[at], C0[at]);
              continue;
            }
            double sum = 0;
            for (int k = 0; k < K; ++k)
              sum += double(ta ? A[std::size_t(k) + std::size_t(i) * lda] : A[std::size_t(i) + std::size_t(k) * lda]) *
                     double(tb ? B[std::size_t(j) + std::size_t(k) * ldb] : B[std::size_t(k) + std::size_t(j) * ldb]);
            EXPECT_NEAR(Cm[at], 0.5 * sum + 2.0 * C0[at], 1e-5)
                << cpu_gemm_name(lib) << " ta=" << ta << " tb=" << tb << " C(" << i << "," << j << ")";
          }
      }
  EXPECT_EQ(cpu_gemm_version(CpuGemm::OpenBLAS).rfind("OpenBLAS ", 0), 0u);
  EXPECT_EQ(cpu_gemm_version(CpuGemm::OneDNN).rfind("oneDNN ", 0), 0u);
}

// A model on oneDNN's GEMM gives the reference's gradient too, fused W1 step included, and
// stays within float roundoff of the OpenBLAS model over several steps; double refuses it.
TEST(CpuGemm, OneDnnModelMatchesTheReferenceAndTheOpenBlasModel) {
  if (!cpu_gemm_available(CpuGemm::OneDNN)) GTEST_SKIP() << "a make DNNL=0 build: no oneDNN";
  const int H = 24, b = 12;
  const CpuImages im = random_images(40, 11);
  const auto order = shuffled(40, 11);
  const ref::Params<float> P = ref::make_params<float>(D, H, C, 12);
  CpuModel<float> ob(D, H, C, 16, CpuGemm::OpenBLAS), dn(D, H, C, 16, CpuGemm::OneDNN);
  EXPECT_EQ(dn.gemm_lib(), CpuGemm::OneDNN);
  for (CpuModel<float>* m : {&ob, &dn}) {
    m->set_params(pack(P));
    m->set_train_data(CpuImages(im));
    m->set_order(order);
  }
  dn.forward_backward(0, b, 1.f / b, true, 0.01f);
  arma::Mat<float> X, Y;
  ref_batch<float>(im, std::span<const std::uint32_t>(order.data(), b), X, Y);
  const std::vector<float> want = pack(ref::backward(P, ref::forward(P, X), X, Y, 0.01f, double(b)));
  const std::vector<float> got = dn.get_grads();
  EXPECT_LT(rel_err(got.data(), want.data(), want.size()), tol<float>());
  dn.fuse_w1_step(true, 0.5f);
  ob.fuse_w1_step(true, 0.5f);
  for (int k = 0; k < 3; ++k)
    for (CpuModel<float>* m : {&ob, &dn}) {
      m->forward_backward(std::size_t(k) * b, b, 1.f / b, true, 0.01f);
      m->sgd_step(0.5f);
    }
  const std::vector<float> a = ob.get_params(), d = dn.get_params();
  EXPECT_LT(rel_err(d.data(), a.data(), a.size()), 1e-5);
  EXPECT_NE(d, pack(P));
  EXPECT_THROW(CpuModel<double>(D, H, C, 4, CpuGemm::OneDNN), std::invalid_argument);
}

// sigmoid' + db1 on a band of rows (the leading-dimension form, as CpuModel splits it over its
// threads) gives exactly the bits of the whole-matrix pass.
TEST(CpuModel, SigmoidBackwardByRowBandsChangesNoBit) {
  const int H = 200, b = 37;
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> A(std::size_t(H) * b), dA(A.size());
  for (float& v : A) v = u(gen);
  for (float& v : dA) v = u(gen) - 0.5f;
  std::vector<float> whole = dA, banded = dA, db_whole(H), db_banded(H);
  cpu::sigmoid_backward_rowsum(whole.data(), A.data(), H, b, db_whole.data());
  for (const auto& [lo, hi] : {std::pair{0, 70}, std::pair{70, 71}, std::pair{71, 200}})
    cpu::sigmoid_backward_rowsum(banded.data() + lo, A.data() + lo, hi - lo, H, b, db_banded.data() + lo);
  EXPECT_EQ(banded, whole);
  EXPECT_EQ(db_banded, db_whole);
}

// sigmoid' by blocks of columns (the model's form): any sharing of the blocks gives the same
// bits, db is the blocks' row sums added in block order, and it is the sum of dZ's rows.
TEST(CpuModel, SigmoidBackwardBlocksGiveTheSameBitsInAnySplit) {
  const int H = 200, b = 3 * cpu::kColumnBlock + 8, blocks = 4;  // the last block is short
  std::mt19937 gen(6);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> A(std::size_t(H) * b), dA(A.size());
  for (float& v : A) v = u(gen);
  for (float& v : dA) v = u(gen) - 0.5f;
  std::vector<float> whole = dA, shared = dA, pw(std::size_t(H) * blocks), ps(pw.size()), db(H), db_shared(H);
  cpu::sigmoid_backward_blocks(whole.data(), A.data(), H, b, 0, blocks, pw.data());
  for (const auto& [k0, k1] : {std::pair{2, 3}, std::pair{0, 2}, std::pair{3, 4}})  // any order, any sizes
    cpu::sigmoid_backward_blocks(shared.data(), A.data(), H, b, k0, k1, ps.data());
  EXPECT_EQ(shared, whole);
  EXPECT_EQ(ps, pw);
  cpu::sum_blocks(pw.data(), blocks, H, db.data());
  cpu::sum_blocks(ps.data(), blocks, H, db_shared.data());
  EXPECT_EQ(db_shared, db);
  for (int h = 0; h < H; ++h) {
    float want = pw[std::size_t(h)];
    for (int k = 1; k < blocks; ++k) want += pw[std::size_t(k) * H + h];
    ASSERT_EQ(db[std::size_t(h)], want) << "row " << h;  // block order, exactly
    double sum = 0;
    for (int j = 0; j < b; ++j) {
      const double a = A[std::size_t(j) * H + h], d = dA[std::size_t(j) * H + h];
      EXPECT_NEAR(whole[std::size_t(j) * H + h], d * a * (1 - a), 1e-7);
      sum += d * a * (1 - a);
    }
    EXPECT_NEAR(db[std::size_t(h)], sum, 1e-5) << "row " << h;
  }
  std::vector<float> none(H, 1.f);
  cpu::sum_blocks(pw.data(), 0, H, none.data());  // an empty slice: zeros
  EXPECT_EQ(none, std::vector<float>(H, 0.f));
}

// Model parallelism on oneDNN, whose dW2 is computed as its transpose (layer2_grads): every
// slice, the empty one (H = 2 over 3 ranks) included.
TEST(CpuGemm, OneDnnModelParallelSlicesSumToTheWholeNetworksGradient) {
  if (!cpu_gemm_available(CpuGemm::OneDNN)) GTEST_SKIP() << "a make DNNL=0 build: no oneDNN";
  expect_model_parallel_slices_sum_to_the_whole<float>(CpuGemm::OneDNN);
}

// With oneDNN on 2 threads the model splits gather, bias + sigmoid, sigmoid' + db1 and the SGD
// passes over them (CpuModel::split; shapes large enough to split): the gradient is still the
// reference's, and the fused W1 step (with its split decay pass) the same as the unfused one.
TEST(CpuGemm, OneDnnModelSplitsItsPassesOverItsThreads) {
  if (!cpu_gemm_available(CpuGemm::OneDNN)) GTEST_SKIP() << "a make DNNL=0 build: no oneDNN";
  // 3 blocks of 64 columns and a short one (the fused layer-2 pass shares them among the threads).
  const int H = 256, b = 3 * cpu::kColumnBlock + 9;
  const CpuImages im = random_images(250, 3);
  const auto order = shuffled(250, 3);
  const ref::Params<float> P = ref::make_params<float>(D, H, C, 4);
  set_gemm_threads(2);
  CpuModel<float> m(D, H, C, b, CpuGemm::OneDNN);
  m.set_params(pack(P));
  m.set_train_data(CpuImages(im));
  m.set_order(order);
  m.forward_backward(0, b, 1.f / b, true, 0.01f);
  arma::Mat<float> X, Y;
  ref_batch<float>(im, std::span<const std::uint32_t>(order.data(), b), X, Y);
  const std::vector<float> want = pack(ref::backward(P, ref::forward(P, X), X, Y, 0.01f, double(b)));
  const std::vector<float> got = m.get_grads();
  EXPECT_LT(rel_err(got.data(), want.data(), want.size()), tol<float>());
  m.sgd_step(0.5f);
  std::vector<float> stepped = pack(P);
  for (std::size_t i = 0; i < stepped.size(); ++i) stepped[i] -= 0.5f * got[i];
  const std::vector<float> after = m.get_params();
  EXPECT_LT(rel_err(after.data(), stepped.data(), stepped.size()), 1e-6);
  // The fused W1 step (its weight-decay pass split too) lands on the same parameters.
  CpuModel<float> f(D, H, C, b, CpuGemm::OneDNN);
  f.set_params(pack(P));
  f.set_train_data(CpuImages(im));
  f.set_order(order);
  f.fuse_w1_step(true, 0.5f);
  f.forward_backward(0, b, 1.f / b, true, 0.01f);
  f.sgd_step(0.5f);
  const std::vector<float> fused = f.get_params();
  EXPECT_LT(rel_err(fused.data(), stepped.data(), stepped.size()), 1e-5);
  set_gemm_threads(1);  // the next trainer run sets its own (cpu_threads)
}

TEST(CpuModel, BadInputThrows) {
  CpuModel<float> m(D, 4, C, 5);
  EXPECT_THROW(m.set_params(std::vector<float>(3)), std::invalid_argument);
  EXPECT_THROW(m.set_train_data(CpuImages(std::vector<std::uint8_t>(20).data(), std::vector<std::uint8_t>(1).data(), 1, 20)),
               std::invalid_argument);
  m.set_train_data(random_images(8, 8));
  EXPECT_THROW(m.set_order({0, 1, 2}), std::invalid_argument);            // wrong length
  EXPECT_THROW(m.set_order({0, 1, 2, 3, 4, 5, 6, 8}), std::out_of_range);  // index outside the shard
  EXPECT_THROW(m.forward_backward(0, 2, 0.5f, false, 0.f), std::out_of_range);  // no order yet
  m.set_order(shuffled(8, 8));
  EXPECT_THROW(m.forward_backward(5, 4, 0.25f, false, 0.f), std::out_of_range);  // past the shard
  EXPECT_THROW(m.forward_backward(0, 6, 0.25f, false, 0.f), std::out_of_range);  // wider than max_cols
  EXPECT_THROW(m.forward_backward(0, -1, 0.25f, false, 0.f), std::out_of_range);
  EXPECT_THROW(m.queue_download(nullptr, 5, 2, Stage::AllGrads), std::out_of_range);
  CpuModel<float> none(D, 0, C, 5);
  none.set_train_data(random_images(8, 8));
  none.set_order(shuffled(8, 8));
  EXPECT_THROW(none.partial_scores_phase(0, 2, true), std::invalid_argument);
  std::vector<std::uint8_t> img(D), lab{12};
  CpuModel<float> bad(D, 4, C, 5);
  bad.set_train_data(CpuImages(img.data(), lab.data(), 1, D));
  bad.set_order({0});
  EXPECT_THROW(bad.forward_backward(0, 1, 1.f, false, 0.f), std::out_of_range);  // label >= C
}

TEST(CpuModel, VectorisableExpIsWithinAFewUlpOfStdExp) {
  // Every 997th float in [-87, -0] by bit pattern (about 10^6 of them, every binade).
  float worst = 0;
  const std::uint32_t lo = std::bit_cast<std::uint32_t>(-0.0f), hi = std::bit_cast<std::uint32_t>(-87.0f);
  for (std::uint32_t u = lo; u <= hi; u += 997) {
    const float x = std::bit_cast<float>(u);
    const float want = std::exp(x), got = cpu::exp_nonpos(x);
    worst = std::max(worst, std::abs(got - want) / (want * std::numeric_limits<float>::epsilon()));
  }
  EXPECT_LE(worst, 4.0f);
  EXPECT_EQ(cpu::exp_nonpos(0.0f), 1.0f);
  EXPECT_GT(cpu::exp_nonpos(-1000.0f), 0.0f);  // clamped at e^-87, never 0 or subnormal
  EXPECT_LT(cpu::exp_nonpos(-1000.0f), 2e-38f);
}

// What was asked against the room there is: the rank never runs more BLAS threads than the
// cores in its affinity mask, or than its share of the node's cores, and says why.
TEST(CpuModel, ThreadsNeverOutnumberTheRanksCores) {
  CpuThreads t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 1, 2, 1);  // plain mpirun -np 1: one core
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(t.asked, 2);
  EXPECT_EQ(t.room, 1);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask");
  t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 2, 2, 1);  // slurm/mpirun.sh: PE=2
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS");
  t = cpu_threads_from(4, "SLURM_CPUS_PER_TASK", 8, 8, 4);  // --bind-to none, 4 ranks x 4 on 8 cores
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "SLURM_CPUS_PER_TASK=4, but 8 cores on the node for 4 ranks");
  t = cpu_threads_from(3, "OMP_NUM_THREADS", 8, 64, 2);  // fewer asked than there is room for
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.room, 8);
  t = cpu_threads_from(0, "", 2, 2, 1);  // nothing asked: all the room
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.asked, 0);
  EXPECT_EQ(t.source, "2 cores / 1 ranks on the node, 2 in this rank's affinity mask");
  EXPECT_EQ(cpu_threads_from(0, "", 1, 2, 4).threads, 1);  // 4 ranks on 2 cores: at least 1
  t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 1, 2, 2);  // 2 ranks x 2 threads on 2 cores
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(t.node_cores, 2);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=2, but 2 cores on the node for 2 ranks");
  EXPECT_EQ(cpu_threads_from(5, "OMP_NUM_THREADS", 0, 0, 0).threads, 1);  // nothing known: 1
  // OMP_PROC_BIND: the room is the OpenMP places' CPUs (cpu_threads_for), named as such.
  t = cpu_threads_from(0, "", 2, 2, 1, "OpenMP places (OMP_PROC_BIND)");
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "2 cores / 1 ranks on the node, 2 in this rank's OpenMP places (OMP_PROC_BIND)");
  EXPECT_EQ(cpu_threads_from(4, "OMP_NUM_THREADS", 1, 2, 1, "place").source, "OMP_NUM_THREADS=4, but 1 core in its place");
}

TEST(CpuModel, ThreadsComeFromTheEnvironmentFirst) {
  const char* names[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"};
  std::vector<std::string> saved;
  std::vector<bool> had;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    had.push_back(v != nullptr);
    saved.push_back(v ? v : "");
    unsetenv(n);
  }
  const CpuThreads def = cpu_threads_for(1, true);
  EXPECT_GE(def.threads, 1);
  EXPECT_NE(def.source.find("cores"), std::string::npos);
  EXPECT_LE(cpu_threads_for(1024, true).threads, def.threads);
  // What is asked (the threads used are at most the room: ThreadsNeverOutnumberTheRanksCores).
  setenv("SLURM_CPUS_PER_TASK", "3", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 3);
  EXPECT_EQ(cpu_threads_for(2, true).source.rfind("SLURM_CPUS_PER_TASK", 0), 0u);
  setenv("OMP_NUM_THREADS", "5", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 5);
  setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 2);
  EXPECT_EQ(cpu_threads_for(2, true).threads, std::min(2, cpu_threads_for(2, true).room));
  setenv("OPENBLAS_NUM_THREADS", "zero", 1);  // not a count: the next source decides
  EXPECT_EQ(cpu_threads_for(2, true).asked, 5);
  EXPECT_EQ(cpu_threads_for(2, true).source.rfind("OMP_NUM_THREADS", 0), 0u);
  for (std::size_t i = 0; i < 3; ++i) {
    if (had[i]) setenv(names[i], saved[i].c_str(), 1);
    else unsetenv(names[i]);
  }
}

}  // namespace
}  // namespace nn::train
