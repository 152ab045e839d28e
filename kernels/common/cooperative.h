// The kernel argument of cudaLaunchCooperativeKernel in every build. CUDA 13's typed overload
// takes T* (any kernel); CUDA 12's takes const T*, from which no kernel's type deduces (nvcc
// and g++ both find no match), so under CUDA 12 the kernel goes to the const void* overload,
// which is what the typed one calls anyway. The emulator's typed form (sim/include/sim/launch.h)
// and CUDA 13 get the kernel itself. Used by the persistent step and the cooperative launch
// tests (tests/sim/).
#pragma once

namespace nn {

template <class... P>
inline auto cooperative_kernel(void (*kernel)(P...)) {
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ < 13
  return reinterpret_cast<const void*>(kernel);
#else
  return kernel;
#endif
}

}  // namespace nn
