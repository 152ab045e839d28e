// How the MPI library reaches a caller's buffer, which may be device memory (--comm device).
// In the CUDA build the pointer goes to MPI as it is: a CUDA-aware Open MPI asks the driver
// whether each buffer is device memory and reaches it through the GPU (GPUDirect or staging).
// The emulator build models that library: its device memory is fenced from host code, so the
// emulated CUDA-aware MPI resolves each buffer through sim::device_view (identity for host
// memory), as the real library resolves it through the driver. Only the MPI calls get the
// view; host code in src/comm that touches a buffer itself uses the caller's pointer, so it
// faults on device memory exactly as it would on a GPU. With SIM_MPI_CUDA_AWARE=0 the
// emulated MPI is not CUDA-aware and gets the pointer unchanged (and faults on device memory).
// Used by gradients.cpp and comm.cpp only; tested through tests/train (--comm device).
#pragma once
#ifdef SIM_EMULATOR
#include <cstdlib>
#include <cstring>
#include "sim/sim_api.h"
#endif

namespace nn::comm::detail {

template <class T>
T* mpi_buffer(T* p) {
#ifdef SIM_EMULATOR
  static const bool cuda_aware = [] {
    const char* v = std::getenv("SIM_MPI_CUDA_AWARE");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  if (cuda_aware) return static_cast<T*>(sim::device_view(p));
#endif
  return p;
}

}  // namespace nn::comm::detail
