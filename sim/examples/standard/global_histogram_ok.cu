// expect: ok
// The correct twin of bugs/global_race_histogram.cu: atomics into the global bins, a
// grid-stride loop that writes each output element from one thread only, a per-block partial
// that thread 0 writes after a __syncthreads, and a second launch that reads them all.
#include <cstdio>

__global__ void histogram(const unsigned char* data, unsigned* bins, float* scaled, unsigned* partial, int n) {
  __shared__ unsigned local;
  if (threadIdx.x == 0) local = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&bins[data[i] % 16], 1u);
    scaled[i] = data[i] * 0.5f;  // one writer per element
    scaled[i] += 1.0f;           // and its own read-modify-write
    atomicAdd(&local, 1u);
  }
  __syncthreads();
  if (threadIdx.x == 0) partial[blockIdx.x] = local;
}

__global__ void total(const unsigned* partial, unsigned* out, int blocks) {
  __shared__ unsigned s[32];
  const int t = threadIdx.x;
  s[t] = t < blocks ? partial[t] : 0u;
  __syncwarp();
  for (int k = 16; k > 0; k /= 2) {
    const unsigned v = t < k ? s[t] + s[t + k] : 0u;
    __syncwarp();
    if (t < k) s[t] = v;
    __syncwarp();
  }
  if (t == 0) *out = s[0];
}

int main() {
  const int n = 1 << 14, blocks = 8;
  unsigned char h[n];
  for (int i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i * 7);
  unsigned char* data = nullptr;
  unsigned *bins = nullptr, *partial = nullptr, *sum = nullptr;
  float* scaled = nullptr;
  if (cudaMalloc(&data, n) != cudaSuccess || cudaMalloc(&bins, 16 * sizeof(unsigned)) != cudaSuccess ||
      cudaMalloc(&scaled, n * sizeof(float)) != cudaSuccess || cudaMalloc(&partial, blocks * sizeof(unsigned)) != cudaSuccess ||
      cudaMalloc(&sum, sizeof(unsigned)) != cudaSuccess)
    return 2;
  cudaMemcpy(data, h, n, cudaMemcpyHostToDevice);
  cudaMemset(bins, 0, 16 * sizeof(unsigned));
  histogram<<<blocks, 128>>>(data, bins, scaled, partial, n);
  total<<<1, 32>>>(partial, sum, blocks);
  unsigned hb[16], hs = 0, t = 0;
  cudaMemcpy(hb, bins, sizeof hb, cudaMemcpyDeviceToHost);
  cudaError_t e = cudaMemcpy(&hs, sum, sizeof hs, cudaMemcpyDeviceToHost);
  for (int k = 0; k < 16; ++k) t += hb[k];
  const bool ok = e == cudaSuccess && t == unsigned(n) && hs == unsigned(n);
  printf("histogram: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
