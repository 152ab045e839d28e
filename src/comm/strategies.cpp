// What the other strategies need of MPI: gathering the model-parallel slices, and the
// CUDA-aware-MPI query (--comm device). The gradient's sums (all-reduce, parameter server) are
// gradients.cpp's. Tested by tests/comm/test_strategies.cpp at 1-4 ranks and through the
// trainer (tests/train).
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_check.h"

namespace nn::comm {

using detail::check;
using detail::kMaxCount;

std::vector<double> gather_to_root(const std::vector<double>& mine) {
  int p = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if (mine.size() > kMaxCount) throw std::length_error("gather_to_root: more than INT_MAX values");
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(r == 0 ? p : 0), displs(r == 0 ? p : 0);
  check((detail::Busy("MPI_Gather"), MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD)), "MPI_Gather");
  std::vector<double> all;
  if (r == 0) {
    long long total = 0;
    for (int q = 0; q < p; ++q) {
      if (total > INT_MAX) throw std::length_error("gather_to_root: more than INT_MAX values");
      displs[q] = static_cast<int>(total);
      total += counts[q];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  check((detail::Busy("MPI_Gatherv"), MPI_Gatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                    0, MPI_COMM_WORLD)),
        "MPI_Gatherv");
  return all;
}

std::string device_pointer_support() {
#ifdef SIM_EMULATOR
  const char* v = std::getenv("SIM_MPI_CUDA_AWARE");
  if (v && std::strcmp(v, "0") == 0)
    return "SIM_MPI_CUDA_AWARE=0 makes the emulator build pretend MPI is not CUDA-aware";
  return "";
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (MPIX_Query_cuda_support() == 1) return "";
  return "this Open MPI was built with CUDA support, but it is not available at run time "
         "(MPIX_Query_cuda_support() = 0)";
#else
  return "this MPI library does not report CUDA support (no MPIX_CUDA_AWARE_SUPPORT in "
         "<mpi-ext.h>): use a CUDA-aware Open MPI build, --comm nccl, or --comm host";
#endif
}

}  // namespace nn::comm
