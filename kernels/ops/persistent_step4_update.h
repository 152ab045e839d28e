// Internal to kernels/ops: the fourth persistent kernel's phase C, in each block's shared memory:
// its W1 tile stepped from dZ1 and the step's inputs, its copy of the cluster's rows of W2 and b1
// and of b2 stepped (every copy from the same sums in the same order: the same bits), and the
// step's loss and hits added to the epoch's. Device code for persistent_step4.cu; tested through
// tests/kernels/test_persistent_cluster.cpp.
#pragma once
#include "ops/ops_common.h"
#include "ops/persistent_step4_phases.h"

namespace nn::persist4::detail {

using ops_detail::kFullMask;

// W1(u, d) -= lr (sum over j of dZ1(u, j) X(d, j) + reg W1(u, d)) for the tile's tdl inputs. A thread
// owns 4 units x 4 inputs and one of jsplit equal parts of the batch (summed in part order).
template <class T>
__device__ void step_tile(const Shape4<T>& g, int b, int tdl, unsigned char* sm) {
  T* w = at<T>(sm, g.L.w);
  const T* x = at<T>(sm, g.L.x);
  const T* dz1 = at<T>(sm, g.L.dz1);
  T* red = at<T>(sm, g.L.red);
  const int U = g.U, ld = g.L.ldx, ugs = U / 4, pairs = ugs * (ld / 4);
  // jsplit > 1 only where pairs x jsplit <= kThreads: one round; else rounds of kThreads tiles.
  for (int base = 0; base < pairs * g.jsplit; base += kThreads) {
    const int t = base + int(threadIdx.x), part = t / pairs, p = t % pairs;
    const bool active = part < g.jsplit;
    const int ul = 4 * (p % ugs), dl = 4 * (p / ugs);
    const int jb = active ? part * b / g.jsplit : 0, je = active ? (part + 1) * b / g.jsplit : 0;
    T acc[4][4] = {};
    for (int j = jb; j < je; ++j) {
      T gv[4], xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) gv[i] = dz1[j * U + ul + i], xv[i] = x[j * ld + dl + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) acc[i][kk] += gv[i] * xv[kk];
    }
    if (active && part > 0)
#pragma unroll
      for (int e = 0; e < 16; ++e) red[((part - 1) * pairs + p) * 16 + e] = acc[e / 4][e % 4];
    __syncthreads();
    if (active && part == 0) {
      for (int q = 1; q < g.jsplit; ++q)
#pragma unroll
        for (int e = 0; e < 16; ++e) acc[e / 4][e % 4] += red[((q - 1) * pairs + p) * 16 + e];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (dl + kk < tdl) {
            T* wp = w + (dl + kk) * U + ul + i;
            const T v = acc[i][kk] + g.a.reg * *wp;
            *wp = *wp - g.a.lr * v;
          }
    }
  }
}

// The block's copies of b1, W2's rows (task e < U: unit e) and b2 (task U) stepped, a warp a task:
// lane l sums columns l, l + 32, ... in order, then butterflies.
template <class T>
__device__ void step_layer2(const Shape4<T>& g, int b, unsigned char* sm) {
  const T* a1 = at<T>(sm, g.L.a1);
  const T* dz1 = at<T>(sm, g.L.dz1);
  const T* dz2 = at<T>(sm, g.L.dz2);
  T* w2 = at<T>(sm, g.L.w2);
  T* b1 = at<T>(sm, g.L.b1);
  T* b2 = at<T>(sm, g.L.b2);
  const int U = g.U, C = g.a.C, lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  for (int e = warp; e <= U; e += kThreads / 32) {
    T s[kMaxC + 1];
#pragma unroll
    for (int c = 0; c <= kMaxC; ++c) s[c] = T(0);
    for (int j = lane; j < b; j += 32) {
      const T av = e < U ? a1[j * U + e] : T(1);  // b2: the column sums of dZ2
      if (e < U) s[kMaxC] += dz1[j * U + e];
#pragma unroll
      for (int c = 0; c < kMaxC; ++c)
        if (c < C) s[c] += e < U ? dz2[j * kMaxC + c] * av : dz2[j * kMaxC + c];
    }
#pragma unroll
    for (int c = 0; c <= kMaxC; ++c)
      for (int off = 16; off > 0; off >>= 1) s[c] += __shfl_xor_sync(kFullMask, s[c], off);
    T v = T(0);  // the lane's own class
#pragma unroll
    for (int c = 0; c < kMaxC; ++c)
      if (c == lane) v = s[c];
    if (e < U) {
      if (lane == kMaxC) b1[e] -= g.a.lr * s[kMaxC];
      if (lane < C) {
        T* wp = w2 + e * kMaxC + lane;
        v += g.a.reg * *wp;
        *wp -= g.a.lr * v;
      }
    } else if (lane < C) {
      b2[lane] -= g.a.lr * v;
    }
  }
}

// One warp: the step's loss and hits (the gathered columns') added to the epoch's sums
// (ops_common.h's loss_task, as the second kernel adds them).
template <class T>
__device__ void add_loss(const Shape4<T>& g, int b, unsigned char* sm, double* stats, unsigned* counts) {
  ops_detail::loss_task(b, at<double>(sm, g.L.loss), at<unsigned>(sm, g.L.hit), stats, counts);
}

}  // namespace nn::persist4::detail
