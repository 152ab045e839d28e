// CpuModel on either GEMM library (src/model/cpu_gemm.h): both libraries against float64 sums for
// every transpose, a model on oneDNN against the reference and the OpenBLAS model, its
// model-parallel slices, and its passes split over its threads. Local to each rank.
#include "cpu_model_util.h"

namespace nn::model {
namespace {

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

}  // namespace
}  // namespace nn::model
