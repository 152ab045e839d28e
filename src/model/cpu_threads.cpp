// BLAS threads per rank and the CPU's name (cpu_threads.h).
#include "model/cpu_threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nn::train {

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
                            int ranks_on_node) {
  CpuThreads t;
  const int ranks = std::max(1, ranks_on_node);
  const int share = int(std::max(1L, online_cores / ranks));
  t.room = std::max(1, std::min(mask_cores, share));
  t.node_cores = online_cores;
  t.room_why = mask_cores < share ? cores(mask_cores) + " in its affinity mask"
                                   : cores(online_cores) + " on the node for " + std::to_string(ranks) + " ranks";
  t.asked = asked;
  if (asked > 0) {
    t.threads = std::min(asked, t.room);
    t.source = asked_from + (asked > t.room ? "=" + std::to_string(asked) + ", but " + t.room_why : "");
  } else {
    t.threads = t.room;
    t.source = cores(online_cores) + " / " + std::to_string(ranks) + " ranks on the node, " + std::to_string(mask_cores) +
               " in this rank's affinity mask";
  }
  return t;
}

CpuThreads cpu_threads_for(int ranks_on_node) {
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
  return cpu_threads_from(asked, from, mine, sysconf(_SC_NPROCESSORS_ONLN), ranks_on_node);
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

}  // namespace nn::train
