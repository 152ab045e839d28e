// cooperative_groups under the SIMT CPU emulator: the grid and the block as groups, with
// grid_group::sync() (the grid barrier of a cudaLaunchCooperativeKernel launch) and
// thread_block::sync(). The runtime side is sim/runtime/coop.cpp; sim/docs/cooperative.md ("Grid
// barriers") lists what is checked. Tested by tests/sim/test_sim_coop.cu.
#pragma once
#include "sim/cuda_sim.h"

namespace sim::detail {
void grid_sync(Site s);        // every thread of every block of the launch, then all go on
bool grid_is_cooperative();    // the running kernel was launched with cudaLaunchCooperativeKernel
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

inline grid_group this_grid() { return grid_group(); }
inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const grid_group& g, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { g.sync(file, line); }
inline void sync(const thread_block& b, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { b.sync(file, line); }

}  // namespace cooperative_groups
