// Elementwise and reduction kernels of the network (declared in ops.h): gather/normalise,
// row sums, sigmoid, SGD, sum of squares; the column kernels (softmax, cross-entropy, argmax
// counting) are in columns.cu.
// nvcc for the GPU, sim/simcc for the CPU emulator; tested by tests/kernels/test_ops.cpp.
#include "ops/ops.h"

#include <atomic>
#include <climits>
#include <cmath>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/nvtx.h"
#include "common/pdl.h"
#include "ops/ops_common.h"

namespace nn {

#ifdef SIM_EMULATOR
namespace ops_detail {
std::atomic<bool> g_gpu_grids{false};
}  // namespace ops_detail
#endif

namespace {
using namespace ops_detail;
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
  pdl_wait();  // the batch's indices and X: the kernels before it (common/pdl.h)
  for (int j = blockIdx.y; j < b; j += gridDim.y) {
    const std::uint8_t v = images[std::size_t(idx[j]) * D + i];
    X[std::size_t(j) * D + i] = static_cast<T>(v) / T(255);  // true division, as the CPU
  }
  pdl_trigger();
}

__global__ void __launch_bounds__(kBlock)
    gather_labels_kernel(const std::uint8_t* __restrict__ labels,
                         const std::uint32_t* __restrict__ idx, int b,
                         std::uint8_t* __restrict__ out) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < b; j += blockDim.x * gridDim.x)
    out[j] = labels[idx[j]];
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
  launch_pdl(NN_LAUNCH_SITE("gather_normalize"), gather_normalize_kernel<T>, grid, dim3(block), 0, s, images, D, idx, b,
             X);
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


// ---- explicit instantiations ---------------------------------------------------------------
#define NN_OPS_INSTANTIATE(T)                                                                     \
  template void gather_normalize<T>(const std::uint8_t*, int, const std::uint32_t*, int, T*,     \
                                    cudaStream_t);                                                \
  template void gather_labels<T>(const std::uint8_t*, const std::uint32_t*, int, std::uint8_t*,  \
                                 cudaStream_t);                                                   \
  template void row_sums<T>(const T*, int, int, int, T*, T, cudaStream_t);                       \
  template void sigmoid_backward<T>(const T*, const T*, std::size_t, T*, cudaStream_t);          \
  template void sigmoid<T>(const T*, std::size_t, T*, cudaStream_t);                             \
  template void sgd_update<T>(T*, const T*, std::size_t, T, T, cudaStream_t);                    \
  template void sum_squares<T>(const T*, std::size_t, double*, cudaStream_t);
NN_OPS_INSTANTIATE(float)
NN_OPS_INSTANTIATE(double)
#undef NN_OPS_INSTANTIATE
template void gather_labels<void>(const std::uint8_t*, const std::uint32_t*, int, std::uint8_t*,
                                  cudaStream_t);

}  // namespace nn

