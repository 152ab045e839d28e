// One column's layer 2, shared by the fused step's layer2_fused (layer2.cu) and the persistent
// step (persistent_step.cu): the scores z = W2 a + b2 of a column by one warp, its softmax,
// cross-entropy and hit, and dZ2. Internal to kernels/ops.
#pragma once
#include <cmath>

#include "ops/layer2.h"
#include "ops/ops_common.h"

namespace nn::ops_detail {

__device__ __forceinline__ double dev_log(double x) { return log(x); }

// Step 1 for column j of the tile: one warp, its lanes along H (consecutive rows: the column
// is read in whole lines), the C sums reduced by butterflies so every lane holds them.
// Lane 0 writes dZ2 (the softmax, as ops softmax_xent forms it), the loss and the hit.
template <class T>
__device__ __forceinline__ void column_scores(const T* a, int H, int C, const T* W2, const T* b2, int label,
                                              T inv_B, T* dz, double* loss, unsigned* hit) {
  const int lane = int(threadIdx.x & 31);
  constexpr int kC = kLayer2MaxClasses;
  T z[kC];
#pragma unroll
  for (int c = 0; c < kC; ++c) z[c] = 0;
  for (int h = lane; h < H; h += 32) {
    const T av = a[h];
    const T* w = W2 + static_cast<std::size_t>(h) * C;
#pragma unroll
    for (int c = 0; c < kC; ++c)
      if (c < C) z[c] += w[c] * av;
  }
#pragma unroll
  for (int c = 0; c < kC; ++c)
    for (int off = 16; off > 0; off >>= 1) z[c] += __shfl_xor_sync(kFullMask, z[c], off);
  if (lane != 0) return;
  T m = T(-INFINITY);
  int arg = -1;
#pragma unroll
  for (int c = 0; c < kC; ++c)
    if (c < C) {
      z[c] += b2[c];
      if (arg < 0 || z[c] > m) m = z[c], arg = c;  // the lowest index on ties
    }
  T sum = 0;
#pragma unroll
  for (int c = 0; c < kC; ++c)
    if (c < C) sum += dev_exp(z[c] - m);
  T zl = T(NAN);  // a label >= C (the loader refuses those) gives a NaN loss, not a stray read
#pragma unroll
  for (int c = 0; c < kC; ++c)
    if (c < C) {
      if (c == label) zl = z[c];
      const T y = dev_exp(z[c] - m) / sum;
      dz[c] = (y - (c == label ? T(1) : T(0))) * inv_B;
    }
  *loss = double(m) - double(zl) + dev_log(double(sum));
  *hit = arg == label ? 1u : 0u;
}

}  // namespace nn::ops_detail
