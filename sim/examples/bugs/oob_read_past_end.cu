// expect: out-of-bounds global memory read
// Bug: a forward difference d[i] = v[i + 1] - v[i] computed for every i < n, so the last
// thread reads v[n], 4 bytes past the end of the 4000-byte buffer (compute-sanitizer:
// "Invalid __global__ read of size 4 ... is 4 bytes after the nearest allocation").
#include <cstdio>

__global__ void forward_diff(const float* v, float* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = v[i + 1] - v[i];  // BUG: i + 1 == n for the last element
}

int main() {
  const int n = 1000;  // 4000 bytes
  float *v = nullptr, *d = nullptr;
  if (cudaMalloc(&v, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(v, 0, n * sizeof(float));
  forward_diff<<<(n + 255) / 256, 256>>>(v, d, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("forward_diff: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
