// expect: uninitialised global memory read
// Bug: the input buffer is allocated but never filled (the cudaMemcpy from the host array was
// lost in a refactoring), so the kernel sums whatever the allocation held (compute-sanitizer
// --tool initcheck: "Uninitialized __global__ memory read of size 4").
#include <cstdio>

__global__ void block_sum(const float* v, float* sums, int n) {
  if (threadIdx.x != 0) return;
  float s = 0.0f;
  for (int i = blockIdx.x * 256; i < n && i < int(blockIdx.x + 1) * 256; ++i) s += v[i];
  sums[blockIdx.x] = s;
}

int main() {
  const int n = 1024, blocks = n / 256;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  float *v = nullptr, *sums = nullptr;
  if (cudaMalloc(&v, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&sums, blocks * sizeof(float)) != cudaSuccess) return 2;
  // BUG: missing cudaMemcpy(v, h, sizeof h, cudaMemcpyHostToDevice);
  block_sum<<<blocks, 32>>>(v, sums, n);
  float hs[blocks];
  cudaError_t e = cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost);
  printf("block_sum: %s, sums[0] = %g (want %g)\n", cudaGetErrorString(e), hs[0], h[0] * 256);
  return e == cudaSuccess && hs[0] == 256.0f ? 0 : 1;
}
