// The hazards of thread block clusters that a GPU hides or hangs on, reported by the emulator
// (sim/runtime/cluster.cpp, dsmem.cpp): a distributed shared memory read with no cluster.sync()
// after the owner's write, a block that exits while another still uses its shared memory,
// map_shared_rank outside the cluster or of memory that is not shared, cluster shapes the device
// refuses (a grid that is not a whole number of clusters, over the portable 8 blocks without the
// opt-in, over 16, the attribute against __cluster_dims__), and cluster barriers not every block
// reaches; and a launch both cooperative and clustered. Emulator only: on a GPU these hang, race or are refused with codes not checked here.
#include <cooperative_groups.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

#ifdef SIM_EMULATOR
namespace {

namespace cg = cooperative_groups;
using simtest::DeviceBuffer;

// Rank 1 reads rank 0's value with no cluster.sync() after rank 0 wrote it.
__global__ void racy_read_kernel(int* out) {
  __shared__ int v;
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) v = int(c.block_rank()) + 10;
  if (c.block_rank() == 1 && threadIdx.x == 0) out[0] = *c.map_shared_rank(&v, 0);
  c.sync();
}

// Rank 1 reads rank 0's value after a cluster.sync(), but rank 0 does not wait for it to finish.
__global__ void owner_exits_kernel(int* out) {
  __shared__ int v;
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) v = int(c.block_rank()) + 10;
  c.sync();
  if (c.block_rank() == 0) return;
  if (threadIdx.x == 0) out[0] = *c.map_shared_rank(&v, 0);
}

__global__ void rank_kernel(int* out, int rank, int global) {
  __shared__ int v;
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) v = 1;
  c.sync();
  if (threadIdx.x == 0) out[blockIdx.x] = *c.map_shared_rank(global ? out : &v, rank);
  c.sync();
}

__global__ void early_exit_kernel(int* out) {
  cg::cluster_group c = cg::this_cluster();
  if (c.block_rank() == 1) return;  // never reaches the barrier rank 0 waits at
  c.sync();
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

__global__ void two_sites_kernel(int* out) {
  cg::cluster_group c = cg::this_cluster();
  if (c.block_rank() == 0)
    c.sync();
  else
    c.sync();
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

__global__ void __cluster_dims__(2, 1, 1) pair_kernel(int* out) {
  cg::this_cluster().sync();
  if (threadIdx.x == 0) out[blockIdx.x] = int(cg::this_cluster().num_blocks());
}

__global__ void plain_kernel(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

// Cooperative and clustered: the cluster's value through DSMEM, then every block's through the grid barrier.
__global__ void coop_cluster_kernel(int* slots, int* out) {
  __shared__ int v;
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) v = int(blockIdx.x);
  c.sync();
  if (threadIdx.x == 0) slots[blockIdx.x] = *c.map_shared_rank(&v, int(c.num_blocks() - 1 - c.block_rank()));
  c.sync();
  cg::this_grid().sync();
  if (threadIdx.x == 0) out[blockIdx.x] = slots[(blockIdx.x + 2) % gridDim.x];
}

extern "C" void __asan_init() __attribute__((weak));
#define SKIP_WITHOUT_CHECKS()                                                        \
  do {                                                                               \
    if (&__asan_init != nullptr) GTEST_SKIP() << "no per-access checks under ASan";  \
  } while (0)

class SimClusterFaults : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_ = sim::racecheck();
    sim::set_fault_mode(sim::FaultMode::Record);
  }
  void TearDown() override {
    sim::set_racecheck(saved_);
    simtest::SimTest::TearDown();
  }
  bool saved_ = true;
};

cudaError_t launch(void (*k)(int*), dim3 grid, dim3 cluster, int* out) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster.x;
  attr[0].val.clusterDim.y = cluster.y;
  attr[0].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(32);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, out);
}

// Runs k on 2-block clusters (grid 2), returns the fault message; *e: cudaDeviceSynchronize's answer.
template <class Launch>
std::string fault_of(cudaError_t* e, Launch&& run) {
  std::string msg;
  {
    DeviceBuffer<int> out(16);
    (void)out.fill_bytes(0);
    run(out.get());
    *e = cudaDeviceSynchronize();
    msg = sim::last_fault();
  }
  sim::reset();
  (void)cudaGetLastError();
  return msg;
}

TEST_F(SimClusterFaults, RemoteReadWithoutClusterSyncIsARace) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck_all();
  simtest::for_each_schedule([&](const std::string& sched) {
    cudaError_t e = cudaSuccess;
    const std::string msg = fault_of(&e, [](int* o) { (void)launch(racy_read_kernel, dim3(2), dim3(2, 1, 1), o); });
    EXPECT_EQ(e, cudaErrorLaunchFailure) << sched;
    EXPECT_NE(msg.find("distributed shared memory race"), std::string::npos) << msg;
    EXPECT_NE(msg.find("thread (0,0,0) of kernel"), std::string::npos) << msg;
  });
}

TEST_F(SimClusterFaults, OwnerExitingWhileItsMemoryIsInUse) {
  cudaError_t e = cudaSuccess;
  const std::string msg = fault_of(&e, [](int* o) { (void)launch(owner_exits_kernel, dim3(2), dim3(2, 1, 1), o); });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("exited"), std::string::npos) << msg;
  EXPECT_NE(msg.find("block (0,0,0) (rank 0)"), std::string::npos) << msg;
}

TEST_F(SimClusterFaults, RankOutsideTheClusterOrNotSharedMemory) {
  cudaError_t e = cudaSuccess;
  std::string msg = fault_of(&e, [](int* o) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {dim3(2), dim3(32), 0, nullptr, attr, 1};
    (void)cudaLaunchKernelEx(&cfg, rank_kernel, o, 2, 0);
  });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("rank 2 is outside the cluster of 2 blocks"), std::string::npos) << msg;
  msg = fault_of(&e, [](int* o) { rank_kernel<<<2, 32>>>(o, 1, 0); });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("a launch without clusters is a cluster of one block"), std::string::npos) << msg;
  msg = fault_of(&e, [](int* o) { rank_kernel<<<2, 32>>>(o, 0, 1); });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("not in the block's shared memory"), std::string::npos) << msg;
}

// The launch's answer and the last error it left (cleared), which must agree.
cudaError_t answer(cudaError_t e) {
  const cudaError_t last = cudaGetLastError();
  return e == last ? e : cudaErrorUnknown;
}

TEST_F(SimClusterFaults, ShapesTheDeviceRefuses) {
  DeviceBuffer<int> out(64);
  // A grid of 3 blocks is not a whole number of 2-block clusters; nothing runs.
  EXPECT_EQ(answer(launch(plain_kernel, dim3(3), dim3(2, 1, 1), out.get())), cudaErrorInvalidClusterSize);
  EXPECT_EQ(answer(launch(plain_kernel, dim3(4, 3), dim3(2, 2, 1), out.get())), cudaErrorInvalidClusterSize);
  // Over the portable 8 without the opt-in, over 16 always.
  ASSERT_CUDA_OK(cudaFuncSetAttribute(plain_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 0));
  EXPECT_EQ(answer(launch(plain_kernel, dim3(16), dim3(16, 1, 1), out.get())), cudaErrorInvalidClusterSize);
  ASSERT_CUDA_OK(cudaFuncSetAttribute(plain_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  EXPECT_CUDA_OK(answer(launch(plain_kernel, dim3(16), dim3(16, 1, 1), out.get())));
  EXPECT_EQ(answer(launch(plain_kernel, dim3(32), dim3(32, 1, 1), out.get())), cudaErrorInvalidClusterSize);
  EXPECT_EQ(answer(launch(plain_kernel, dim3(8), dim3(0, 1, 1), out.get())), cudaErrorInvalidClusterSize);
  // __cluster_dims__(2, 1, 1): <<<>>> runs pairs, the attribute may repeat it but not change it.
  pair_kernel<<<4, 32>>>(out.get());
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(out.download()[3], 2);
  EXPECT_CUDA_OK(answer(launch(pair_kernel, dim3(4), dim3(2, 1, 1), out.get())));
  EXPECT_EQ(answer(launch(pair_kernel, dim3(4), dim3(4, 1, 1), out.get())), cudaErrorInvalidClusterSize);
  pair_kernel<<<3, 32>>>(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidClusterSize);
  EXPECT_EQ(cudaFuncSetAttribute(pair_kernel, cudaFuncAttributeRequiredClusterWidth, 4), cudaErrorNotPermitted);
  (void)cudaGetLastError();
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // refusals are not sticky
}

TEST_F(SimClusterFaults, CooperativeClusteredLaunchRunsEveryBlockAtOnce) {
  sim::set_racecheck_all();
  DeviceBuffer<int> slots(6), out(6);
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeCooperative;
  attr[1].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {dim3(6), dim3(32), 0, nullptr, attr, 2};
  ASSERT_CUDA_OK(cudaLaunchKernelEx(&cfg, coop_cluster_kernel, slots.get(), out.get()));
  ASSERT_LAUNCH_OK();
  const std::vector<int> h = out.download();
  for (int b = 0; b < 6; ++b) EXPECT_EQ(h[b], ((b + 2) % 6) ^ 1) << "block " << b;  // its pair's index
}

TEST_F(SimClusterFaults, BlockExitingBeforeTheClusterBarrierFaultsInsteadOfHanging) {
  cudaError_t e = cudaSuccess;
  const std::string msg = fault_of(&e, [](int* o) { (void)launch(early_exit_kernel, dim3(4), dim3(2, 1, 1), o); });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("cluster.sync() at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("can never complete: 1 of the 2 blocks"), std::string::npos) << msg;
}

TEST_F(SimClusterFaults, BlocksAtDifferentClusterBarriersFault) {
  cudaError_t e = cudaSuccess;
  const std::string msg = fault_of(&e, [](int* o) { (void)launch(two_sites_kernel, dim3(2), dim3(2, 1, 1), o); });
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("cluster barrier divergence"), std::string::npos) << msg;
}

}  // namespace
#endif
