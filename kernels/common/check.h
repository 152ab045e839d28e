// The CUDA error idiom: CUDA_CHECK throws nn::InternalError (errors.h) with file:line,
// CUDA_CHECK_NOTHROW prints (for destructors), CHECK_LAUNCH checks a kernel launch.
// The same code compiles in the CUDA build and in the emulator build (sim).
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "common/errors.h"

namespace nn {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Every kernel launch of ours passes CHECK_LAUNCH, which counts it here: --report's
// kernels_per_step is this count's change over a step (with CUDA Graphs, the launches a
// replayed graph captured; DeviceModel::kernels_issued). cuBLAS's own launches are not counted.
inline std::atomic<std::uint64_t>& launch_counter() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

}  // namespace nn

#define CUDA_CHECK(call)                                                   \
  do {                                                                     \
    cudaError_t nn_err_ = (call);                                          \
    if (nn_err_ != cudaSuccess) ::nn::throw_cuda(nn_err_, #call, __FILE__, __LINE__); \
  } while (0)

// For destructors and other places that must not throw.
#define CUDA_CHECK_NOTHROW(call)                                                     \
  do {                                                                               \
    cudaError_t nn_err_ = (call);                                                    \
    if (nn_err_ != cudaSuccess)                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                   cudaGetErrorString(nn_err_));                                     \
  } while (0)

// Every launch is checked for configuration errors; only DEBUG builds also wait for
// the kernel (so asynchronous faults surface at the launch that caused them).
#ifdef NN_DEBUG
#define CHECK_LAUNCH(name)                                                     \
  do {                                                                         \
    ::nn::launch_counter().fetch_add(1, std::memory_order_relaxed);            \
    CUDA_CHECK(cudaGetLastError());                                            \
    CUDA_CHECK(cudaDeviceSynchronize());                                       \
  } while (0)
#else
#define CHECK_LAUNCH(name)                                                     \
  do {                                                                         \
    ::nn::launch_counter().fetch_add(1, std::memory_order_relaxed);            \
    CUDA_CHECK(cudaGetLastError());                                            \
  } while (0)
#endif
