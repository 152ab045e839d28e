// The device a rank trains on: the node-local rank modulo the node's devices; what the
// GPGPU-Sim simulator cannot run; and every rank's node and device, gathered on rank 0 for
// the run header and the --report JSON ("rank_devices"). Problems are returned as strings,
// for all_ranks_ok (agree.h). The mapping, the encoding and the formatting are pure functions
// (tests/train/test_devices.cpp feeds them hand-made ranks on several hosts).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cpu_threads.h"
#include "train/config.h"

namespace nn::train {

// Where one rank runs. A GPU rank: device d of device_count (cudaDeviceProp::name); a
// --device cpu rank: device -1, device_count 0, the CPU's name and its BLAS threads.
struct RankDevice {
  int rank = 0;
  std::string host;  // MPI_Get_processor_name
  int local_rank = 0;  // the rank within its node (MPI_COMM_TYPE_SHARED)
  int device = -1;
  int device_count = 0;
  std::string device_name;
  // The GPU's identity on its node: PCI bus id, and the UUID in the CUDA build (e.g.
  // "0000:17:00.0 GPU-5e1f..."); in the emulator build only when CUDA_VISIBLE_DEVICES gives it
  // node GPUs (sim/README.md). Two ranks of a node with the same id share a GPU: a warning line.
  std::string device_id;
  int threads = 0;  // --device cpu: BLAS threads
  std::string threads_from;  // --device cpu: what decided them (cpu_threads.h)
  int threads_asked = 0;  // --device cpu: what the environment asked for (0: nothing)
  long node_cores = 0;    // --device cpu: the node's online cores
  bool operator==(const RankDevice&) const = default;
};

// The device of the rank with node-local rank `local_rank` on a node with `count` devices:
// local_rank % count, so a multi-node job uses every node's devices (never the global rank).
int device_for(int local_rank, int count);

// cudaSetDevice(device_for(comm::local_rank(), count)); fills `me` (rank, host, local rank,
// device). Collective. Returns a problem, or "".
std::string select_device(RankDevice& me);

// This rank as a --device cpu rank (rank, host, local rank; device -1). Collective.
RankDevice cpu_rank(const std::string& cpu_name, const model::CpuThreads& threads);

// A rank's entry of the report's "rank_devices": {"rank", "host", "local_rank", "device",
// "device_count", "device_name"}, and for a --device cpu rank "device": null, "device_count": 0,
// "threads", "threads_from", "threads_asked", "node_cores". rank_from_json reads it back (throws nlohmann::json's errors).
nlohmann::ordered_json rank_json(const RankDevice& d);
RankDevice rank_from_json(const nlohmann::json& j);

// Every rank's RankDevice on rank 0, in rank order (empty elsewhere). Collective.
std::vector<RankDevice> gather_ranks(const RankDevice& mine);

// The header's lines, one per node (hosts in the order of their first rank), then one warning
// line per node where ranks share a GPU (the same device_id), e.g.
//   ranks on node-a: 0->gpu0 1->gpu1 (4 devices: SIMT CPU emulator (1 workers))
//   ranks on node-c: 0->gpu0[0000:17:00.0 GPU-5e1f...] 1->gpu0[0000:65:00.0 GPU-0b2c...] (1 device: NVIDIA H100)
//   ranks on node-b: 2->gpu0 3->gpu1 (4 devices: SIMT CPU emulator (1 workers))
//   ranks on node-a: 0->cpu 1->cpu (CPU Intel Xeon, 1 BLAS thread each)
std::vector<std::string> placement_lines(const std::vector<RankDevice>& ranks);

// One line when some --device cpu rank runs fewer BLAS threads than the environment asked
// for because it has fewer cores (cpu_threads.h), with the fix: the launches that give each
// rank its cores, or, where the node has too few for its ranks x threads, fewer of either; or "".
std::string threads_warning(const std::vector<RankDevice>& ranks);

// What is wrong with a gathered list, or "": every rank 0..n-1 listed once in order, the local
// ranks of each host 0..m-1 (in rank order), and every GPU rank on device local_rank % count.
std::string check_placement(const std::vector<RankDevice>& ranks);

// What the selected device cannot run, as one line, or "": on GPGPU-Sim (tests/gpgpusim/run.sh)
// the options it cannot run; before compute capability 8.0 (V100, T4) --gemm 5 (TF32).
std::string simulator_limits(const std::string& device_name, const Config& cfg);

}  // namespace nn::train
