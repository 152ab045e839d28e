// CpuModel<T>::split (cpu_model.h): the host model's elementwise passes over the GEMM
// library's OpenMP threads. Internal to src/model (cpu_model.cpp, cpu_model_shared.cpp).
#pragma once
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>

#include "model/cpu_model.h"

namespace nn::model {

// fn(lo, hi) over [0, n) in equal contiguous parts, one per OpenMP thread, when the GEMMs are
// oneDNN's and run on more than one thread: those OpenMP threads are idle between the GEMMs
// and already hold the rank's cores. With OpenBLAS (its own pthreads, which would fight an
// OpenMP team for the cores), one thread, or a build without OpenMP: fn(0, n) here. Each part
// computes its own entries exactly as the whole would, so no bit depends on the split.
template <class T>
template <class F>
void CpuModel<T>::split(std::size_t n, [[maybe_unused]] std::size_t grain, F&& fn) const {
#ifdef _OPENMP
  const int team = gemm_lib_ == CpuGemm::OneDNN ? omp_get_max_threads() : 1;
  const int parts = int(std::min<std::size_t>(std::size_t(std::max(team, 1)), n / std::max<std::size_t>(grain, 1)));
  if (parts > 1) {
#pragma omp parallel num_threads(parts)
    {
      const std::size_t k = std::size_t(omp_get_thread_num()), m = std::size_t(omp_get_num_threads());
      fn(n * k / m, n * (k + 1) / m);
    }
    return;
  }
#endif
  fn(0, n);
}

}  // namespace nn::model
