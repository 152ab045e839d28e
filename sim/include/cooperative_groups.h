// cooperative_groups under the SIMT CPU emulator: the grid, the block and the thread block
// cluster as groups, with grid_group::sync() (the grid barrier of a cudaLaunchCooperativeKernel
// launch), thread_block::sync() and cluster_group::sync() and map_shared_rank() (distributed
// shared memory). The runtime side is sim/runtime/coop.cpp, cluster.cpp and dsmem.cpp;
// sim/docs/cooperative.md and sim/docs/clusters.md list what is checked. Tested by
// tests/sim/test_sim_coop.cu and tests/sim/test_sim_cluster*.cu.
#pragma once
#include "sim/cuda_sim.h"

namespace sim::detail {
void grid_sync(Site s);        // every thread of every block of the launch, then all go on
bool grid_is_cooperative();    // the running kernel was launched with cudaLaunchCooperativeKernel
void cluster_sync(Site s);     // every thread of every block of the cluster, then all go on
void* cluster_map(const void* p, int rank, Site s);  // p's counterpart in block `rank` of the cluster
unsigned cluster_query_rank(const void* p, Site s);  // the rank of the block whose shared memory holds p
dim3 cluster_shape();          // the launch's cluster dimensions (1x1x1 without clusters)
}  // namespace sim::detail

namespace cooperative_groups {

class thread_block {
 public:
  void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    ::sim::detail::syncthreads(::sim::detail::Site{file, line});
  }
  unsigned long long size() const { return static_cast<unsigned long long>(blockDim.x) * blockDim.y * blockDim.z; }
  unsigned long long thread_rank() const {
    return threadIdx.x + static_cast<unsigned long long>(blockDim.x) * (threadIdx.y + static_cast<unsigned long long>(blockDim.y) * threadIdx.z);
  }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 dim_threads() const { return blockDim; }
};

class grid_group {
 public:
  // The grid barrier: every thread of the launch arrives, and memory written before it by any
  // thread is visible to every thread after it.
  void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const {
    ::sim::detail::grid_sync(::sim::detail::Site{file, line});
  }
  bool is_valid() const { return ::sim::detail::grid_is_cooperative(); }
  unsigned long long num_blocks() const { return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z; }
  unsigned long long block_rank() const {
    return blockIdx.x + static_cast<unsigned long long>(gridDim.x) * (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  }
  unsigned long long size() const { return num_blocks() * thread_block().size(); }
  unsigned long long thread_rank() const { return block_rank() * thread_block().size() + thread_block().thread_rank(); }
  unsigned long long num_threads() const { return size(); }
};

// The thread block cluster of the running block (a launch without clusters: the block alone).
// Every member is static, as in CUDA's header.
class cluster_group {
 public:
  struct arrival_token {};
  static void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::sim::detail::cluster_sync(::sim::detail::Site{file, line});
  }
  // The split barrier: the emulator's arrival is the whole barrier at barrier_wait() (what the
  // block does between the two calls counts as before the barrier).
  static arrival_token barrier_arrive() { return arrival_token(); }
  static void barrier_wait(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { sync(file, line); }
  static void barrier_wait(arrival_token&&, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    sync(file, line);
  }
  template <class T>
  static T* map_shared_rank(T* addr, int rank, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return static_cast<T*>(::sim::detail::cluster_map(addr, rank, ::sim::detail::Site{file, line}));
  }
  static unsigned int query_shared_rank(const void* addr, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ::sim::detail::cluster_query_rank(addr, ::sim::detail::Site{file, line});
  }
  static dim3 dim_blocks() { return ::sim::detail::cluster_shape(); }
  static unsigned int num_blocks() {
    const dim3 c = dim_blocks();
    return c.x * c.y * c.z;
  }
  static dim3 block_index() {
    const dim3 c = dim_blocks();
    return dim3(blockIdx.x % c.x, blockIdx.y % c.y, blockIdx.z % c.z);
  }
  static unsigned int block_rank() {
    const dim3 c = dim_blocks(), b = block_index();
    return b.x + c.x * (b.y + c.y * b.z);
  }
  static dim3 dim_threads() {
    const dim3 c = dim_blocks();
    return dim3(c.x * blockDim.x, c.y * blockDim.y, c.z * blockDim.z);
  }
  static dim3 thread_index() {
    const dim3 b = block_index();
    return dim3(b.x * blockDim.x + threadIdx.x, b.y * blockDim.y + threadIdx.y, b.z * blockDim.z + threadIdx.z);
  }
  static unsigned int num_threads() { return num_blocks() * static_cast<unsigned>(thread_block().size()); }
  static unsigned int size() { return num_threads(); }
  static unsigned int thread_rank() {
    return block_rank() * static_cast<unsigned>(thread_block().size()) + static_cast<unsigned>(thread_block().thread_rank());
  }
  static bool is_valid() { return true; }  // every launch has clusters (of one block without the attribute)
};

inline grid_group this_grid() { return grid_group(); }
inline cluster_group this_cluster() { return cluster_group(); }
inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const grid_group& g, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { g.sync(file, line); }
inline void sync(const cluster_group& c, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { c.sync(file, line); }
inline void sync(const thread_block& b, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { b.sync(file, line); }

}  // namespace cooperative_groups
