// Internal to kernels/ops: the second persistent kernel's phase B (a batch column by a block: the
// hidden layer from the split-K sums, the scores, softmax, loss and dZ2, dZ1) and phase C's tail
// ([b1 | W2 | b2] and the loss, a warp a task). Device code for persistent_step2.cu; tested
// through tests/kernels/test_persistent_step*.cpp.
#pragma once
#include <cmath>

#include "gemm/gemm.h"
#include "ops/ops_common.h"
#include "ops/persistent_step2_io.h"

namespace nn::persist2::detail {

using ops_detail::dev_exp;
using ops_detail::kFullMask;
using ops_detail::loss_task;

// Phase B's hidden unit h of column j: z = the slices' sums in slice order + b1, a = sigmoid(z)
// (written to A1), w = W2's row h; everything it reads is issued before the first sum waits.
template <class T>
__device__ __forceinline__ T hidden_unit(const Shape2<T>& g, int j, int h, const T* b1, const T* W2, const T* Zp,
                                         T* A1, T (&w)[kMaxC]) {
  const int H = g.a.H, C = g.a.C, S = g.a.slices;
  const T bias = b1[h];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) w[c] = c < C ? W2[static_cast<std::size_t>(h) * C + c] : T(0);
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
  const T a = gemm_detail::sigmoid(z + bias);
  A1[static_cast<std::size_t>(j) * H + h] = a;
  return a;
}

// Warp 0 of phase B: the scores from the warps' partial sums (sred, in warp order) + b2, the
// softmax (the maximum and the lowest class holding it by butterflies), dZ2 into sdz and dZ2, the
// column's loss and hit (ops softmax_xent's forms; a label >= C gives a NaN loss, as there).
template <class T>
__device__ void column_softmax(const Shape2<T>& g, int j, int b, int lbl, const T* b2, const T* sred, T* sdz, T* dZ2,
                               double* loss_cols, unsigned* hit_cols) {
  const int C = g.a.C, lane = int(threadIdx.x) & 31;
  T z = -INFINITY;
  if (lane < C) {
    z = T(0);
    for (int u = 0; u < kThreads / 32; ++u) z += sred[u * kMaxC + lane];
    z += b2[lane];
  }
  T m = z;
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
    loss_cols[j] = double(m) - (lbl < C && lbl >= 0 ? double(zl) : double(NAN)) + log(double(sum));
    hit_cols[j] = arg == lbl ? 1u : 0u;
  }
}

// Phase B for batch column j by the whole block: thread r holds hidden units r, r + 256, ...
template <class T>
__device__ void column(const Shape2<T>& g, int j, int b, const std::uint8_t* labels, const std::uint32_t* cols,
                       const T* P, const T* Zp, T* A1, T* dZ1, T* dZ2, double* loss_cols, unsigned* hit_cols,
                       unsigned char* sm) {
  const int H = g.a.H, C = g.a.C, lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const T* b1 = P + static_cast<std::size_t>(H) * g.a.D;
  const T* W2 = b1 + H;
  T* sred = reinterpret_cast<T*>(sm + g.L.col);  // [warp][c]
  T* sdz = sred + (kThreads / 32) * kMaxC;        // [c], then the label
  int label = 0;
  if (threadIdx.x == 0) label = int(labels[cols[j]]);  // issued first: its two loads overlap the rest
  T a[kMaxHPerThread], w[kMaxHPerThread][kMaxC], part[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c) part[c] = T(0);
#pragma unroll
  for (int u = 0; u < kMaxHPerThread; ++u) {
    const int h = int(threadIdx.x) + u * kThreads;
    a[u] = h < H ? hidden_unit(g, j, h, b1, W2, Zp, A1, w[u]) : T(0);
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (h < H && c < C) part[c] += w[u][c] * a[u];
  }
  // The scores: each warp's sums by butterflies, then the warps' in order (warp 0).
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    for (int off = 16; off > 0; off >>= 1) part[c] += __shfl_xor_sync(kFullMask, part[c], off);
  if (lane == 0)
#pragma unroll
    for (int c = 0; c < kMaxC; ++c) sred[warp * kMaxC + c] = part[c];
  if (threadIdx.x == 0) sdz[kMaxC] = T(label);
  __syncthreads();
  if (warp == 0)
    column_softmax(g, j, b, int(sdz[kMaxC]), W2 + static_cast<std::size_t>(C) * H, sred, sdz, dZ2, loss_cols,
                   hit_cols);
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kMaxHPerThread; ++u) {
    const int h = int(threadIdx.x) + u * kThreads;
    if (h >= H) continue;
    T da = T(0);
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) da += w[u][c] * sdz[c];
    dZ1[static_cast<std::size_t>(j) * H + h] = da * (a[u] * (T(1) - a[u]));  // ops sigmoid_backward's form
  }
  __syncthreads();  // sred and sdz are the next column's
}

// Phase C's tail, task e by one warp: e < H steps b1(e) and W2(e, :), e == H steps b2, e == H + 1
// is the loss task. Lane l sums columns l, l + 32, ... in order, then butterflies: the same bits
// for any grid.
template <class T>
__device__ void tail_task(const Shape2<T>& g, int e, int b, T* P, const T* A1, const T* dZ1, const T* dZ2,
                          const double* loss_cols, const unsigned* hit_cols, double* stats, unsigned* counts) {
  const int H = g.a.H, C = g.a.C, lane = int(threadIdx.x) & 31;
  if (e == H + 1) return loss_task(b, loss_cols, hit_cols, stats, counts);
  T* b1 = P + static_cast<std::size_t>(H) * g.a.D;
  T* W2 = b1 + H;
  T* b2 = W2 + static_cast<std::size_t>(C) * H;
  T s[kMaxC + 1];
#pragma unroll
  for (int c = 0; c <= kMaxC; ++c) s[c] = T(0);
  for (int j = lane; j < b; j += 32) {
    const T* dz2 = dZ2 + static_cast<std::size_t>(j) * C;
    const T av = e < H ? A1[static_cast<std::size_t>(j) * H + e] : T(1);  // b2: the column sums of dZ2
    if (e < H) s[kMaxC] += dZ1[static_cast<std::size_t>(j) * H + e];
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c < C) s[c] += e < H ? dz2[c] * av : dz2[c];
  }
#pragma unroll
  for (int c = 0; c <= kMaxC; ++c)
    for (int off = 16; off > 0; off >>= 1) s[c] += __shfl_xor_sync(kFullMask, s[c], off);
  T v = T(0);  // the lane's own class (an unrolled pick: s stays in registers)
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    if (c == lane) v = s[c];
  if (e < H) {
    if (lane == kMaxC) b1[e] -= g.a.lr * s[kMaxC];
    if (lane < C) {
      T* wp = W2 + static_cast<std::size_t>(e) * C + lane;
      v += g.a.reg * *wp;
      *wp -= g.a.lr * v;
    }
  } else if (lane < C) {
    b2[lane] -= g.a.lr * v;
  }
}

}  // namespace nn::persist2::detail
