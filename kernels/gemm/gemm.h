// GEMM for the trainer: D = alpha*op(A)*op(B) + beta*C, then a fused bias/sigmoid epilogue,
// column-major, behind one dispatcher with numbered variants (0 = cuBLAS, 1.. ours), listed in
// the registry gemm/variants.h. Tested by tests/kernels/test_gemm.cpp; timed by
// bench/gemm_bench.cpp (see bench/README.md); the variants and how to add one: README.md here.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include "gemm/variants.h"

namespace nn {

enum class Op { N, T };
// Fused after v = alpha*op(A)op(B) + beta*C: Bias / BiasSigmoid: D(i,j) = v + bias[i], then the
// optional sigmoid. Step (variants 4 and 5 only; the fused training step's dW1 GEMM): v is a gradient,
// C the weights it belongs to, and D(i,j) = C(i,j) - step_lr * v (C == D: the SGD step in place,
// the same two roundings as gemm + ops sgd_update; C is read even when beta == 0).
enum class Epilogue { None, Bias, BiasSigmoid, Step };

template <class T>
struct GemmArgs {
  Op opA = Op::N, opB = Op::N;
  int M = 0, N = 0, K = 0;  // D is M x N, op(A) is M x K, op(B) is K x N
  T alpha = 1; const T* A = nullptr; int lda = 0; const T* B = nullptr; int ldb = 0;
  T beta = 0;  const T* C = nullptr; int ldc = 0;  // C may be null when beta == 0; C may equal D (in place)
  T* D = nullptr; int ldd = 0;
  Epilogue epilogue = Epilogue::None; const T* bias = nullptr;  // bias has M entries
  T step_lr = 0;  // Epilogue::Step's learning rate
};

// The registry's rows as data (gemm/variants.h; gemm_detail because callers use the functions
// below): number, name, --help text, fused (has the fused step's Epilogue::Step).
namespace gemm_detail {
struct VariantInfo {
  int number;
  const char* name;
  const char* help;
  bool fused;
};
#define NN_GEMM_STEP_fused true
#define NN_GEMM_STEP_plain false
#define NN_GEMM_INFO(n, name, step, help) VariantInfo{n, #name, help, NN_GEMM_STEP_##step},
inline constexpr VariantInfo kVariants[] = {NN_GEMM_VARIANTS(NN_GEMM_INFO)};
#undef NN_GEMM_INFO
constexpr bool numbered_in_order() {
  for (int i = 0; i < int(std::size(kVariants)); ++i)
    if (kVariants[i].number != i) return false;
  return true;
}
static_assert(numbered_in_order(), "gemm/variants.h: rows must be numbered 0, 1, 2, ... in order");
static_assert(NN_GEMM_DEFAULT_VARIANT >= 0 && NN_GEMM_DEFAULT_VARIANT < int(std::size(kVariants)) &&
                  kVariants[NN_GEMM_DEFAULT_VARIANT].fused,
              "gemm/variants.h: the default variant must be a fused row");
}  // namespace gemm_detail

// 0 = cuBLAS (emulated on OpenBLAS in the CPU build), 1.. ours; numbers are permanent.
constexpr int kGemmVariants = int(std::size(gemm_detail::kVariants));
static_assert(kGemmVariants < 255, "checkpoint fingerprints store 255 for --device cpu (docs/checkpoint.md)");
const char* gemm_variant_name(int v);  // "cublas", "naive", "tiled", "regblock", "warptile", ...
bool gemm_variant_available(int v);    // a row of the registry (every row runs in both builds)
// The --gemm help of nn_train: "0 cuBLAS (emulator: on OpenBLAS), 1 naive, 2 tiled, ...".
std::string gemm_variants_help();
// Validates args (std::invalid_argument on M,N,K < 1, bad ld, null pointers), dispatches.
template <class T>
void gemm(int variant, const GemmArgs<T>& a, cudaStream_t s = 0);
constexpr int gemm_default_variant() { return NN_GEMM_DEFAULT_VARIANT; }  // variants.h
// The registry's fused rows: the variants with the fused step's Epilogue::Step.
constexpr bool gemm_has_fused_extras(int v) {
  return v >= 0 && v < int(std::size(gemm_detail::kVariants)) && gemm_detail::kVariants[v].fused;
}
// Those variants' numbers for a message: "4 and 5".
std::string gemm_fused_step_variants_text();
// Frees the split-K scratch that variant 4 caches per stream and destroys variant 0's cuBLAS
// handle. Call it before cudaDeviceReset, which frees device memory behind their backs (a
// handle used after a reset fails on a GPU, and the emulator refuses it); errors are
// ignored, since a reset often follows a fault.
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
// Variant 5 (float only): tile configuration cfg (-1: chosen per shape, tf32_plan) and products
// 3 (the TF32 compensation, what gemm(5, ...) runs) or 1 (plain TF32, for comparison only);
// splits >= 1 forces that many k-slices (1: no split-K, the same bits in every configuration),
// 0 lets the plan choose (what gemm(5, ...) does).
constexpr int kTf32Configs = 4;
// One more configuration past those: the 128x128 kernel on Hopper's warpgroup MMA
// (5_tf32x3_wgmma.cu), only where tf32_wgmma_available() (compute capability 9.0: H100,
// H200; always in the emulator). tf32_plan chooses it only when NN_TF32_WGMMA=1 is set (for
// M, N and K of 64 or more); its bits differ from the others' (partial sums every 32 k, not 16).
constexpr int kTf32Wgmma = kTf32Configs;
bool tf32_wgmma_available();
const char* tf32_config_name(int cfg);  // "128x128", "64x64", "32x32", "128x64", "wgmma128x128"
void gemm_tf32_with(int cfg, int products, const GemmArgs<float>& a, cudaStream_t s = 0, int splits = 1);
}  // namespace gemm_tuning

// ---------------------------------------------------------------------------------------
// Internals shared by kernels/gemm/*.cu; not for callers.
namespace gemm_detail {

template <class T>
void validate(const GemmArgs<T>& a);  // throws std::invalid_argument

// gemm() runs wider problems as column chunks: gridDim.y <= 65535, 8 columns per block
// in the narrowest variant.
inline constexpr int kMaxColumnsPerLaunch = 65535 * 8;

// Launchers of the variants, one per registry row (gemm_NAME, defined in NUMBER_NAME.cu);
// arguments already validated and at most kMaxColumnsPerLaunch columns, C null when beta == 0.
#define NN_GEMM_DECLARE(n, name, step, help) \
  template <class T> void gemm_##name(const GemmArgs<T>& a, cudaStream_t s);
NN_GEMM_VARIANTS(NN_GEMM_DECLARE)
// Destroys variant 0's process-wide cuBLAS handle (the next call creates a new one).
void release_cublas_handle();
#undef NN_GEMM_DECLARE
// Variant 4 with a forced tile configuration: cfg < 0: chosen per shape; splits == 0: chosen
// per shape (see 4_warptile_plan.cu). gemm_warptile(a, s) is warptile_run(a, s, -1, 0).
template <class T> void warptile_run(const GemmArgs<T>& a, cudaStream_t s, int cfg, int splits);
// Variant 5 with a forced configuration (cfg < 0: tf32_plan), 1 or 3 products, and k-slices
// (0: planned per shape).
void tf32_run(const GemmArgs<float>& a, cudaStream_t s, int cfg, int products, int splits);
void tf32_wgmma_run(const GemmArgs<float>& a, cudaStream_t s, int products, int splits);  // kTf32Wgmma
int tf32_plan(int M, int N, int K);  // the configuration gemm(5, ...) runs at M x N x K

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
// Epilogue::Step is not handled here: variant 4 applies it where it holds C.
template <class T>
__host__ __device__ __forceinline__ T apply_epilogue(T v, Epilogue ep, const T* bias, int i) {
  if (ep == Epilogue::Bias || ep == Epilogue::BiasSigmoid) v += bias[i];
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
