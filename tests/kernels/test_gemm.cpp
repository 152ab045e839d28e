// Tests of nn::gemm (kernels/gemm/*.cu): every variant of the registry (kernels/gemm/variants.h;
// AllVariants/GemmVariant.*/NAME) against a double-precision CPU reference, all op(A)/op(B)
// combinations, alpha/beta, in place, padded ld, epilogues, float and double, under every
// emulator thread order. Variant 4's tiles and split-K: test_gemm_warptile.cpp; the dispatcher's
// contract and the registry: test_gemm_api.cpp; the shared machinery: gemm_problem.h.
#include <gtest/gtest.h>

#include <string>

#include "gemm/gemm.h"
#include "gemm_problem.h"

namespace {

using gemm_test::Case;
using gemm_test::kOps;
using gemm_test::Problem;
using gemm_test::run;
using gemm_test::run_variant;
using gemm_test::run_variant_both;
using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

class GemmVariant : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!nn::gemm_variant_available(GetParam()))
      GTEST_SKIP() << nn::gemm_variant_name(GetParam()) << " is not available in this build";
  }
};

// Every op combination at the tiny and odd shapes, cycling alpha/beta, epilogue, padding and
// in-place so that each op pair meets each of them at least once.
TEST_P(GemmVariant, AllOpsSmallShapes) {
  const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 17}};
  int n = 0;
  for (const auto& s : shapes)
    for (Op oa : kOps)
      for (Op ob : kOps) {
        Case c;
        c.opA = oa;
        c.opB = ob;
        c.M = s[0];
        c.N = s[1];
        c.K = s[2];
        c.alpha = n % 2 ? -0.75 : 1.0;
        c.beta = n % 3 == 0 ? 0.0 : 0.5;
        c.ep = Epilogue(n % 3);
        c.pad = n % 2 ? 3 : 0;
        c.in_place = n % 4 == 1;
        run_variant_both<float>(GetParam(), c, 100 + n);
        ++n;
      }
}

TEST_P(GemmVariant, EpiloguesWithAlphaBeta) {
  for (int e = 0; e < 3; ++e) {
    Case c;
    c.M = 33;
    c.N = 18;
    c.K = 29;
    c.opA = e == 1 ? Op::T : Op::N;
    c.alpha = 1.25;
    c.beta = -2.0;
    c.ep = Epilogue(e);
    c.pad = 1;
    run_variant_both<float>(GetParam(), c, 7 + e);
  }
}

TEST_P(GemmVariant, BetaZeroNeverReadsC) {
  for (Op oa : kOps) {
    Case c;
    c.M = 20;
    c.N = 9;
    c.K = 11;
    c.opA = oa;
    c.opB = oa;
    c.alpha = 2.0;
    c.beta = 0.0;
    c.nan_c = true;
    c.ep = oa == Op::N ? Epilogue::BiasSigmoid : Epilogue::None;
    run_variant_both<float>(GetParam(), c);
  }
}

TEST_P(GemmVariant, InPlacePadded) {
  Case c;
  c.M = 19;
  c.N = 23;
  c.K = 40;
  c.opB = Op::T;
  c.alpha = 0.5;
  c.beta = 1.0;
  c.ep = Epilogue::Bias;
  c.pad = 5;
  c.in_place = true;
  run_variant_both<float>(GetParam(), c);
}

// On a created stream (variant 0 sets it on its handle; variant 4 keeps split-K scratch per stream).
TEST_P(GemmVariant, NonDefaultStream) {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  Case c;
  c.M = 10;
  c.N = 33;
  c.K = 300;
  c.opB = Op::T;
  c.beta = 0.25;
  Problem<float> p(c, 77);
  run(p, [&](const GemmArgs<float>& g) {
    nn::gemm(GetParam(), g, stream);
    if (GetParam() == 4) nn::gemm_tuning::gemm_warptile_with_config(3, 4, g, stream);  // split-K
    CUDA_CHECK(cudaStreamSynchronize(stream));
  });
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Saturating inputs: the sigmoid must give 0 and 1, never NaN.
TEST_P(GemmVariant, SigmoidSaturates) {
  Case c;
  c.M = 6;
  c.N = 5;
  c.K = 3;
  c.alpha = 200.0;
  c.ep = Epilogue::BiasSigmoid;
  run_variant_both<float>(GetParam(), c);
}

// The trainer's shapes, scaled down so the emulator stays fast: output layer 10 x B x H,
// hidden layer H x B x 784 (forward, sigmoid), dW1 H x 784 x B (op(B) = T), dA1 H x B x 10
// (op(A) = T), dW2 10 x H x B.
TEST_P(GemmVariant, TrainerShapes) {
  struct S { int M, N, K; Op oa, ob; Epilogue ep; };
  const S shapes[] = {{10, 61, 512, Op::N, Op::N, Epilogue::Bias},
                      {96, 61, 784, Op::N, Op::N, Epilogue::BiasSigmoid},
                      {784, 96, 61, Op::N, Op::T, Epilogue::None},
                      {96, 61, 10, Op::T, Op::N, Epilogue::None},
                      {10, 96, 61, Op::N, Op::T, Epilogue::None}};
  int n = 0;
  for (const S& s : shapes) {
    Case c;
    c.M = s.M;
    c.N = s.N;
    c.K = s.K;
    c.opA = s.oa;
    c.opB = s.ob;
    c.ep = s.ep;
    c.beta = n == 3 ? 0.5 : 0.0;
    // One double case per variant keeps the emulator run short; float covers all shapes.
    if (n == 0) run_variant<double>(GetParam(), c, 300 + n);
    run_variant<float>(GetParam(), c, 300 + n);
    ++n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GemmVariant, ::testing::Range(0, nn::kGemmVariants),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(nn::gemm_variant_name(i.param));
                         });

}  // namespace
