// The host's cores for --device cpu: how many BLAS threads a rank uses, and the CPU's name
// for the header. Used by the trainer's setup (src/train/setup.cpp); tested by
// tests/model/test_cpu_kernels.cpp.
#pragma once
#include <string>

namespace nn::model {

// BLAS threads for one rank. What is asked: OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else
// Slurm's SLURM_CPUS_PER_TASK; what there is room for: the cores in this process's affinity
// mask, and no more than the node's cores divided by the ranks on it (at least 1). The rank
// uses the smaller: BLAS threads that share a core only wait for each other (OpenBLAS's spin
// on one core made an epoch 1.1x slower at 2 threads than at 1, docs/performance.md), and
// the result differs only in rounding. `source` says what decided, for the header line.
struct CpuThreads {
  int threads = 1;   // what the rank uses
  std::string source;
  int asked = 0;     // what the environment asked for; 0 when nothing was set
  int room = 1;      // min(cores in the affinity mask, node's cores / ranks on the node)
  long node_cores = 0;  // the node's online cores
  std::string room_why;  // e.g. "1 core in its affinity mask"
};
// With openmp_team (the GEMMs are oneDNN's, whose threads are an OpenMP team) and an OpenMP
// runtime that binds threads, the room counts the CPUs of its places (openmp_place_cpus).
CpuThreads cpu_threads_for(int ranks_on_node, bool openmp_team);
// The same, from the counts themselves (pure; cpu_threads_for passes the environment's).
// mask_name names where mask_cores come from, in the texts ("affinity mask").
CpuThreads cpu_threads_from(int asked, const std::string& asked_from, int mask_cores, long online_cores,
                            int ranks_on_node, const std::string& mask_name = "affinity mask");
// The CPUs in the OpenMP runtime's places when it binds threads (OMP_PROC_BIND, or OMP_PLACES
// alone): libgomp then binds the initial thread to the first place before main, so this
// thread's affinity mask shows one place (one core with OMP_PLACES=cores) while an OpenMP team
// spreads over all of them; OpenBLAS's own threads inherit the one place. 0 when the runtime
// binds nothing, binds the team to the initial thread's place (master/primary), or the
// build has no OpenMP (DNNL=0).
int openmp_place_cpus();
// The CPU's model name (/proc/cpuinfo), or "CPU" when unknown.
std::string cpu_name();

}  // namespace nn::model
