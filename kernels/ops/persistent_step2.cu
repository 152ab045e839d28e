// The second persistent-step kernel (persistent_step.h describes both): W1's tiles on chip for the
// whole launch, the input slice gathered once a step by asynchronous copies a step ahead, every
// phase on every block, wide shared reads, fixed-order sums; its phases are in
// persistent_step2_{io,tiles,columns}.h. nvcc (SASS only: the grid barrier's and cp.async's PTX are
// not GPGPU-Sim's) and sim/simcc. Tested by tests/kernels/test_persistent_step*.cpp.
#include "ops/persistent_step2.h"

#include <cooperative_groups.h>

#include "common/check.h"
#include "ops/persistent_step2_columns.h"
#include "ops/persistent_step2_tiles.h"
#include "ops/persistent_step2_v3.h"

namespace nn::persist2 {
namespace {

namespace cg = cooperative_groups;
using namespace detail;
constexpr int kIdxPerThread = 4;  // the next step's indices a thread holds in registers (B <= 1024)

// The owned W1 tiles into shared memory, for the whole launch (zero past the tile's edge).
template <class T>
__device__ void tiles_in(const Shape2<T>& g, const T* W1, unsigned char* sm) {
  T* ws = reinterpret_cast<T*>(sm + g.L.w);
  const int td4 = round4(g.td);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    for (int i = int(threadIdx.x); i < td4 * g.th; i += kThreads) {
      const int dd = i / g.th, hh = i % g.th;
      ws[k * td4 * g.th + i] = dd < q.tdl && hh < q.thl ? W1[static_cast<std::size_t>(q.d0 + dd) * g.a.H + q.h0 + hh] : T(0);
    }
  }
}
// The stepped tiles back to W1.
template <class T>
__device__ void tiles_out(const Shape2<T>& g, T* W1, const unsigned char* sm) {
  const T* ws = reinterpret_cast<const T*>(sm + g.L.w);
  const int td4 = round4(g.td);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    for (int i = int(threadIdx.x); i < td4 * g.th; i += kThreads) {
      const int dd = i / g.th, hh = i % g.th;
      if (dd < q.tdl && hh < q.thl) W1[static_cast<std::size_t>(q.d0 + dd) * g.a.H + q.h0 + hh] = ws[k * td4 * g.th + i];
    }
  }
}

// The kernel is longer than 60 lines because the launch's prologue (the W1 tiles in, the first
// gather), the step loop with its two grid barriers and probe marks, and the epilogue (the tiles
// back to W1) share one shared-memory layout and one set of step indices. V3: variant 3
// (persistent_step2_v3.h: windows, word conversion, the tail in the next step's phase A, the
// marks inside phase A); the same arithmetic as variant 2.
template <class T, bool V3>
__global__ void __launch_bounds__(kThreads, 1)
    persistent2_kernel(const std::uint8_t* __restrict__ images, const std::uint8_t* __restrict__ labels,
                       const std::uint32_t* __restrict__ order, T* P, T* Zp, T* A1, T* dZ1, T* dZ2,
                       double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts,
                       unsigned long long* probe, Shape2<T> g) {
  extern __shared__ __align__(16) unsigned char sm[];
  cg::grid_group grid = cg::this_grid();
  const PersistentShape<T>& a = g.a;
  constexpr int K = V3 ? kProbeMarks3 : kProbeMarks, mA = V3 ? 4 : 1;  // marks a step; phase A's end
  T* lut = reinterpret_cast<T*>(sm + g.L.lut);
  std::uint32_t* idx = reinterpret_cast<std::uint32_t*>(sm + g.L.idx);
  const int tid = int(threadIdx.x);
  tiles_in(g, P, sm);
  for (int i = tid; i < 256; i += kThreads) lut[i] = T(i) / T(255);  // ops gather_normalize's division
  for (int j = tid; j < cols_of(g, 0); j += kThreads) idx[j] = order_of(g, order, 0)[j];
  __syncthreads();
  gather_step<V3>(g, images, idx, cols_of(g, 0), sm);
  const int warps = kThreads / 32, warp = tid / 32;
  const int tasks = a.H + 2, slot = (warps - 1 - warp) * int(gridDim.x) + int(blockIdx.x);
  int slots_a = 0;  // variant 3: the warps of the grid that run the previous step's tail in phase A
  const int slot_a = V3 ? tail_slot(g, &slots_a) : -1;
  for (int s = 0; s < a.steps; ++s) {
    const int b = cols_of(g, s);
    const std::uint32_t* cols = order_of(g, order, s);
    mark<K>(probe, s, 0);
    // Phase A: this step's inputs landed; the next step's gathered while B and C run. The next
    // step's image indices are loaded first, their latency under the wait and the conversion.
    const int bn = s + 1 < a.steps ? cols_of(g, s + 1) : 0;
    std::uint32_t nidx[kIdxPerThread];
#pragma unroll
    for (int u = 0; u < kIdxPerThread; ++u) {
      const int j = tid + u * kThreads;
      nidx[u] = j < bn ? order_of(g, order, s + 1)[j] : 0u;
    }
    __pipeline_wait_prior(0);
    __syncthreads();
    if constexpr (V3) mark<K>(probe, s, 1), convert_words(g, b, sm), mark<K>(probe, s, 2);
    else convert(g, b, sm);
#pragma unroll
    for (int u = 0; u < kIdxPerThread; ++u)
      if (tid + u * kThreads < bn) idx[tid + u * kThreads] = nidx[u];
    for (int j = tid + kIdxPerThread * kThreads; j < bn; j += kThreads) idx[j] = order_of(g, order, s + 1)[j];
    __syncthreads();  // the bytes are converted (the buffers are free) and idx holds step s + 1's
    if (bn > 0) gather_step<V3>(g, images, idx, bn, sm);
    if constexpr (V3) {  // the previous step's tail on the warps with no forward work
      mark<K>(probe, s, 3);
      if (s > 0 && slot_a >= 0)
        for (int e = slot_a; e < tasks; e += slots_a)
          tail_task(g, e, cols_of(g, s - 1), P, A1, dZ1, dZ2, loss_cols, hit_cols, stats, counts);
    }
    for (int k = 0; k < g.tpb; ++k) {
      const int t = int(blockIdx.x) + k * int(gridDim.x);
      if (t >= g.tiles) break;
      forward_tile<V3 && sizeof(T) == 4>(g, tile_of(g, t), k, b, Zp, sm);  // double's would spill
    }
    mark<K>(probe, s, mA);
    grid.sync();  // Zp complete (variant 3: and the previous step's tail)
    mark<K>(probe, s, mA + 1);
    for (int j = int(blockIdx.x); j < b; j += int(gridDim.x))
      column(g, j, b, labels, cols, P, Zp, A1, dZ1, dZ2, loss_cols, hit_cols, sm);
    mark<K>(probe, s, mA + 2);
    grid.sync();  // A1, dZ1, dZ2 and the columns' losses complete; W2, b1 and b2 read
    mark<K>(probe, s, mA + 3);
    for (int k = 0; k < g.tpb; ++k) {
      const int t = int(blockIdx.x) + k * int(gridDim.x);
      if (t >= g.tiles) break;
      step_tile(g, tile_of(g, t), k, b, dZ1, sm);
    }
    if (slots_a == 0 || s + 1 == a.steps)  // variant 2, or the launch's last step
      for (int e = slot; e < tasks; e += warps * int(gridDim.x))
        tail_task(g, e, b, P, A1, dZ1, dZ2, loss_cols, hit_cols, stats, counts);
    mark<K>(probe, s, mA + 4);
    // No grid barrier: the next step's phase A reads only this block's W1 tiles (the barrier after
    // the wait orders step_tile's writes) and writes Zp, which every block finished reading.
  }
  __syncthreads();
  tiles_out(g, P, sm);
  __pipeline_wait_prior(0);  // nothing is gathered past the last step; leave no copy in flight
}

// The typed calls (the emulator notes a kernel's parameter types through them).
template <class T, bool V3>
int occupancy(std::size_t smem) {
  int per_sm = 0;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(persistent2_kernel<T, V3>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent2_kernel<T, V3>, kThreads, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return per_sm;
}
template <class T, bool V3>
void launch(int blocks, void** args, std::size_t smem, cudaStream_t s) {
  if (smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(persistent2_kernel<T, V3>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(persistent2_kernel<T, V3>),
                                         dim3(unsigned(blocks)), dim3(kThreads), args, smem, s));
  CHECK_LAUNCH("persistent_step2");
}

}  // namespace

template <class T>
int blocks_per_sm(std::size_t smem, int variant) {
  return variant == 3 ? occupancy<T, true>(smem) : occupancy<T, false>(smem);
}

template <class T>
void run(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
         const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, T* A1, T* dZ1, T* dZ2,
         double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts, unsigned long long* probe,
         cudaStream_t s) {
  Shape2<T> g;
  g.a = shape;
  g.th = plan.tile_h, g.td = plan.tile_d, g.nht = (shape.H + plan.tile_h - 1) / plan.tile_h;
  g.tiles = plan.tiles, g.tpb = plan.tiles_per_block, g.jsplit = plan.jsplit, g.copy = plan.copy_bytes;
  g.dz_cols = plan.dz_cols;
  g.window = windowed(plan) ? 1 : 0;
  g.L = layout_of<T>(plan, shape.B);
  void* args[] = {&images, &labels, &order, &P, &scratch, &A1, &dZ1, &dZ2, &loss_cols, &hit_cols, &stats, &counts,
                  &probe, &g};
  if (plan.variant == 3) launch<T, true>(plan.blocks, args, g.L.total, s);
  else launch<T, false>(plan.blocks, args, g.L.total, s);
}

#define NN_PERSIST2_INSTANTIATE(T)                                                                                   \
  template int blocks_per_sm<T>(std::size_t, int);                                                                    \
  template void run<T>(const PersistentPlan&, const PersistentShape<T>&, const std::uint8_t*, const std::uint8_t*,  \
                       const std::uint32_t*, T*, T*, T*, T*, T*, double*, unsigned*, double*, unsigned*,            \
                       unsigned long long*, cudaStream_t);
NN_PERSIST2_INSTANTIATE(float)
NN_PERSIST2_INSTANTIATE(double)
#undef NN_PERSIST2_INSTANTIATE

}  // namespace nn::persist2
