// The host's cores for --device cpu: how many BLAS threads a rank uses, and the CPU's name
// for the header. Used by the trainer's setup (src/train/setup.h); tested by
// tests/model/test_cpu_model.cpp.
#pragma once
#include <string>

namespace nn::train {

// BLAS threads for one rank: OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else Slurm's
// SLURM_CPUS_PER_TASK, else the cores this process may run on divided by the ranks on its
// node (at least 1). `source` says which one decided, for the header line.
struct CpuThreads {
  int threads = 1;
  std::string source;
};
CpuThreads cpu_threads_for(int ranks_on_node);
// Sets OpenBLAS's thread count for this process (openblas_set_num_threads).
void set_blas_threads(int n);
// The CPU's model name (/proc/cpuinfo), or "CPU" when unknown.
std::string cpu_name();

}  // namespace nn::train
