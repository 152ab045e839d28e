// GEMM variant 5: the tensor cores at FP32 accuracy. Each FP32 operand x is split into a TF32
// "big" part, big = tf32(x), and a TF32 "small" remainder, small = tf32(x - big); the product
// of two such pairs is taken as small_a*big_b + big_a*small_b + big_a*big_b (the small*small
// term, at most 2^-24 of the product, is dropped): three TF32 tensor-core products. Each k-tile
// (16) is summed on the tensor cores from zero and added to an FP32 running sum on the CUDA
// cores, which rounds to nearest (the tensor cores' own accumulation does not). One product
// alone (kProducts = 1) is plain TF32, kept for comparison and never the default.
// Tiles are staged through shared memory with the next k-tile's global loads in flight
// (registers, double-buffered shared memory: one barrier per k-tile); the MMAs are PTX's
// mma.sync m16n8k8 TF32 with its documented fragments (gemm/mma_tf32.h), loaded from shared
// memory with plain loads and rounded with cvt.rn.tf32 (one instruction on sm_90), and the
// epilogue (bias, sigmoid, the fused step's SGD update) works on the fragments in registers.
// WMMA's m16n16k8 TF32 fragments are slower: nvcc makes each fragment load a generic 64-bit
// load with its own address arithmetic and each TF32 rounding four integer instructions, so
// only 1 instruction in 9 is an MMA and the tensor pipe is 38% busy (kernels/gemm/README.md,
// "Why mma.sync, not WMMA").
//
// Every output element sums the same k-tiles in increasing k order in every tile
// configuration (BK is 16 in each), so the configuration never changes a bit of the result;
// split-K (gridDim.z slices, the plan's choice for long K) sums the slices in a fixed order.
// float only: double (no TF32) runs variant 4's kernel. Also the fused step's two extras
// (Epilogue::Step), as in variant 4. Run through nn::gemm(5, ...) and
// gemm_tuning::gemm_tf32_with; tested by tests/kernels/test_gemm_tf32x3.cu and every
// AllVariants test; the emulator implements mma_tf32.h's two primitives (sim/include/mma.h).
#include "gemm/gemm.h"

#include <cstdint>
#include <type_traits>

#include "common/check.h"
#include "common/nvtx.h"
#include "common/vector_access.h"
#include "gemm/5_tf32x3.h"
#include "gemm/5_tf32x3_device.h"
#include "gemm/mma_tf32.h"

namespace nn::gemm_detail {

namespace {

// Block tile BM x BN x BK, warp tile WM x WN (FM x FN MMA tiles of 16 x 8).
template <int BM_, int BN_, int BK_, int WM_, int WN_>
struct TcShape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
  static constexpr int FM = WM / 16, FN = WN / 8;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "whole m16n8k8 tiles");
  static_assert(BM % WM == 0 && BN % WN == 0, "warps tile the block");
};
template <int ID> struct TcCfg;
template <> struct TcCfg<0> : TcShape<128, 128, 16, 64, 32> {};  // 8 warps: big problems
template <> struct TcCfg<1> : TcShape<64, 64, 16, 32, 32> {};    // 4 warps
template <> struct TcCfg<2> : TcShape<32, 32, 16, 16, 16> {};    // 4 warps: small problems
template <> struct TcCfg<3> : TcShape<128, 64, 16, 64, 32> {};   // 4 warps, config 0's warp tile
// BK may also be 32 (the partial sums are still added every 16 k: the same bits), but on an
// H200 128x128 and 64x64 with BK = 32 are slower than with BK = 16 at 4096^3 and at the big
// trainer shapes, and within 4% elsewhere: the 32 staging registers cost 128x128 spills and
// 64x64 a block an SM.
constexpr int kTcConfigs = tf32x3::kConfigs;
template <int ID>
constexpr bool kTileAgrees = TcCfg<ID>::BM == tf32x3::kTileM[ID] && TcCfg<ID>::BN == tf32x3::kTileN[ID];
static_assert(kTileAgrees<0> && kTileAgrees<1> && kTileAgrees<2> && kTileAgrees<3>, "5_tf32x3.h's tiles");
// k-slices start at multiples of this (every BK divides it), so every configuration splits K
// at the same places and a slice count gives the same bits in all of them.
constexpr int kTcSliceAlign = 32;

// Which operands allow 16-byte loads (the epilogue stores one float at a time from the fragments).
enum TcVec { kTcVecA = 1, kTcVecB = 2 };

// One operand tile in shared memory as S[o][c]: c runs along the dimension that is contiguous
// in global memory (so global -> shared is a straight copy of 16-byte chunks), padded so that
// a fragment load's 32 lanes hit 32 different banks (for an m16n8k8 TF32 fragment, lanes step
// the row by lane/4 and the column by lane%4: a leading dimension of 8 mod 32 for the long
// tiles, 4 mod 32 for the k-contiguous ones: 20 or 36), rows staying 16-byte aligned. Element
// (c, o) of the operand is X[o*ld + c].
template <int CL, int OL, int NT, bool kKAlongC>
struct Stage {
  static constexpr int LD = CL + (kKAlongC ? 4 : 8);
  static constexpr int kSize = OL * LD;
  static constexpr int kChunks = CL * OL / (4 * NT);
  static_assert(kChunks >= 1 && kChunks * 4 * NT == CL * OL, "tile must split evenly");
  static_assert(kSize % 8 == 0, "each buffer keeps 32-byte alignment");
  float reg[kChunks * 4];

  __device__ __forceinline__ void load(const float* X, int ld, int c0, int c_end, int o0, int o_end, bool vec,
                                       int tid) {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      const int idx = tid + q * NT;
      tf32x3::load4(reg + q * 4, X, ld, c0 + (idx % (CL / 4)) * 4, c_end, o0 + idx / (CL / 4), o_end, vec);
    }
  }

  __device__ __forceinline__ void store(float* S, int tid) const {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      const int idx = tid + q * NT;
      const int c = (idx % (CL / 4)) * 4, o = idx / (CL / 4);
      store_vector(reinterpret_cast<float4*>(S + o * LD + c),
                   make_float4(reg[q * 4], reg[q * 4 + 1], reg[q * 4 + 2], reg[q * 4 + 3]));
    }
  }
};

// The two operand tiles of configuration S in shared memory, and the bytes of both buffers.
template <class S, Op OA, Op OB>
struct TcTiles {
  static constexpr bool kAcol = OA == Op::N, kBcol = OB == Op::N;
  using SA = Stage<kAcol ? S::BM : S::BK, kAcol ? S::BK : S::BM, S::kThreads, !kAcol>;
  using SB = Stage<kBcol ? S::BK : S::BN, kBcol ? S::BN : S::BK, S::kThreads, kBcol>;
  static constexpr int kBuf = SA::kSize + SB::kSize;
  static constexpr int kSmemBytes = 2 * kBuf * int(sizeof(float));
};

// This lane's fragments of one 8-deep k-step (As, Bs: the k-tile's operands in shared memory),
// each element split into big = tf32(x) and small = tf32(x - big) (small only for 3 products).
template <class S, bool kAcol, bool kBcol, class SA, class SB, int kProducts>
__device__ __forceinline__ void split_fragments(float (&a_big)[S::FM][4], float (&a_small)[S::FM][4],
                                                float (&b_big)[S::FN][2], float (&b_small)[S::FN][2], const float* As,
                                                const float* Bs, int kk, int wm, int wn, int g, int t4) {
#pragma unroll
  for (int i = 0; i < S::FM; ++i) {
    const int m = wm * S::WM + i * 16 + g;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int mm = m + (e & 1) * 8, k = kk + t4 + (e >> 1) * 4;
      const float x = kAcol ? As[k * SA::LD + mm] : As[mm * SA::LD + k];
      a_big[i][e] = tf32_rn(x);
      if constexpr (kProducts == 3) a_small[i][e] = tf32_rn(x - a_big[i][e]);
    }
  }
#pragma unroll
  for (int j = 0; j < S::FN; ++j) {
    const int n = wn * S::WN + j * 8 + g;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int k = kk + t4 + e * 4;
      const float x = kBcol ? Bs[n * SB::LD + k] : Bs[k * SB::LD + n];
      b_big[j][e] = tf32_rn(x);
      if constexpr (kProducts == 3) b_small[j][e] = tf32_rn(x - b_big[j][e]);
    }
  }
}

// One k-tile of a warp's products. They are summed on the tensor cores from zero into part (per
// k-step the two small correction products first, then the main one), and part is added to the
// running sum acc in FP32 on the CUDA cores, rounding to nearest. Accumulating the running sum
// itself on the tensor cores made the error grow with K: measured on an H200, 13x variant 4's
// at 4096^3 and 32x at dW1 (K = 3000), as a tensor core's sum does not round to nearest. Every
// part of the warp tile is live at once and each product is issued over all of them before the
// next: FM * FN independent MMA chains. With BK = 32 part is added every 16 k, as with BK = 16
// (the same bits).
template <class S, bool kAcol, bool kBcol, class SA, class SB, int kProducts>
__device__ __forceinline__ void multiply_tile(float (&acc)[S::FM][S::FN][4], const float* As, const float* Bs, int wm,
                                              int wn, int g, int t4) {
  constexpr int FM = S::FM, FN = S::FN;
  float part[FM][FN][4];
#pragma unroll
  for (int kk = 0; kk < S::BK; kk += 8) {
    if (kk % 16 == 0) {
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[i][j][e] = 0.0f;
    }
    float a_big[FM][4], a_small[FM][4], b_big[FN][2], b_small[FN][2];
    split_fragments<S, kAcol, kBcol, SA, SB, kProducts>(a_big, a_small, b_big, b_small, As, Bs, kk, wm, wn, g, t4);
    if constexpr (kProducts == 3) {
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) mma_m16n8k8_tf32(part[i][j], a_small[i], b_big[j]);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) mma_m16n8k8_tf32(part[i][j], a_big[i], b_small[j]);
    }
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) mma_m16n8k8_tf32(part[i][j], a_big[i], b_big[j]);
    if (kk % 16 == 8) {
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
    }
  }
}

// D = epilogue(alpha * op(A) op(B) + beta * C) for one BM x BN tile per block. OA == N keeps
// A's tile column-major in shared memory (m contiguous), OA == T row-major (k contiguous); B
// likewise, so every global load is a straight copy.
// Each warp owns a WM x WN tile: FM x FN MMA tiles of 16 x 8 (mma_tf32.h's fragments), read
// from shared memory with plain loads (Stage's padding keeps each fragment load free of bank
// conflicts) and split on the fly: big = tf32(x), small = tf32(x - big) (multiply_tile).
// The kernel is longer than 60 lines because the prologue, the double-buffered k-loop and the
// split-K hand-off share its shared tiles and registers.
template <class S, Op OA, Op OB, int kProducts>
__global__ void __launch_bounds__(S::kThreads)
gemm_tf32x3_kernel(int M, int N, int K, int k_split, float alpha, const float* A, int lda, const float* B,
                   int ldb, float beta, const float* C, int ldc, float* D, int ldd, Epilogue ep,
                   const float* bias, int vec, float* ws, unsigned* counters, float step_lr) {
  static_assert(kProducts == 1 || kProducts == 3, "plain TF32 or the three-product compensation");
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK, NT = S::kThreads, FM = S::FM, FN = S::FN;
  constexpr bool kAcol = OA == Op::N;  // A(m, k) at As[k][m]; else As[m][k]
  constexpr bool kBcol = OB == Op::N;  // B(k, n) at Bs[n][k]; else Bs[k][n]
  using T = TcTiles<S, OA, OB>;
  using SA = typename T::SA;
  using SB = typename T::SB;
  constexpr int kBuf = T::kBuf;
  extern __shared__ float4 smem4[];  // 2 * kBuf floats (T::kSmemBytes), 16-byte aligned
  float* smem = reinterpret_cast<float*>(smem4);
  __shared__ int is_last;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int wm = warp % S::kWarpsM, wn = warp / S::kWarpsM;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const bool vecA = vec & kTcVecA, vecB = vec & kTcVecB;
  const int k_begin = blockIdx.z * k_split;
  const int k_end = min(K, k_begin + k_split);

  SA la;
  SB lb;
  const auto load = [&](int k0) {
    if constexpr (kAcol) la.load(A, lda, m0, M, k0, k_end, vecA, tid);
    else la.load(A, lda, k0, k_end, m0, M, vecA, tid);
    if constexpr (kBcol) lb.load(B, ldb, k0, k_end, n0, N, vecB, tid);
    else lb.load(B, ldb, n0, N, k0, k_end, vecB, tid);
  };
  load(k_begin);
  la.store(smem, tid);
  lb.store(smem + SA::kSize, tid);
  __syncthreads();

  float acc[FM][FN][4];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int ntiles = (k_end - k_begin + BK - 1) / BK;
  for (int t = 0; t < ntiles; ++t) {
    const float* As = smem + (t & 1) * kBuf;
    const float* Bs = As + SA::kSize;
    // Tile t+1's global loads are in flight while tile t is multiplied (past the end they are
    // all out of range: zeros, no memory traffic).
    load(k_begin + (t + 1) * BK);
    multiply_tile<S, kAcol, kBcol, SA, SB, kProducts>(acc, As, Bs, wm, wn, g, t4);
    // The other buffer was last read in iteration t-1, finished by every thread before the
    // barrier that ended it.
    float* next = smem + ((t + 1) & 1) * kBuf;
    la.store(next, tid);
    lb.store(next + SA::kSize, tid);
    __syncthreads();
  }

  // Split-K (gridDim.z slices, each a whole number of k-tiles): the last slice to arrive sums
  // all of them in slice order (5_tf32x3_device.h), as in variant 4.
  if (gridDim.z > 1 && !tf32x3::splitk_last<FM * FN * 4, NT>(&acc[0][0][0], ws, counters, tid, is_last)) return;

  // Epilogue straight from the fragments: this lane holds rows g and g + 8 of columns 2t and
  // 2t + 1 of each 16 x 8 tile (D and C are column-major: D + row + col * ldd).
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        tf32x3::epilogue_store(acc[i][j][e], m0 + wm * S::WM + i * 16 + g + (e >> 1) * 8,
                               n0 + wn * S::WN + j * 8 + 2 * t4 + (e & 1), M, N, alpha, beta, C, ldc, D, ldd, ep,
                               bias, step_lr);
}

// Blocks of configuration ID that one SM holds (registers and shared memory decide), asked of
// the runtime once per kernel instantiation.
template <class Kernel>
int resident_blocks(Kernel k, int threads, int smem_bytes) {
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, smem_bytes));
  return n > 0 ? n : 1;
}

// splits >= 1: that many k-slices (1: none); 0: tf32x3::plan_splits (5_tf32x3_plan.cu).
template <int ID, int kProducts>
void launch_tc(const GemmArgs<float>& a, cudaStream_t s, int splits) {
  using S = TcCfg<ID>;
  auto vec_ok = [](const void* p, int ld) { return aligned16(p) && ld % 4 == 0; };
  int vec = 0;
  if (vec_ok(a.A, a.lda)) vec |= kTcVecA;
  if (vec_ok(a.B, a.ldb)) vec |= kTcVecB;
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    const auto kernel = gemm_tf32x3_kernel<S, OA, OB, kProducts>;
    constexpr int kSmem = TcTiles<S, OA, OB>::kSmemBytes;
    // Over 48 KiB of dynamic shared memory needs the kernel's opt-in, once.
    static const bool opted_in = [&] {
      if (kSmem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)opted_in;
    dim3 grid((a.M + S::BM - 1) / S::BM, (a.N + S::BN - 1) / S::BN, 1);
    if (splits <= 0) {
      static const int resident = resident_blocks(kernel, S::kThreads, kSmem);
      splits = tf32x3::plan_splits(long(grid.x) * grid.y, resident, a.K);
    }
    // Slices of a whole number of kTcSliceAlign (a multiple of every BK).
    const tf32x3::Slices sl = tf32x3::slice_k(a.K, splits, kTcSliceAlign, std::size_t(grid.x) * grid.y,
                                              std::size_t(S::BM) * S::BN, s);
    grid.z = sl.z;
    kernel<<<grid, S::kThreads, kSmem, s>>>(a.M, a.N, a.K, sl.k_split, a.alpha, a.A, a.lda, a.B, a.ldb, a.beta,
                                        a.C, a.ldc, a.D, a.ldd, a.epilogue, a.bias, vec, sl.ws, sl.counters,
                                        a.step_lr);
    CHECK_LAUNCH("gemm_tf32x3_kernel");
  });
}

template <int kProducts>
void run_tc(const GemmArgs<float>& a, cudaStream_t s, int cfg, int splits) {
  switch (cfg < 0 ? tf32x3::plan_tile(a.M, a.N, a.K) : cfg) {
    case 0: launch_tc<0, kProducts>(a, s, splits); break;
    case 1: launch_tc<1, kProducts>(a, s, splits); break;
    case 2: launch_tc<2, kProducts>(a, s, splits); break;
    case gemm_tuning::kTf32Wgmma: tf32_wgmma_run(a, s, kProducts, splits); break;
    default: launch_tc<3, kProducts>(a, s, splits); break;
  }
}

}  // namespace

void tf32_run(const GemmArgs<float>& a, cudaStream_t s, int cfg, int products, int splits) {
  if (cfg == gemm_tuning::kTf32Wgmma) return tf32_wgmma_run(a, s, products, splits);
  NN_RANGE("gemm_tf32x3");
  if (products == 1) run_tc<1>(a, s, cfg, splits);
  else run_tc<3>(a, s, cfg, splits);
}

// The registry's launcher (gemm/variants.h): the three-product compensation, tiles per shape.
template <class T>
void gemm_tf32x3(const GemmArgs<T>& a, cudaStream_t s) {
  if constexpr (std::is_same_v<T, float>) tf32_run(a, s, -1, 3, 0);
  else warptile_run(a, s, -1, 0);  // no TF32 for double: variant 4's kernel
}

template void gemm_tf32x3<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_tf32x3<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail

namespace nn::gemm_tuning {
const char* tf32_config_name(int cfg) {
  static const char* const names[] = {"128x128", "64x64", "32x32", "128x64", "wgmma128x128"};
  return cfg >= 0 && cfg <= kTf32Wgmma ? names[cfg] : "unknown";
}
static_assert(kTf32Configs == nn::gemm_detail::kTcConfigs, "gemm.h's kTf32Configs");
}  // namespace nn::gemm_tuning
