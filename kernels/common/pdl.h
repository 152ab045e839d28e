// Programmatic dependent launch (PDL) for the fused step's kernels: the launch attribute that
// lets a kernel start while the one before it on its stream finishes (its launch and prologue
// overlap that kernel's tail), the device-side wait before the first access to what the kernels
// before it wrote, and the trigger that lets the next one start. Off by default (it measured
// slower where the fused step is the default, pdl.cu); with NN_PDL=1 in the environment or
// set_programmatic_launch(true), on where the device and the code running on it support it
// (compute capability 9.0 and kernels compiled for it). Both builds: the emulator
// models PDL with its hazard (sim/docs/async.md). Tested by tests/kernels/test_pdl.cpp.
#pragma once
#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#include "common/check.h"

namespace nn {

// Whether launch_pdl sets the attribute: the switch (default off) and the device's support.
bool programmatic_launch();
// The switch; returns the previous setting. NN_PDL=1 sets it on at start.
bool set_programmatic_launch(bool on);

#if defined(__CUDACC__) || defined(SIM_EMULATOR)
// In a kernel launched by launch_pdl: before its first read of anything the kernels before it on
// the stream write (and its first write of anything they read). A no-op without PDL.
__device__ __forceinline__ void pdl_wait() {
#if defined(SIM_EMULATOR)
  cudaGridDependencySynchronize();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// After the kernel's last read of its inputs: the next kernel may be scheduled (it still waits
// for this one's completion before it touches what this one writes).
__device__ __forceinline__ void pdl_trigger() {
#if defined(SIM_EMULATOR)
  cudaTriggerProgrammaticLaunchCompletion();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
#endif

// The launch helper is for .cu files (nvcc or simcc); host .cpp files see the switch only.
#if defined(__CUDACC__) || defined(SIM_EMULATOR)
struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};
#define NN_LAUNCH_SITE(kernel) ::nn::LaunchSite{kernel, __FILE__, __LINE__}

// k<<<grid, block, smem, s>>>(args...), through cudaLaunchKernelEx with the programmatic stream
// serialization attribute when programmatic_launch(); also inside a stream capture (the graph's
// kernel nodes then carry programmatic edges). Errors as CHECK_LAUNCH reports them. Without PDL
// the CUDA build launches as always (GPGPU-Sim has no cudaLaunchKernelEx); the emulator's
// launch is the same either way.
template <class... P, class... A>
void launch_pdl(LaunchSite site, void (*k)(P...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t s,
                A&&... args) {
#ifndef SIM_EMULATOR
  if (!programmatic_launch()) {
    k<<<grid, block, smem, s>>>(std::forward<A>(args)...);
    CHECK_LAUNCH(site.kernel);
    return;
  }
#endif
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic_launch() ? 1 : 0;
#ifdef SIM_EMULATOR
  const cudaError_t e = ::sim::detail::launch_ex_named(::sim::detail::Site{site.file, site.line}, site.kernel, &cfg, k,
                                                       std::forward<A>(args)...);
#else
  const cudaError_t e = cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
#endif
  if (e != cudaSuccess) throw_cuda(e, site.kernel, site.file, site.line);
  CHECK_LAUNCH(site.kernel);
}
#endif

}  // namespace nn
