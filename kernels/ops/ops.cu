// Elementwise and reduction kernels of the network (declared in ops.h): gather/normalise,
// softmax + cross-entropy, row sums, sigmoid, SGD, sum of squares, argmax counting.
// nvcc for the GPU, sim/simcc for the CPU emulator; tested by tests/kernels/test_ops.cpp.
#include "ops/ops.h"

#include <atomic>
#include <climits>
#include <cmath>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/nvtx.h"

namespace nn {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kBlock = 256;  // threads per block of the 1-D and column kernels
// Grid-stride loops cover whatever these grids do not: 2048 x 256 threads are about twice
// what an H100 (132 SMs x 2048) keeps resident, enough to saturate memory, while keeping
// the number of per-block atomics of the reductions small.
struct GridCaps {
  unsigned blocks, reduce_blocks, grid_y;
};
constexpr GridCaps kGpuCaps{2048, 1024, 65535};  // 65535: the hardware limit of gridDim.y
#ifndef SIM_EMULATOR
constexpr GridCaps caps() { return kGpuCaps; }
#else
// In the emulator every CUDA thread is a fiber whose switches cost more than one
// element's work, so the emulator build launches a few blocks that stride further.
// Results do not depend on the grid (every loop strides), and the tests then exercise
// the striding paths at every size; use_gpu_grids(true) restores the GPU's grids
// (make test-gpu-grid), so the many-block paths run as on a GPU too.
constexpr GridCaps kEmulatorCaps{8, 8, 8};
std::atomic<bool> g_gpu_grids{false};
GridCaps caps() { return g_gpu_grids.load(std::memory_order_relaxed) ? kGpuCaps : kEmulatorCaps; }
#endif

unsigned grid_1d(std::size_t n, unsigned cap) {
  const unsigned g = blocks_for(n, kBlock);
  return g < cap ? g : cap;
}
unsigned grid_1d(std::size_t n) { return grid_1d(n, caps().blocks); }

// Precise math for both types (never the fast intrinsics: results are compared with the CPU).
__device__ __forceinline__ float dev_exp(float x) { return expf(x); }
__device__ __forceinline__ double dev_exp(double x) { return exp(x); }
__device__ __forceinline__ float dev_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double dev_abs(double x) { return fabs(x); }

// Sum over the whole block; the result is valid in thread 0 only. `smem` holds one entry
// per warp. Every thread of the block must call it (it has a barrier).
template <class U>
__device__ U block_sum(U v, U* smem) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(kFullMask, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  U total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += smem[w];
  return total;
}

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

unsigned column_grid(int C, int b) {
  const std::size_t cols_per_block = std::size_t(kBlock / 32) * std::size_t(32 / group_width(C));
  const std::size_t g = (std::size_t(b) + cols_per_block - 1) / cols_per_block;
  const unsigned cap = caps().blocks;
  return g < cap ? unsigned(g) : cap;
}

}  // namespace

#ifdef SIM_EMULATOR
void use_gpu_grids(bool on) { g_gpu_grids.store(on); }
bool gpu_grids() { return g_gpu_grids.load(); }
#else
void use_gpu_grids(bool) {}
bool gpu_grids() { return true; }
#endif

// ---- kernels -----------------------------------------------------------------------------

// Threads run down a column (x) and blocks across columns (y): the byte reads of one
// image and the writes of one batch column are both contiguous.
template <class T>
__global__ void __launch_bounds__(kBlock)
    gather_normalize_kernel(const std::uint8_t* __restrict__ images, int D,
                            const std::uint32_t* __restrict__ idx, int b, T* __restrict__ X) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= D) return;
  for (int j = blockIdx.y; j < b; j += gridDim.y) {
    const std::uint8_t v = images[std::size_t(idx[j]) * D + i];
    X[std::size_t(j) * D + i] = static_cast<T>(v) / T(255);  // true division, as the CPU
  }
}

__global__ void __launch_bounds__(kBlock)
    gather_labels_kernel(const std::uint8_t* __restrict__ labels,
                         const std::uint32_t* __restrict__ idx, int b,
                         std::uint8_t* __restrict__ out) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < b; j += blockDim.x * gridDim.x)
    out[j] = labels[idx[j]];
}

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

// Row sums without atomics: a block owns kRowTile rows and all n columns. kRowTile
// consecutive elements of a column are one 32-byte sector, so a warp (32 / kRowTile columns
// x kRowTile rows) reads whole sectors, while the tile stays narrow enough that H = 512 rows
// already give 64 blocks of 1024 threads. Per-thread strided sums, then shuffles over the
// lanes of the same row, then the warps' partials in a fixed order: the result does not
// depend on scheduling (bitwise reproducible), unlike an atomicAdd split over columns.
constexpr int kRowSumThreads = 1024;
template <class T>
constexpr int kRowTile = int(32 / sizeof(T));

template <class T>
__global__ void __launch_bounds__(kRowSumThreads)
    row_sums_kernel(const T* __restrict__ A, int M, int n, int lda, T* __restrict__ out, T beta) {
  constexpr int R = kRowTile<T>;
  __shared__ T part[kRowSumThreads / 32][R];
  const int tx = threadIdx.x % R;  // row within the tile
  const int ty = threadIdx.x / R;  // column slice
  const int slices = blockDim.x / R;
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int tile = blockIdx.x; tile * R < M; tile += gridDim.x) {  // uniform over the block
    const int i = tile * R + tx;
    T acc = 0;
    if (i < M) {
      const T* a = A + i;
#pragma unroll 4
      for (int j = ty; j < n; j += slices) acc += a[std::size_t(j) * lda];
    }
    for (int off = 16; off >= R; off >>= 1) acc += __shfl_down_sync(kFullMask, acc, off);
    if ((threadIdx.x & 31) < R) part[warp][tx] = acc;
    __syncthreads();
    if (threadIdx.x < R && i < M) {
      T total = 0;
      for (int w = 0; w < nwarps; ++w) total += part[w][tx];
      // beta == 0 never reads out: it may be uninitialised (NaN * 0 would be NaN).
      out[i] = (beta == T(0)) ? total : beta * out[i] + total;
    }
    __syncthreads();  // part is reused by the next tile
  }
}

// Elementwise kernels: grid-stride loops, adjacent threads on adjacent elements.
template <class T>
__global__ void __launch_bounds__(kBlock)
    sigmoid_backward_kernel(const T* dA1, const T* __restrict__ a1, std::size_t n, T* dZ1) {
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += std::size_t(blockDim.x) * gridDim.x) {
    const T a = a1[k];
    dZ1[k] = dA1[k] * (a * (T(1) - a));
  }
}

// The logistic function takes exp only of -|z| <= 0, so nothing overflows for any finite z
// (the CPU reference's form, so both round alike).
template <class T>
__global__ void __launch_bounds__(kBlock) sigmoid_kernel(const T* Z, std::size_t n, T* A) {
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += std::size_t(blockDim.x) * gridDim.x) {
    const T z = Z[k];
    const T e = dev_exp(-dev_abs(z));
    A[k] = (z >= T(0) ? T(1) : e) / (T(1) + e);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    sgd_update_kernel(T* __restrict__ p, const T* __restrict__ g, std::size_t n, T lr, T reg) {
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += std::size_t(blockDim.x) * gridDim.x) {
    const T w = p[k];
    p[k] = w - lr * (g[k] + reg * w);
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    sum_squares_kernel(const T* __restrict__ p, std::size_t n, double* out) {
  __shared__ double s_sum[kBlock / 32];
  double acc = 0;  // a float squared is exact in double
  for (std::size_t k = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += std::size_t(blockDim.x) * gridDim.x) {
    const double v = p[k];
    acc += v * v;
  }
  const double t = block_sum(acc, s_sum);
  if (threadIdx.x == 0) atomicAdd(out, t);
}

// ---- launchers -----------------------------------------------------------------------------

template <class T>
void gather_normalize(const std::uint8_t* images, int D, const std::uint32_t* idx, int b, T* X,
                      cudaStream_t s) {
  NN_RANGE("gather_normalize");
  if (D <= 0 || b <= 0) return;
  // Short columns get a narrower block rather than idle threads.
  const unsigned block = D < kBlock ? unsigned((D + 31) / 32 * 32) : unsigned(kBlock);
  const unsigned max_y = caps().grid_y;
  const dim3 grid(blocks_for(std::size_t(D), block), b < int(max_y) ? unsigned(b) : max_y);
  gather_normalize_kernel<T><<<grid, block, 0, s>>>(images, D, idx, b, X);
  CHECK_LAUNCH("gather_normalize");
}

template <class T>
void gather_labels(const std::uint8_t* labels, const std::uint32_t* idx, int b, std::uint8_t* out,
                   cudaStream_t s) {
  NN_RANGE("gather_labels");
  if (b <= 0) return;
  gather_labels_kernel<<<grid_1d(std::size_t(b)), kBlock, 0, s>>>(labels, idx, b, out);
  CHECK_LAUNCH("gather_labels");
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
void row_sums(const T* A, int M, int n, int lda, T* out, T beta, cudaStream_t s) {
  NN_RANGE("row_sums");
  if (M <= 0) return;
  if (n <= 0 && beta == T(1)) return;  // nothing to add; other betas still scale out
  const std::size_t tiles = (std::size_t(M) + kRowTile<T> - 1) / kRowTile<T>;
  const unsigned cap = caps().blocks;
  const unsigned grid = tiles < cap ? unsigned(tiles) : cap;
  row_sums_kernel<T><<<grid, kRowSumThreads, 0, s>>>(A, M, n < 0 ? 0 : n, lda, out, beta);
  CHECK_LAUNCH("row_sums");
}

template <class T>
void sigmoid_backward(const T* dA1, const T* a1, std::size_t n, T* dZ1, cudaStream_t s) {
  NN_RANGE("sigmoid_backward");
  if (n == 0) return;
  sigmoid_backward_kernel<T><<<grid_1d(n), kBlock, 0, s>>>(dA1, a1, n, dZ1);
  CHECK_LAUNCH("sigmoid_backward");
}

template <class T>
void sigmoid(const T* Z, std::size_t n, T* A, cudaStream_t s) {
  NN_RANGE("sigmoid");
  if (n == 0) return;
  sigmoid_kernel<T><<<grid_1d(n), kBlock, 0, s>>>(Z, n, A);
  CHECK_LAUNCH("sigmoid");
}

template <class T>
void sgd_update(T* p, const T* g, std::size_t n, T lr, T reg, cudaStream_t s) {
  NN_RANGE("sgd_update");
  if (n == 0) return;
  sgd_update_kernel<T><<<grid_1d(n), kBlock, 0, s>>>(p, g, n, lr, reg);
  CHECK_LAUNCH("sgd_update");
}

template <class T>
void sum_squares(const T* p, std::size_t n, double* out, cudaStream_t s) {
  NN_RANGE("sum_squares");
  if (n == 0) return;
  sum_squares_kernel<T><<<grid_1d(n, caps().reduce_blocks), kBlock, 0, s>>>(p, n, out);
  CHECK_LAUNCH("sum_squares");
}

template <class T>
void count_correct(const T* scores, const std::uint8_t* labels, int C, int b, unsigned* correct,
                   cudaStream_t s) {
  NN_RANGE("count_correct");
  if (C <= 0 || b <= 0) return;
  count_correct_kernel<T><<<column_grid(C, b), kBlock, 0, s>>>(scores, labels, C, b, correct);
  CHECK_LAUNCH("count_correct");
}

// ---- explicit instantiations ---------------------------------------------------------------
#define NN_OPS_INSTANTIATE(T)                                                                     \
  template void gather_normalize<T>(const std::uint8_t*, int, const std::uint32_t*, int, T*,     \
                                    cudaStream_t);                                                \
  template void gather_labels<T>(const std::uint8_t*, const std::uint32_t*, int, std::uint8_t*,  \
                                 cudaStream_t);                                                   \
  template void softmax_columns<T>(const T*, int, int, T*, cudaStream_t);                        \
  template void softmax_xent<T>(const T*, const std::uint8_t*, int, int, T, T*, T*, double*,     \
                                unsigned*, cudaStream_t);                                         \
  template void row_sums<T>(const T*, int, int, int, T*, T, cudaStream_t);                       \
  template void sigmoid_backward<T>(const T*, const T*, std::size_t, T*, cudaStream_t);          \
  template void sigmoid<T>(const T*, std::size_t, T*, cudaStream_t);                             \
  template void sgd_update<T>(T*, const T*, std::size_t, T, T, cudaStream_t);                    \
  template void sum_squares<T>(const T*, std::size_t, double*, cudaStream_t);                    \
  template void count_correct<T>(const T*, const std::uint8_t*, int, int, unsigned*, cudaStream_t);
NN_OPS_INSTANTIATE(float)
NN_OPS_INSTANTIATE(double)
#undef NN_OPS_INSTANTIATE
template void gather_labels<void>(const std::uint8_t*, const std::uint32_t*, int, std::uint8_t*,
                                  cudaStream_t);

}  // namespace nn
