// expect: global memory race
// Bug: a histogram whose blocks add into the global bins with a plain `bins[k] += 1` instead of
// atomicAdd: threads of different blocks (and of different warps) read-modify-write the same
// bin, so increments are lost (the H200 printed a total below n, different on each run;
// compute-sanitizer's memcheck, racecheck, initcheck and synccheck report nothing: racecheck
// only looks at shared memory).
#include <cstdio>

__global__ void histogram(const unsigned char* data, unsigned* bins, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    bins[data[i] % 16] += 1;  // BUG: not atomicAdd(&bins[...], 1u)
}

int main() {
  const int n = 1 << 14;
  unsigned char h[n];
  for (int i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i * 7);
  unsigned char* data = nullptr;
  unsigned* bins = nullptr;
  if (cudaMalloc(&data, n) != cudaSuccess || cudaMalloc(&bins, 16 * sizeof(unsigned)) != cudaSuccess) return 2;
  cudaMemcpy(data, h, n, cudaMemcpyHostToDevice);
  cudaMemset(bins, 0, 16 * sizeof(unsigned));
  histogram<<<8, 128>>>(data, bins, n);
  unsigned hb[16], total = 0;
  cudaError_t e = cudaMemcpy(hb, bins, sizeof hb, cudaMemcpyDeviceToHost);
  for (int k = 0; k < 16; ++k) total += hb[k];
  printf("histogram: %s, total %u (want %d)\n", cudaGetErrorString(e), total, n);
  return e == cudaSuccess && total == unsigned(n) ? 0 : 1;
}
