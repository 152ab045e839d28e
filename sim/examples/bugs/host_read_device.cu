// expect: host code read device memory
// Bug: the host reads a result straight out of device memory instead of copying it back
// (on a GPU: a segmentation fault, the most common crash of a first GPU run).
#include <cstdio>

__global__ void square(float* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = v[i] * v[i];
}

int main() {
  const int n = 256;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = float(i);
  float* d = nullptr;
  cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  square<<<(n + 127) / 128, 128>>>(d, n);
  cudaDeviceSynchronize();
  printf("v[10] = %g\n", d[10]);  // BUG: d is device memory
  cudaFree(d);
  return 0;
}
