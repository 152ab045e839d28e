// The column kernels of the C x b score matrices (declared in ops.h): softmax, the fused
// softmax + cross-entropy + gradient, and the argmax count, each column handled by a group of
// lanes so a warp reads whole adjacent columns. nvcc for the GPU, sim/simcc for the CPU
// emulator; tested by tests/kernels/test_ops.cpp.
#include <climits>
#include <cmath>

#include "common/check.h"
#include "common/nvtx.h"
#include "ops/ops.h"
#include "ops/ops_common.h"

namespace nn {
namespace {

using namespace ops_detail;

// ---- column groups ---------------------------------------------------------------------
// The C x b score matrices have C = 10 rows: one thread per column would make a warp's
// loads C elements apart. Instead each column is handled by a group of G lanes (G = the
// power of two >= C, at most 32): lane r of the group reads row r, so a warp reads 32/G
// whole adjacent columns, one contiguous span of memory; group reductions are shuffles.
// Rows >= G (C > 32) are looped over by the same lanes.
struct ColumnGroup {
  int G;          // lanes per column (power of two <= 32)
  int row0;       // first row of this lane
  int rows;       // C for a column that exists, 0 for a lane past b
  long long col;  // the column
  __device__ bool valid() const { return rows > 0; }
};

__host__ __device__ inline int group_width(int C) {
  int G = 1;
  while (G < C && G < 32) G <<= 1;
  return G;
}

// Butterfly reductions leave the result in every lane of the group, bitwise identical
// (IEEE addition is commutative, so partners always combine the same two values).
template <class T>
__device__ __forceinline__ T group_sum(T v, int G) {
  for (int off = G >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off, G);
  return v;
}

// The column's maximum, in every lane of the group (max is exact, so all lanes agree).
template <class T>
__device__ __forceinline__ T column_max(const T* z, const ColumnGroup& g) {
  T m = T(-INFINITY);
#pragma unroll 1
  for (int r = g.row0; r < g.rows; r += g.G) m = z[r] > m ? z[r] : m;
  for (int off = g.G >> 1; off > 0; off >>= 1) {
    const T o = __shfl_xor_sync(kFullMask, m, off, g.G);
    m = o > m ? o : m;
  }
  return m;
}

// Lowest row holding the maximum m (the tie rule): one ballot per G rows instead of
// shuffling (value, index) pairs; the group's bits of the ballot are in lane order, which is
// row order within each G-row chunk, and chunks are visited in increasing order.
template <class T>
__device__ __forceinline__ int column_argmax(const T* z, int C, const ColumnGroup& g, T m) {
  const int first_lane = int(threadIdx.x & 31) & ~(g.G - 1);
  const unsigned group_bits = g.G == 32 ? kFullMask : ((1u << g.G) - 1u);
  int arg = INT_MAX;
  for (int r0 = 0; r0 < C; r0 += g.G) {  // same trip count in every lane
    const int r = r0 + g.row0;
    const bool hit = r < g.rows && z[r] == m;
    const unsigned bits = (__ballot_sync(kFullMask, hit) >> first_lane) & group_bits;
    if (arg == INT_MAX && bits) arg = r0 + __ffs(int(bits)) - 1;
  }
  return arg;
}

// sum_r exp(z_r - m) over the column: every term is <= 1 and the max's term is exactly 1,
// so the sum lies in [1, C]: no overflow, and its log is never log(0).
template <class T>
__device__ __forceinline__ T column_sum_exp(const T* z, const ColumnGroup& g, T m) {
  T s = 0;
#pragma unroll 1
  for (int r = g.row0; r < g.rows; r += g.G) s += dev_exp(z[r] - m);
  return group_sum(s, g.G);
}

// Calls body(group) for each of this lane's columns. Columns go in warp-sized sets and the
// loop condition is uniform over each warp, so all 32 lanes always take part in the group
// shuffles (full mask), including lanes whose column lies past b.
template <class F>
__device__ __forceinline__ void for_each_column_group(int C, int b, F&& body) {
  const int G = group_width(C);
  const int lane = int(threadIdx.x & 31);
  const long long per_warp = 32 / G, warps = blockDim.x >> 5;
  const long long stride = (long long)gridDim.x * warps * per_warp;
  for (long long base = ((long long)blockIdx.x * warps + (threadIdx.x >> 5)) * per_warp; base < b;
       base += stride) {
    const long long col = base + lane / G;
    body(ColumnGroup{G, lane & (G - 1), col < b ? C : 0, col});
  }
}

inline unsigned column_grid(int C, int b) {
  const std::size_t cols_per_block = std::size_t(kBlock / 32) * std::size_t(32 / group_width(C));
  const std::size_t g = (std::size_t(b) + cols_per_block - 1) / cols_per_block;
  const unsigned cap = caps().blocks;
  return g < cap ? unsigned(g) : cap;
}

}  // namespace

// ---- kernels -----------------------------------------------------------------------------

// No __restrict__ on Z / Y: they may alias. Each element is read before it is written,
// by the one lane that owns it, so in-place use is safe.
template <class T>
__global__ void __launch_bounds__(kBlock) softmax_columns_kernel(const T* Z, int C, int b, T* Y) {
  for_each_column_group(C, b, [&](const ColumnGroup& g) {
    const T* z = Z + (g.valid() ? g.col : 0) * C;
    const T m = column_max(z, g);
    const T sum = column_sum_exp(z, g, m);
#pragma unroll 1
    for (int r = g.row0; r < g.rows; r += g.G) Y[g.col * C + r] = dev_exp(z[r] - m) / sum;
  });
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    softmax_xent_kernel(const T* Z, const std::uint8_t* __restrict__ labels, int C, int b, T inv_B,
                        T* yhat, T* dZ2, double* loss_sum, unsigned* correct) {
  __shared__ double s_loss[kBlock / 32];
  __shared__ unsigned s_hits[kBlock / 32];
  double loss = 0;  // over this lane's columns (group leaders only)
  unsigned hits = 0;
  for_each_column_group(C, b, [&](const ColumnGroup& g) {
    const T* z = Z + (g.valid() ? g.col : 0) * C;
    const T m = column_max(z, g);
    const int arg = correct ? column_argmax(z, C, g, m) : INT_MAX;
    const T sum = column_sum_exp(z, g, m);
    const int label = (g.valid() && labels) ? int(labels[g.col]) : -1;
    // z[label], fetched from the lane that owns row `label` (row % G within the group).
    T mine = 0;
#pragma unroll 1
    for (int r = g.row0; r < g.rows; r += g.G) {
      const T zr = z[r];
      if (r == label) mine = zr;
      const T y = dev_exp(zr - m) / sum;
      if (yhat) yhat[g.col * C + r] = y;
      if (dZ2) dZ2[g.col * C + r] = (y - (r == label ? T(1) : T(0))) * inv_B;
    }
    const T zl = __shfl_sync(kFullMask, mine, label >= 0 ? label % g.G : 0, g.G);
    if (g.valid() && g.row0 == 0) {
      // CE = -(z[label] - max - log(sum)), formed in double (an exact difference for float
      // inputs); sum >= 1, so the log is finite.
      loss += double(m) - double(zl) + log(double(sum));
      hits += (arg == label) ? 1u : 0u;
    }
  });
  // One atomic per block for each accumulator; skipped outputs skip the whole reduction
  // (the pointers are kernel arguments, so the barrier is uniform).
  if (loss_sum) {
    const double t = block_sum(loss, s_loss);
    if (threadIdx.x == 0) atomicAdd(loss_sum, t);
  }
  if (correct) {
    const unsigned t = block_sum(hits, s_hits);
    if (threadIdx.x == 0 && t) atomicAdd(correct, t);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    count_correct_kernel(const T* __restrict__ scores, const std::uint8_t* __restrict__ labels,
                         int C, int b, unsigned* correct) {
  __shared__ unsigned s_hits[kBlock / 32];
  unsigned hits = 0;
  for_each_column_group(C, b, [&](const ColumnGroup& g) {
    const T* z = scores + (g.valid() ? g.col : 0) * C;
    const int arg = column_argmax(z, C, g, column_max(z, g));
    if (g.valid() && g.row0 == 0 && arg == int(labels[g.col])) ++hits;
  });
  const unsigned t = block_sum(hits, s_hits);
  if (threadIdx.x == 0 && t) atomicAdd(correct, t);
}

template <class T>
void softmax_columns(const T* Z, int C, int b, T* Y, cudaStream_t s) {
  NN_RANGE("softmax_columns");
  if (C <= 0 || b <= 0) return;
  softmax_columns_kernel<T><<<column_grid(C, b), kBlock, 0, s>>>(Z, C, b, Y);
  CHECK_LAUNCH("softmax_columns");
}

template <class T>
void softmax_xent(const T* Z, const std::uint8_t* labels, int C, int b, T inv_B, T* yhat, T* dZ2,
                  double* loss_sum, unsigned* correct, cudaStream_t s) {
  NN_RANGE("softmax_xent");
  if (C <= 0 || b <= 0 || (!yhat && !dZ2 && !loss_sum && !correct)) return;
  softmax_xent_kernel<T><<<column_grid(C, b), kBlock, 0, s>>>(Z, labels, C, b, inv_B, yhat, dZ2,
                                                              loss_sum, correct);
  CHECK_LAUNCH("softmax_xent");
}

template <class T>
void count_correct(const T* scores, const std::uint8_t* labels, int C, int b, unsigned* correct,
                   cudaStream_t s) {
  NN_RANGE("count_correct");
  if (C <= 0 || b <= 0) return;
  count_correct_kernel<T><<<column_grid(C, b), kBlock, 0, s>>>(scores, labels, C, b, correct);
  CHECK_LAUNCH("count_correct");
}

#define NN_OPS_INSTANTIATE(T)                                                                     \
  template void softmax_columns<T>(const T*, int, int, T*, cudaStream_t);                        \
  template void softmax_xent<T>(const T*, const std::uint8_t*, int, int, T, T*, T*, double*,     \
                                unsigned*, cudaStream_t);                                         \
  template void count_correct<T>(const T*, const std::uint8_t*, int, int, unsigned*, cudaStream_t);
NN_OPS_INSTANTIATE(float)
NN_OPS_INSTANTIATE(double)
#undef NN_OPS_INSTANTIATE

}  // namespace nn
