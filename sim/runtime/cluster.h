// Thread block clusters, private to the runtime: the state of one cluster of a launch, shared by
// the OS threads that run its blocks (cluster.cpp: launch checks, execution, the cluster
// barrier; dsmem.cpp: distributed shared memory and its checks). Described in
// sim/docs/clusters.md; tested by tests/sim/test_sim_cluster*.cu.
#pragma once
#include <condition_variable>
#include <map>
#include "internal.h"

namespace sim::detail {

constexpr unsigned kPortableCluster = 8;  // blocks a cluster may have without the opt-in
constexpr unsigned kMaxCluster = 16;      // with cudaFuncAttributeNonPortableClusterSizeAllowed (H100)

// One access of another block to a block's shared memory (distributed shared memory).
struct RemoteUse {
  bool set = false;
  bool write = false;
  unsigned rank = 0;                // the accessing block's rank in the cluster
  unsigned long long epoch = 0;     // cluster barriers that block had passed
  uint3 tid{0, 0, 0};               // the accessing thread
  Site site{nullptr, 0};            // map_shared_rank's call site (the mapping)
  const void* pc = nullptr;         // the access's code address (an access)
};
struct RemoteByte {
  RemoteUse w, r;  // the latest remote write and read of the byte
};

struct ClusterMember {
  Worker* w = nullptr;              // the worker running the block (its shared window)
  bool started = false, exited = false;
  bool at_barrier = false;          // its thread 0 waits at a cluster barrier
  unsigned long long epoch = 0;     // cluster barriers the block has passed
  uint64_t mark = 0;                // its arena.gen when it last left a cluster barrier
  unsigned long long block = 0;     // linear block index in the grid
  std::map<size_t, RemoteByte> remote;  // other blocks' accesses to its window, by offset
  RemoteUse last_map;               // the latest map_shared_rank of its memory by another block
};

struct ClusterState {
  std::mutex m;
  std::condition_variable cv;
  unsigned arrived = 0, finished = 0;
  unsigned long long gen = 0;       // cluster barriers completed
  Site site{nullptr, 0};            // where the current barrier's first block arrived
  std::vector<uint64_t> syncs;      // the global race check's order of each release, ascending
  ClusterMember mem[kMaxCluster];
};

// The linear index of cluster c's block of rank r, and the rank and cluster of block b.
unsigned long long cluster_block(const Launch& L, unsigned long long c, unsigned r);
void cluster_place(const Launch& L, unsigned long long b, unsigned long long* c, unsigned* r);
std::string cluster_block_name(const Launch& L, unsigned long long b);  // "(x,y,z)"

}  // namespace sim::detail
