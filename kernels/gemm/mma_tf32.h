// The two tensor-core primitives of GEMM variant 5 (5_tf32x3.cu), in one place so that the
// emulator can stand in for both:
//  - tf32_rn(x): FP32 rounded to TF32 (10 explicit significand bits, the low 13 bits cleared).
//    On sm_90 and later PTX's cvt.rn.tf32.f32 (to nearest, ties to even: one instruction,
//    F2FP.TF32.F32); before sm_90 only cvt.rna exists (ties away from zero, emulated by ptxas
//    with 3-4 integer instructions), so the two differ on exact ties only. NaN stays NaN; a
//    carry may reach the next binade or infinity. The emulator rounds to nearest even.
//  - mma_m16n8k8_tf32(d, a, b): d += a * b on one warp's tensor cores, PTX's
//    mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, with PTX's documented fragments
//    (g = lane / 4, t = lane % 4; A 16x8 (row, k), B 8x8 (k, col), C/D 16x8 (row, col)):
//      a[0] (g, t)    a[1] (g+8, t)    a[2] (g, t+4)    a[3] (g+8, t+4)
//      b[0] (t, g)    b[1] (t+4, g)
//      d[0] (g, 2t)   d[1] (g, 2t+1)   d[2] (g+8, 2t)   d[3] (g+8, 2t+1)
//    The tensor cores read only the TF32 bits of a and b (the low 13 bits are ignored), and
//    their sum does not round to nearest (variant 5 adds each k-tile's partial to an FP32 sum
//    for that reason). Warp-collective: all 32 lanes, converged. In the emulator a rendezvous
//    of the warp (sim/include/mma.h, sim::mma_m16n8k8_tf32: the products exact, each d(i,j)
//    summed with fmaf in k order; the GPU's internal rounding is not modelled bit for bit).
// Before sm_80 (V100, T4) both trap: the kernel compiles for every CUDA_ARCH, and --gemm 5 is
// refused on such a GPU. Tested by tests/kernels/test_gemm_tf32x3.cu (Tf32x3.*) and tests/sim/test_sim_wmma.cu.
#pragma once

#ifdef SIM_EMULATOR
#include <mma.h>  // the emulator's: sim::tf32_rn_reference, sim::mma_m16n8k8_tf32
#endif

namespace nn::gemm_detail {

__device__ __forceinline__ float tf32_rn(float x) {
#if defined(SIM_EMULATOR)
  return ::sim::tf32_rn_reference(x);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned r;
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#elif defined(__CUDA_ARCH__)
  __trap();  // no TF32 before sm_80: --gemm 5 is refused there (nn::train::simulator_limits)
  return x;
#else
  return x;  // host pass of nvcc: never called
#endif
}

#ifdef SIM_EMULATOR
__attribute__((always_inline)) inline void mma_m16n8k8_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2],
                                                            const char* file = __builtin_FILE(),
                                                            int line = __builtin_LINE()) {
  ::sim::mma_m16n8k8_tf32(d, a, b, file, line);
}
#else
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const float (&a)[4], const float (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
#elif defined(__CUDA_ARCH__)
  __trap();  // T4, V100: no TF32 tensor cores; never launched there (--gemm 5 is refused)
#endif
}
#endif

}  // namespace nn::gemm_detail
