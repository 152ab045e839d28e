// The GEMM dispatcher: argument validation, the registry's names and help (gemm/variants.h),
// the launcher table built from it, column chunking, and the gemm_tuning entry point. The
// variants themselves are kernels/gemm/N_name.cu (0 = cuBLAS: 0_cublas.cu).
// Tested by tests/kernels/test_gemm.cpp; timed by bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include <stdexcept>
#include <string>

namespace nn {

namespace {
[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("gemm: " + what);
}

// The launchers, indexed by variant number: one entry per registry row.
template <class T>
using Launcher = void (*)(const GemmArgs<T>&, cudaStream_t);
#define NN_GEMM_LAUNCHER(n, name, step, help) &gemm_detail::gemm_##name<T>,
template <class T>
constexpr Launcher<T> kLaunchers[kGemmVariants] = {NN_GEMM_VARIANTS(NN_GEMM_LAUNCHER)};
#undef NN_GEMM_LAUNCHER
}  // namespace

const char* gemm_variant_name(int v) {
  return (v >= 0 && v < kGemmVariants) ? gemm_detail::kVariants[v].name : "unknown";
}

bool gemm_variant_available(int v) { return v >= 0 && v < kGemmVariants; }

std::string gemm_variants_help() {
  std::string s;
  for (const gemm_detail::VariantInfo& v : gemm_detail::kVariants) {
    if (!s.empty()) s += ", ";
    s += std::to_string(v.number) + " " + v.help;
  }
  return s;
}

std::string gemm_fused_step_variants_text() {
  std::string s, last;
  for (const gemm_detail::VariantInfo& v : gemm_detail::kVariants) {
    if (!v.fused) continue;
    if (!last.empty()) s += (s.empty() ? "" : ", ") + last;
    last = std::to_string(v.number);
  }
  return s.empty() ? last : s + " and " + last;
}

namespace gemm_detail {

template <class T>
void validate(const GemmArgs<T>& a) {
  if (a.M < 1 || a.N < 1 || a.K < 1)
    bad("M, N, K must be >= 1 (got " + std::to_string(a.M) + ", " + std::to_string(a.N) + ", " +
        std::to_string(a.K) + ")");
  // Stored shapes: op(A) is M x K, so A is M x K (N) or K x M (T); likewise B.
  const int a_rows = a.opA == Op::N ? a.M : a.K;
  const int b_rows = a.opB == Op::N ? a.K : a.N;
  if (a.lda < a_rows) bad("lda " + std::to_string(a.lda) + " < rows of A " + std::to_string(a_rows));
  if (a.ldb < b_rows) bad("ldb " + std::to_string(a.ldb) + " < rows of B " + std::to_string(b_rows));
  if (a.ldd < a.M) bad("ldd " + std::to_string(a.ldd) + " < M " + std::to_string(a.M));
  if (!a.A || !a.B || !a.D) bad("A, B and D must not be null");
  if (a.D == a.A || a.D == a.B) bad("D must not alias A or B");
  if (a.epilogue == Epilogue::Step) {
    if (!a.C) bad("the step epilogue needs C (the weights)");
    if (a.ldc < a.M) bad("ldc " + std::to_string(a.ldc) + " < M " + std::to_string(a.M));
    if (a.C == a.D && a.ldc != a.ldd) bad("in-place C == D needs ldc == ldd");
  }
  if (a.beta != T(0)) {
    if (!a.C) bad("C must not be null when beta != 0");
    if (a.ldc < a.M) bad("ldc " + std::to_string(a.ldc) + " < M " + std::to_string(a.M));
    if (a.C == a.D && a.ldc != a.ldd) bad("in-place C == D needs ldc == ldd");
  }
  if ((a.epilogue == Epilogue::Bias || a.epilogue == Epilogue::BiasSigmoid) && !a.bias)
    bad("the bias epilogue needs a bias pointer");
}

}  // namespace gemm_detail

template <class T>
void gemm(int variant, const GemmArgs<T>& args, cudaStream_t s) {
  if (variant < 0 || variant >= kGemmVariants)
    bad("unknown variant " + std::to_string(variant) + " (0.." + std::to_string(kGemmVariants - 1) + ")");
  gemm_detail::validate(args);
  if (!gemm_has_fused_extras(variant) && args.epilogue == Epilogue::Step)
    bad(std::string("variant ") + std::to_string(variant) + " (" + gemm_variant_name(variant) +
        ") has no step epilogue (" + gemm_fused_step_variants_text() + " have it)");
  GemmArgs<T> a = args;
  // BLAS semantics: C is not read at all (but the step epilogue reads the weights).
  if (a.beta == T(0) && a.epilogue != Epilogue::Step) a.C = nullptr;
  // Every variant puts N on gridDim.y (at most 65535 blocks), the narrowest with 8 columns
  // per block: wider problems run as column chunks (columns of D, C and op(B) are
  // independent; the bias is per row).
  constexpr int kMaxN = gemm_detail::kMaxColumnsPerLaunch;
  if (a.N > kMaxN) {
    for (int j0 = 0; j0 < a.N; j0 += kMaxN) {
      GemmArgs<T> c = a;
      c.N = a.N - j0 < kMaxN ? a.N - j0 : kMaxN;
      c.B = a.opB == Op::N ? a.B + std::size_t(j0) * a.ldb : a.B + j0;
      if (c.C) c.C = a.C + std::size_t(j0) * a.ldc;
      c.D = a.D + std::size_t(j0) * a.ldd;
      gemm(variant, c, s);
    }
    return;
  }
  kLaunchers<T>[variant](a, s);
}

namespace gemm_tuning {
template <class T>
void gemm_warptile_with_config(int cfg, int splits, const GemmArgs<T>& args, cudaStream_t s) {
  if (cfg < 0 || cfg >= kWarptileConfigs) bad("unknown warptile config " + std::to_string(cfg));
  if (splits < 0) bad("negative split count " + std::to_string(splits));
  gemm_detail::validate(args);
  GemmArgs<T> a = args;
  if (a.beta == T(0) && a.epilogue != Epilogue::Step) a.C = nullptr;
  gemm_detail::warptile_run(a, s, cfg, splits);
}

void gemm_tf32_with(int cfg, int products, const GemmArgs<float>& args, cudaStream_t s, int splits) {
  if (cfg < -1 || cfg > kTf32Wgmma) bad("unknown tf32 config " + std::to_string(cfg));
  if (cfg == kTf32Wgmma && !tf32_wgmma_available())
    bad("tf32 config wgmma128x128 needs a GPU of compute capability 9.0 (H100, H200)");
  if (products != 1 && products != 3) bad("tf32 products must be 1 or 3, got " + std::to_string(products));
  if (splits < 0) bad("negative split count " + std::to_string(splits));
  gemm_detail::validate(args);
  GemmArgs<float> a = args;
  if (a.beta == 0.0f && a.epilogue != Epilogue::Step) a.C = nullptr;
  if (a.N > gemm_detail::kMaxColumnsPerLaunch) bad("gemm_tf32_with: N above kMaxColumnsPerLaunch");
  gemm_detail::tf32_run(a, s, cfg, products, splits);
}
}  // namespace gemm_tuning

#define NN_GEMM_INSTANTIATE(T)                                                        \
  template void gemm<T>(int, const GemmArgs<T>&, cudaStream_t);                       \
  template void gemm_detail::validate<T>(const GemmArgs<T>&);                         \
  template void gemm_tuning::gemm_warptile_with_config<T>(int, int, const GemmArgs<T>&, cudaStream_t);
NN_GEMM_INSTANTIATE(float)
NN_GEMM_INSTANTIATE(double)
#undef NN_GEMM_INSTANTIATE

}  // namespace nn
