// The second persistent-step kernel (persistent_step.h describes both): W1's tiles on chip for the
// whole launch, the input slice gathered once a step by asynchronous copies a step ahead, every
// phase on every block, wide shared reads, fixed-order sums. nvcc (SASS only: the grid barrier's
// and cp.async's PTX are not GPGPU-Sim's) and sim/simcc. Tested by tests/kernels/test_persistent_step*.cpp.
#include "ops/persistent_step2.h"

#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <chrono>
#include <cmath>

#include "common/check.h"
#include "common/vector_access.h"
#include "gemm/gemm.h"
#include "ops/ops_common.h"

namespace nn::persist2 {
namespace {

namespace cg = cooperative_groups;
using ops_detail::dev_exp;
using ops_detail::kFullMask;
constexpr int kIdxPerThread = 4;  // the next step's indices a thread holds in registers (B <= 1024)

template <class T>
struct Shape2 {
  PersistentShape<T> a;
  int th, td, nht, tiles, tpb, jsplit, copy, dz_cols;
  Layout L;
};

// 4 consecutive T from 16-byte-aligned shared memory: one LDS.128 (two for double).
__device__ __forceinline__ void ld4(const float* p, float (&o)[4]) {
  const float4 v = load_vector(reinterpret_cast<const float4*>(p));
  o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
}
__device__ __forceinline__ void ld4(const double* p, double (&o)[4]) {
  const double2 a = load_vector(reinterpret_cast<const double2*>(p));
  const double2 b = load_vector(reinterpret_cast<const double2*>(p) + 1);
  o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
}

__device__ __forceinline__ unsigned long long clock_ns() {
#ifdef SIM_EMULATOR
  return static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}
// Thread 0 of each block notes when it reached mark m of step s (probe on only).
__device__ __forceinline__ void mark(unsigned long long* probe, int s, int m) {
  if (probe && threadIdx.x == 0) probe[(static_cast<std::size_t>(s) * gridDim.x + blockIdx.x) * kProbeMarks + m] = clock_ns();
}

struct Tile {
  int h0, thl, d0, tdl, slice;
};
template <class T>
__device__ __forceinline__ Tile tile_of(const Shape2<T>& g, int t) {
  Tile q;
  q.slice = t / g.nht;
  q.h0 = (t % g.nht) * g.th;
  q.thl = min(g.th, g.a.H - q.h0);
  q.d0 = q.slice * g.td;
  q.tdl = min(g.td, g.a.D - q.d0);
  return q;
}

template <class T>
__device__ __forceinline__ int cols_of(const Shape2<T>& g, int s) {  // the batch columns of step s
  const unsigned long long left = g.a.n - (g.a.offset + static_cast<unsigned long long>(s) * unsigned(g.a.B));
  return int(left < static_cast<unsigned long long>(g.a.B) ? left : static_cast<unsigned long long>(g.a.B));
}
template <class T>
__device__ __forceinline__ const std::uint32_t* order_of(const Shape2<T>& g, const std::uint32_t* order, int s) {
  return order + g.a.offset + static_cast<unsigned long long>(s) * unsigned(g.a.B);
}

// Step s's images of the owned tiles' slices, into the byte buffers: copy_bytes-sized asynchronous
// copies (the last one of a short slice zero-filled), or plain loads where D or the tile width
// allows no aligned copy. idx holds the step's image indices. Issued, committed, not waited for.
template <class T>
__device__ void gather(const Shape2<T>& g, const std::uint8_t* images, const std::uint32_t* idx, int b,
                       unsigned char* sm) {
  std::uint8_t* xb = reinterpret_cast<std::uint8_t*>(sm + g.L.xb);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    std::uint8_t* dst = xb + static_cast<std::size_t>(k) * g.a.B * g.L.ldxb;
    if (g.copy > 0) {
      const int per = (q.tdl + g.copy - 1) / g.copy;
      for (int i = int(threadIdx.x); i < b * per; i += kThreads) {
        const int j = i / per, c = i % per, left = q.tdl - c * g.copy;
        const std::uint8_t* src = images + static_cast<std::size_t>(idx[j]) * g.a.D + q.d0 + c * g.copy;
        __pipeline_memcpy_async(dst + j * g.L.ldxb + c * g.copy, src, std::size_t(g.copy),
                                left < g.copy ? std::size_t(g.copy - left) : 0);
      }
    } else {
      for (int i = int(threadIdx.x); i < b * q.tdl; i += kThreads) {
        const int j = i / q.tdl, d = i % q.tdl;
        dst[j * g.L.ldxb + d] = images[static_cast<std::size_t>(idx[j]) * g.a.D + q.d0 + d];
      }
    }
  }
  __pipeline_commit();
}

// The gathered bytes to inputs (exactly byte / 255, through the table), zeros past the tile's
// width and in the rows up to the next multiple of 4 (read by the 4-column thread tiles).
template <class T>
__device__ void convert(const Shape2<T>& g, int b, unsigned char* sm) {
  const std::uint8_t* xb = reinterpret_cast<const std::uint8_t*>(sm + g.L.xb);
  T* x = reinterpret_cast<T*>(sm + g.L.x);
  const T* lut = reinterpret_cast<const T*>(sm + g.L.lut);
  const int td4 = round4(g.td), b4 = round4(b);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const int tdl = tile_of(g, t).tdl;
    const std::uint8_t* src = xb + static_cast<std::size_t>(k) * g.a.B * g.L.ldxb;
    T* dst = x + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx;
    for (int i = int(threadIdx.x); i < b4 * td4; i += kThreads) {
      const int j = i / td4, d = i % td4;
      dst[j * g.L.ldx + d] = j < b && d < tdl ? lut[src[j * g.L.ldxb + d]] : T(0);
    }
  }
}

// Phase A for owned tile k: Zp[slice](h, j) = sum over the tile's inputs d (in order) of W1(h, d) X(d, j).
// A thread owns 4 rows x 4 columns; a warp's lanes run along the rows (W reads broadcast across
// the column groups).
template <class T>
__device__ void forward_tile(const Shape2<T>& g, const Tile& q, int k, int b, T* Zp, unsigned char* sm) {
  const T* w = reinterpret_cast<const T*>(sm + g.L.w) + static_cast<std::size_t>(k) * round4(g.td) * g.th;
  const T* x = reinterpret_cast<const T*>(sm + g.L.x) + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx;
  const int hgs = g.th / 4, pairs = hgs * ((b + 3) / 4), tdl4 = round4(q.tdl);
  for (int p = int(threadIdx.x); p < pairs; p += kThreads) {
    const int hl = 4 * (p % hgs), j0 = 4 * (p / hgs);
    T acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[i][jj] = T(0);
    for (int d = 0; d < tdl4; d += 4) {
      T wv[4][4], xv[4][4];  // wv[kk][i] = W(h0 + hl + i, d + kk); xv[jj][kk] = X(d + kk, j0 + jj)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) ld4(w + (d + kk) * g.th + hl, wv[kk]);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) ld4(x + (j0 + jj) * g.L.ldx + d, xv[jj]);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) acc[i][jj] += wv[kk][i] * xv[jj][kk];
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = j0 + jj;
      if (j >= b) break;
      T* z = Zp + (static_cast<std::size_t>(q.slice) * g.a.B + j) * g.a.H + q.h0 + hl;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (hl + i < q.thl) z[i] = acc[i][jj];
    }
  }
}

// Phase B for batch column j by the whole block: thread r holds hidden units r, r + 256, ...
template <class T>
__device__ void column(const Shape2<T>& g, int j, int b, const std::uint8_t* labels, const std::uint32_t* cols,
                       const T* P, const T* Zp, T* A1, T* dZ1, T* dZ2, double* loss_cols, unsigned* hit_cols,
                       unsigned char* sm) {
  const int H = g.a.H, C = g.a.C, S = g.a.slices, lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const T* b1 = P + static_cast<std::size_t>(H) * g.a.D;
  const T* W2 = b1 + H;
  const T* b2 = W2 + static_cast<std::size_t>(C) * H;
  T* sred = reinterpret_cast<T*>(sm + g.L.col);   // [warp][c]
  T* sdz = sred + (kThreads / 32) * kMaxC;         // [c]
  int label = 0;
  if (threadIdx.x == 0) label = int(labels[cols[j]]);  // issued first: its two loads overlap the rest
  T a[kMaxHPerThread], w[kMaxHPerThread][kMaxC], part[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) part[c] = T(0);
#pragma unroll
  for (int u = 0; u < kMaxHPerThread; ++u) {
    const int h = int(threadIdx.x) + u * kThreads;
    a[u] = T(0);
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) w[u][c] = T(0);
    if (h >= H) continue;
    // Everything this unit reads is issued before the first sum waits on a load.
    const T bias = b1[h];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) w[u][c] = W2[static_cast<std::size_t>(h) * C + c];
    const T* zp = Zp + static_cast<std::size_t>(j) * H + h;
    const std::size_t stride = static_cast<std::size_t>(g.a.B) * H;
    T z = T(0);
    for (int s0 = 0; s0 < S; s0 += 16) {  // 16 slices' loads in flight, then summed in order
      T v[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = s0 + i < S ? zp[(s0 + i) * stride] : T(0);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (s0 + i < S) z += v[i];
    }
    a[u] = gemm_detail::sigmoid(z + bias);
    A1[static_cast<std::size_t>(j) * H + h] = a[u];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) part[c] += w[u][c] * a[u];
  }
  // The scores: each warp's sums by butterflies, then the warps' in order.
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    for (int off = 16; off > 0; off >>= 1) part[c] += __shfl_xor_sync(kFullMask, part[c], off);
  if (lane == 0)
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) sred[warp * kMaxC + c] = part[c];
  if (threadIdx.x == 0) sdz[kMaxC] = T(label);  // the label, for warp 0's lanes
  __syncthreads();
  if (warp == 0) {
    const int lbl = int(sdz[kMaxC]);
    T z = -INFINITY;
    if (lane < C) {
      z = T(0);
      for (int u = 0; u < kThreads / 32; ++u) z += sred[u * kMaxC + lane];
      z += b2[lane];
    }
    T m = z;  // the maximum, and the lowest class index holding it
    int arg = lane < C ? lane : kMaxC;
    for (int off = 16; off > 0; off >>= 1) {
      const T om = __shfl_xor_sync(kFullMask, m, off);
      const int oa = __shfl_xor_sync(kFullMask, arg, off);
      if (om > m || (om == m && oa < arg)) m = om, arg = oa;
    }
    const T e = lane < C ? dev_exp(z - m) : T(0);
    T sum = e;
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(kFullMask, sum, off);
    const T zl = __shfl_sync(kFullMask, z, lbl < C && lbl >= 0 ? lbl : 0);
    if (lane < C) {
      const T dz = (e / sum - (lane == lbl ? T(1) : T(0))) * (T(1) / T(b));
      sdz[lane] = dz;
      dZ2[static_cast<std::size_t>(j) * C + lane] = dz;
    }
    if (lane == 0) {
      // A label >= C (the loader refuses those) gives a NaN loss, as ops softmax_xent does.
      loss_cols[j] = double(m) - (lbl < C && lbl >= 0 ? double(zl) : double(NAN)) + log(double(sum));
      hit_cols[j] = arg == lbl ? 1u : 0u;
    }
  }
  __syncthreads();
  T dz[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) dz[c] = c < C ? sdz[c] : T(0);
#pragma unroll
  for (int u = 0; u < kMaxHPerThread; ++u) {
    const int h = int(threadIdx.x) + u * kThreads;
    if (h >= H) continue;
    T da = T(0);
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) da += w[u][c] * dz[c];
    dZ1[static_cast<std::size_t>(j) * H + h] = da * (a[u] * (T(1) - a[u]));  // ops sigmoid_backward's form
  }
  __syncthreads();  // sred and sdz are the next column's
}

// Phase C for owned tile k: W1(h, d) -= lr (sum over j of dZ1(h, j) X(d, j) + reg W1(h, d)). A thread
// owns 4 rows x 4 inputs and one of jsplit equal parts of the batch (summed in part order); dZ1's
// columns pass through shared memory dz_cols at a time.
template <class T>
__device__ void step_tile(const Shape2<T>& g, const Tile& q, int k, int b, const T* dZ1, unsigned char* sm) {
  T* w = reinterpret_cast<T*>(sm + g.L.w) + static_cast<std::size_t>(k) * round4(g.td) * g.th;
  const T* x = reinterpret_cast<const T*>(sm + g.L.x) + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx;
  T* dzs = reinterpret_cast<T*>(sm + g.L.dz);
  T* red = reinterpret_cast<T*>(sm + g.L.red);
  const int hgs = g.th / 4, pairs = hgs * (round4(g.td) / 4);
  const int tid = int(threadIdx.x), part = tid / pairs, p = tid % pairs;
  const bool active = part < g.jsplit;
  const int hl = 4 * (p % hgs), dl = 4 * (p / hgs);
  const int jb = active ? part * b / g.jsplit : 0, je = active ? (part + 1) * b / g.jsplit : 0;
  T acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) acc[i][kk] = T(0);
  for (int c0 = 0; c0 < b; c0 += g.dz_cols) {
    const int nc = min(g.dz_cols, b - c0);
    for (int i = tid; i < nc * g.th; i += kThreads) {
      const int jj = i / g.th, hh = i % g.th;
      dzs[i] = hh < q.thl ? dZ1[static_cast<std::size_t>(c0 + jj) * g.a.H + q.h0 + hh] : T(0);
    }
    __syncthreads();
    const int lo = max(jb, c0), hi = min(je, c0 + nc);
    for (int j = lo; j < hi; ++j) {
      T gv[4], xv[4];
      ld4(dzs + (j - c0) * g.th + hl, gv);
      ld4(x + j * g.L.ldx + dl, xv);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) acc[i][kk] += gv[i] * xv[kk];
    }
    __syncthreads();  // the next pass restages dzs
  }
  if (active && part > 0)
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) red[((part - 1) * pairs + p) * 16 + i * 4 + kk] = acc[i][kk];
  __syncthreads();
  if (active && part == 0) {
    for (int u = 1; u < g.jsplit; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) acc[i][kk] += red[((u - 1) * pairs + p) * 16 + i * 4 + kk];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (dl + kk < q.tdl && hl + i < q.thl) {
          T* wp = w + (dl + kk) * g.th + hl + i;
          const T v = acc[i][kk] + g.a.reg * *wp;
          *wp = *wp - g.a.lr * v;
        }
  }
  __syncthreads();  // red is the next tile's
}

// Phase C's tail, task e by one warp: e < H steps b1(e) and W2(e, :), e == H steps b2, e == H + 1
// adds the step's loss and hits to the epoch's. Lane l sums columns l, l + 32, ... in order, then
// butterflies: the same bits for any grid.
template <class T>
__device__ void tail_task(const Shape2<T>& g, int e, int b, T* P, const T* A1, const T* dZ1, const T* dZ2,
                          const double* loss_cols, const unsigned* hit_cols, double* stats, unsigned* counts) {
  const int H = g.a.H, C = g.a.C, lane = int(threadIdx.x) & 31;
  T* b1 = P + static_cast<std::size_t>(H) * g.a.D;
  T* W2 = b1 + H;
  T* b2 = W2 + static_cast<std::size_t>(C) * H;
  if (e == H + 1) {
    double l = 0;
    unsigned hits = 0;
    for (int j = lane; j < b; j += 32) l += loss_cols[j], hits += hit_cols[j];
    for (int off = 16; off > 0; off >>= 1) {
      l += __shfl_xor_sync(kFullMask, l, off);
      hits += __shfl_xor_sync(kFullMask, hits, off);
    }
    if (lane == 0) {
      stats[0] += l;
      counts[0] += hits;
      counts[1] += 1;
      const bool finite = l - l == 0.0;  // false for inf and NaN, as layer2_finish tests it
      if (!finite && counts[2] == 0) counts[2] = counts[1];
    }
    return;
  }
  T s[kMaxC + 1];
#pragma unroll
  for (int c = 0; c <= kMaxC; ++c) s[c] = T(0);
  for (int j = lane; j < b; j += 32) {
    const T* dz2 = dZ2 + static_cast<std::size_t>(j) * C;
    if (e < H) {
      const T av = A1[static_cast<std::size_t>(j) * H + e];
      s[kMaxC] += dZ1[static_cast<std::size_t>(j) * H + e];
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) s[c] += dz2[c] * av;
    } else {
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) s[c] += dz2[c];
    }
  }
#pragma unroll
  for (int c = 0; c <= kMaxC; ++c)
    for (int off = 16; off > 0; off >>= 1) s[c] += __shfl_xor_sync(kFullMask, s[c], off);
  if (e < H) {
    if (lane == kMaxC) b1[e] -= g.a.lr * s[kMaxC];
    if (lane < C) {
      T* wp = W2 + static_cast<std::size_t>(e) * C + lane;
      // The lane's own class: a shuffle-free pick of s[lane] (unrolled, so s stays in registers).
      T v = T(0);
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c == lane) v = s[c];
      v += g.a.reg * *wp;
      *wp -= g.a.lr * v;
    }
  } else if (lane < C) {
    T v = T(0);
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c == lane) v = s[c];
    b2[lane] -= g.a.lr * v;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    persistent2_kernel(const std::uint8_t* __restrict__ images, const std::uint8_t* __restrict__ labels,
                       const std::uint32_t* __restrict__ order, T* P, T* Zp, T* A1, T* dZ1, T* dZ2,
                       double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts,
                       unsigned long long* probe, Shape2<T> g) {
  extern __shared__ __align__(16) unsigned char sm[];
  cg::grid_group grid = cg::this_grid();
  const PersistentShape<T>& a = g.a;
  T* W1 = P;
  T* ws = reinterpret_cast<T*>(sm + g.L.w);
  T* lut = reinterpret_cast<T*>(sm + g.L.lut);
  std::uint32_t* idx = reinterpret_cast<std::uint32_t*>(sm + g.L.idx);
  const int td4 = round4(g.td), tid = int(threadIdx.x);
  // The owned W1 tiles into shared memory, for the whole launch (zero past the tile's edge).
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    for (int i = tid; i < td4 * g.th; i += kThreads) {
      const int dd = i / g.th, hh = i % g.th;
      ws[k * td4 * g.th + i] = dd < q.tdl && hh < q.thl ? W1[static_cast<std::size_t>(q.d0 + dd) * a.H + q.h0 + hh] : T(0);
    }
  }
  for (int i = tid; i < 256; i += kThreads) lut[i] = T(i) / T(255);  // ops gather_normalize's division
  for (int j = tid; j < cols_of(g, 0); j += kThreads) idx[j] = order_of(g, order, 0)[j];
  __syncthreads();
  gather(g, images, idx, cols_of(g, 0), sm);
  const int warps = kThreads / 32, warp = tid / 32;
  const int tasks = a.H + 2, slot = (warps - 1 - warp) * int(gridDim.x) + int(blockIdx.x);
  for (int s = 0; s < a.steps; ++s) {
    const int b = cols_of(g, s);
    const std::uint32_t* cols = order_of(g, order, s);
    mark(probe, s, 0);
    // Phase A: this step's inputs landed; the next step's gathered while B and C run. The next
    // step's image indices are loaded first, their latency under the wait and the conversion.
    const int bn = s + 1 < a.steps ? cols_of(g, s + 1) : 0;
    std::uint32_t nidx[kIdxPerThread];
#pragma unroll
    for (int u = 0; u < kIdxPerThread; ++u) {
      const int j = tid + u * kThreads;
      nidx[u] = j < bn ? order_of(g, order, s + 1)[j] : 0u;
    }
    __pipeline_wait_prior(0);
    __syncthreads();
    convert(g, b, sm);
#pragma unroll
    for (int u = 0; u < kIdxPerThread; ++u)
      if (tid + u * kThreads < bn) idx[tid + u * kThreads] = nidx[u];
    for (int j = tid + kIdxPerThread * kThreads; j < bn; j += kThreads) idx[j] = order_of(g, order, s + 1)[j];
    __syncthreads();  // the bytes are converted (the buffers are free) and idx holds step s + 1's
    if (bn > 0) gather(g, images, idx, bn, sm);
    for (int k = 0; k < g.tpb; ++k) {
      const int t = int(blockIdx.x) + k * int(gridDim.x);
      if (t >= g.tiles) break;
      forward_tile(g, tile_of(g, t), k, b, Zp, sm);
    }
    mark(probe, s, 1);
    grid.sync();  // Zp complete
    mark(probe, s, 2);
    for (int j = int(blockIdx.x); j < b; j += int(gridDim.x))
      column(g, j, b, labels, cols, P, Zp, A1, dZ1, dZ2, loss_cols, hit_cols, sm);
    mark(probe, s, 3);
    grid.sync();  // A1, dZ1, dZ2 and the columns' losses complete; W2, b1 and b2 read
    mark(probe, s, 4);
    for (int k = 0; k < g.tpb; ++k) {
      const int t = int(blockIdx.x) + k * int(gridDim.x);
      if (t >= g.tiles) break;
      step_tile(g, tile_of(g, t), k, b, dZ1, sm);
    }
    for (int e = slot; e < tasks; e += warps * int(gridDim.x))
      tail_task(g, e, b, P, A1, dZ1, dZ2, loss_cols, hit_cols, stats, counts);
    mark(probe, s, 5);
    // No grid barrier: the next step's phase A reads only this block's W1 tiles (the barrier after
    // the wait orders step_tile's writes) and writes Zp, which every block finished reading.
  }
  __syncthreads();
  for (int k = 0; k < g.tpb; ++k) {  // the stepped tiles back to P
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    for (int i = tid; i < td4 * g.th; i += kThreads) {
      const int dd = i / g.th, hh = i % g.th;
      if (dd < q.tdl && hh < q.thl) W1[static_cast<std::size_t>(q.d0 + dd) * a.H + q.h0 + hh] = ws[k * td4 * g.th + i];
    }
  }
  __pipeline_wait_prior(0);  // nothing is gathered past the last step; leave no copy in flight
}

}  // namespace

template <class T>
int blocks_per_sm(std::size_t smem) {
  int per_sm = 0;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(persistent2_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent2_kernel<T>, kThreads, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return per_sm;
}

template <class T>
void run(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
         const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, T* A1, T* dZ1, T* dZ2,
         double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts, unsigned long long* probe,
         cudaStream_t s) {
  Shape2<T> g;
  g.a = shape;
  g.th = plan.tile_h, g.td = plan.tile_d, g.nht = (shape.H + plan.tile_h - 1) / plan.tile_h;
  g.tiles = plan.tiles, g.tpb = plan.tiles_per_block, g.jsplit = plan.jsplit, g.copy = plan.copy_bytes;
  g.dz_cols = plan.dz_cols;
  g.L = layout<T>(g.td, g.th, shape.B, g.tpb, g.dz_cols, g.jsplit);
  if (g.L.total > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(persistent2_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.L.total)));
  void* args[] = {&images, &labels, &order, &P, &scratch, &A1, &dZ1, &dZ2, &loss_cols, &hit_cols, &stats, &counts,
                  &probe, &g};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(persistent2_kernel<T>),
                                         dim3(unsigned(plan.blocks)), dim3(kThreads), args, g.L.total, s));
  CHECK_LAUNCH("persistent_step2");
}

#define NN_PERSIST2_INSTANTIATE(T)                                                                                   \
  template int blocks_per_sm<T>(std::size_t);                                                                       \
  template void run<T>(const PersistentPlan&, const PersistentShape<T>&, const std::uint8_t*, const std::uint8_t*,  \
                       const std::uint32_t*, T*, T*, T*, T*, T*, double*, unsigned*, double*, unsigned*,            \
                       unsigned long long*, cudaStream_t);
NN_PERSIST2_INSTANTIATE(float)
NN_PERSIST2_INSTANTIATE(double)
#undef NN_PERSIST2_INSTANTIATE

}  // namespace nn::persist2
