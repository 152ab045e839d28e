// GEMM variant 4 (the default): warp-tiled 2-D register blocking, double-buffered shared memory,
// 16-byte vector loads/stores when pointers and leading dimensions allow, optional split-K.
// This file: the kernel and its launch; the per-shape plan and the split-K scratch are in
// 4_warptile_plan.cu. Run through nn::gemm(4, ...) and gemm_tuning::*; tested by
// tests/kernels/test_gemm.cpp.
#include "gemm/gemm.h"

#include <type_traits>

#include "common/check.h"
#include "common/nvtx.h"
#include "common/vector_access.h"
#include "gemm/4_warptile.h"

namespace nn::gemm_detail {

namespace {

// 16-byte vectors: the widest global/shared access a thread can issue.
template <class T> struct Vec;
template <> struct Vec<float> { using type = float4; static constexpr int n = 4; };
template <> struct Vec<double> { using type = double2; static constexpr int n = 2; };

__device__ __forceinline__ void unpack(float* d, float4 v) { d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w; }
__device__ __forceinline__ void unpack(double* d, double2 v) { d[0] = v.x; d[1] = v.y; }
__device__ __forceinline__ float4 pack(const float* s) { return make_float4(s[0], s[1], s[2], s[3]); }
__device__ __forceinline__ double2 pack(const double* s) { return make_double2(s[0], s[1]); }

// Four consecutive elements (one fragment group) to/from 16-byte aligned memory.
template <class T>
__device__ __forceinline__ void load4(T* d, const T* p) {
  using V = typename Vec<T>::type;
  constexpr int n = Vec<T>::n;
#pragma unroll
  for (int v = 0; v < 4 / n; ++v) unpack(d + v * n, load_vector(reinterpret_cast<const V*>(p + v * n)));
}
template <class T>
__device__ __forceinline__ void store4(T* p, const T* s) {
  using V = typename Vec<T>::type;
  constexpr int n = Vec<T>::n;
#pragma unroll
  for (int v = 0; v < 4 / n; ++v) store_vector(reinterpret_cast<V*>(p + v * n), pack(s + v * n));
}

// Block tile BM x BN x BK; each warp owns WM x WN; each thread TM x TN outputs, as TM/4 x TN/4
// groups of 4x4 spread LM*4 rows (LN*4 columns) apart, so that a warp's fragment reads from
// shared memory are consecutive 16-byte chunks (no bank conflicts, broadcast across the other
// lane dimension) and its stores to D cover whole 128-byte column segments.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_>
struct Shape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int LM = WM / TM, LN = WN / TN;  // lanes along M and N inside a warp
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static_assert(LM * LN == 32 && TM % 4 == 0 && TN % 4 == 0, "a warp is 32 lanes of 4x4 groups");
  static_assert(BM % WM == 0 && BN % WN == 0, "warps tile the block");
};

// The tiles (same BM x BN for both types so the plan does not depend on T). M=H up to 2048 and
// N=B/p in 750..3000 give 8-32 x 12-47 tiles of 64: 128x128 tiles would leave most of an
// H100's 132 SMs idle, so the largest tile is 128x64 and smaller ones fill the machine; 16x64
// is for the M=10 output layer. double halves BK (same shared-memory bytes) and keeps 32
// accumulators per thread (64 registers) so nothing spills.
template <class T, int ID> struct Cfg;
template <> struct Cfg<float, 0> : Shape<128, 64, 16, 64, 32, 8, 8> {};
template <> struct Cfg<float, 1> : Shape<64, 64, 16, 32, 32, 4, 8> {};
template <> struct Cfg<float, 2> : Shape<64, 32, 16, 32, 16, 4, 4> {};
template <> struct Cfg<float, 3> : Shape<16, 64, 32, 16, 32, 4, 4> {};
template <> struct Cfg<double, 0> : Shape<128, 64, 8, 64, 16, 8, 4> {};
template <> struct Cfg<double, 1> : Shape<64, 64, 8, 32, 32, 4, 8> {};
template <> struct Cfg<double, 2> : Shape<64, 32, 8, 32, 16, 4, 4> {};
template <> struct Cfg<double, 3> : Shape<16, 64, 16, 16, 32, 4, 4> {};
template <class T, int ID>
constexpr bool matches_plan() {  // the plan (4_warptile_plan.cu) counts tiles of kTileM x kTileN
  return Cfg<T, ID>::BM == warptile::kTileM[ID] && Cfg<T, ID>::BN == warptile::kTileN[ID];
}
static_assert(matches_plan<float, 0>() && matches_plan<float, 1>() && matches_plan<float, 2>() &&
                  matches_plan<float, 3>() && matches_plan<double, 0>() && matches_plan<double, 1>() &&
                  matches_plan<double, 2>() && matches_plan<double, 3>(),
              "Cfg tiles must match warptile::kTileM/kTileN");

enum VecFlags { kVecA = 1, kVecB = 2, kVecD = 4 };

template <class T> struct Bytes;  // VN uint8 values in one access (4 or 2 bytes)
template <> struct Bytes<float> { using type = uchar4; };
template <> struct Bytes<double> { using type = uchar2; };
__device__ __forceinline__ void unpack_bytes(float* d, uchar4 v) {
  d[0] = float(v.x) / 255.0f; d[1] = float(v.y) / 255.0f; d[2] = float(v.z) / 255.0f; d[3] = float(v.w) / 255.0f;
}
__device__ __forceinline__ void unpack_bytes(double* d, uchar2 v) {
  d[0] = double(v.x) / 255.0; d[1] = double(v.y) / 255.0;
}

// Moves one operand tile (R rows of M or N, by BK) global -> registers -> shared memory, so
// the global loads of tile t+1 are in flight while tile t is multiplied. Shared layout is
// always S[k][r] (r contiguous, padded by one vector so the transposed stores of the
// k-contiguous case spread over the banks while rows stay 16-byte aligned).
// kRowContig: element (r, k) is X[r + k*ld] (A with op N, B with op T); otherwise X[k + r*ld].
template <class T, int R, int BK, int NT, bool kRowContig>
struct TileLoader {
  static constexpr int VN = Vec<T>::n;
  static constexpr int kChunks = R * BK / (VN * NT);  // vectors per thread
  static_assert(kChunks >= 1 && kChunks * VN * NT == R * BK, "tile must split evenly");
  T reg[kChunks * VN];

  __device__ __forceinline__ static T at(const T* X, int ld, int r, int k) {
    return kRowContig ? X[r + static_cast<std::size_t>(k) * ld] : X[k + static_cast<std::size_t>(r) * ld];
  }

  // Chunk c of the tile: consecutive threads take consecutive VN-long pieces of the
  // contiguous dimension, so a warp reads whole 128-byte lines in either layout.
  __device__ __forceinline__ static void chunk(int c, int& rr, int& kk) {
    rr = kRowContig ? (c % (R / VN)) * VN : c / (BK / VN);
    kk = kRowContig ? c / (R / VN) : (c % (BK / VN)) * VN;
  }

  // Rows r0.., k in [k0, k_end); out-of-range elements are 0 so edge tiles add nothing. The
  // vector load needs the whole chunk in range and 16-byte alignment (vec: decided at launch);
  // otherwise the same chunk is read element by element (the warp still covers whole lines).
  __device__ __forceinline__ void load(const T* X, int ld, int rows, int r0, int k0, int k_end,
                                       bool vec, int tid) {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int rr, kk;
      chunk(tid + q * NT, rr, kk);
      const int r = r0 + rr, k = k0 + kk;
      T* d = reg + q * VN;
      const bool full = kRowContig ? (k < k_end && r + VN <= rows) : (r < rows && k + VN <= k_end);
      if (vec && full) {
        const T* p = kRowContig ? X + r + static_cast<std::size_t>(k) * ld
                                : X + k + static_cast<std::size_t>(r) * ld;
        unpack(d, __ldg(reinterpret_cast<const typename Vec<T>::type*>(p)));
      } else {
#pragma unroll
        for (int v = 0; v < VN; ++v) {
          const int rv = kRowContig ? r + v : r, kv = kRowContig ? k : k + v;
          d[v] = (rv < rows && kv < k_end) ? at(X, ld, rv, kv) : T(0);
        }
      }
    }
  }

  __device__ __forceinline__ void store(T (*S)[R + VN], int tid) const {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int rr, kk;
      chunk(tid + q * NT, rr, kk);
      if (kRowContig) {
        store_vector(reinterpret_cast<typename Vec<T>::type*>(&S[kk][rr]), pack(reg + q * VN));
      } else {
#pragma unroll
        for (int v = 0; v < VN; ++v) S[kk + v][rr] = reg[q * VN + v];
      }
    }
  }
};

// The fused step's B: the batch's images read straight from the resident uint8 columns and
// normalised on load, X(p, j) = src[p + cols[j] * ld] / 255 (the true division of
// ops gather_normalize, so the products are those of the unfused path bit for bit). The same
// chunks and shared layout as TileLoader; a chunk's VN bytes are one 4- (2-) byte load when
// the column base and ld allow it (vec).
template <class T, int R, int BK, int NT, bool kRowContig>
struct GatherLoader : TileLoader<T, R, BK, NT, kRowContig> {
  using Base = TileLoader<T, R, BK, NT, kRowContig>;
  using Base::kChunks;
  using Base::reg;
  static constexpr int VN = Vec<T>::n;

  __device__ __forceinline__ void load(const std::uint8_t* X, const std::uint32_t* cols, int ld, int rows,
                                       int r0, int k0, int k_end, bool vec, int tid) {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int rr, kk;
      Base::chunk(tid + q * NT, rr, kk);
      const int r = r0 + rr, k = k0 + kk;
      T* d = reg + q * VN;
      // kRowContig (op T): r runs along a column (pixels), k picks the column; otherwise the
      // reverse. `j` is the batch column, `p` the first pixel of the chunk.
      const int j = kRowContig ? k : r, p = kRowContig ? r : k;
      const int p_end = kRowContig ? rows : k_end;
      const bool col_ok = kRowContig ? k < k_end : r < rows;
      if (!col_ok) {
#pragma unroll
        for (int v = 0; v < VN; ++v) d[v] = T(0);
        continue;
      }
      const std::uint8_t* src = X + static_cast<std::size_t>(cols[j]) * ld + p;
      if (vec && p + VN <= p_end) {
        unpack_bytes(d, __ldg(reinterpret_cast<const typename Bytes<T>::type*>(src)));
      } else {
#pragma unroll
        for (int v = 0; v < VN; ++v) d[v] = p + v < p_end ? T(src[v]) / T(255) : T(0);
      }
    }
  }
};

// k_split: the k-range of one grid.z slice (a multiple of BK). With gridDim.z > 1 each slice
// writes its raw accumulators to ws; the last slice to finish a tile (found with a per-tile
// atomic counter, no spinning) sums the slices in slice order, so the result does not depend
// on which block finished last, then runs the epilogue and resets the counter for the next call.
// kGatherB: B is the gathered uint8 batch (Bu8, Bcols; GatherLoader) instead of B.
// Epilogue::Step: D = C - step_lr * (alpha * acc + beta * C), C read even when beta == 0.
template <class T, class S, Op OA, Op OB, bool kGatherB>
__global__ void __launch_bounds__(S::kThreads)
gemm_warptile_kernel(int M, int N, int K, int k_split, T alpha, const T* A, int lda, const T* B,
                     int ldb, T beta, const T* C, int ldc, T* D, int ldd, Epilogue ep,
                     const T* bias, int vec, T* ws, unsigned* counters, const std::uint8_t* Bu8,
                     const std::uint32_t* Bcols, T step_lr) {
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
  using LoaderB = std::conditional_t<kGatherB, GatherLoader<T, BN, BK, NT, OB == Op::T>,
                                     TileLoader<T, BN, BK, NT, OB == Op::T>>;
  LoaderB lb;
  const auto load_b = [&](int k0) {
    if constexpr (kGatherB) lb.load(Bu8, Bcols, ldb, N, n0, k0, k_end, vecB, tid);
    else lb.load(B, ldb, N, n0, k0, k_end, vecB, tid);
  };
  la.load(A, lda, M, m0, k_begin, k_end, vecA, tid);
  load_b(k_begin);
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
    load_b(k_begin + (t + 1) * BK);
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

  if (gridDim.z > 1) {
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
    if (!is_last) return;
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
  }

  // Epilogue: each (g, h, c) is 4 consecutive rows of one column of D, stored as one
  // 16-byte vector when D (and C) allow it; guarded element by element at the edges.
  const bool vecD = vec & kVecD;
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

template <class T, int ID>
void launch_cfg(const GemmArgs<T>& a, int splits, cudaStream_t s) {
  using S = Cfg<T, ID>;
  constexpr int VN = Vec<T>::n;
  // Vector access needs 16-byte aligned columns: an aligned base and ld a multiple of VN.
  auto vec_ok = [](const void* p, int ld) { return aligned16(p) && ld % VN == 0; };
  int vec = 0;
  if (vec_ok(a.A, a.lda)) vec |= kVecA;
  // Gathered bytes: a chunk is one VN-byte load when every column starts VN-byte aligned.
  if (a.B_u8 ? (reinterpret_cast<std::uintptr_t>(a.B_u8) % VN == 0 && a.ldb % VN == 0) : vec_ok(a.B, a.ldb))
    vec |= kVecB;
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
  const auto launch = [&]<Op OA, Op OB, bool kGather>() {
    gemm_warptile_kernel<T, S, OA, OB, kGather><<<grid, S::kThreads, 0, s>>>(
        a.M, a.N, a.K, k_split, a.alpha, a.A, a.lda, a.B, a.ldb, a.beta, a.C, a.ldc, a.D, a.ldd,
        a.epilogue, a.bias, vec, ws, counters, a.B_u8, a.B_cols, a.step_lr);
    CHECK_LAUNCH("gemm_warptile_kernel");
  };
  with_ops_gather(a, launch);
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
