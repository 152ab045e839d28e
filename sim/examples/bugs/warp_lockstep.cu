// expect: the same warp
// Bug: a warp-synchronous reduction written for pre-Volta GPUs. The last 32 partial sums are
// added by the first warp through shared memory with no __syncwarp() between one step's
// writes and the next step's reads: since Volta the lanes of a warp are not in lockstep, so a
// lane may read its partner's entry before the partner wrote it (compute-sanitizer's racecheck
// warns; the H200 printed the right sum on most runs and a wrong one on some).
#include <cstdio>

__global__ void block_sum(const float* in, float* out) {
  __shared__ float buf[256];
  const int t = threadIdx.x;
  buf[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int s = 128; s > 32; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t < 32) {
    volatile float* v = buf;
    for (int s = 32; s > 0; s /= 2) v[t] += v[t + s];  // BUG: no __syncwarp() between steps
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}

int main() {
  const int blocks = 4, n = 256 * blocks;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = 1.0f;
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, sizeof h) != cudaSuccess || cudaMalloc(&out, blocks * sizeof(float)) != cudaSuccess) return 2;
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  block_sum<<<blocks, 256>>>(in, out);
  float r[blocks];
  cudaError_t e = cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  printf("block_sum: %s, out[0] = %g (want 256)\n", cudaGetErrorString(e), r[0]);
  return e == cudaSuccess && r[0] == 256.0f ? 0 : 1;
}
