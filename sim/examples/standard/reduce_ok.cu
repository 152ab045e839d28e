// expect: ok
// Sum of n floats: each block reduces 2 * blockDim.x inputs in shared memory (tree with
// __syncthreads down to 64 partial sums, then the last warp alone, with __syncwarp between
// its steps as Volta's independent thread scheduling requires); the host adds the block sums.
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

__global__ void reduce_sum(const float* in, float* block_sums, int n) {
  __shared__ float sdata[kBlock];
  int tid = threadIdx.x;
  int i = blockIdx.x * (2 * blockDim.x) + tid;
  float v = 0.0f;
  if (i < n) v = in[i];
  if (i + int(blockDim.x) < n) v += in[i + blockDim.x];
  sdata[tid] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {  // the last warp: no __syncthreads needed, but __syncwarp between steps
    v = sdata[tid] + sdata[tid + 32];
    for (int offset = 16; offset > 0; offset >>= 1) {
      __syncwarp();
      sdata[tid] = v;
      __syncwarp();
      v += sdata[tid + offset];
    }
    if (tid == 0) block_sums[blockIdx.x] = v;
  }
}

int main() {
  const int n = 100000;  // not a multiple of the 512 inputs per block
  const int blocks = (n + 2 * kBlock - 1) / (2 * kBlock);
  std::vector<float> h(n);
  double want = 0.0;
  for (int i = 0; i < n; ++i) {
    h[i] = float(i % 17) - 8.0f;  // small integers: every partial sum is exact in float
    want += h[i];
  }
  float *d_in = nullptr, *d_sums = nullptr;
  CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CHECK(cudaMalloc(&d_sums, blocks * sizeof(float)));
  CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  reduce_sum<<<blocks, kBlock>>>(d_in, d_sums, n);
  CHECK(cudaGetLastError());
  std::vector<float> sums(blocks);
  CHECK(cudaMemcpy(sums.data(), d_sums, blocks * sizeof(float), cudaMemcpyDeviceToHost));
  double got = 0.0;
  for (float s : sums) got += s;
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_sums));
  printf("reduce: sum of %d values = %g (expected %g)\n", n, got, want);
  if (got != want) {
    printf("reduce: WRONG\n");
    return 1;
  }
  return 0;
}
