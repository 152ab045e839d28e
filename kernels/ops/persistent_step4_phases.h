// Internal to kernels/ops: the fourth persistent kernel's forward phases and the loss's columns:
// the step's inputs of a block's slice, the slice's partial Z1, the split-K sums across the cluster
// (distributed shared memory), the cluster's partial scores, and after the grid barrier the scores,
// softmax, loss and dZ2, and dZ1 of the cluster's units. Device code for persistent_step4.cu
// (nvcc for sm_90, sim/simcc); tested through tests/kernels/test_persistent_cluster.cpp.
#pragma once
#include <cmath>

#include "gemm/gemm.h"
#include "ops/ops_common.h"
#include "ops/persistent_step4.h"

namespace nn::persist4::detail {

using ops_detail::dev_exp;

template <class T>
__device__ __forceinline__ T* at(unsigned char* sm, std::size_t off) {
  return reinterpret_cast<T*>(sm + off);
}

// Block r's share of the b batch columns: [r b / CL, (r + 1) b / CL).
__device__ __forceinline__ int share_begin(int r, int b, int CL) { return r * b / CL; }

// Step s's inputs d0 .. d0 + tdl of the batch into x[j][d] (exactly byte / 255, through the table),
// zeros past tdl and in the rows up to the next multiple of 4 (read by phase A's thread tiles).
template <class T>
__device__ void gather_inputs(const Shape4<T>& g, const std::uint8_t* images, const std::uint32_t* cols, int b,
                              int d0, int tdl, unsigned char* sm) {
  T* x = at<T>(sm, g.L.x);
  const T* lut = at<T>(sm, g.L.lut);
  const int ld = g.L.ldx, rows = round4(b);
  for (int i = int(threadIdx.x); i < rows * ld; i += kThreads) {
    const int j = i / ld, d = i % ld;
    x[i] = j < b && d < tdl ? lut[images[static_cast<std::size_t>(cols[j]) * g.a.D + d0 + d]] : T(0);
  }
}

// Phase A: zp[j][u] = the sum over the slice's inputs d (in order) of W1(u, d) X(d, j). A thread
// owns 4 units and the columns jg, jg + G, jg + 2G, jg + 3G (G = ceil(b / 4)).
template <class T>
__device__ void forward_partial(const Shape4<T>& g, int b, unsigned char* sm) {
  const T* w = at<T>(sm, g.L.w);
  const T* x = at<T>(sm, g.L.x);
  T* zp = at<T>(sm, g.L.zp);
  const int U = g.U, ugs = U / 4, G = (b + 3) / 4, ld = g.L.ldx;
  for (int p = int(threadIdx.x); p < ugs * G; p += kThreads) {
    const int ul = 4 * (p % ugs), jg = p / ugs;
    T acc[4][4] = {};
    for (int d = 0; d < ld; ++d) {
      T wv[4], xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) wv[i] = w[d * U + ul + i];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) xv[jj] = x[(jg + jj * G) * ld + d];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) acc[i][jj] += wv[i] * xv[jj];
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = jg + jj * G;
      if (j < b)
#pragma unroll
        for (int i = 0; i < 4; ++i) zp[j * U + ul + i] = acc[i][jj];
    }
  }
}

// After cluster.sync(): the block's columns [j0, j1) of Z1 for the cluster's units, the partial
// sums of the cluster's blocks added in rank order (read from their shared memory) + b1, A1 =
// sigmoid(Z1) into a1.
template <class T, class Cluster>
__device__ void hidden_share(const Shape4<T>& g, Cluster& cluster, int j0, int j1, unsigned char* sm) {
  T* zp = at<T>(sm, g.L.zp);
  T* a1 = at<T>(sm, g.L.a1);
  const T* b1 = at<T>(sm, g.L.b1);
  const int U = g.U;
  for (int i = int(threadIdx.x); i < (j1 - j0) * U; i += kThreads) {
    const int e = j0 * U + i, u = i % U;
    T v[kMaxCluster];  // every rank's load in flight, then summed in rank order
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q) v[q] = q < g.CL ? cluster.map_shared_rank(zp, unsigned(q))[e] : T(0);
    T z = T(0);
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q)
      if (q < g.CL) z += v[q];
    a1[e] = gemm_detail::sigmoid(z + b1[u]);
  }
}

// The cluster's partial scores of columns [j0, j1): S_k(c, j) = sum over its units u (in order) of
// W2(u, c) A1(u, j), into Sp[j][c] (the step's parity buffer, the cluster's part).
template <class T>
__device__ void partial_scores(const Shape4<T>& g, int j0, int j1, T* Sp, unsigned char* sm) {
  const T* a1 = at<T>(sm, g.L.a1);
  const T* w2 = at<T>(sm, g.L.w2);
  const int U = g.U, C = g.a.C;
  for (int i = int(threadIdx.x); i < (j1 - j0) * C; i += kThreads) {
    const int j = j0 + i / C, c = i % C;
    T s = T(0);
    for (int u = 0; u < U; ++u) s += w2[u * kMaxC + c] * a1[j * U + u];
    Sp[static_cast<std::size_t>(j) * C + c] = s;
  }
}

// After the grid barrier, column j's softmax from its scores in dz2[j] (the clusters' parts summed
// + b2): dZ2 in place, the loss and hit (ops softmax_xent's forms; a label >= C gives a NaN loss).
template <class T>
__device__ void column_softmax(const Shape4<T>& g, int j, int b, int lbl, unsigned char* sm) {
  T* z = at<T>(sm, g.L.dz2) + j * kMaxC;
  const int C = g.a.C;
  T m = z[0];
  int arg = 0;
  for (int c = 1; c < C; ++c)
    if (z[c] > m) m = z[c], arg = c;
  T sum = T(0), e[kMaxC];
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    if (c < C) e[c] = dev_exp(z[c] - m), sum += e[c];
  const bool ok = lbl < C && lbl >= 0;
  at<double>(sm, g.L.loss)[j] = double(m) - (ok ? double(z[ok ? lbl : 0]) : double(NAN)) + log(double(sum));
  at<unsigned>(sm, g.L.hit)[j] = arg == lbl ? 1u : 0u;
#pragma unroll
  for (int c = 0; c < kMaxC; ++c)
    if (c < C) z[c] = (e[c] / sum - (c == lbl ? T(1) : T(0))) * (T(1) / T(b));
}

// Phase B for the block's columns [j0, j1): the scores (every cluster's part in cluster order +
// b2), softmax, loss, hit and dZ2, then dZ1(u, j) = (W2^T dZ2)(u, j) a1 (1 - a1) for the cluster's
// units. Every cluster computes the same scores of a column: the same bits.
template <class T>
__device__ void output_share(const Shape4<T>& g, int j0, int j1, int b, const std::uint8_t* labels,
                             const std::uint32_t* cols, const T* S, unsigned char* sm) {
  T* dz2 = at<T>(sm, g.L.dz2);
  const T* b2 = at<T>(sm, g.L.b2);
  const int C = g.a.C, U = g.U;
  for (int i = int(threadIdx.x); i < (j1 - j0) * C; i += kThreads) {
    const int j = j0 + i / C, c = i % C;
    const T* sp = S + static_cast<std::size_t>(j) * C + c;
    const std::size_t stride = static_cast<std::size_t>(g.a.B) * C;
    T z = T(0);
    for (int k0 = 0; k0 < g.NC; k0 += 16) {  // 16 clusters' loads in flight, then summed in order
      T v[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = k0 + i < g.NC ? sp[(k0 + i) * stride] : T(0);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (k0 + i < g.NC) z += v[i];
    }
    dz2[j * kMaxC + c] = z + b2[c];
  }
  __syncthreads();
  for (int j = j0 + int(threadIdx.x); j < j1; j += kThreads) column_softmax(g, j, b, int(labels[cols[j]]), sm);
  __syncthreads();
  const T* a1 = at<T>(sm, g.L.a1);
  const T* w2 = at<T>(sm, g.L.w2);
  T* dz1 = at<T>(sm, g.L.dz1);
  for (int i = int(threadIdx.x); i < (j1 - j0) * U; i += kThreads) {
    const int j = j0 + i / U, u = i % U;
    T da = T(0);
    for (int c = 0; c < C; ++c) da += w2[u * kMaxC + c] * dz2[j * kMaxC + c];
    const T a = a1[j * U + u];
    dz1[j * U + u] = da * (a * (T(1) - a));  // ops sigmoid_backward's form
  }
}

// After cluster.sync(): the other blocks' columns of A1, dZ1 and dZ2 (and, where losses is set,
// the losses and hits) copied from their shared memory into this block's.
template <class T, class Cluster>
__device__ void gather_columns(const Shape4<T>& g, Cluster& cluster, int r, int b, bool losses,
                               unsigned char* sm) {
  const int U = g.U;
  for (int q = 0; q < g.CL; ++q) {
    if (q == r) continue;
    const int j0 = share_begin(q, b, g.CL), j1 = share_begin(q + 1, b, g.CL);
    unsigned char* rs = cluster.map_shared_rank(sm, unsigned(q));
    for (int i = j0 * U + int(threadIdx.x); i < j1 * U; i += kThreads) {
      at<T>(sm, g.L.a1)[i] = at<T>(rs, g.L.a1)[i];
      at<T>(sm, g.L.dz1)[i] = at<T>(rs, g.L.dz1)[i];
    }
    for (int i = j0 * kMaxC + int(threadIdx.x); i < j1 * kMaxC; i += kThreads)
      if (i % kMaxC < g.a.C) at<T>(sm, g.L.dz2)[i] = at<T>(rs, g.L.dz2)[i];
    if (losses)
      for (int j = j0 + int(threadIdx.x); j < j1; j += kThreads) {
        at<double>(sm, g.L.loss)[j] = at<double>(rs, g.L.loss)[j];
        at<unsigned>(sm, g.L.hit)[j] = at<unsigned>(rs, g.L.hit)[j];
      }
  }
}

}  // namespace nn::persist4::detail
