// GEMM variant 2 (shared-memory tiled): 16x16 threads, one output each, stage 16x16 tiles of
// op(A) and op(B) through shared memory so each global element is read once per block.
// Run through nn::gemm(2, ...) by tests/kernels/test_gemm.cpp and bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include "common/check.h"
#include "common/nvtx.h"

namespace nn::gemm_detail {

namespace {

constexpr int kTile = 16;

// Guarded load: out-of-range elements become 0, so partial edge tiles add nothing.
template <Op O, class T>
__device__ __forceinline__ T load_or_zero(const T* X, int ld, int r, int c, int rows, int cols) {
  return (r < rows && c < cols) ? *op_ptr<O>(X, ld, r, c) : T(0);
}

template <class T, Op OA, Op OB>
__global__ void gemm_tiled_kernel(int M, int N, int K, T alpha, const T* A, int lda, const T* B,
                                  int ldb, T beta, const T* C, int ldc, T* D, int ldd,
                                  Epilogue ep, const T* bias) {
  // Both tiles are stored k-major (As[k][i], Bs[k][j]); the +1 column of padding makes the
  // transposed stores below hit 16 different banks instead of one.
  __shared__ T As[kTile][kTile + 1];
  __shared__ T Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.x * kTile, n0 = blockIdx.y * kTile;
  T acc = 0;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // threadIdx.x always walks the operand's contiguous dimension in memory, so each
    // half-warp reads 16 consecutive elements whatever the op.
    if constexpr (OA == Op::N) As[ty][tx] = load_or_zero<OA>(A, lda, m0 + tx, k0 + ty, M, K);
    else As[tx][ty] = load_or_zero<OA>(A, lda, m0 + ty, k0 + tx, M, K);
    if constexpr (OB == Op::N) Bs[tx][ty] = load_or_zero<OB>(B, ldb, k0 + tx, n0 + ty, K, N);
    else Bs[ty][tx] = load_or_zero<OB>(B, ldb, k0 + ty, n0 + tx, K, N);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += As[kk][tx] * Bs[kk][ty];  // Bs: a broadcast
    __syncthreads();
  }
  const int i = m0 + tx, j = n0 + ty;
  if (i < M && j < N) {
    const std::size_t jd = static_cast<std::size_t>(j);
    D[i + jd * ldd] = finish(acc, alpha, beta, C ? C + i + jd * ldc : nullptr, ep, bias, i);
  }
}

}  // namespace

template <class T>
void gemm_tiled(const GemmArgs<T>& a, cudaStream_t s) {
  NN_RANGE("gemm_tiled");
  const dim3 block(kTile, kTile);
  const dim3 grid((a.M + kTile - 1) / kTile, (a.N + kTile - 1) / kTile);
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    gemm_tiled_kernel<T, OA, OB><<<grid, block, 0, s>>>(a.M, a.N, a.K, a.alpha, a.A, a.lda, a.B,
                                                        a.ldb, a.beta, a.C, a.ldc, a.D, a.ldd,
                                                        a.epilogue, a.bias);
    CHECK_LAUNCH("gemm_tiled_kernel");
  });
}

template void gemm_tiled<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_tiled<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail
