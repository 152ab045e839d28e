// Device selection and every rank's placement (devices.h).
#include "train/devices.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "comm/comm.h"
#include "common/check.h"

namespace nn::train {

namespace {

// "0000:17:00.0 GPU-5e1f..." (see RankDevice::device_id).
std::string device_id(const cudaDeviceProp& prop) {
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", unsigned(prop.pciDomainID), unsigned(prop.pciBusID),
                unsigned(prop.pciDeviceID));
#ifdef SIM_EMULATOR
  return std::getenv("CUDA_VISIBLE_DEVICES") ? bus : "";
#else
  std::string id = std::string(bus) + " GPU-";
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    id += hex[b >> 4];
    id += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) id += '-';
  }
  return id;
#endif
}

}  // namespace

int device_for(int local_rank, int count) { return count > 0 ? local_rank % count : -1; }

std::string select_device(RankDevice& me) {
  me.rank = comm::rank();
  me.host = comm::processor_name();
  me.local_rank = comm::local_rank();  // collective: called before any early return
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    (void)cudaGetLastError();  // clear it: the error is reported as a user error instead
    return std::string("no CUDA device visible") +
           (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : std::string());
  }
  // The rank within the node, not the global rank: ranks 2 and 3 of a job on two nodes of
  // two GPUs each are local ranks 0 and 1 of the second node, on its devices 0 and 1.
  const int dev = device_for(me.local_rank, count);
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  me.device = dev;
  me.device_count = count;
  me.device_name = prop.name;
  me.device_id = device_id(prop);
  return "";
}

RankDevice cpu_rank(const std::string& cpu_name, const model::CpuThreads& threads) {
  RankDevice me;
  me.rank = comm::rank();
  me.host = comm::processor_name();
  me.local_rank = comm::local_rank();
  me.device_name = cpu_name;
  me.threads = threads.threads;
  me.threads_from = threads.source;
  me.threads_asked = threads.asked;
  me.node_cores = threads.node_cores;
  return me;
}

nlohmann::ordered_json rank_json(const RankDevice& d) {
  nlohmann::ordered_json j;
  j["rank"] = d.rank;
  j["host"] = d.host;
  j["local_rank"] = d.local_rank;
  j["device"] = d.device >= 0 ? nlohmann::ordered_json(d.device) : nlohmann::ordered_json(nullptr);
  j["device_count"] = d.device_count;
  j["device_name"] = d.device_name;
  if (!d.device_id.empty()) j["device_id"] = d.device_id;
  if (d.device < 0) {
    j["threads"] = d.threads;
    j["threads_from"] = d.threads_from;
    j["threads_asked"] = d.threads_asked;
    j["node_cores"] = d.node_cores;
  }
  return j;
}

RankDevice rank_from_json(const nlohmann::json& j) {
  RankDevice d;
  d.rank = j.at("rank").get<int>();
  d.host = j.at("host").get<std::string>();
  d.local_rank = j.at("local_rank").get<int>();
  d.device = j.at("device").is_null() ? -1 : j.at("device").get<int>();
  d.device_count = j.at("device_count").get<int>();
  d.device_name = j.at("device_name").get<std::string>();
  d.device_id = j.value("device_id", std::string());
  if (d.device < 0) {
    d.threads = j.at("threads").get<int>();
    d.threads_from = j.at("threads_from").get<std::string>();
    d.threads_asked = j.value("threads_asked", 0);  // reports written before these existed lack them
    d.node_cores = j.value("node_cores", 0L);
  }
  return d;
}

std::vector<RankDevice> gather_ranks(const RankDevice& mine) {
  std::vector<RankDevice> all;
  for (const std::string& line : comm::gather_strings(rank_json(mine).dump()))
    all.push_back(rank_from_json(nlohmann::json::parse(line)));
  return all;
}

namespace {

// What a rank runs on beside its index, e.g. "4 devices: SIMT CPU emulator (1 workers)".
std::string what_it_is(const RankDevice& d) {
  if (d.device < 0)
    return "CPU " + d.device_name + ", " + std::to_string(d.threads) + " BLAS thread" + (d.threads == 1 ? "" : "s") +
           " each" + (d.threads_from.empty() ? "" : " (" + d.threads_from + ")");
  return std::to_string(d.device_count) + (d.device_count == 1 ? " device: " : " devices: ") + d.device_name;
}

}  // namespace

namespace {

// One line per node where ranks share a GPU (the same device_id), which no rank asked for:
// two ranks on one GPU halve each other's speed (a launch with fewer GPUs than ranks per node).
std::vector<std::string> shared_gpu_warnings(const std::vector<RankDevice>& ranks) {
  std::vector<std::string> out;
  std::map<std::pair<std::string, std::string>, std::vector<int>> users;  // (host, id) -> ranks
  for (const RankDevice& d : ranks)
    if (d.device >= 0 && !d.device_id.empty()) users[{d.host, d.device_id}].push_back(d.rank);
  for (const auto& [where, rs] : users) {
    if (rs.size() < 2) continue;
    std::string list;
    for (const int r : rs) list += (list.empty() ? "" : " ") + std::to_string(r);
    out.push_back("warning: ranks " + list + " on " + where.first + " share one GPU (" + where.second +
                  "): give each rank its own (srun --gpus-per-task=1, or as many GPUs per node as ranks)");
  }
  return out;
}

}  // namespace

std::vector<std::string> placement_lines(const std::vector<RankDevice>& ranks) {
  struct Node {
    std::string ranks;
    std::vector<std::string> what;  // distinct, in order
  };
  std::vector<std::string> order;  // hosts in the order of their first rank
  std::map<std::string, Node> nodes;
  for (const RankDevice& d : ranks) {
    auto [it, fresh] = nodes.try_emplace(d.host);
    if (fresh) order.push_back(d.host);
    Node& n = it->second;
    n.ranks += (n.ranks.empty() ? "" : " ") + std::to_string(d.rank) + "->" +
               (d.device < 0 ? std::string("cpu") : "gpu" + std::to_string(d.device)) +
               (d.device_id.empty() ? "" : "[" + d.device_id + "]");
    const std::string w = what_it_is(d);
    if (std::find(n.what.begin(), n.what.end(), w) == n.what.end()) n.what.push_back(w);
  }
  std::vector<std::string> lines;
  for (const std::string& h : order) {
    std::string what;
    for (const std::string& w : nodes[h].what) what += (what.empty() ? "" : "; ") + w;
    lines.push_back("ranks on " + h + ": " + nodes[h].ranks + " (" + what + ")");
  }
  for (const std::string& w : shared_gpu_warnings(ranks)) lines.push_back(w);
  return lines;
}

std::string check_placement(const std::vector<RankDevice>& ranks) {
  std::map<std::string, int> next_local;  // per host: the local rank its next rank must have
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankDevice& d = ranks[i];
    const std::string who = "rank " + std::to_string(d.rank) + " on " + d.host;
    if (d.rank != int(i)) return "entry " + std::to_string(i) + " is " + who + ", expected rank " + std::to_string(i);
    int& want = next_local[d.host];
    if (d.local_rank != want)
      return who + ": local rank " + std::to_string(d.local_rank) + ", expected " + std::to_string(want);
    ++want;
    if (d.device < 0) continue;  // --device cpu
    if (d.device_count < 1 || d.device != device_for(d.local_rank, d.device_count))
      return who + ": device " + std::to_string(d.device) + " of " + std::to_string(d.device_count) +
             ", expected local rank " + std::to_string(d.local_rank) + " % " + std::to_string(d.device_count);
  }
  return "";
}

// GPGPU-Sim (tests/gpgpusim/run.sh) executes our kernels' PTX but has no cuBLAS (CUDA 13's
// ships no PTX), no TF32 tensor-core instructions (variant 5 is built as SASS only), no stream capture
// and no cooperative launch: say so in one line instead of failing inside them.
std::string simulator_limits(const std::string& device_name, const Config& cfg) {
  int dev = 0, major = 0, minor = 0;
  const bool gpgpusim = device_name.rfind("GPGPU-Sim", 0) == 0;  // it reports 7.0: its own line below
  if (cfg.gemm == 5 && !gpgpusim && cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major < 8)
    return "--gemm 5 (TF32 tensor cores) needs compute capability 8.0 or newer; " + device_name + " is " +
           std::to_string(major) + "." + std::to_string(minor) + ": use --gemm 4";
  if (!gpgpusim) return "";
  if (cfg.gemm == 0) return "--gemm 0 (cuBLAS) does not run on GPGPU-Sim; use --gemm 1-4";
  if (cfg.gemm == 5)
    return "--gemm 5 (TF32 tensor cores) does not run on GPGPU-Sim (no TF32 wmma there; built without PTX); use --gemm 1-4";
  if (cfg.graph == Graphs::On) return "--graph (CUDA Graphs) does not run on GPGPU-Sim; leave it out";
  if (cfg.persistent == Persistent::On)
    return "--persistent on (a cooperative launch) does not run on GPGPU-Sim (no grid barrier there); leave it out";
  return "";
}

std::string threads_warning(const std::vector<RankDevice>& ranks) {
  const RankDevice* first = nullptr;
  int short_ranks = 0;
  for (const RankDevice& d : ranks)
    if (d.device < 0 && d.threads_asked > d.threads) {
      if (!first) first = &d;
      ++short_ranks;
    }
  if (!first) return "";
  const int asked = first->threads_asked;
  const std::string t = std::to_string(asked);
  std::string more;
  if (short_ranks > 1)
    more = "; so do " + std::to_string(short_ranks - 1) + " more rank" + (short_ranks == 2 ? "" : "s");
  const long on_node = std::count_if(ranks.begin(), ranks.end(), [&](const RankDevice& d) { return d.host == first->host; });
  std::string fix;
  if (first->node_cores > 0 && on_node * asked > first->node_cores) {
    const long fit = std::max(1L, first->node_cores / asked);
    fix = first->host + " has " + std::to_string(first->node_cores) + " cores for " + std::to_string(on_node) + " ranks x " +
          t + " threads: run at most " + std::to_string(fit) + " rank" + (fit == 1 ? "" : "s") + " per node there, or " +
          "ask for " + std::to_string(std::max(1L, first->node_cores / on_node)) + " thread" +
          (first->node_cores / on_node > 1 ? "s" : "");
  } else {
    fix = "to give each rank " + t + " cores, launch with slurm/mpirun.sh (one host), mpirun --map-by slot:PE=" + t +
          " or srun --cpus-per-task=" + t;
  }
  return "rank " + std::to_string(first->rank) + " on " + first->host + " runs " + std::to_string(first->threads) +
         " BLAS thread" + (first->threads == 1 ? "" : "s") + " (" + first->threads_from + ")" + more + ": " + fix;
}

}  // namespace nn::train
