// expect: refused
// Bug: one block per matrix row with one thread per column; the row length grew to 1025 and a
// block cannot have more than 1024 threads. The launch fails (CUDA 13.0 says
// cudaErrorInvalidValue, older runtimes cudaErrorInvalidConfiguration) and nothing runs; the
// program checks cudaGetLastError and exits 1.
#include <cstdio>

__global__ void scale_rows(float* m, const float* s, int cols) {
  m[blockIdx.x * cols + threadIdx.x] *= s[blockIdx.x];
}

int main() {
  const int rows = 4, cols = 1025;
  float *m = nullptr, *s = nullptr;
  if (cudaMalloc(&m, rows * cols * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&s, rows * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(m, 0, rows * cols * sizeof(float));
  cudaMemset(s, 0, rows * sizeof(float));
  scale_rows<<<rows, cols>>>(m, s, cols);  // BUG: 1025 threads per block
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    printf("scale_rows launch failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaDeviceSynchronize();
  printf("ok\n");
  return 0;
}
