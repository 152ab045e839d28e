// Thread block clusters (sim/runtime/cluster.cpp, dsmem.cpp, sim/include/cooperative_groups.h):
// a split-K sum through distributed shared memory (each block's partial in its own shared
// memory, cluster.sync(), rank 0 adds the others' through map_shared_rank) is exact for clusters
// of 2, 4, 8 and 16 blocks, launched with cudaLaunchKernelEx's cluster attribute or through a
// kernel's __cluster_dims__; the cluster group's ranks and shapes for a 2D cluster; a launch
// without clusters is a cluster of one block. Race-checked under every emulator order. Compiled
// by nvcc for sm_90 too (Makefile), where the tests skip on a GPU below compute capability 9.0.
#include <cooperative_groups.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

namespace cg = cooperative_groups;
using simtest::DeviceBuffer;

constexpr int kThreads = 64;

// Block b sums x[b * per_block ...]; rank 0 of each cluster adds its cluster's partials.
__device__ void cluster_sum(const int* x, int per_block, int* out) {
  __shared__ int part[kThreads];
  __shared__ int total;
  cg::cluster_group cluster = cg::this_cluster();
  const int t = int(threadIdx.x);
  int s = 0;
  for (int i = t; i < per_block; i += kThreads) s += x[blockIdx.x * per_block + i];
  part[t] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (t < w) part[t] += part[t + w];
    __syncthreads();
  }
  if (t == 0) total = part[0];
  cluster.sync();  // every block's total is written
  if (cluster.block_rank() == 0 && t == 0) {
    int sum = 0;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) sum += *cluster.map_shared_rank(&total, int(r));
    out[blockIdx.x / cluster.num_blocks()] = sum;
  }
  cluster.sync();  // no block exits while rank 0 still reads its total
}

__global__ void cluster_sum_kernel(const int* x, int per_block, int* out) { cluster_sum(x, per_block, out); }

__global__ void __cluster_dims__(2, 1, 1) fixed_pair_kernel(const int* x, int per_block, int* out) {
  cluster_sum(x, per_block, out);
}

// Per block: block_rank, num_blocks, dim_blocks().x/.y, block_index().x/.y, thread_rank of thread 0.
__global__ void cluster_info_kernel(unsigned* out) {
  cg::cluster_group c = cg::this_cluster();
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  if (threadIdx.x == 0) {
    unsigned* o = out + 7 * b;
    o[0] = c.block_rank();
    o[1] = c.num_blocks();
    o[2] = c.dim_blocks().x;
    o[3] = c.dim_blocks().y;
    o[4] = c.block_index().x;
    o[5] = c.block_index().y;
    o[6] = c.thread_rank();
  }
  c.sync();
}

// Blocks of a cluster hand values through global memory across cluster.sync().
__global__ void global_ring_kernel(int* slots, int* out) {
  cg::cluster_group c = cg::this_cluster();
  const unsigned n = c.num_blocks(), first = blockIdx.x - c.block_rank();
  if (threadIdx.x == 0) slots[blockIdx.x] = int(blockIdx.x) * 3;
  c.sync();
  if (threadIdx.x == 0) out[blockIdx.x] = slots[first + (c.block_rank() + 1) % n];
}

// No clusters: this_cluster() is the block alone.
__global__ void lone_block_kernel(int* out) {
  __shared__ int v;
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) v = int(blockIdx.x) + 1;
  c.sync();
  if (threadIdx.x == 1) out[blockIdx.x] = *c.map_shared_rank(&v, 0) * 100 + int(c.num_blocks());
}

bool cluster_device() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9;
}
#define SKIP_WITHOUT_CLUSTERS() \
  if (!cluster_device()) GTEST_SKIP() << "thread block clusters need compute capability 9.0"

class SimCluster : public simtest::SimTest {
#ifdef SIM_EMULATOR
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_ = sim::racecheck();
    sim::set_racecheck_all();
  }
  void TearDown() override {
    sim::set_racecheck(saved_);
    simtest::SimTest::TearDown();
  }
  bool saved_ = true;
#endif
};

cudaError_t launch_sum(unsigned csize, int clusters, const int* x, int per_block, int* out) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = csize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(csize * unsigned(clusters));
  cfg.blockDim = dim3(kThreads);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, cluster_sum_kernel, x, per_block, out);
}

void check_sum(unsigned csize) {
  const int clusters = 3, per_block = 100;
  const int blocks = int(csize) * clusters;
  std::vector<int> hx(size_t(blocks) * per_block);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = int(i % 37) - 11;
  DeviceBuffer<int> x(hx.size()), out(clusters);
  ASSERT_CUDA_OK(x.upload(hx));
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0));
    ASSERT_CUDA_OK(launch_sum(csize, clusters, x.get(), per_block, out.get()));
    ASSERT_LAUNCH_OK();
    const std::vector<int> h = out.download();
    for (int c = 0; c < clusters; ++c) {
      long long want = 0;
      for (size_t i = size_t(c) * csize * per_block; i < size_t(c + 1) * csize * per_block; ++i) want += hx[i];
      EXPECT_EQ(h[c], want) << "cluster " << c << " of " << csize << " blocks, " << sched;
    }
  });
}

TEST_F(SimCluster, SplitKSumThroughDistributedSharedMemory) {
  SKIP_WITHOUT_CLUSTERS();
  for (unsigned csize : {2u, 4u, 8u}) check_sum(csize);
}

TEST_F(SimCluster, SixteenBlocksWithTheNonPortableAttribute) {
  SKIP_WITHOUT_CLUSTERS();
  ASSERT_CUDA_OK(cudaFuncSetAttribute(cluster_sum_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  check_sum(16);
}

TEST_F(SimCluster, ClusterDimsKernelLaunchedWithTripleChevrons) {
  SKIP_WITHOUT_CLUSTERS();
  const int per_block = 50, blocks = 6;
  std::vector<int> hx(size_t(blocks) * per_block);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = int(i);
  DeviceBuffer<int> x(hx.size()), out(blocks / 2);
  ASSERT_CUDA_OK(x.upload(hx));
  fixed_pair_kernel<<<blocks, kThreads>>>(x.get(), per_block, out.get());
  ASSERT_LAUNCH_OK();
  const std::vector<int> h = out.download();
  for (int c = 0; c < blocks / 2; ++c) {
    int want = 0;
    for (int i = c * 2 * per_block; i < (c + 1) * 2 * per_block; ++i) want += hx[i];
    EXPECT_EQ(h[c], want) << "cluster " << c;
  }
}

TEST_F(SimCluster, RanksAndShapesOfA2DCluster) {
  SKIP_WITHOUT_CLUSTERS();
  const dim3 grid(4, 2);
  DeviceBuffer<unsigned> out(7 * 8);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 2;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(32);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  ASSERT_CUDA_OK(cudaLaunchKernelEx(&cfg, cluster_info_kernel, out.get()));
  ASSERT_LAUNCH_OK();
  const std::vector<unsigned> h = out.download();
  for (unsigned y = 0; y < grid.y; ++y)
    for (unsigned x = 0; x < grid.x; ++x) {
      const unsigned* o = h.data() + 7 * (x + grid.x * y);
      const unsigned rank = (x % 2) + 2 * (y % 2);
      EXPECT_EQ(o[0], rank) << x << "," << y;
      EXPECT_EQ(o[1], 4u);
      EXPECT_EQ(o[2], 2u);
      EXPECT_EQ(o[3], 2u);
      EXPECT_EQ(o[4], x % 2);
      EXPECT_EQ(o[5], y % 2);
      EXPECT_EQ(o[6], rank * 32u);
    }
}

TEST_F(SimCluster, ClusterSyncOrdersGlobalMemoryWithinTheCluster) {
  SKIP_WITHOUT_CLUSTERS();
  const int blocks = 8;
  DeviceBuffer<int> slots(blocks), out(blocks);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 4;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(32);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(slots.fill_bytes(0));
    ASSERT_CUDA_OK(cudaLaunchKernelEx(&cfg, global_ring_kernel, slots.get(), out.get()));
    ASSERT_LAUNCH_OK();
    const std::vector<int> h = out.download();
    for (int b = 0; b < blocks; ++b) EXPECT_EQ(h[b], (b / 4 * 4 + (b % 4 + 1) % 4) * 3) << "block " << b << ", " << sched;
  });
}

TEST_F(SimCluster, LaunchWithoutClustersIsAClusterOfOneBlock) {
  SKIP_WITHOUT_CLUSTERS();
  DeviceBuffer<int> out(3);
  lone_block_kernel<<<3, 32>>>(out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), (std::vector<int>{101, 201, 301}));
}

TEST_F(SimCluster, DeviceAndOccupancyAnswers) {
  SKIP_WITHOUT_CLUSTERS();
  int dev = 0, on = 0;
  ASSERT_CUDA_OK(cudaGetDevice(&dev));
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&on, cudaDevAttrClusterLaunch, dev));
  EXPECT_EQ(on, 1);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 4;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(8);
  cfg.blockDim = dim3(kThreads);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0, per_sm = 0, sms = 0;
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveClusters(&clusters, cluster_sum_kernel, &cfg));
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cluster_sum_kernel, kThreads, 0));
  ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  EXPECT_GE(clusters, 1);
  EXPECT_LE(clusters, per_sm * sms / 4);
}

}  // namespace
