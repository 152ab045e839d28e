// The fused step's layer-2 kernels (declared in layer2.h): layer2_fused does the scores,
// softmax, loss and hits, dZ2, dW2 / db2 / db1's per-tile parts and dZ1 over A1 in one pass
// per 16-column tile; layer2_finish sums the parts in tile order and steps (or writes the
// gradient of) [b1 | W2 | b2]. nvcc for the GPU, sim/simcc for the CPU emulator; tested by
// tests/kernels/test_layer2.cpp.
#include "ops/layer2.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"
#include "common/pdl.h"
#include "ops/layer2_column.h"
#include "ops/ops_common.h"

namespace nn {
namespace {

using namespace ops_detail;
constexpr int kC = kLayer2MaxClasses;
constexpr int kCols = kLayer2TileCols;

// Tiles are visited grid-stride, so any grid gives the same parts. Per tile: step 1 (a warp
// per column), a barrier, then step 2 by rows: thread h keeps W2(:, h) and its dW2 sums in
// registers and walks the tile's columns, reading a1 before writing dZ1 over it.
template <class T>
__global__ void __launch_bounds__(kBlock)
    layer2_fused_kernel(T* A1, int H, int C, int b, const T* __restrict__ W2, const T* __restrict__ b2,
                        const std::uint8_t* __restrict__ labels, const std::uint32_t* __restrict__ cols,
                        T inv_B, T* __restrict__ parts, double* __restrict__ loss_parts,
                        unsigned* __restrict__ hit_parts) {
  __shared__ T s_dz[kCols][kC];
  __shared__ double s_loss[kCols];
  __shared__ unsigned s_hit[kCols];
  const int warp = int(threadIdx.x >> 5), warps = int(blockDim.x >> 5);
  const std::size_t n_part = layer2_part_size(H, C);
  const int tiles = layer2_tiles(b);
  pdl_wait();  // A1 (the forward GEMM's) and the parts the finish kernel before it read
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    if (t + int(gridDim.x) >= tiles) pdl_trigger();  // the block's last tile: the finish kernel may start
    const int j0 = t * kCols, ncols = min(kCols, b - j0);
    for (int jj = warp; jj < ncols; jj += warps)
      column_scores(A1 + static_cast<std::size_t>(j0 + jj) * H, H, C, W2, b2, int(labels[cols[j0 + jj]]), inv_B,
                    s_dz[jj], &s_loss[jj], &s_hit[jj]);
    __syncthreads();
    T* part = parts + static_cast<std::size_t>(t) * n_part;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
      T w[kC], dw[kC];
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        w[c] = c < C ? W2[static_cast<std::size_t>(h) * C + c] : T(0);
        dw[c] = 0;
      }
      T db1 = 0;
      for (int jj = 0; jj < ncols; ++jj) {
        T* ap = A1 + static_cast<std::size_t>(j0 + jj) * H + h;
        const T a = *ap;
        T da = 0;
#pragma unroll
        for (int c = 0; c < kC; ++c)
          if (c < C) {
            const T d = s_dz[jj][c];
            dw[c] += d * a;
            da += w[c] * d;
          }
        const T dz1 = da * (a * (T(1) - a));  // ops sigmoid_backward's form
        *ap = dz1;
        db1 += dz1;
      }
      part[h] = db1;
#pragma unroll
      for (int c = 0; c < kC; ++c)
        if (c < C) part[H + static_cast<std::size_t>(h) * C + c] = dw[c];
    }
    if (int(threadIdx.x) < C) {
      T s = 0;
      for (int jj = 0; jj < ncols; ++jj) s += s_dz[jj][threadIdx.x];
      part[H + static_cast<std::size_t>(H) * C + threadIdx.x] = s;
    }
    if (threadIdx.x == 0) {
      double l = 0;
      unsigned hits = 0;
      for (int jj = 0; jj < ncols; ++jj) l += s_loss[jj], hits += s_hit[jj];
      loss_parts[t] = l;
      hit_parts[t] = hits;
    }
    __syncthreads();  // the next tile reuses the shared arrays
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    layer2_finish_kernel(const T* __restrict__ parts, int tiles, int H, int C, T reg, T lr, T* P, T* G,
                         const double* __restrict__ loss_parts, const unsigned* __restrict__ hit_parts,
                         double* stats, unsigned* counts) {
  const std::size_t n = layer2_part_size(H, C);
  const std::size_t w2_begin = std::size_t(H), w2_end = std::size_t(H) * (C + 1);
  pdl_wait();  // the parts of the fused kernel before it
  pdl_trigger();  // a short kernel: the dW1 GEMM may be scheduled now (it waits for this one to end)
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(blockDim.x) * gridDim.x) {
    T g = 0;
    for (int t = 0; t < tiles; ++t) g += parts[static_cast<std::size_t>(t) * n + i];
    const T p = P[i];
    // The unfused path's dW2 GEMM adds reg * W2 through beta * C: the same product and sum.
    if (reg != T(0) && i >= w2_begin && i < w2_end) g += reg * p;
    if (G) G[i] = g;
    else P[i] = p - lr * g;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double l = 0;
    unsigned hits = 0;
    for (int t = 0; t < tiles; ++t) l += loss_parts[t], hits += hit_parts[t];
    stats[0] += l;
    counts[0] += hits;
    counts[1] += 1;
    const bool finite = l - l == 0.0;  // false for inf and NaN, in any compiler's device code
    if (!finite && counts[2] == 0) counts[2] = counts[1];
  }
}

}  // namespace

template <class T>
void layer2_fused(T* A1, int H, int C, int b, const T* W2, const T* b2, const std::uint8_t* labels,
                  const std::uint32_t* cols, T inv_B, T* parts, double* loss_parts, unsigned* hit_parts,
                  cudaStream_t s) {
  NN_RANGE("layer2_fused");
  if (C < 1 || C > kLayer2MaxClasses || H < 1 || b < 0)
    throw std::invalid_argument("layer2_fused: needs 1 <= C <= " + std::to_string(kLayer2MaxClasses) +
                                ", H >= 1, b >= 0 (got C " + std::to_string(C) + ", H " + std::to_string(H) +
                                ", b " + std::to_string(b) + ")");
  if (b == 0) return;
  const unsigned tiles = unsigned(layer2_tiles(b)), cap = caps().blocks;
  launch_pdl(NN_LAUNCH_SITE("layer2_fused"), layer2_fused_kernel<T>, dim3(tiles < cap ? tiles : cap), dim3(kBlock), 0,
             s, A1, H, C, b, W2, b2, labels, cols, inv_B, parts, loss_parts, hit_parts);
}

template <class T>
void layer2_finish(const T* parts, int tiles, int H, int C, T reg, T lr, T* P, T* G, const double* loss_parts,
                   const unsigned* hit_parts, double* stats, unsigned* counts, cudaStream_t s) {
  NN_RANGE("layer2_finish");
  if (C < 1 || H < 1 || tiles < 0) throw std::invalid_argument("layer2_finish: needs C >= 1, H >= 1, tiles >= 0");
  launch_pdl(NN_LAUNCH_SITE("layer2_finish"), layer2_finish_kernel<T>, dim3(grid_1d(layer2_part_size(H, C))),
             dim3(kBlock), 0, s, parts, tiles, H, C, reg, lr, P, G, loss_parts, hit_parts, stats, counts);
}

#define NN_LAYER2_INSTANTIATE(T)                                                                                \
  template void layer2_fused<T>(T*, int, int, int, const T*, const T*, const std::uint8_t*, const std::uint32_t*, \
                                T, T*, double*, unsigned*, cudaStream_t);                                       \
  template void layer2_finish<T>(const T*, int, int, int, T, T, T*, T*, const double*, const unsigned*, double*, \
                                 unsigned*, cudaStream_t);
NN_LAYER2_INSTANTIATE(float)
NN_LAYER2_INSTANTIATE(double)
#undef NN_LAYER2_INSTANTIATE

}  // namespace nn
