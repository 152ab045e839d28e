// expect: CUBLAS_STATUS_INVALID_VALUE: lda = 3 < max(1, m = 4)
// A buggy cuBLAS program: A is a 4 x 3 matrix, but its leading dimension is given as 3 (the
// number of columns, a row-major habit) instead of 4 (the rows: cuBLAS is column-major).
// cuBLAS refuses the call with CUBLAS_STATUS_INVALID_VALUE; the program checks the status,
// prints it and exits 1. The emulator also says why on stderr.
//   sim/simcc sim/examples/bugs/cublas_bad_lda.cu -lcublas -o cublas_bad_lda
// Valid CUDA: nvcc cublas_bad_lda.cu -lcublas builds the same program.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)
#define CHECK_CUBLAS(call)                                                                 \
  do {                                                                                     \
    cublasStatus_t s_ = (call);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,       \
                   cublasGetStatusName(s_), static_cast<int>(s_));                         \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

int main() {
  const int m = 4, n = 2, k = 3;  // C (m x n) = A (m x k) * B (k x n)
  std::vector<float> a(m * k, 1.0f), b(k * n, 2.0f), c(m * n, 0.0f);
  float *dA = nullptr, *dB = nullptr, *dC = nullptr;
  CHECK_CUDA(cudaMalloc(&dA, a.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dB, b.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dC, c.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dA, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  cublasHandle_t h = nullptr;
  CHECK_CUBLAS(cublasCreate(&h));
  const float alpha = 1.0f, beta = 0.0f;
  const int lda = k;  // BUG: column-major A needs lda >= m
  CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, dA, lda, dB, k, &beta, dC, m));
  CHECK_CUDA(cudaMemcpy(c.data(), dC, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("C(0,0) = %g\n", c[0]);
  CHECK_CUBLAS(cublasDestroy(h));
  return 0;
}
