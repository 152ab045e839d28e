// expect: ok
// Inclusive prefix sum of n ints in three kernels: every block scans its 256 elements in shared
// memory (Hillis-Steele, double-buffered: each step reads one buffer and writes the other, one
// __syncthreads per step) and writes its total; one block scans the block totals the same way;
// then every element gets the total of the blocks before its own.
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

constexpr int kBlock = 256;

// data[0..n) scanned in place per block; totals[blockIdx.x] = the block's sum (if totals).
__global__ void scan_blocks(int* data, int* totals, int n) {
  __shared__ int buf[2][kBlock];
  int tid = threadIdx.x;
  int i = blockIdx.x * kBlock + tid;
  int pout = 0, pin = 1;
  buf[pout][tid] = i < n ? data[i] : 0;
  __syncthreads();
  for (int offset = 1; offset < kBlock; offset *= 2) {
    pout = 1 - pout;  // swap the buffers
    pin = 1 - pout;
    if (tid >= offset)
      buf[pout][tid] = buf[pin][tid] + buf[pin][tid - offset];
    else
      buf[pout][tid] = buf[pin][tid];
    __syncthreads();
  }
  if (i < n) data[i] = buf[pout][tid];
  if (totals != nullptr && tid == kBlock - 1) totals[blockIdx.x] = buf[pout][tid];
}

__global__ void add_offsets(int* data, const int* scanned_totals, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockIdx.x > 0 && i < n) data[i] += scanned_totals[blockIdx.x - 1];
}

int main() {
  const int n = 50000;  // 196 blocks: their totals fit in one block of the second pass
  const int blocks = (n + kBlock - 1) / kBlock;
  std::vector<int> h(n), got(n);
  for (int i = 0; i < n; ++i) h[i] = (i * 13) % 7 - 3;
  int *d_data = nullptr, *d_totals = nullptr;
  CHECK(cudaMalloc(&d_data, n * sizeof(int)));
  CHECK(cudaMalloc(&d_totals, blocks * sizeof(int)));
  CHECK(cudaMemcpy(d_data, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  scan_blocks<<<blocks, kBlock>>>(d_data, d_totals, n);
  CHECK(cudaGetLastError());
  scan_blocks<<<1, kBlock>>>(d_totals, nullptr, blocks);
  CHECK(cudaGetLastError());
  add_offsets<<<blocks, kBlock>>>(d_data, d_totals, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(got.data(), d_data, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_data));
  CHECK(cudaFree(d_totals));
  int want = 0;
  for (int i = 0; i < n; ++i) {
    want += h[i];
    if (got[i] != want) {
      printf("scan: WRONG at %d: %d, expected %d\n", i, got[i], want);
      return 1;
    }
  }
  printf("scan: inclusive prefix sum of %d ints correct, last = %d\n", n, got[n - 1]);
  return 0;
}
