// CpuModel (src/model/cpu_model.h, --device cpu) on its own, float and double: gradients,
// loss and hits of a slice against the Armadillo reference and (double) centred finite
// differences, the two-phase split, empty slices, model-parallel slices, evaluation, SGD and
// bad input. Local to each rank (no collectives); the trainer tests run it under MPI.
#include "cpu_model_util.h"

namespace nn::model {
namespace {

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

}  // namespace
}  // namespace nn::model
