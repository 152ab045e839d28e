// GEMM variant 0 (cuBLAS): one lazily created handle, cublasSgemm/Dgemm, then a small
// bias/sigmoid epilogue kernel (cuBLAS has no such fusion). In the emulator build, sim's
// emulated cuBLAS, computed by the host's OpenBLAS. Run through nn::gemm(0, ...) by
// tests/kernels/test_gemm.cpp and bench/gemm_bench.cpp.
#include "gemm/gemm.h"

#include <mutex>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"

#include <cublas_v2.h>

namespace nn::gemm_detail {

namespace {

void cublas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw InternalError(std::string("gemm (cuBLAS): ") + what + " failed with status " +
                        std::to_string(static_cast<int>(st)));
}

// One handle per process, created on first use and destroyed only by
// gemm_release_workspaces() (before a cudaDeviceReset, which would leave it pointing at freed
// device state: on an H200 the next cublasSgemm failed with status 13, then a kernel with an
// illegal address). Never destroyed at exit: at static destruction the CUDA runtime may
// already be gone, and the OS reclaims it anyway.
// The mutex guards creation and release only: gemm(0, ...) is called from one host thread at a
// time (the trainer's), and gemm_release_workspaces() only when no GEMM is in flight.
std::mutex handle_mutex;
cublasHandle_t handle = nullptr;

cublasHandle_t cublas_handle() {
  std::lock_guard<std::mutex> lock(handle_mutex);
  if (!handle) cublas_check(cublasCreate(&handle), "cublasCreate");
  return handle;
}

// cuBLAS has no fused bias/sigmoid, so variant 0 pays one more pass over D: threadIdx.x
// runs along M, the contiguous dimension, so each warp touches consecutive addresses.
template <class T>
__global__ void gemm_bias_epilogue_kernel(int M, int N, T* D, int ldd, const T* bias, bool sig) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  T& d = D[i + static_cast<std::size_t>(j) * ldd];
  T v = d + bias[i];
  d = sig ? sigmoid(v) : v;
}

template <class T>
void gemm_bias_epilogue(int M, int N, T* D, int ldd, const T* bias, bool sig, cudaStream_t s) {
  NN_RANGE("gemm_bias_epilogue");
  const dim3 block(32, 8);
  const dim3 grid((M + 31) / 32, (N + 7) / 8);
  gemm_bias_epilogue_kernel<T><<<grid, block, 0, s>>>(M, N, D, ldd, bias, sig);
  CHECK_LAUNCH("gemm_bias_epilogue_kernel");
}

}  // namespace

template <class T>
void gemm_cublas(const GemmArgs<T>& a, cudaStream_t s) {
  NN_RANGE("gemm_cublas");
  cublasHandle_t h = cublas_handle();
  cublas_check(cublasSetStream(h, s), "cublasSetStream");
  // cuBLAS computes D = alpha*op(A)op(B) + beta*D; with beta == 0 it does not read D.
  if (a.C && a.C != a.D)
    CUDA_CHECK(cudaMemcpy2DAsync(a.D, sizeof(T) * a.ldd, a.C, sizeof(T) * a.ldc, sizeof(T) * a.M,
                                 a.N, cudaMemcpyDeviceToDevice, s));
  const cublasOperation_t ta = a.opA == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t tb = a.opB == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T;
  const T beta = a.C ? a.beta : T(0);
  if constexpr (std::is_same_v<T, float>)
    cublas_check(cublasSgemm(h, ta, tb, a.M, a.N, a.K, &a.alpha, a.A, a.lda, a.B, a.ldb, &beta,
                             a.D, a.ldd), "cublasSgemm");
  else
    cublas_check(cublasDgemm(h, ta, tb, a.M, a.N, a.K, &a.alpha, a.A, a.lda, a.B, a.ldb, &beta,
                             a.D, a.ldd), "cublasDgemm");
  if (a.epilogue != Epilogue::None)
    gemm_bias_epilogue(a.M, a.N, a.D, a.ldd, a.bias, a.epilogue == Epilogue::BiasSigmoid, s);
}

void release_cublas_handle() {
  std::lock_guard<std::mutex> lock(handle_mutex);
  if (handle) (void)cublasDestroy(handle);  // errors ignored: a reset, often after a fault, follows
  handle = nullptr;
}

template void gemm_cublas<float>(const GemmArgs<float>&, cudaStream_t);
template void gemm_cublas<double>(const GemmArgs<double>&, cudaStream_t);

}  // namespace nn::gemm_detail
