// expect: (type const float4), which needs 16-byte alignment
// Bug: a vectorised copy that starts at an odd float offset. float4 loads need 16-byte
// alignment; in + 1 is only 4-byte aligned, so the GPU faults (cudaErrorMisalignedAddress,
// "misaligned address") and the context is unusable afterwards.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void copy4(const float* in, float* out, int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) reinterpret_cast<float4*>(out)[i] = reinterpret_cast<const float4*>(in)[i];
}

int main() {
  const int n = 1024;
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, (n + 4) * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(in, 0, (n + 4) * sizeof(float));
  copy4<<<(n / 4 + 127) / 128, 128>>>(in + 1, out, n / 4);  // skip a header float: misaligned
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  if (launch != cudaSuccess || sync != cudaSuccess) {
    std::printf("copy4 failed: launch: %s, sync: %s\n", cudaGetErrorString(launch),
                cudaGetErrorString(sync));
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
