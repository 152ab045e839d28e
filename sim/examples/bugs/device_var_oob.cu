// expect: __device__ variable
// Bug: linear interpolation in a 16-entry __device__ lookup table spanning x = 0..1, so x maps
// to position x * 15. The kernel scales by 16, so for x > 15/16 it clamps k to 15 and reads
// table[k + 1] == table[16], one past the end of the variable. On a GPU that silently reads
// whatever the module placed next (compute-sanitizer may well not notice: the word is usually
// still inside the module's global data).
#include <cstdio>

__device__ float table[16];

__global__ void lookup(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float pos = x[i] * 16.0f;  // BUG: should be x[i] * 15.0f
  int k = min(static_cast<int>(pos), 15);
  float f = pos - k;
  y[i] = (1.0f - f) * table[k] + f * table[k + 1];
}

int main() {
  const int n = 64;
  float h_table[16], h_x[n];
  for (int k = 0; k < 16; ++k) h_table[k] = k * k;
  for (int i = 0; i < n; ++i) h_x[i] = i / float(n - 1);  // 0 .. 1
  float *x = nullptr, *y = nullptr;
  if (cudaMemcpyToSymbol(table, h_table, sizeof h_table) != cudaSuccess) return 2;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&y, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemcpy(x, h_x, sizeof h_x, cudaMemcpyHostToDevice);
  lookup<<<1, n>>>(x, y, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("lookup: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
