// expect: ok
// The correct twin of bugs/lost_update.cu: each block reduces its products in shared memory
// (ordered by __syncthreads) and one thread per block adds the block's sum with atomicAdd.
#include <cstdio>

__global__ void dot(const float* x, const float* y, float* result, int n) {
  __shared__ float s[256];
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] * y[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) atomicAdd(result, s[0]);
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
  const bool ok = e == cudaSuccess && hr == n;
  printf("dot: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
