// Variant 5's internals shared by its two files: 5_tf32x3.cu (the kernel and its launch) and
// 5_tf32x3_plan.cu (the per-shape plan: which tile, how many k-slices). Not for callers.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace nn::gemm_detail::tf32x3 {

// Block tile BM x BN of each configuration (5_tf32x3.cu's TcCfg<ID> static_asserts that it
// agrees): 128x128, 64x64, 32x32, 128x64.
inline constexpr int kConfigs = 4;
inline constexpr int kTileM[kConfigs] = {128, 64, 32, 128}, kTileN[kConfigs] = {128, 64, 32, 64};

// K cut into `splits` slices of a whole number of `align` each, recounted so that none is empty
// (z slices of k_split; z = 1: no split-K), and when z > 1 the split-K scratch of stream s for
// `tiles` output tiles of `tile_floats` each (variant 4's: warptile::workspace).
struct Slices {
  int k_split;
  unsigned z;
  float* ws;
  unsigned* counters;
};
Slices slice_k(int K, int splits, int align, std::size_t tiles, std::size_t tile_floats, cudaStream_t s);

// The configuration gemm(5, ...) runs at M x N x K on the current device.
int plan_tile(int M, int N, int K);
// k-slices for `tiles` blocks of a configuration of which `resident` fit an SM at once, at
// depth K (1: no split-K).
int plan_splits(long tiles, int resident, int K);
// The same for the wgmma kernel (one block an SM, slices of whole `align` k-tiles): the count
// that minimises the k-steps of its busiest SM, waves * (slice + a fixed cost per block), plus
// a cost per extra slice. The constants are estimates, not fitted to measurements.
int plan_splits_waves(long tiles, int K, int align);

}  // namespace nn::gemm_detail::tf32x3
