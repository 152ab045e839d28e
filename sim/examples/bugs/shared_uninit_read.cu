// expect: uninitialised shared memory read
// Bug: a block-wide sum stages its values in a 256-entry __shared__ buffer, but is launched
// with 192 threads; the tree reduction still starts at stride 128 and adds entries 192..255,
// which no thread wrote (a GPU adds whatever an earlier block left there: compute-sanitizer's
// initcheck does not look at shared memory, and racecheck sees no race: it prints nothing).
#include <cstdio>

__global__ void block_sum(const float* in, float* out) {
  __shared__ float buf[256];
  const int t = threadIdx.x;
  buf[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int s = 128; s > 0; s /= 2) {  // BUG: assumes blockDim.x == 256
    if (t < s && t + s < 256) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}

int main() {
  const int threads = 192, blocks = 4, n = threads * blocks;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, sizeof h) != cudaSuccess || cudaMalloc(&out, blocks * sizeof(float)) != cudaSuccess) return 2;
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  block_sum<<<blocks, threads>>>(in, out);
  float r[blocks];
  cudaError_t e = cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  printf("block_sum: %s, out[0] = %g (want %d)\n", cudaGetErrorString(e), r[0], threads);
  return e == cudaSuccess && r[0] == threads ? 0 : 1;
}
