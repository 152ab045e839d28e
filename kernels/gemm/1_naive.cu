// GEMM variant 1 (naive): one thread per output element, operands straight from global memory.
// The baseline the other variants are validated and timed against; run through nn::gemm(1, ...)
// by tests/kernels/test_gemm.cpp and bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include "common/check.h"
#include "common/nvtx.h"

namespace nn::gemm_detail {

namespace {

// threadIdx.x runs along M, the contiguous dimension of D (and of A when opA == N), so a warp
// stores 32 consecutive elements; with opA == T the A reads of a warp are strided, which is
// one of the things variant 2 fixes. B(k, j) is the same for the whole warp (a broadcast).
template <class T, Op OA, Op OB>
__global__ void gemm_naive_kernel(int M, int N, int K, T alpha, const T* A, int lda, const T* B,
                                  int ldb, T beta, const T* C, int ldc, T* D, int ldd,
                                  Epilogue ep, const T* bias) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  T acc = 0;
  for (int k = 0; k < K; ++k) acc += *op_ptr<OA>(A, lda, i, k) * *op_ptr<OB>(B, ldb, k, j);
  const std::size_t jd = static_cast<std::size_t>(j);
  D[i + jd * ldd] = finish(acc, alpha, beta, C ? C + i + jd * ldc : nullptr, ep, bias, i);
}

}  // namespace

template <class T>
void gemm_naive(const GemmArgs<T>& a, cudaStream_t s) {
  NN_RANGE("gemm_naive");
  const dim3 block(32, 8);
  const dim3 grid((a.M + 31) / 32, (a.N + 7) / 8);
  with_ops(a.opA, a.opB, [&]<Op OA, Op OB>() {
    gemm_naive_kernel<T, OA, OB><<<grid, block, 0, s>>>(
        a.M, a.N, a.K, a.alpha, a.A, a.lda, a.B, a.ldb, a.beta, a.C, a.ldc, a.D, a.ldd,
        a.epilogue, a.bias);
    CHECK_LAUNCH("gemm_naive_kernel");
  });
}

template void gemm_naive<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_naive<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail
