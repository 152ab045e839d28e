// BLAS threads per rank and the CPU's name (cpu_threads.h).
#include "model/cpu_threads.h"

#include <sched.h>
#include <unistd.h>
#ifdef NN_HAVE_DNNL
#include <omp.h>  // oneDNN's OpenMP runtime (libgomp), linked with it
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace nn::model {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n > 0 && n < 4096) ? int(n) : 0;
}

std::string cores(long n) { return std::to_string(n) + (n == 1 ? " core" : " cores"); }

}  // namespace

CpuThreads cpu_threads_from(int asked, const std::string& asked_from, int mask_cores, long online_cores,
                            int ranks_on_node, const std::string& mask_name) {
  CpuThreads t;
  const int ranks = std::max(1, ranks_on_node);
  const int share = int(std::max(1L, online_cores / ranks));
  t.room = std::max(1, std::min(mask_cores, share));
  t.node_cores = online_cores;
  t.room_why = mask_cores < share ? cores(mask_cores) + " in its " + mask_name
                                   : cores(online_cores) + " on the node for " + std::to_string(ranks) + " ranks";
  t.asked = asked;
  if (asked > 0) {
    t.threads = std::min(asked, t.room);
    t.source = asked_from + (asked > t.room ? "=" + std::to_string(asked) + ", but " + t.room_why : "");
  } else {
    t.threads = t.room;
    t.source = cores(online_cores) + " / " + std::to_string(ranks) + " ranks on the node, " + std::to_string(mask_cores) +
               " in this rank's " + mask_name;
  }
  return t;
}

int openmp_place_cpus() {
#ifdef NN_HAVE_DNNL
  // master (primary): the whole team shares the initial thread's place, which the mask shows.
  const omp_proc_bind_t bind = omp_get_proc_bind();
  if (bind == omp_proc_bind_false || bind == omp_proc_bind_master) return 0;
  cpu_set_t all;
  CPU_ZERO(&all);
  std::vector<int> ids;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    const int n = omp_get_place_num_procs(p);
    if (n <= 0) continue;
    ids.assign(std::size_t(n), -1);
    omp_get_place_proc_ids(p, ids.data());
    for (const int id : ids)
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &all);
  }
  return CPU_COUNT(&all);
#else
  return 0;
#endif
}

CpuThreads cpu_threads_for(int ranks_on_node, bool openmp_team) {
  int asked = 0;
  std::string from;
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"})
    if (const int n = env_int(name)) {
      asked = n;
      from = name;
      break;
    }
  // The cores this process may use (mpirun binds each of up to 2 ranks to one core unless told
  // otherwise; slurm/mpirun.sh tells it), and the node's cores shared among its ranks.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  // OMP_PROC_BIND / OMP_PLACES: this thread's mask is one place (openmp_place_cpus).
  const int places = openmp_place_cpus();
  if (places > mine && openmp_team)
    return cpu_threads_from(asked, from, places, online, ranks_on_node, "OpenMP places (OMP_PROC_BIND)");
  if (places > mine)  // OpenBLAS's pthreads inherit this thread's one place
    return cpu_threads_from(asked, from, mine, online, ranks_on_node,
                            "affinity mask (OMP_PROC_BIND bound it to one OpenMP place; OpenBLAS's threads stay there)");
  return cpu_threads_from(asked, from, mine, online, ranks_on_node);
}

std::string cpu_name() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "CPU";
  char line[512];
  std::string name = "CPU";
  while (std::fgets(line, sizeof line, f)) {
    const std::string l(line);
    if (l.rfind("model name", 0) != 0) continue;
    const std::size_t colon = l.find(':');
    if (colon != std::string::npos) name = l.substr(l.find_first_not_of(' ', colon + 1));
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    break;
  }
  std::fclose(f);
  return name.empty() ? "CPU" : name;
}

}  // namespace nn::model
