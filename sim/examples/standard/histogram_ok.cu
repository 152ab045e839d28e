// expect: ok
// 64-bin histogram of bytes: each block counts into a shared-memory histogram with shared
// atomics (grid-stride loop), then adds its counts to the global histogram with global atomics.
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t err_ = (call);                                                         \
    if (err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));    \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

constexpr int kBins = 64;

__global__ void histogram(const unsigned char* data, int n, unsigned int* bins) {
  __shared__ unsigned int local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[data[i] * kBins / 256], 1u);  // bin = value / 4: 0 .. 63
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}

int main() {
  const int n = 1 << 20;
  std::vector<unsigned char> h(n);
  unsigned int seed = 12345;
  for (int i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    h[i] = static_cast<unsigned char>(seed >> 24);
  }
  std::vector<unsigned int> want(kBins, 0);
  for (int i = 0; i < n; ++i) ++want[h[i] * kBins / 256];

  unsigned char* d_data = nullptr;
  unsigned int* d_bins = nullptr;
  CHECK(cudaMalloc(&d_data, n));
  CHECK(cudaMalloc(&d_bins, kBins * sizeof(unsigned int)));
  CHECK(cudaMemcpy(d_data, h.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_bins, 0, kBins * sizeof(unsigned int)));
  histogram<<<32, 256>>>(d_data, n, d_bins);
  CHECK(cudaGetLastError());
  std::vector<unsigned int> got(kBins);
  CHECK(cudaMemcpy(got.data(), d_bins, kBins * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_data));
  CHECK(cudaFree(d_bins));
  unsigned long long total = 0;
  for (int b = 0; b < kBins; ++b) {
    total += got[b];
    if (got[b] != want[b]) {
      printf("histogram: WRONG: bin %d = %u, expected %u\n", b, got[b], want[b]);
      return 1;
    }
  }
  printf("histogram: %d bins, %llu values counted, bin 0 = %u, bin 63 = %u: correct\n", kBins, total,
         got[0], got[kBins - 1]);
  return 0;
}
