// Tests of nn::gemm's dispatcher (kernels/gemm/gemm.cu): column chunking of wide problems,
// argument validation, and the variant registry (names, availability, the --gemm help).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/device_buffer.h"
#include "gemm/gemm.h"
#include "gemm_problem.h"

namespace {

using gemm_test::Case;
using gemm_test::Problem;
using gemm_test::run;
using gemm_test::run_variant;
using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

// ---- the dispatcher's contract ----------------------------------------------------------

// Wider than one launch's gridDim.y allows in the narrowest variant: the dispatcher
// splits the columns (for every variant; the fast one is used here). op(B) = T checks that
// the chunks step along B's rows (op N steps like C and D), bias + beta the epilogue.
TEST(GemmApi, WideProblemsRunInColumnChunks) {
  {
    Case c;
    c.opB = Op::T;
    c.M = 2;
    c.N = nn::gemm_detail::kMaxColumnsPerLaunch + 37;
    c.K = 3;
    c.alpha = 1.5;
    c.beta = 0.5;
    c.ep = Epilogue::Bias;
    run_variant<float>(nn::gemm_default_variant(), c, 7);
  }
}

// Variant numbers are permanent (checkpoint fingerprints and --gemm N store them): the first
// five keep their names forever, whatever is added after them (kernels/gemm/README.md).
TEST(GemmApi, NamesAndAvailability) {
  const char* names[] = {"cublas", "naive", "tiled", "regblock", "warptile"};
  ASSERT_GE(nn::kGemmVariants, 5);
  for (int v = 0; v < 5; ++v) EXPECT_STREQ(nn::gemm_variant_name(v), names[v]);
  EXPECT_STREQ(nn::gemm_variant_name(nn::kGemmVariants), "unknown");
  EXPECT_STREQ(nn::gemm_variant_name(-1), "unknown");
  EXPECT_EQ(nn::gemm_default_variant(), 4);
  // 0..4 in both builds (cuBLAS is emulated on OpenBLAS in the emulator build).
  for (int v = 0; v < 5; ++v) EXPECT_TRUE(nn::gemm_variant_available(v));
  EXPECT_FALSE(nn::gemm_variant_available(-1));
  EXPECT_FALSE(nn::gemm_variant_available(nn::kGemmVariants));
}

// The registry (kernels/gemm/variants.h): one row per number, names unique, and the --gemm help
// of nn_train built from it, unchanged for 0..4.
TEST(GemmApi, RegistryAndHelp) {
  const std::string help = nn::gemm_variants_help();
  EXPECT_EQ(help.rfind("0 cuBLAS (emulator: on OpenBLAS), 1 naive, 2 tiled, 3 regblock, 4 warptile", 0), 0u)
      << help;
  for (int v = 0; v < nn::kGemmVariants; ++v) {
    const nn::gemm_detail::VariantInfo& row = nn::gemm_detail::kVariants[v];
    EXPECT_EQ(row.number, v);
    EXPECT_STREQ(row.name, nn::gemm_variant_name(v));
    EXPECT_TRUE(nn::gemm_variant_available(v));
    EXPECT_EQ(row.fused, nn::gemm_has_fused_extras(v));
    EXPECT_NE(help.find(std::to_string(v) + " " + row.help), std::string::npos) << help;
    for (int w = 0; w < v; ++w) EXPECT_STRNE(row.name, nn::gemm_variant_name(w));
  }
}

TEST(GemmApi, InvalidArgumentsThrow) {
  nn::DeviceBuffer<float> buf(64 * 64);
  float* p = buf.get();
  // The valid call computes: its operands must hold data (the emulator's initcheck).
  CUDA_CHECK(cudaMemset(p, 0, 64 * 64 * sizeof(float)));
  GemmArgs<float> ok;
  ok.M = 8;
  ok.N = 4;
  ok.K = 6;
  ok.A = p;
  ok.lda = 8;
  ok.B = p + 1000;
  ok.ldb = 6;
  ok.C = p + 2000;
  ok.ldc = 8;
  ok.D = p + 3000;
  ok.ldd = 8;
  EXPECT_NO_THROW(nn::gemm(1, ok));
  CUDA_CHECK(cudaDeviceSynchronize());

  auto expect_throw = [&](const char* what, auto mutate, int variant = 1) {
    GemmArgs<float> a = ok;
    mutate(a);
    EXPECT_THROW(nn::gemm(variant, a), std::invalid_argument) << what;
  };
  expect_throw("M = 0", [](auto& a) { a.M = 0; });
  expect_throw("N < 0", [](auto& a) { a.N = -3; });
  expect_throw("K = 0", [](auto& a) { a.K = 0; });
  expect_throw("lda < M (op N)", [](auto& a) { a.lda = 7; });
  expect_throw("lda < K (op T)", [](auto& a) { a.opA = Op::T; a.lda = 5; });
  expect_throw("ldb < K (op N)", [](auto& a) { a.ldb = 5; });
  expect_throw("ldb < N (op T)", [](auto& a) { a.opB = Op::T; a.ldb = 3; });
  expect_throw("ldd < M", [](auto& a) { a.ldd = 7; });
  expect_throw("ldc < M with beta != 0", [](auto& a) { a.beta = 1; a.ldc = 7; });
  expect_throw("null A", [](auto& a) { a.A = nullptr; });
  expect_throw("null B", [](auto& a) { a.B = nullptr; });
  expect_throw("null D", [](auto& a) { a.D = nullptr; });
  expect_throw("null C with beta != 0", [](auto& a) { a.beta = 0.5f; a.C = nullptr; });
  expect_throw("null bias", [](auto& a) { a.epilogue = Epilogue::Bias; });
  expect_throw("in place with ldc != ldd", [](auto& a) { a.beta = 1; a.C = a.D; a.ldd = 9; });
  expect_throw("D aliases A", [](auto& a) { a.D = const_cast<float*>(a.A); });
  expect_throw("variant -1", [](auto&) {}, -1);
  expect_throw("variant kGemmVariants", [](auto&) {}, nn::kGemmVariants);
  // cuBLAS gets the same validation before it is called.
  expect_throw("lda < M, cuBLAS", [](auto& a) { a.lda = 7; }, 0);
  expect_throw("null C with beta != 0, cuBLAS", [](auto& a) { a.beta = 0.5f; a.C = nullptr; }, 0);
  EXPECT_NO_THROW(nn::gemm(0, ok));
  // Null C and a bad ldc are fine when beta == 0: C is not used.
  GemmArgs<float> a = ok;
  a.C = nullptr;
  a.ldc = 0;
  EXPECT_NO_THROW(nn::gemm(4, a));
  EXPECT_THROW(nn::gemm_tuning::gemm_warptile_with_config(nn::gemm_tuning::kWarptileConfigs, 1, ok),
               std::invalid_argument);
  EXPECT_THROW(nn::gemm_tuning::gemm_warptile_with_config(0, -1, ok), std::invalid_argument);
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

// gemm_release_workspaces() before a cudaDeviceReset, then every variant works again: the reset
// frees what variant 0's cuBLAS handle and variant 4's split-K scratch point at, so both must be
// let go first. On an H200 a handle kept across a reset makes the next cublasSgemm fail (status
// 13) and a later kernel fault with an illegal address (docs/testing.md, "On a GPU"); the emulator
// refuses such a handle, so without the release this test fails in both builds.
TEST(GemmApi, EveryVariantWorksAfterReleaseAndDeviceReset) {
  Case c;
  c.M = 67;
  c.N = 45;
  c.K = 512;
  // Variant 4 with 3 k-slices, so that the stream has split-K scratch (the plan may not split
  // on a device with few SMs, such as the emulator's).
  const auto split_k = [&](unsigned seed) {
    Problem<float> p(c, seed);
    run(p, [](const GemmArgs<float>& g) { nn::gemm_tuning::gemm_warptile_with_config(1, 3, g); });
  };
  for (int v = 0; v < nn::kGemmVariants; ++v) run_variant<float>(v, c, 3);
  split_k(3);
  nn::gemm_release_workspaces();
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  for (int v = 0; v < nn::kGemmVariants; ++v) run_variant<float>(v, c, 4);
  split_k(4);
  nn::gemm_release_workspaces();  // twice in a row is harmless
  nn::gemm_release_workspaces();
  run_variant<float>(0, c, 5);
}
