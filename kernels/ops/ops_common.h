// Internal to kernels/ops (ops.cu, columns.cu): the launch geometry shared by every ops
// kernel, precise math for float and double, and a block-wide sum.
#pragma once
#include <atomic>
#include <cmath>
#include <cstddef>

#include "common/device_buffer.h"

namespace nn::ops_detail {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlock = 256;  // threads per block of the 1-D and column kernels
// Grid-stride loops cover whatever these grids do not: 2048 x 256 threads are about twice
// what an H100 (132 SMs x 2048) keeps resident, enough to saturate memory, while keeping
// the number of per-block atomics of the reductions small.
struct GridCaps {
  unsigned blocks, reduce_blocks, grid_y;
};
constexpr GridCaps kGpuCaps{2048, 1024, 65535};  // 65535: the hardware limit of gridDim.y
#ifndef SIM_EMULATOR
constexpr inline GridCaps caps() { return kGpuCaps; }
#else
// In the emulator every CUDA thread is a fiber whose switches cost more than one
// element's work, so the emulator build launches a few blocks that stride further.
// Results do not depend on the grid (every loop strides), and the tests then exercise
// the striding paths at every size; use_gpu_grids(true) restores the GPU's grids
// (make test-gpu-grid), so the many-block paths run as on a GPU too.
constexpr GridCaps kEmulatorCaps{8, 8, 8};
extern std::atomic<bool> g_gpu_grids;  // defined in ops.cu (use_gpu_grids)
inline GridCaps caps() { return g_gpu_grids.load(std::memory_order_relaxed) ? kGpuCaps : kEmulatorCaps; }
#endif

inline unsigned grid_1d(std::size_t n, unsigned cap) {
  const unsigned g = blocks_for(n, kBlock);
  return g < cap ? g : cap;
}
inline unsigned grid_1d(std::size_t n) { return grid_1d(n, caps().blocks); }

// Precise math for both types (never the fast intrinsics: results are compared with the CPU).
__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__device__ __forceinline__ float dev_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double dev_abs(double x) { return fabs(x); }

// Sum over the whole block; the result is valid in thread 0 only. `smem` holds one entry
// per warp. Every thread of the block must call it (it has a barrier).
template <class U>
__device__ U block_sum(U v, U* smem) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(kFullMask, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  U total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += smem[w];
  return total;
}

// The persistent steps' loss task, one warp: a step's loss and hits added to the epoch's (lane l sums
// columns l, l + 32, ... in order, then butterflies), the calls counted, the first non-finite one kept.
__device__ inline void loss_task(int b, const double* loss_cols, const unsigned* hit_cols, double* stats,
                                 unsigned* counts) {
  const int lane = int(threadIdx.x) & 31;
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
}

}  // namespace nn::ops_detail
