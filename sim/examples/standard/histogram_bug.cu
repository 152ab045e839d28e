// expect: out-of-bounds shared memory
// Bug: the bin of a byte value v is computed as v * kBins / 255 instead of v * kBins / 256, so
// v = 255 falls into bin 64 of a 64-bin shared histogram: one past the end of the __shared__
// array (compute-sanitizer: "Invalid __shared__ atomic of size 4").
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
    atomicAdd(&local[data[i] * kBins / 255], 1u);  // BUG: 255 * 64 / 255 == 64
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}

int main() {
  const int n = 1 << 16;
  std::vector<unsigned char> h(n);
  for (int i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i * 7);  // every value 0..255
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
  unsigned long long total = 0;
  for (int b = 0; b < kBins; ++b) total += got[b];
  printf("histogram: %llu of %d values counted\n", total, n);
  return total == static_cast<unsigned long long>(n) ? 0 : 1;
}
