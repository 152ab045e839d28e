// Whole vector loads and stores (float4, double2, ...): one 16-byte access, as a GPU issues it
// (LDG.128/LDS.128/STS.128 from nvcc). Under the SIMT emulator the same access is one checked
// access instead of one per field (sim::load_whole in sim/include/sim/device.h says why), which
// is what keeps the emulator's per-access checks cheap in the GEMM's inner loop.
// nvcc compiles exactly `*p` and `*p = v`. Used by kernels/gemm/4_warptile.cu.
#pragma once
#include <cuda_runtime.h>

namespace nn {

#ifdef SIM_EMULATOR
// The caller's file and line, for the emulator's misaligned-address message.
template <class V>
__device__ __forceinline__ V load_vector(const V* p, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return sim::load_whole(p, file, line);
}
template <class V>
__device__ __forceinline__ void store_vector(V* p, V v, const char* file = __builtin_FILE(),
                                             int line = __builtin_LINE()) {
  sim::store_whole(p, v, file, line);
}
#else
template <class V>
__device__ __forceinline__ V load_vector(const V* p) {
  return *p;
}
template <class V>
__device__ __forceinline__ void store_vector(V* p, V v) {
  *p = v;
}
#endif

}  // namespace nn
