// The fourth persistent-step kernel (persistent_step.h describes all variants): thread block
// clusters and distributed shared memory, one grid barrier a step. Cluster k (CL blocks) owns
// hidden units k U .. k U + U; its block r owns input slice r (inputs r td .. r td + td) and keeps
// its W1 tile (U x td), its copy of W2's and b1's rows of the cluster's units and of b2 in shared
// memory for the whole launch. Each step:
//   A. every block gathers its slice of the batch's inputs and multiplies them with its tile: a
//      partial Z1 over its slice (U x b); cluster.sync(); block r sums its share of the columns
//      over the cluster's blocks in rank order (distributed shared memory) + b1, the sigmoid, and
//      the cluster's partial scores W2[units]^T A1 of those columns to global memory (a buffer by
//      step parity: clusters still reading the previous step's read the other);
//   B. after the grid barrier, block r's columns in every cluster: the clusters' partial scores in
//      cluster order + b2 (the same bits in every cluster), softmax, loss, hit, dZ2, and dZ1 =
//      (W2^T dZ2) o a1 o (1 - a1) of the cluster's units; cluster.sync();
//   C. every block copies the other blocks' columns of A1, dZ1, dZ2 from their shared memory,
//      steps its W1 tile, and its copies of W2's rows, b1 and b2 (identical in every block of the
//      cluster, and b2 in every cluster: the same sums); block 0 adds the loss and hits.
// The next step's phase A reads only the block's own shared memory and writes what other blocks
// read only after the next cluster.sync(). At the end the tiles, W2's rows, b1 and b2 go back to P
// and a last cluster.sync() keeps each block's shared memory alive until its cluster is done
// reading it. nvcc for sm_90 (clusters; the body is empty in older code, which the plan never
// launches) and sim/simcc. Tested by tests/kernels/test_persistent_cluster.cpp.
#include "ops/persistent_step4.h"

#include <cooperative_groups.h>

#include "common/check.h"
#include "ops/persistent_step4_update.h"

namespace nn::persist4 {
namespace {

namespace cg = cooperative_groups;
using namespace detail;

template <class T>
__device__ __forceinline__ int cols_of(const PersistentShape<T>& a, int s) {
  const unsigned long long left = a.n - (a.offset + static_cast<unsigned long long>(s) * unsigned(a.B));
  return int(left < static_cast<unsigned long long>(a.B) ? left : static_cast<unsigned long long>(a.B));
}

// The block's parameters into shared memory: its W1 tile (zeros past the slice), its cluster's W2
// rows and b1, b2; the byte / 255 table. store: the stepped ones back (the tile by every block,
// W2's rows and b1 by the cluster's rank 0, b2 by block 0).
template <class T>
__device__ void move_params(const Shape4<T>& g, T* P, int r, int d0, int tdl, int h0, bool store, unsigned char* sm) {
  const PersistentShape<T>& a = g.a;
  T* b1g = P + static_cast<std::size_t>(a.H) * a.D;
  T* W2 = b1g + a.H;
  T* b2g = W2 + static_cast<std::size_t>(a.C) * a.H;
  T* w = at<T>(sm, g.L.w);
  T* w2 = at<T>(sm, g.L.w2);
  const int U = g.U, tid = int(threadIdx.x);
  for (int i = tid; i < g.L.ldx * U; i += kThreads) {
    const int d = i / U, u = i % U;
    T* p = P + static_cast<std::size_t>(d0 + d) * a.H + h0 + u;
    if (store) {
      if (d < tdl) *p = w[i];
    } else {
      w[i] = d < tdl ? *p : T(0);
    }
  }
  if (!store || r == 0)
    for (int i = tid; i < U * kMaxC; i += kThreads) {
      const int u = i / kMaxC, c = i % kMaxC;
      T* p = W2 + static_cast<std::size_t>(h0 + u) * a.C + c;
      if (store && c < a.C) *p = w2[i];
      if (!store) w2[i] = c < a.C ? *p : T(0);
    }
  for (int u = tid; u < U && (!store || r == 0); u += kThreads) {
    if (store) b1g[h0 + u] = at<T>(sm, g.L.b1)[u];
    else at<T>(sm, g.L.b1)[u] = b1g[h0 + u];
  }
  for (int c = tid; c < kMaxC && (!store || blockIdx.x == 0); c += kThreads) {
    if (store && c < a.C) b2g[c] = at<T>(sm, g.L.b2)[c];
    if (!store) at<T>(sm, g.L.b2)[c] = c < a.C ? b2g[c] : T(0);
  }
  if (!store)
    for (int i = tid; i < 256; i += kThreads) at<T>(sm, g.L.lut)[i] = T(i) / T(255);  // ops gather_normalize's
}

// One block of a cluster: the step loop with its barriers; the phases are in the headers.
template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    persistent4_kernel(const std::uint8_t* __restrict__ images, const std::uint8_t* __restrict__ labels,
                       const std::uint32_t* __restrict__ order, T* P, T* scratch, double* stats, unsigned* counts,
                       Shape4<T> g) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char sm[];
  cg::grid_group grid = cg::this_grid();
  cg::cluster_group cluster = cg::this_cluster();
  const PersistentShape<T>& a = g.a;
  const int r = int(cluster.block_rank()), k = int(blockIdx.x) / g.CL;
  const int d0 = r * g.td, tdl = max(0, min(g.td, a.D - d0)), h0 = k * g.U;
  move_params(g, P, r, d0, tdl, h0, false, sm);
  __syncthreads();
  for (int s = 0; s < a.steps; ++s) {
    const int b = cols_of(a, s), j0 = share_begin(r, b, g.CL), j1 = share_begin(r + 1, b, g.CL);
    const std::uint32_t* cols = order + a.offset + static_cast<unsigned long long>(s) * unsigned(a.B);
    T* S = scratch + static_cast<std::size_t>(s & 1) * g.NC * a.B * a.C;
    gather_inputs(g, images, cols, b, d0, tdl, sm);
    __syncthreads();
    forward_partial(g, b, sm);
    cluster.sync();  // every block's partial Z1 complete
    hidden_share(g, cluster, j0, j1, sm);
    __syncthreads();
    partial_scores(g, j0, j1, S + static_cast<std::size_t>(k) * a.B * a.C, sm);
    grid.sync();  // every cluster's partial scores complete
    output_share(g, j0, j1, b, labels, cols, S, sm);
    cluster.sync();  // every block's columns of A1, dZ1, dZ2 complete
    gather_columns(g, cluster, r, b, blockIdx.x == 0, sm);
    __syncthreads();
    step_tile(g, b, tdl, sm);
    step_layer2(g, b, sm);
    if (blockIdx.x == 0 && threadIdx.x < 32) add_loss(g, b, sm, stats, counts);
    __syncthreads();  // the inputs and columns are the next step's
  }
  move_params(g, P, r, d0, tdl, h0, true, sm);
  cluster.sync();  // no block leaves while another may still read its shared memory
#else
  __trap();  // never launched: the plan needs code for compute capability 9.0
#endif
}

}  // namespace

template <class T>
int max_clusters(int cl, std::size_t smem, int device) {
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, persistent4_kernel<T>) != cudaSuccess || fa.binaryVersion < 90 ||
      (smem > 48 * 1024 &&
       cudaFuncSetAttribute(persistent4_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) !=
           cudaSuccess)) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(cl), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(unsigned(cl));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // The clusters the device can hold at once, and a cooperative launch's bound (every block
  // resident: the occupancy times the SMs). The occupancy calls answer for the current device.
  int n = 0, per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveClusters(&n, persistent4_kernel<T>, &cfg) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent4_kernel<T>, kThreads, smem) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n < per_sm * sms / cl ? n : per_sm * sms / cl;
}

template <class T>
void run(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
         const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, double* stats, unsigned* counts,
         cudaStream_t s) {
  Shape4<T> g;
  g.a = shape;
  g.CL = plan.cluster, g.U = plan.units, g.NC = shape.H / plan.units, g.td = plan.tile_d, g.jsplit = plan.jsplit;
  g.L = layout<T>(g.td, g.U, shape.B, g.jsplit);
  if (g.L.total > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(persistent4_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.L.total)));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(g.CL), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeCooperative;
  attr[1].val.cooperative = 1;
  cfg.gridDim = dim3(unsigned(g.NC * g.CL));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = g.L.total;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, persistent4_kernel<T>, images, labels, order, P, scratch, stats, counts, g));
  CHECK_LAUNCH("persistent_step4");
}

#define NN_PERSIST4_INSTANTIATE(T)                                                                                  \
  template int max_clusters<T>(int, std::size_t, int);                                                             \
  template void run<T>(const PersistentPlan&, const PersistentShape<T>&, const std::uint8_t*, const std::uint8_t*, \
                       const std::uint32_t*, T*, T*, double*, unsigned*, cudaStream_t);
NN_PERSIST4_INSTANTIATE(float)
NN_PERSIST4_INSTANTIATE(double)
#undef NN_PERSIST4_INSTANTIATE

}  // namespace nn::persist4
