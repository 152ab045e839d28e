// expect: integer division or remainder by zero
// Bug: each thread splits its element into `parts` buckets with i % parts, where parts comes
// from a table that has a zero entry for the last group (a GPU computes garbage silently:
// compute-sanitizer reports nothing; on the CPU the division would raise SIGFPE).
#include <cstdio>

__global__ void bucket(const int* parts, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i % parts[i / 64];
}

int main() {
  const int n = 256;
  int hp[n / 64] = {4, 3, 2, 0};  // BUG: the last group has no parts
  int *parts = nullptr, *out = nullptr;
  if (cudaMalloc(&parts, sizeof hp) != cudaSuccess || cudaMalloc(&out, n * sizeof(int)) != cudaSuccess) return 2;
  cudaMemcpy(parts, hp, sizeof hp, cudaMemcpyHostToDevice);
  bucket<<<n / 128, 128>>>(parts, out, n);
  int h[n];
  cudaError_t e = cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  printf("bucket: %s, out[255] = %d\n", cudaGetErrorString(e), h[255]);
  return e == cudaSuccess ? 0 : 1;
}
