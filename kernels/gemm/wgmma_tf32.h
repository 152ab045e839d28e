// Hopper's warpgroup MMA (wgmma) for GEMM variant 5's sm_90 kernel (5_tf32x3_wgmma.cu), in one
// place so that the emulator can stand in for it (sim/include/mma.h, "wgmma"):
//  - smem_desc(p, lbo, sbo): PTX's 64-bit shared-memory matrix descriptor of a K-major,
//    no-swizzle operand starting at p: element (row, k) at byte
//    (row / 8) * sbo + (k / 4) * lbo + (row % 8) * 16 + (k % 4) * 4 from p (core matrices of
//    8 rows x 16 bytes). p, lbo and sbo multiples of 16 bytes.
//  - wgmma_m64n128k8_tf32(d, da, db, scale_d): d = A * B + (scale_d ? d : 0) over the
//    warpgroup (128 threads, 4 consecutive warps from a multiple of 4), A 64 x 8 (da), B 8 x 128
//    given as 128 rows of 8 k (db); the TF32 bits of each input (the low 13 are ignored).
//    Asynchronous: d is valid only after wgmma_commit() and a wgmma_wait<n>() that covers its
//    group. d's fragment: warp w = warp % 4, g = lane / 4, t = lane % 4, for j < 16:
//      d[4j] (16w+g, 8j+2t)   d[4j+1] (16w+g, 8j+2t+1)   d[4j+2] (16w+g+8, 8j+2t)   d[4j+3] (.., 8j+2t+1)
//  - wgmma_fence(): before the first wgmma that touches registers other code wrote.
//  - fence_proxy_async(): after a thread's plain shared-memory stores and before the barrier
//    after which a wgmma reads them (the tensor cores read through the async proxy).
// Only sm_90a has wgmma: the file that uses it is compiled for sm_90a alone (Makefile) and
// runs only on compute capability 9.0 (H100, H200). Tested by tests/kernels/test_gemm_wgmma.cu.
#pragma once

#include <cstdint>

#ifdef SIM_EMULATOR
#include <mma.h>  // the emulator's: sim::wgmma_*
#endif

namespace nn::gemm_detail {

#if defined(SIM_EMULATOR)
#define NN_WGMMA_SITE , const char *file = __builtin_FILE(), int line = __builtin_LINE()
#define NN_WGMMA_SITE_FIRST const char *file = __builtin_FILE(), int line = __builtin_LINE()
#else
#define NN_WGMMA_SITE
#define NN_WGMMA_SITE_FIRST
#endif

__device__ __forceinline__ std::uint64_t smem_desc(const float* p, unsigned lbo, unsigned sbo NN_WGMMA_SITE) {
#if defined(SIM_EMULATOR)
  const unsigned addr = ::sim::wgmma_smem_address(p, file, line);
#elif defined(__CUDA_ARCH__)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
#else
  const unsigned addr = 0;
  (void)p;
#endif
  return std::uint64_t((addr & 0x3ffffu) >> 4) | std::uint64_t((lbo & 0x3ffffu) >> 4) << 16 |
         std::uint64_t((sbo & 0x3ffffu) >> 4) << 32;
}

__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], std::uint64_t da, std::uint64_t db,
                                                     bool scale_d NN_WGMMA_SITE) {
#if defined(SIM_EMULATOR)
  ::sim::wgmma_m64nNk8_tf32(d, 128, da, db, scale_d, file, line);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(int(scale_d)));
#elif defined(__CUDA_ARCH__)
  (void)d, (void)da, (void)db, (void)scale_d;
  __trap();  // no wgmma before sm_90a (never launched: see tf32_wgmma_available)
#endif
}

__device__ __forceinline__ void wgmma_fence(NN_WGMMA_SITE_FIRST) {
#if defined(SIM_EMULATOR)
  ::sim::wgmma_fence(file, line);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit(NN_WGMMA_SITE_FIRST) {
#if defined(SIM_EMULATOR)
  ::sim::wgmma_commit(file, line);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait(NN_WGMMA_SITE_FIRST) {
#if defined(SIM_EMULATOR)
  ::sim::wgmma_wait(N, file, line);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Pins the accumulator registers in program order against the surrounding code: the asm of
// wgmma_wait names no registers, so without this the compiler could move a read of d above
// the wait (undefined in PTX; CUDA 13.0 does not, but nothing obliges it). Nothing on the
// emulator, where the wait is a call.
__device__ __forceinline__ void wgmma_pin(float (&d)[64]) {
#if defined(__CUDA_ARCH__) && !defined(SIM_EMULATOR)
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if defined(SIM_EMULATOR)
  ::sim::fence_proxy_async();
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#undef NN_WGMMA_SITE
#undef NN_WGMMA_SITE_FIRST

}  // namespace nn::gemm_detail
