// The persistent training step's first kernel (variant 1; persistent_step.h describes both) and
// the entry point that runs either (persistent_steps). nvcc for the GPU, sim/simcc for the CPU
// emulator (whose grid barrier is modelled with its hazards, sim/README.md "Grid barriers").
// Tested by tests/kernels/test_persistent_step.cpp.
#include "ops/persistent_step.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/cooperative.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "ops/layer2_column.h"
#include "ops/persistent_step2.h"
#include "ops/persistent_step4.h"

namespace nn {
namespace {

namespace cg = cooperative_groups;
using namespace ops_detail;
constexpr int kTH = kPersistentTileH, kTD = kPersistentMaxTileD, kThreads = kPersistentThreads;
static_assert(kThreads == 256 && kTH == 64 && kTD == 32, "the thread tiles below assume 16 x 16 threads");
// Batch columns staged in shared memory per pass (the shared arrays stay within 48 KiB).
template <class T>
constexpr int kJC = sizeof(T) == 4 ? 64 : 32;
template <class T>
constexpr int kSmem = (kTH + kTD) * (kJC<T> + 1);

template <class T>
struct Step {  // the current step's batch
  const std::uint32_t* cols;  // its image indices
  int b;                      // its columns
};

template <class T>
__device__ __forceinline__ Step<T> step_of(const PersistentShape<T>& a, const std::uint32_t* order, int s) {
  const unsigned long long off = a.offset + static_cast<unsigned long long>(s) * unsigned(a.B);
  const unsigned long long left = a.n - off;
  return {order + off, int(left < static_cast<unsigned long long>(a.B) ? left : static_cast<unsigned long long>(a.B))};
}

// Stages the batch's inputs d0 .. d0 + td (td <= kTD) of columns j0 .. j0 + kJC into x[d][j], / 255.
template <class T>
__device__ __forceinline__ void stage_inputs(T (*x)[kJC<T> + 1], const std::uint8_t* images, int D,
                                             const Step<T>& st, int d0, int td, int j0) {
  for (int i = int(threadIdx.x); i < kTD * kJC<T>; i += kThreads) {
    const int jj = i / kTD, dd = i % kTD, j = j0 + jj;
    x[dd][jj] = dd < td && j < st.b ? T(images[static_cast<std::size_t>(st.cols[j]) * D + d0 + dd]) / T(255) : T(0);
  }
}

struct Tile {
  int h0, th, d0, td, slice;
};
template <class T>
__device__ __forceinline__ Tile tile_of(const PersistentShape<T>& a, int t) {
  const int nht = (a.H + kTH - 1) / kTH;
  Tile q;
  q.slice = t / nht;
  q.h0 = (t % nht) * kTH;
  q.th = min(kTH, a.H - q.h0);
  q.d0 = q.slice * a.tile_d;
  q.td = min(a.tile_d, a.D - q.d0);
  return q;
}

// Phase A for one tile: Zp[slice](h, j) = sum over the tile's inputs d of W1(h, d) X(d, j).
// Thread (tx, ty) of 16 x 16 holds rows tx + 16 i and columns ty + 16 k of each pass.
template <class T>
__device__ void forward_tile(const PersistentShape<T>& a, const Tile& q, const Step<T>& st, const std::uint8_t* images,
                             const T* W1, T* Zp, T* smem) {
  constexpr int JC = kJC<T>, KJ = JC / 16;
  T(*w)[kTH + 1] = reinterpret_cast<T(*)[kTH + 1]>(smem);                      // w[d][h]
  T(*x)[JC + 1] = reinterpret_cast<T(*)[JC + 1]>(smem + kTD * (kTH + 1));      // x[d][j]
  const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;
  __syncthreads();  // the last step's phase C wrote this tile of W1 with another thread mapping
  for (int i = int(threadIdx.x); i < kTD * kTH; i += kThreads) {
    const int dd = i / kTH, hh = i % kTH;
    w[dd][hh] = dd < q.td && hh < q.th ? W1[static_cast<std::size_t>(q.d0 + dd) * a.H + q.h0 + hh] : T(0);
  }
  for (int j0 = 0; j0 < st.b; j0 += JC) {
    stage_inputs<T>(x, images, a.D, st, q.d0, q.td, j0);
    __syncthreads();
    T acc[4][KJ];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int k = 0; k < KJ; ++k) acc[i][k] = T(0);
    for (int dd = 0; dd < q.td; ++dd) {
      T wv[4], xv[KJ];
#pragma unroll
      for (int i = 0; i < 4; ++i) wv[i] = w[dd][tx + 16 * i];
#pragma unroll
      for (int k = 0; k < KJ; ++k) xv[k] = x[dd][ty + 16 * k];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int k = 0; k < KJ; ++k) acc[i][k] += wv[i] * xv[k];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int k = 0; k < KJ; ++k) {
        const int hh = tx + 16 * i, j = j0 + ty + 16 * k;
        if (hh < q.th && j < st.b) Zp[(static_cast<std::size_t>(q.slice) * a.B + j) * a.H + q.h0 + hh] = acc[i][k];
      }
    __syncthreads();  // the next pass restages x
  }
}

// Phase B for column j, by one warp.
template <class T>
__device__ void column(const PersistentShape<T>& a, const Step<T>& st, int j, const std::uint8_t* labels, const T* P,
                       const T* Zp, T* A1, T* dZ1, T* dZ2, double* loss_cols, unsigned* hit_cols) {
  const int H = a.H, C = a.C, lane = int(threadIdx.x & 31);
  const T* b1 = P + static_cast<std::size_t>(H) * a.D;
  const T* W2 = b1 + H;
  const T* b2 = W2 + static_cast<std::size_t>(C) * H;
  T* a1 = A1 + static_cast<std::size_t>(j) * H;
  for (int h = lane; h < H; h += 32) {
    T z = 0;
    for (int sl = 0; sl < a.slices; ++sl) z += Zp[(static_cast<std::size_t>(sl) * a.B + j) * H + h];
    a1[h] = gemm_detail::sigmoid(z + b1[h]);
  }
  T* dz = dZ2 + static_cast<std::size_t>(j) * C;
  column_scores(a1, H, C, W2, b2, int(labels[st.cols[j]]), T(1) / T(st.b), dz, &loss_cols[j], &hit_cols[j]);
  __syncwarp();  // lane 0 wrote dz
  T d[kLayer2MaxClasses];
#pragma unroll
  for (int c = 0; c < kLayer2MaxClasses; ++c) d[c] = c < C ? dz[c] : T(0);
  T* dz1 = dZ1 + static_cast<std::size_t>(j) * H;
  for (int h = lane; h < H; h += 32) {
    const T av = a1[h];
    T da = 0;
#pragma unroll
    for (int c = 0; c < kLayer2MaxClasses; ++c)
      if (c < C) da += W2[static_cast<std::size_t>(h) * C + c] * d[c];
    dz1[h] = da * (av * (T(1) - av));  // ops sigmoid_backward's form
  }
}

// Phase C for one tile: W1(h, d) -= lr (sum over j of dZ1(h, j) X(d, j) + reg W1(h, d)).
template <class T>
__device__ void step_tile(const PersistentShape<T>& a, const Tile& q, const Step<T>& st, const std::uint8_t* images,
                          const T* dZ1, T* W1, T* smem) {
  constexpr int JC = kJC<T>;
  T(*g)[JC + 1] = reinterpret_cast<T(*)[JC + 1]>(smem);               // g[h][j] = dZ1(h0 + h, j0 + j)
  T(*x)[JC + 1] = reinterpret_cast<T(*)[JC + 1]>(smem + kTH * (JC + 1));  // x[d][j]
  const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;
  T acc[4][2] = {};
  for (int j0 = 0; j0 < st.b; j0 += JC) {
    for (int i = int(threadIdx.x); i < kTH * JC; i += kThreads) {
      const int jj = i / kTH, hh = i % kTH, j = j0 + jj;
      g[hh][jj] = hh < q.th && j < st.b ? dZ1[static_cast<std::size_t>(j) * a.H + q.h0 + hh] : T(0);
    }
    stage_inputs<T>(x, images, a.D, st, q.d0, q.td, j0);
    __syncthreads();
    const int jn = min(JC, st.b - j0);
    for (int jj = 0; jj < jn; ++jj) {
      T gv[4], xv[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) gv[i] = g[tx + 16 * i][jj];
#pragma unroll
      for (int k = 0; k < 2; ++k) xv[k] = x[ty + 16 * k][jj];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int k = 0; k < 2; ++k) acc[i][k] += gv[i] * xv[k];
    }
    __syncthreads();  // the next pass restages g and x
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int hh = tx + 16 * i, dd = ty + 16 * k;
      if (hh < q.th && dd < q.td) {
        T* w = W1 + static_cast<std::size_t>(q.d0 + dd) * a.H + q.h0 + hh;
        const T v = acc[i][k] + a.reg * *w;
        *w = *w - a.lr * v;
      }
    }
}

// Phase C for entry e of [b1 | W2 | b2] (the parameters' tail, from P + H D): its gradient
// summed over the batch in column order, plus reg times the weight on W2's entries, then stepped.
template <class T>
__device__ __forceinline__ void step_tail_entry(const PersistentShape<T>& a, const Step<T>& st, int e, const T* A1,
                                                const T* dZ1, const T* dZ2, T* tail) {
  const int H = a.H, C = a.C;
  T g = 0;
  if (e < H) {
    for (int j = 0; j < st.b; ++j) g += dZ1[static_cast<std::size_t>(j) * H + e];
  } else if (e < H + C * H) {
    const int h = (e - H) / C, c = (e - H) % C;
    for (int j = 0; j < st.b; ++j) g += dZ2[static_cast<std::size_t>(j) * C + c] * A1[static_cast<std::size_t>(j) * H + h];
    g += a.reg * tail[e];
  } else {
    const int c = e - H - C * H;
    for (int j = 0; j < st.b; ++j) g += dZ2[static_cast<std::size_t>(j) * C + c];
  }
  tail[e] -= a.lr * g;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    persistent_step_kernel(const std::uint8_t* __restrict__ images, const std::uint8_t* __restrict__ labels,
                           const std::uint32_t* __restrict__ order, T* P, T* Zp, T* A1, T* dZ1, T* dZ2,
                           double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts,
                           PersistentShape<T> a) {
  __shared__ T smem[kSmem<T>];
  cg::grid_group grid = cg::this_grid();
  const int nht = (a.H + kTH - 1) / kTH, tiles = nht * a.slices;
  const int warps = kThreads / 32, warp = int(threadIdx.x) / 32;
  const int tail = a.H * (a.C + 1) + a.C;
  for (int s = 0; s < a.steps; ++s) {
    const Step<T> st = step_of(a, order, s);
    for (int t = int(blockIdx.x); t < tiles; t += int(gridDim.x)) forward_tile(a, tile_of(a, t), st, images, P, Zp, smem);
    grid.sync();  // Zp complete
    for (int j = int(blockIdx.x) * warps + warp; j < st.b; j += int(gridDim.x) * warps)
      column(a, st, j, labels, P, Zp, A1, dZ1, dZ2, loss_cols, hit_cols);
    grid.sync();  // A1, dZ1, dZ2 and the columns' losses complete; W2, b1 and b2 read
    for (int t = int(blockIdx.x); t < tiles; t += int(gridDim.x)) step_tile(a, tile_of(a, t), st, images, dZ1, P, smem);
    T* ptail = P + static_cast<std::size_t>(a.H) * a.D;
    for (int e = int(blockIdx.x * blockDim.x + threadIdx.x); e < tail; e += int(gridDim.x * blockDim.x))
      step_tail_entry(a, st, e, A1, dZ1, dZ2, ptail);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      double l = 0;
      unsigned hits = 0;
      for (int j = 0; j < st.b; ++j) l += loss_cols[j], hits += hit_cols[j];
      stats[0] += l;
      counts[0] += hits;
      counts[1] += 1;
      const bool finite = l - l == 0.0;  // false for inf and NaN, as layer2_finish tests it
      if (!finite && counts[2] == 0) counts[2] = counts[1];
    }
    // No barrier here: the next step's phase A reads only the W1 tiles this block stepped, and
    // writes Zp, which every block finished reading before the barrier above.
  }
}

}  // namespace

namespace persist1 {
// Tile widths tried: the smallest per-block critical path (tiles a block runs x their width),
// then the fewest slices (phase B sums one partial per slice).
int pick_tile_d(int D, int H, int blocks) {
  const int nht = (H + kTH - 1) / kTH;
  int best = kTD;
  long long best_cost = -1;
  for (int td = 8; td <= kTD; td += 4) {
    const long long tiles = static_cast<long long>(nht) * ((D + td - 1) / td);
    const long long cost = (tiles + blocks - 1) / blocks * td;
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && td > best)) best = td, best_cost = cost;
  }
  return best;
}
template <class T>
int blocks_per_sm() {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_step_kernel<T>, kThreads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return per_sm;
}
template int blocks_per_sm<float>();
template int blocks_per_sm<double>();
}  // namespace persist1

// NN_PERSISTENT_PROBE (persistent_step.h): persistent_probe.cu.
unsigned long long* probe_begin(const PersistentPlan& plan, int steps);
void probe_end(const PersistentPlan& plan, int steps, cudaStream_t s);

template <class T>
void persistent_steps(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
                      const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, T* A1, T* dZ1,
                      T* dZ2, double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts,
                      cudaStream_t s) {
  NN_RANGE("persistent steps");
  if (shape.C < 1 || shape.C > kLayer2MaxClasses || shape.H < 1 || shape.D < 1 || shape.B < 1 || shape.steps < 0 ||
      plan.blocks < 1 || shape.tile_d != plan.tile_d || shape.slices != plan.slices ||
      shape.offset + static_cast<unsigned long long>(shape.steps > 0 ? shape.steps - 1 : 0) * unsigned(shape.B) >= shape.n)
    throw std::invalid_argument("persistent_steps: needs 1 <= C <= " + std::to_string(kLayer2MaxClasses) +
                                ", H, D, B >= 1, a plan for this shape and steps inside the shard (got C " +
                                std::to_string(shape.C) + ", H " + std::to_string(shape.H) + ", B " +
                                std::to_string(shape.B) + ", " + std::to_string(shape.steps) + " steps)");
  if (shape.steps == 0) return;
  if (plan.variant == 4) {
    if (plan.units < 4 || shape.H % plan.units != 0 || plan.cluster < 1 ||
        persist4::layout<T>(plan.tile_d, plan.units, shape.B, plan.jsplit).total > plan.smem)
      throw std::invalid_argument("persistent_steps: the plan (variant 4) was made for another shape (H " +
                                  std::to_string(shape.H) + ", B " + std::to_string(shape.B) + ")");
    persist4::run<T>(plan, shape, images, labels, order, P, scratch, stats, counts, s);
    return;
  }
  if (plan.variant == 2 || plan.variant == 3) {
    if (shape.H > persist2::kMaxHPerThread * kThreads || plan.tile_h < 4 || plan.tile_h % 4 != 0 ||
        persist2::layout_of<T>(plan, shape.B).total > plan.smem)
      throw std::invalid_argument("persistent_steps: the plan (variant " + std::to_string(plan.variant) +
                                  ") was made for another shape (H " + std::to_string(shape.H) + ", B " +
                                  std::to_string(shape.B) + ")");
    unsigned long long* probe = probe_begin(plan, shape.steps);
    persist2::run<T>(plan, shape, images, labels, order, P, scratch, A1, dZ1, dZ2, loss_cols, hit_cols, stats, counts,
                     probe, s);
    if (probe) probe_end(plan, shape.steps, s);
    return;
  }
  PersistentShape<T> a = shape;
  void* args[] = {&images, &labels, &order, &P, &scratch, &A1, &dZ1, &dZ2, &loss_cols, &hit_cols, &stats, &counts, &a};
  CUDA_CHECK(cudaLaunchCooperativeKernel(cooperative_kernel(persistent_step_kernel<T>), dim3(unsigned(plan.blocks)),
                                         dim3(kThreads), args, 0, s));
  CHECK_LAUNCH("persistent_step");
}

#define NN_PERSISTENT_INSTANTIATE(T)                                                                                \
  template void persistent_steps<T>(const PersistentPlan&, const PersistentShape<T>&, const std::uint8_t*,          \
                                    const std::uint8_t*, const std::uint32_t*, T*, T*, T*, T*, T*, double*, unsigned*, \
                                    double*, unsigned*, cudaStream_t);
NN_PERSISTENT_INSTANTIATE(float)
NN_PERSISTENT_INSTANTIATE(double)
#undef NN_PERSISTENT_INSTANTIATE

}  // namespace nn
