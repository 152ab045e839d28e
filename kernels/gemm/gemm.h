// GEMM for the trainer: D = alpha*op(A)*op(B) + beta*C, then a fused bias/sigmoid epilogue,
// column-major, behind one dispatcher with numbered variants (0 = cuBLAS, 1..4 ours).
// Tested by tests/kernels/test_gemm.cpp; timed by bench/gemm_bench.cpp (see bench/README.md).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

namespace nn {

enum class Op { N, T };
enum class Epilogue { None, Bias, BiasSigmoid };  // fused after alpha*op(A)op(B)+beta*C: D(i,j) += bias[i], then optional sigmoid

template <class T>
struct GemmArgs {
  Op opA = Op::N, opB = Op::N;
  int M = 0, N = 0, K = 0;  // D is M x N, op(A) is M x K, op(B) is K x N
  T alpha = 1; const T* A = nullptr; int lda = 0; const T* B = nullptr; int ldb = 0;
  T beta = 0;  const T* C = nullptr; int ldc = 0;  // C may be null when beta == 0; C may equal D (in place)
  T* D = nullptr; int ldd = 0;
  Epilogue epilogue = Epilogue::None; const T* bias = nullptr;  // bias has M entries
};

constexpr int kGemmVariants = 5;  // 0 = cuBLAS (emulated on OpenBLAS in the CPU build), 1..4 ours
const char* gemm_variant_name(int v);  // "cublas", "naive", "tiled", "regblock", "warptile"
bool gemm_variant_available(int v);    // 0..4 (true in both builds)
// Validates args (std::invalid_argument on M,N,K < 1, bad ld, null pointers), dispatches.
template <class T>
void gemm(int variant, const GemmArgs<T>& a, cudaStream_t s = 0);
int gemm_default_variant();  // the best of ours: 4
// Frees the split-K scratch that variant 4 caches per stream. Call it before cudaDeviceReset,
// which frees device memory behind the cache's back (as cuBLAS handles must be destroyed
// first); errors are ignored, since a reset often follows a fault.
void gemm_release_workspaces();

// Tile configurations of variant 4, exposed so the bench can compare them. gemm(4, ...)
// picks a plan per shape (warptile_plan); gemm_warptile_with_config runs one explicitly.
namespace gemm_tuning {
constexpr int kWarptileConfigs = 4;
const char* warptile_config_name(int cfg);  // "128x64", "64x64", "64x32", "16x64" (BM x BN)
struct WarptilePlan {
  int cfg, splits;  // splits > 1: split-K
};
WarptilePlan warptile_plan(int M, int N, int K);  // what gemm(4, ...) runs on the current device
// splits >= 1 forces that many k-slices (1: no split-K; more: slices reduced in a fixed
// order, so the result is deterministic); splits == 0 lets the heuristic choose.
template <class T>
void gemm_warptile_with_config(int cfg, int splits, const GemmArgs<T>& a, cudaStream_t s = 0);
}  // namespace gemm_tuning

// ---------------------------------------------------------------------------------------
// Internals shared by kernels/gemm/*.cu; not for callers.
namespace gemm_detail {

template <class T>
void validate(const GemmArgs<T>& a);  // throws std::invalid_argument

// gemm() runs wider problems as column chunks: gridDim.y <= 65535, 8 columns per block
// in the narrowest variant.
inline constexpr int kMaxColumnsPerLaunch = 65535 * 8;

// Launchers of the variants; arguments already validated, C null when beta == 0.
template <class T> void gemm_naive(const GemmArgs<T>& a, cudaStream_t s);
template <class T> void gemm_tiled(const GemmArgs<T>& a, cudaStream_t s);
template <class T> void gemm_regblock(const GemmArgs<T>& a, cudaStream_t s);
// cfg < 0: chosen per shape; splits == 0: chosen per shape (see 4_warptile.cu).
template <class T> void gemm_warptile(const GemmArgs<T>& a, cudaStream_t s, int cfg = -1, int splits = 0);

// Calls f.template operator()<opA, opB>() (f is a C++20 template lambda): each variant's
// kernels are templated on the two ops, so the loops that decide coalescing are resolved at
// compile time.
template <class F>
inline void with_ops(Op opA, Op opB, F&& f) {
  if (opA == Op::N) {
    if (opB == Op::N) f.template operator()<Op::N, Op::N>();
    else f.template operator()<Op::N, Op::T>();
  } else {
    if (opB == Op::N) f.template operator()<Op::T, Op::N>();
    else f.template operator()<Op::T, Op::T>();
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Element (r, c) of op(X) where X is stored column-major with leading dimension ld.
template <Op O, class T>
__host__ __device__ __forceinline__ const T* op_ptr(const T* X, int ld, int r, int c) {
  return O == Op::N ? X + r + static_cast<std::size_t>(c) * ld
                    : X + c + static_cast<std::size_t>(r) * ld;
}

template <class T>
__host__ __device__ __forceinline__ T sigmoid(T v) {
  // 1/(1+e^-v) is safe at both ends: e^-v -> inf gives 0, e^-v -> 0 gives 1.
  if constexpr (std::is_same_v<T, float>) return 1.0f / (1.0f + expf(-v));
  else return 1.0 / (1.0 + exp(-v));
}

// bias and sigmoid, applied to v = alpha*acc + beta*c (that part is done by the caller).
template <class T>
__host__ __device__ __forceinline__ T apply_epilogue(T v, Epilogue ep, const T* bias, int i) {
  if (ep != Epilogue::None) v += bias[i];
  if (ep == Epilogue::BiasSigmoid) v = sigmoid(v);
  return v;
}

// The common tail of the simple variants: alpha*acc (+ beta*C when C is given), then the
// epilogue. C is null exactly when beta == 0, so a NaN-filled C never leaks into D.
template <class T>
__host__ __device__ __forceinline__ T finish(T acc, T alpha, T beta, const T* c, Epilogue ep,
                                             const T* bias, int i) {
  T v = alpha * acc;
  if (c) v += beta * *c;
  return apply_epilogue(v, ep, bias, i);
}

}  // namespace gemm_detail
}  // namespace nn
