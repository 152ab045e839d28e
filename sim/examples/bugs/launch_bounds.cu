// expect: over the kernel's __launch_bounds__(128)
// Bug: the kernel promises the compiler at most 128 threads per block, but the launch uses
// 256 (the block size was raised later and the bounds were forgotten). A GPU refuses the
// launch (cudaErrorInvalidValue with CUDA 13.0); nothing is computed.
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kMaxThreads = 128;

__global__ void __launch_bounds__(kMaxThreads) scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  const int n = 1 << 12, block = 256;
  float* x = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(x, 0, n * sizeof(float));
  scale<<<(n + block - 1) / block, block>>>(x, 2.0f, n);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  if (launch != cudaSuccess || sync != cudaSuccess) {
    std::printf("scale failed: launch: %s, sync: %s\n", cudaGetErrorString(launch),
                cudaGetErrorString(sync));
    return 1;
  }
  std::printf("ok\n");
  cudaFree(x);
  return 0;
}
