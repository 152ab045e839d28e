// A kernel with __launch_bounds__ defined in a header, for tests/sim/test_sim_func_attrs.cu:
// simcc rewrites quote-included headers that hold kernel code like .cu files, so the bound is
// enforced and reported by cudaFuncGetAttributes. Include it from one .cu file only.
#pragma once

namespace simtest_header {

constexpr int kHeaderBound = 48;

// Every thread that runs counts itself.
__global__ void __launch_bounds__(kHeaderBound) header_bounded_count(unsigned* count) {
  atomicAdd(count, 1u);
}
#ifdef SIM_EMULATOR
constexpr int kHeaderBoundsLine = __LINE__ - 4;  // the line of the __launch_bounds__
#endif

}  // namespace simtest_header
