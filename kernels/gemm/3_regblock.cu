// GEMM variant 3 (register-blocked, the course's scheme): 16x4 = 64 threads compute a 64x16
// tile of D; each thread keeps a 16-long strip of its row of op(A) in registers and 16 outputs.
// Run through nn::gemm(3, ...) by tests/kernels/test_gemm.cpp and bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include "common/check.h"
#include "common/nvtx.h"

namespace nn::gemm_detail {

namespace {

constexpr int kRows = 64;   // tile rows = threads per block, one D row each
constexpr int kCols = 16;   // tile columns = outputs per thread
constexpr int kChunk = 16;  // k-extent of the shared op(B) tile

template <class T, Op OA, Op OB>
__global__ void __launch_bounds__(kRows)
gemm_regblock_kernel(int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
                     T beta, const T* C, int ldc, T* D, int ldd, Epilogue ep, const T* bias) {
  // Bs[k][j]: +1 padding so the k-fastest stores of op(B) == B spread over all banks; the
  // reads in the inner loop are broadcasts (every thread wants the same element).
  __shared__ T Bs[kChunk][kCols + 1];
  const int tid = threadIdx.x + 16 * threadIdx.y;
  const int m0 = blockIdx.x * kRows, n0 = blockIdx.y * kCols;
  const int i = m0 + tid;
  T acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0;

  for (int k0 = 0; k0 < K; k0 += kChunk) {
#pragma unroll
    for (int r = 0; r < kChunk * kCols / kRows; ++r) {
      const int e = tid + r * kRows;
      // Consecutive threads take B's contiguous dimension: k for op N, j for op T.
      const int k = OB == Op::N ? e % kChunk : e / kCols;
      const int j = OB == Op::N ? e / kChunk : e % kCols;
      Bs[k][j] = (k0 + k < K && n0 + j < N) ? *op_ptr<OB>(B, ldb, k0 + k, n0 + j) : T(0);
    }
    // The row strip of op(A) goes to registers: with op N a warp reads 32 consecutive rows
    // (coalesced); with op T each thread walks its own column of A (strided, cached in L1).
    T a[kChunk];
#pragma unroll
    for (int kk = 0; kk < kChunk; ++kk)
      a[kk] = (i < M && k0 + kk < K) ? *op_ptr<OA>(A, lda, i, k0 + kk) : T(0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kChunk; ++kk)
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[c] += a[kk] * Bs[kk][c];
    __syncthreads();
  }
  if (i >= M) return;  // after the last barrier: no divergence at __syncthreads
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int j = n0 + c;
    if (j < N) {
      const std::size_t jd = static_cast<std::size_t>(j);
      D[i + jd * ldd] = finish(acc[c], alpha, beta, C ? C + i + jd * ldc : nullptr, ep, bias, i);
    }
  }
}

}  // namespace

template <class T>
void gemm_regblock(const GemmArgs<T>& a, cudaStream_t s) {
  NN_RANGE("gemm_regblock");
  const dim3 block(16, kRows / 16);
  const dim3 grid((a.M + kRows - 1) / kRows, (a.N + kCols - 1) / kCols);
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    gemm_regblock_kernel<T, OA, OB><<<grid, block, 0, s>>>(a.M, a.N, a.K, a.alpha, a.A, a.lda,
                                                           a.B, a.ldb, a.beta, a.C, a.ldc, a.D,
                                                           a.ldd, a.epilogue, a.bias);
    CHECK_LAUNCH("gemm_regblock_kernel");
  });
}

template void gemm_regblock<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_regblock<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail
