// expect: out-of-bounds global memory write
// Bug: the grid is rounded up to whole blocks and the kernel has no `if (i < n)` guard, so the
// last block writes past the end of the buffer (compute-sanitizer: "Invalid __global__ write").
#include <cstdio>

__global__ void scale(float* v, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  v[i] = a * i;  // BUG: no bounds check
}

int main() {
  const int n = 1000;
  float* d = nullptr;
  cudaMalloc(&d, n * sizeof(float));
  cudaMemset(d, 0, n * sizeof(float));
  scale<<<(n + 255) / 256, 256>>>(d, 2.0f);
  cudaError_t e = cudaDeviceSynchronize();
  printf("scale: %s\n", cudaGetErrorString(e));
  cudaFree(d);
  return e == cudaSuccess ? 0 : 1;
}
