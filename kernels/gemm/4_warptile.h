// Variant 4's internals shared by its two files: 4_warptile.cu (the kernel and its launch) and
// 4_warptile_plan.cu (the per-shape plan, the SM count and the split-K scratch). Not for callers.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace nn::gemm_detail::warptile {

// Block tile BM x BN of each configuration, the same for float and double so the plan does not
// depend on T (4_warptile.cu's Cfg<T, ID> static_asserts that it agrees).
inline constexpr int kTileM[] = {128, 64, 64, 16}, kTileN[] = {64, 64, 32, 64};

int sm_count();  // of the current device, cached
// k-slices for configuration cfg at M x N x K on a device with sms SMs (1: no split-K).
int plan_splits(int cfg, int M, int N, int K, int sms);

// Split-K scratch of one (device, stream): raw partial tiles and one arrival counter per tile.
struct Workspace {
  void* partial = nullptr;
  std::size_t partial_bytes = 0;
  unsigned* counters = nullptr;
  std::size_t n_counters = 0;
};
// The scratch of stream s on the current device, grown to at least these sizes.
Workspace& workspace(cudaStream_t s, std::size_t partial_bytes, std::size_t n_counters);

}  // namespace nn::gemm_detail::warptile
