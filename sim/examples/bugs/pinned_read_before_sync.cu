// expect: is still queued to write it
// Bug: the results are copied back with cudaMemcpyAsync into pinned memory on a stream, and the
// host sums them right away; the cudaStreamSynchronize comes after the loop instead of before
// it. On a GPU the copy is usually still in flight: the host reads the previous contents of the
// buffer (the H200 printed a stale sum; compute-sanitizer reports nothing: it does not look at
// host code).
#include <cstdio>

__global__ void square(float* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = v[i] * v[i];
}

int main() {
  const int n = 1 << 16;
  float *h = nullptr, *d = nullptr;
  cudaStream_t s;
  if (cudaMallocHost(&h, n * sizeof(float)) != cudaSuccess || cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 2;
  cudaStreamCreate(&s);
  for (int i = 0; i < n; ++i) h[i] = 2.0f;
  cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);
  square<<<n / 256, 256, 0, s>>>(d, n);
  cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += h[i];  // BUG: before cudaStreamSynchronize(s)
  cudaStreamSynchronize(s);
  printf("sum = %g (want %g)\n", sum, 4.0 * n);
  return sum == 4.0 * n ? 0 : 1;
}
