// Device code that variant 5's two kernels share: 5_tf32x3.cu (mma.sync, every GPU since
// sm_80) and 5_tf32x3_wgmma.cu (wgmma, sm_90a). Not for callers.
//  - load4: four consecutive elements of an operand from global memory (zeros past its end),
//    16 bytes at once where allowed.
//  - splitk_last: split-K's deterministic reduction of one thread's running sums.
//  - epilogue_store: one element of D through the epilogue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/vector_access.h"
#include "gemm/gemm.h"

namespace nn::gemm_detail::tf32x3 {

// d[v] = element (c + v, o) of the operand (c along the dimension contiguous in memory), at
// X + o * ld + c + v; zero where o >= o_end or c + v >= c_end. vec: 16-byte loads allowed when
// all four are in range.
__device__ __forceinline__ void load4(float* d, const float* X, int ld, int c, int c_end, int o, int o_end, bool vec) {
  if (o >= o_end) {
#pragma unroll
    for (int v = 0; v < 4; ++v) d[v] = 0.0f;
    return;
  }
  const float* p = X + static_cast<std::size_t>(o) * ld + c;
  if (vec && c + 4 <= c_end) {
    const float4 u = __ldg(reinterpret_cast<const float4*>(p));
    d[0] = u.x; d[1] = u.y; d[2] = u.z; d[3] = u.w;
  } else {
#pragma unroll
    for (int v = 0; v < 4; ++v) d[v] = c + v < c_end ? p[v] : 0.0f;
  }
}

// Split-K (gridDim.z slices): every slice writes its kPer running sums per thread to ws; the
// last slice to arrive at a tile (a per-tile counter, no spinning) adds all slices in slice
// order from zero, so the result does not depend on which block came last, and resets the
// counter for the next launch. Returns false in every block but that last one, which then
// holds the sum in acc and runs the epilogue. Call with every thread of the block.
template <int kPer, int kThreads>
__device__ __forceinline__ bool splitk_last(float* acc, float* ws, unsigned* counters, int tid, int& is_last) {
  static_assert(kPer % 4 == 0, "whole float4s");
  const std::size_t tile = blockIdx.x + static_cast<std::size_t>(blockIdx.y) * gridDim.x;
  float* mine = ws + ((tile * gridDim.z + blockIdx.z) * kThreads + tid) * kPer;
#pragma unroll
  for (int i = 0; i < kPer; i += 4)
    store_vector(reinterpret_cast<float4*>(mine + i), make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]));
  __threadfence();  // publish the partials before the counter says they are there
  __syncthreads();
  if (tid == 0) {
    const unsigned prev = atomicAdd(&counters[tile], 1u);
    is_last = prev == gridDim.z - 1;
    if (is_last) counters[tile] = 0;
  }
  __syncthreads();
  if (!is_last) return false;
  __threadfence();
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0.0f;
  for (unsigned z = 0; z < gridDim.z; ++z) {
    const float* p = ws + ((tile * gridDim.z + z) * kThreads + tid) * kPer;
#pragma unroll
    for (int i = 0; i < kPer; i += 4) {
      const float4 u = __ldcg(reinterpret_cast<const float4*>(p + i));  // L2 only: other SMs wrote it
      acc[i] += u.x;
      acc[i + 1] += u.y;
      acc[i + 2] += u.z;
      acc[i + 3] += u.w;
    }
  }
  return true;
}

// D(row, col) = epilogue(alpha * sum + beta * C(row, col)) (D and C column-major), or for the
// fused step D = C - step_lr * (alpha * sum + beta * C); nothing outside M x N.
__device__ __forceinline__ void epilogue_store(float sum, int row, int col, int M, int N, float alpha, float beta,
                                               const float* C, int ldc, float* D, int ldd, Epilogue ep,
                                               const float* bias, float step_lr) {
  if (row >= M || col >= N) return;
  const std::size_t jc = static_cast<std::size_t>(col);
  float v = alpha * sum;
  if (C) {
    const float cv = C[row + jc * ldc];
    v += beta * cv;
    if (ep == Epilogue::Step) v = cv - step_lr * v;
  }
  if (ep != Epilogue::Step) v = apply_epilogue(v, ep, bias, row);
  D[row + jc * ldd] = v;
}

}  // namespace nn::gemm_detail::tf32x3
