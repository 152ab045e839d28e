// expect: one update is lost
// Bug: a dot product whose threads add their partial products into one global accumulator
// with a plain `*result += ...`: many threads read-modify-write the same word and all but one
// of each overlapping pair of updates are lost (the H200 printed a different, too small sum on
// every run; compute-sanitizer reports nothing).
#include <cstdio>

__global__ void dot(const float* x, const float* y, float* result, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) *result += x[i] * y[i];  // BUG: not atomicAdd(result, x[i] * y[i])
}

int main() {
  const int n = 4096;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  float *x = nullptr, *y = nullptr, *r = nullptr;
  if (cudaMalloc(&x, sizeof h) != cudaSuccess || cudaMalloc(&y, sizeof h) != cudaSuccess ||
      cudaMalloc(&r, sizeof(float)) != cudaSuccess)
    return 2;
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemcpy(y, h, sizeof h, cudaMemcpyHostToDevice);
  cudaMemset(r, 0, sizeof(float));
  dot<<<n / 256, 256>>>(x, y, r, n);
  float hr = 0;
  cudaError_t e = cudaMemcpy(&hr, r, sizeof hr, cudaMemcpyDeviceToHost);
  printf("dot: %s, %g (want %d)\n", cudaGetErrorString(e), hr, n);
  return e == cudaSuccess && hr == n ? 0 : 1;
}
