// expect: out-of-bounds shared memory
// Bug: the kernel stages two arrays in its dynamic shared memory (x, then y behind it), but the
// launch sizes the buffer for one (blockDim.x floats instead of 2 * blockDim.x), so every
// access to y is past the end of the buffer (compute-sanitizer: "Invalid __shared__ write").
#include <cstdio>

__global__ void pairwise_max(const float* x, const float* y, float* out, int n) {
  extern __shared__ float buf[];
  float* sx = buf;
  float* sy = buf + blockDim.x;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  sx[threadIdx.x] = i < n ? x[i] : 0.0f;
  sy[threadIdx.x] = i < n ? y[i] : 0.0f;
  __syncthreads();
  int j = (threadIdx.x + 1) % blockDim.x;  // the neighbour's pair
  if (i < n) out[i] = fmaxf(sx[threadIdx.x], sy[j]);
}

int main() {
  const int n = 1024, block = 128;
  float *x = nullptr, *y = nullptr, *out = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&y, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(x, 0, n * sizeof(float));
  cudaMemset(y, 0, n * sizeof(float));
  pairwise_max<<<n / block, block, block * sizeof(float)>>>(x, y, out, n);  // BUG: needs 2 * block
  cudaError_t e = cudaDeviceSynchronize();
  printf("pairwise_max: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
