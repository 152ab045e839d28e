// The GEMM dispatcher: argument validation, variant names, and variant 0 (cuBLAS: one lazily
// created handle plus a small bias/sigmoid epilogue kernel; in the emulator build the emulated
// cuBLAS of sim, computed by the host's OpenBLAS).
// Tested by tests/kernels/test_gemm.cpp; timed by bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"

#include <cublas_v2.h>

namespace nn {

namespace {
constexpr const char* kNames[kGemmVariants] = {"cublas", "naive", "tiled", "regblock", "warptile"};

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("gemm: " + what);
}
}  // namespace

const char* gemm_variant_name(int v) {
  return (v >= 0 && v < kGemmVariants) ? kNames[v] : "unknown";
}

bool gemm_variant_available(int v) { return v >= 0 && v < kGemmVariants; }

int gemm_default_variant() { return 4; }

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
  if (a.beta != T(0)) {
    if (!a.C) bad("C must not be null when beta != 0");
    if (a.ldc < a.M) bad("ldc " + std::to_string(a.ldc) + " < M " + std::to_string(a.M));
    if (a.C == a.D && a.ldc != a.ldd) bad("in-place C == D needs ldc == ldd");
  }
  if (a.epilogue != Epilogue::None && !a.bias) bad("the bias epilogue needs a bias pointer");
}

}  // namespace gemm_detail

namespace {

void cublas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw InternalError(std::string("gemm (cuBLAS): ") + what + " failed with status " +
                        std::to_string(static_cast<int>(st)));
}

// One handle per process, created on first use. Deliberately never destroyed: at static
// destruction the CUDA runtime may already be gone, and the OS reclaims it anyway.
cublasHandle_t cublas_handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    cublas_check(cublasCreate(&x), "cublasCreate");
    return x;
  }();
  return h;
}

// cuBLAS has no fused bias/sigmoid, so variant 0 pays one more pass over D: threadIdx.x
// runs along M, the contiguous dimension, so each warp touches consecutive addresses.
template <class T>
__global__ void gemm_bias_epilogue_kernel(int M, int N, T* D, int ldd, const T* bias, bool sig) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  T& d = D[i + static_cast<std::size_t>(j) * ldd];
  T v = d + bias[i];
  d = sig ? gemm_detail::sigmoid(v) : v;
}

template <class T>
void gemm_bias_epilogue(int M, int N, T* D, int ldd, const T* bias, bool sig, cudaStream_t s) {
  NN_RANGE("gemm_bias_epilogue");
  const dim3 block(32, 8);
  const dim3 grid((M + 31) / 32, (N + 7) / 8);
  gemm_bias_epilogue_kernel<T><<<grid, block, 0, s>>>(M, N, D, ldd, bias, sig);
  CHECK_LAUNCH("gemm_bias_epilogue_kernel");
}

template <class T>
void gemm_cublas(const GemmArgs<T>& a, cudaStream_t s) {
  NN_RANGE("gemm_cublas");
  cublasHandle_t h = cublas_handle();
  cublas_check(cublasSetStream(h, s), "cublasSetStream");
  // cuBLAS computes D = alpha*op(A)op(B) + beta*D; with beta == 0 it does not read D.
  if (a.C && a.C != a.D)
    CUDA_CHECK(cudaMemcpy2DAsync(a.D, sizeof(T) * a.ldd, a.C, sizeof(T) * a.ldc, sizeof(T) * a.M,
                                 a.N, cudaMemcpyDeviceToDevice, s));
  const cublasOperation_t ta = a.opA == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t tb = a.opB == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T;
  const T beta = a.C ? a.beta : T(0);
  if constexpr (std::is_same_v<T, float>)
    cublas_check(cublasSgemm(h, ta, tb, a.M, a.N, a.K, &a.alpha, a.A, a.lda, a.B, a.ldb, &beta,
                             a.D, a.ldd), "cublasSgemm");
  else
    cublas_check(cublasDgemm(h, ta, tb, a.M, a.N, a.K, &a.alpha, a.A, a.lda, a.B, a.ldb, &beta,
                             a.D, a.ldd), "cublasDgemm");
  if (a.epilogue != Epilogue::None)
    gemm_bias_epilogue(a.M, a.N, a.D, a.ldd, a.bias, a.epilogue == Epilogue::BiasSigmoid, s);
}

}  // namespace

template <class T>
void gemm(int variant, const GemmArgs<T>& args, cudaStream_t s) {
  if (variant < 0 || variant >= kGemmVariants)
    bad("unknown variant " + std::to_string(variant) + " (0.." + std::to_string(kGemmVariants - 1) + ")");
  gemm_detail::validate(args);
  GemmArgs<T> a = args;
  if (a.beta == T(0)) a.C = nullptr;  // BLAS semantics: C is not read at all
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
  switch (variant) {
    case 0: gemm_cublas(a, s); break;
    case 1: gemm_detail::gemm_naive(a, s); break;
    case 2: gemm_detail::gemm_tiled(a, s); break;
    case 3: gemm_detail::gemm_regblock(a, s); break;
    case 4: gemm_detail::gemm_warptile(a, s); break;
  }
}

namespace gemm_tuning {
template <class T>
void gemm_warptile_with_config(int cfg, int splits, const GemmArgs<T>& args, cudaStream_t s) {
  if (cfg < 0 || cfg >= kWarptileConfigs) bad("unknown warptile config " + std::to_string(cfg));
  if (splits < 0) bad("negative split count " + std::to_string(splits));
  gemm_detail::validate(args);
  GemmArgs<T> a = args;
  if (a.beta == T(0)) a.C = nullptr;
  gemm_detail::gemm_warptile(a, s, cfg, splits);
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
