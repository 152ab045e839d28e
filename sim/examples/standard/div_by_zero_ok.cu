// expect: ok
// The correct twin of bugs/div_by_zero.cu: a group with no parts keeps its elements whole
// (the divisor is tested before the remainder).
#include <cstdio>

__global__ void bucket(const int* parts, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const int p = parts[i / 64];
    out[i] = p > 0 ? i % p : i;
  }
}

int main() {
  const int n = 256;
  int hp[n / 64] = {4, 3, 2, 0};
  int *parts = nullptr, *out = nullptr;
  if (cudaMalloc(&parts, sizeof hp) != cudaSuccess || cudaMalloc(&out, n * sizeof(int)) != cudaSuccess) return 2;
  cudaMemcpy(parts, hp, sizeof hp, cudaMemcpyHostToDevice);
  bucket<<<n / 128, 128>>>(parts, out, n);
  int h[n];
  cudaError_t e = cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  bool ok = e == cudaSuccess;
  for (int i = 0; i < n; ++i) ok = ok && h[i] == (hp[i / 64] ? i % hp[i / 64] : i);
  printf("bucket: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
