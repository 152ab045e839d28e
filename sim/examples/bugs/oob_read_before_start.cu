// expect: out-of-bounds global memory read
// Bug: a backward difference d[i] = v[i] - v[i - 1] with no special case for i == 0, so thread
// 0 reads v[-1], 4 bytes before the start of the buffer (compute-sanitizer: "Invalid
// __global__ read of size 4 ... is 4 bytes before the nearest allocation").
#include <cstdio>

__global__ void backward_diff(const float* v, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = v[i] - v[i - 1];  // BUG: v[-1] at i == 0
}

int main() {
  const int n = 1000;
  float *v = nullptr, *d = nullptr;
  if (cudaMalloc(&v, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(v, 0, n * sizeof(float));
  backward_diff<<<(n + 255) / 256, 256>>>(v, d, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("backward_diff: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
