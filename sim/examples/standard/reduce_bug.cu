// expect: out-of-bounds global memory read
// Bug: the same block reduction, but the loads have no `i < n` guard: n is not a multiple of the
// 512 inputs a block takes, so the last block reads past the end of the input (on a GPU it
// reads whatever lies there, or faults; compute-sanitizer: "Invalid __global__ read").
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
  sdata[tid] = in[i] + in[i + blockDim.x];  // BUG: no bounds check on either load
  __syncthreads();
  for (int s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    float v = sdata[tid] + sdata[tid + 32];
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
  const int n = 1000;  // the last (only other) block reads in[1000..1023]: 96 bytes past the end
  const int blocks = (n + 2 * kBlock - 1) / (2 * kBlock);
  std::vector<float> h(n, 1.0f);
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
  printf("reduce: sum = %g (expected %d)\n", got, n);
  return got == n ? 0 : 1;
}
