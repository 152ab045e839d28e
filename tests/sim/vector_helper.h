// A kernel-side helper in a header, as kernels/common/vector_access.h is one: used by
// tests/sim/test_sim_checks_vector.cu to check that a fault inside it names its line and its caller's.
#pragma once

template <class V>
__device__ __forceinline__ V helper_load(const V* p) {
  return sim::load_whole(p);
}
constexpr int kHelperLoadLine = __LINE__ - 2;
