// expect: out-of-bounds shared memory
// Bug: a per-block cache sized for a 32-thread block (one warp), launched with 64 threads per
// block; threads 32..63 index the 32-float __shared__ array out of bounds (compute-sanitizer:
// "Invalid __shared__ write of size 4").
#include <cstdio>

__global__ void reverse_block(const float* in, float* out) {
  __shared__ float cache[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  cache[threadIdx.x] = in[i];  // BUG: blockDim.x is 64
  __syncthreads();
  out[i] = cache[blockDim.x - 1 - threadIdx.x];
}

int main() {
  const int n = 256, block = 64;
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(in, 0, n * sizeof(float));
  reverse_block<<<n / block, block>>>(in, out);
  cudaError_t e = cudaDeviceSynchronize();
  printf("reverse_block: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
