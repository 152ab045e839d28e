// Internal to kernels/ops: the second persistent kernel's W1 tiles, phase A (a tile's forward
// partial sums) and phase C (a tile's SGD step from dZ1 and the step's inputs kept in shared
// memory). Device code for persistent_step2.cu; tested through tests/kernels/test_persistent_step*.cpp.
#pragma once
#include "ops/persistent_step2_io.h"

namespace nn::persist2::detail {

// forward_tile's operands for inputs d .. d + 3: wv[kk][i] = W(h0 + hl + i, d + kk), xv[jj][kk] =
// X(d + kk, jg + jj G); and their products added to acc (kk, then i, then jj: one order).
template <class T>
__device__ __forceinline__ void forward_load(const T* w, const T* x, int th, int ldx, int hl, int jg, int G, int d,
                                             T (&wv)[4][4], T (&xv)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) ld4(w + (d + kk) * th + hl, wv[kk]);
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) ld4(x + (jg + jj * G) * ldx + d, xv[jj]);
}
template <class T>
__device__ __forceinline__ void forward_fma(T (&acc)[4][4], const T (&wv)[4][4], const T (&xv)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[i][jj] += wv[kk][i] * xv[jj][kk];
}

// Phase A for owned tile k: Zp[slice](h, j) = sum over the tile's inputs d (in order) of W1(h, d) X(d, j).
// A thread owns 4 rows and the columns jg, jg + G, jg + 2G, jg + 3G (G = ceil(b / 4) groups); a
// warp's lanes run along the rows, then along jg, so one load instruction reads W rows broadcast
// across the column groups and consecutive X rows (distinct banks: x_stride). Pipelined (variant
// 3): two sets of operands, the next 4 inputs' loaded before the current 4's products, in the
// same order (float only: double's two sets of operands spill registers, measured by ptxas on sm_90).
template <bool Pipelined = false, class T>
__device__ void forward_tile(const Shape2<T>& g, const Tile& q, int k, int b, T* Zp, unsigned char* sm) {
  const T* w = reinterpret_cast<const T*>(sm + g.L.w) + static_cast<std::size_t>(k) * round4(g.td) * g.th;
  const T* x = reinterpret_cast<const T*>(sm + g.L.x) + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx;
  const int hgs = g.th / 4, G = (b + 3) / 4, pairs = hgs * G, tdl4 = round4(q.tdl);
  for (int p = int(threadIdx.x); p < pairs; p += kThreads) {
    const int hl = 4 * (p % hgs), jg = p / hgs;
    T acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[i][jj] = T(0);
    if constexpr (Pipelined) {
      T wa[4][4], xa[4][4], wb[4][4], xb[4][4];
      if (tdl4 > 0) forward_load(w, x, g.th, g.L.ldx, hl, jg, G, 0, wa, xa);
      for (int d = 0; d < tdl4; d += 8) {
        if (d + 4 < tdl4) forward_load(w, x, g.th, g.L.ldx, hl, jg, G, d + 4, wb, xb);
        forward_fma(acc, wa, xa);
        if (d + 4 >= tdl4) break;
        if (d + 8 < tdl4) forward_load(w, x, g.th, g.L.ldx, hl, jg, G, d + 8, wa, xa);
        forward_fma(acc, wb, xb);
      }
    } else {
      for (int d = 0; d < tdl4; d += 4) {
        T wv[4][4], xv[4][4];
        forward_load(w, x, g.th, g.L.ldx, hl, jg, G, d, wv, xv);
        forward_fma(acc, wv, xv);
      }
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = jg + jj * G;
      if (j >= b) break;
      T* z = Zp + (static_cast<std::size_t>(q.slice) * g.a.B + j) * g.a.H + q.h0 + hl;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (hl + i < q.thl) z[i] = acc[i][jj];
    }
  }
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

}  // namespace nn::persist2::detail
