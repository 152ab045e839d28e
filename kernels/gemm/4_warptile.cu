// GEMM variant 4 (the default): warp-tiled 2-D register blocking, double-buffered shared memory,
// 16-byte vector loads/stores when pointers and leading dimensions allow, optional split-K.
// This file: the kernel and its launch; its tiles and loaders are in 4_warptile_tiles.h, the
// per-shape plan and the split-K scratch in 4_warptile_plan.cu. Run through nn::gemm(4, ...) and gemm_tuning::*; tested by
// tests/kernels/test_gemm.cpp.
#include "gemm/gemm.h"

#include <type_traits>

#include "common/check.h"
#include "common/nvtx.h"
#include "common/pdl.h"
#include "common/vector_access.h"
#include "gemm/4_warptile.h"
#include "gemm/4_warptile_tiles.h"

namespace nn::gemm_detail {

namespace {

// Split-K: this slice's raw accumulators go to ws; the block that finds itself the last of its
// tile to arrive (a per-tile atomic counter, reset for the next call) sums every slice in slice
// order into acc, so the sum does not depend on which block came last. False: not the last.
template <class T, class S>
__device__ __forceinline__ bool sum_slices(T (&acc)[S::TM][S::TN], T* ws, unsigned* counters, int& is_last) {
  constexpr int TM = S::TM, TN = S::TN, NT = S::kThreads;
  const int tid = threadIdx.x;
  const std::size_t tile = blockIdx.x + static_cast<std::size_t>(blockIdx.y) * gridDim.x;
  T* mine = ws + ((tile * gridDim.z + blockIdx.z) * NT + tid) * (TM * TN);
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 4) store4(mine + i * TN + j, &acc[i][j]);  // own slice too
  __threadfence();  // publish the partials before the counter says they are there
  __syncthreads();
  if (tid == 0) {
    const unsigned prev = atomicAdd(&counters[tile], 1u);
    is_last = prev == gridDim.z - 1;
    if (is_last) counters[tile] = 0;  // every slice has arrived: ready for the next launch
  }
  __syncthreads();
  if (!is_last) return false;
  __threadfence();
  // Sum every slice, this block's own included, from ws in slice order: the same additions
  // in the same order whichever block came last.
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0;
  for (unsigned z = 0; z < gridDim.z; ++z) {
    const T* p = ws + ((tile * gridDim.z + z) * NT + tid) * (TM * TN);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; j += Vec<T>::n) {
        T part[Vec<T>::n];
        unpack(part, __ldcg(reinterpret_cast<const typename Vec<T>::type*>(p + i * TN + j)));
#pragma unroll
        for (int v = 0; v < Vec<T>::n; ++v) acc[i][j + v] += part[v];  // L2 only (__ldcg): other SMs wrote it
      }
  }
  return true;
}

// The epilogue of one thread's TM x TN outputs (rows m0 + a_off + ..., columns n0 + b_off + ...):
// each (g, h, c) is 4 consecutive rows of one column of D, stored as one 16-byte vector when D
// (and C) allow it; guarded element by element at the edges.
template <class T, class S>
__device__ __forceinline__ void store_tile(const T (&acc)[S::TM][S::TN], int M, int N, int m0, int n0, int a_off,
                                           int b_off, bool vecD, T alpha, T beta, const T* C, int ldc, T* D,
                                           int ldd, Epilogue ep, const T* bias, T step_lr) {
  constexpr int TM = S::TM, TN = S::TN;
#pragma unroll
  for (int g = 0; g < TM / 4; ++g) {
    const int i0 = m0 + a_off + g * S::LM * 4;
    if (i0 >= M) continue;
#pragma unroll
    for (int h = 0; h < TN / 4; ++h)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = n0 + b_off + h * S::LN * 4 + c;
        if (j >= N) continue;
        const std::size_t jd = static_cast<std::size_t>(j);
        // One copy of the arithmetic (the sigmoid is long); only the memory access differs
        // between the vector case and the guarded edge case.
        const bool vec4 = vecD && i0 + 4 <= M;
        T v[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) v[r] = alpha * acc[4 * g + r][4 * h + c];
        if (C) {
          const T* cp = C + i0 + jd * ldc;
          T cv[4];
          if (vec4) {
            load4(cv, cp);
          } else {
#pragma unroll
            for (int r = 0; r < 4; ++r) cv[r] = i0 + r < M ? cp[r] : T(0);
          }
#pragma unroll
          for (int r = 0; r < 4; ++r) v[r] += beta * cv[r];
          if (ep == Epilogue::Step) {
#pragma unroll
            for (int r = 0; r < 4; ++r) v[r] = cv[r] - step_lr * v[r];
          }
        }
        if (ep != Epilogue::Step) {
#pragma unroll
          for (int r = 0; r < 4; ++r) v[r] = apply_epilogue(v[r], ep, bias, min(i0 + r, M - 1));
        }
        T* dp = D + i0 + jd * ldd;
        if (vec4) {
          store4(dp, v);
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (i0 + r < M) dp[r] = v[r];
        }
      }
  }
}

// k_split: the k-range of one grid.z slice (a multiple of BK); with gridDim.z > 1 the last
// slice of a tile sums them all (sum_slices) and runs the epilogue (store_tile).
// Epilogue::Step: D = C - step_lr * (alpha * acc + beta * C), C read even when beta == 0.
// The kernel is longer than 60 lines because the k-loop's prefetch, multiply and buffer swap
// share one set of registers and shared tiles with the prologue that fills them.
template <class T, class S, Op OA, Op OB>
__global__ void __launch_bounds__(S::kThreads)
gemm_warptile_kernel(int M, int N, int K, int k_split, T alpha, const T* A, int lda, const T* B,
                     int ldb, T beta, const T* C, int ldc, T* D, int ldd, Epilogue ep,
                     const T* bias, int vec, T* ws, unsigned* counters, T step_lr) {
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK, TM = S::TM, TN = S::TN, NT = S::kThreads;
  constexpr int PAD = Vec<T>::n;
  __shared__ __align__(16) T As[2][BK][BM + PAD];
  __shared__ __align__(16) T Bs[2][BK][BN + PAD];
  __shared__ int is_last;

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int wm = warp % S::kWarpsM, wn = warp / S::kWarpsM;
  const int lm = lane % S::LM, ln = lane / S::LM;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int k_begin = blockIdx.z * k_split;
  const int k_end = min(K, k_begin + k_split);
  const bool vecA = vec & kVecA, vecB = vec & kVecB;

  TileLoader<T, BM, BK, NT, OA == Op::N> la;
  TileLoader<T, BN, BK, NT, OB == Op::T> lb;
  pdl_wait();  // A, B and C may be the kernels before it's (common/pdl.h)
  la.load(A, lda, M, m0, k_begin, k_end, vecA, tid);
  lb.load(B, ldb, N, n0, k_begin, k_end, vecB, tid);
  la.store(As[0], tid);
  lb.store(Bs[0], tid);
  __syncthreads();

  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0;

  const int a_off = wm * S::WM + lm * 4, b_off = wn * S::WN + ln * 4;
  const int ntiles = (k_end - k_begin + BK - 1) / BK;
  for (int t = 0; t < ntiles; ++t) {
    const int cur = t & 1;
    // Prefetch tile t+1 while tile t is multiplied. After the last tile this "loads" an
    // all-out-of-range tile (zeros, no memory traffic) into the idle buffer: cheaper than a
    // branch, and it keeps the compiler from peeling a second copy of this loop.
    la.load(A, lda, M, m0, k_begin + (t + 1) * BK, k_end, vecA, tid);
    lb.load(B, ldb, N, n0, k_begin + (t + 1) * BK, k_end, vecB, tid);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T a[TM], b[TN];
#pragma unroll
      for (int g = 0; g < TM / 4; ++g) load4(a + 4 * g, &As[cur][kk][a_off + g * S::LM * 4]);
#pragma unroll
      for (int h = 0; h < TN / 4; ++h) load4(b + 4 * h, &Bs[cur][kk][b_off + h * S::LN * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    // The other buffer was last read in iteration t-1, which every thread finished before
    // the barrier that ended it: one barrier per k-tile suffices.
    la.store(As[cur ^ 1], tid);
    lb.store(Bs[cur ^ 1], tid);
    __syncthreads();
  }
  pdl_trigger();  // A and B read: the next kernel may be scheduled during the epilogue

  if (gridDim.z > 1 && !sum_slices<T, S>(acc, ws, counters, is_last)) return;
  store_tile<T, S>(acc, M, N, m0, n0, a_off, b_off, vec & kVecD, alpha, beta, C, ldc, D, ldd, ep, bias, step_lr);
}

template <class T, int ID>
void launch_cfg(const GemmArgs<T>& a, int splits, cudaStream_t s) {
  using S = Cfg<T, ID>;
  constexpr int VN = Vec<T>::n;
  // Vector access needs 16-byte aligned columns: an aligned base and ld a multiple of VN.
  auto vec_ok = [](const void* p, int ld) { return aligned16(p) && ld % VN == 0; };
  int vec = 0;
  if (vec_ok(a.A, a.lda)) vec |= kVecA;
  if (vec_ok(a.B, a.ldb)) vec |= kVecB;
  if (vec_ok(a.D, a.ldd) && (!a.C || vec_ok(a.C, a.ldc))) vec |= kVecD;

  // Each slice gets a whole number of BK-tiles; recount so that no slice is empty.
  int k_split = (a.K + splits - 1) / splits;
  k_split = (k_split + S::BK - 1) / S::BK * S::BK;
  splits = (a.K + k_split - 1) / k_split;

  const dim3 grid((a.M + S::BM - 1) / S::BM, (a.N + S::BN - 1) / S::BN, splits);
  T* ws = nullptr;
  unsigned* counters = nullptr;
  if (splits > 1) {
    const std::size_t n_tiles = std::size_t(grid.x) * grid.y;
    warptile::Workspace& w = warptile::workspace(s, n_tiles * splits * S::BM * S::BN * sizeof(T), n_tiles);
    ws = static_cast<T*>(w.partial);
    counters = w.counters;
  }
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    launch_pdl(NN_LAUNCH_SITE("gemm_warptile_kernel"), gemm_warptile_kernel<T, S, OA, OB>, grid, dim3(S::kThreads),
               0, s, a.M, a.N, a.K, k_split, a.alpha, a.A, a.lda, a.B, a.ldb, a.beta, a.C, a.ldc, a.D, a.ldd,
               a.epilogue, a.bias, vec, ws, counters, a.step_lr);
  });
}

}  // namespace

template <class T>
void warptile_run(const GemmArgs<T>& a, cudaStream_t s, int cfg, int splits) {
  NN_RANGE("gemm_warptile");
  if (cfg < 0) {
    const gemm_tuning::WarptilePlan p = gemm_tuning::warptile_plan(a.M, a.N, a.K);
    cfg = p.cfg;
    if (splits <= 0) splits = p.splits;
  } else if (splits <= 0) {
    splits = warptile::plan_splits(cfg, a.M, a.N, a.K, warptile::sm_count());
  }
  switch (cfg) {
    case 0: launch_cfg<T, 0>(a, splits, s); break;
    case 1: launch_cfg<T, 1>(a, splits, s); break;
    case 2: launch_cfg<T, 2>(a, splits, s); break;
    default: launch_cfg<T, 3>(a, splits, s); break;
  }
}

// The registry's launcher (gemm/variants.h): tiles and split-K chosen per shape.
template <class T>
void gemm_warptile(const GemmArgs<T>& a, cudaStream_t s) {
  warptile_run(a, s, -1, 0);
}

template void warptile_run<float>(const GemmArgs<float>&, cudaStream_t, int, int);
template void warptile_run<double>(const GemmArgs<double>&, cudaStream_t, int, int);
template void gemm_warptile<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_warptile<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail
