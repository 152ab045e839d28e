// expect: ok
// The correct twin of bugs/warp_lockstep.cu: the last warp's steps are ordered, once with
// __syncwarp() between a step's reads and writes and once with shuffles.
#include <cstdio>

__global__ void block_sum(const float* in, float* out, int use_shuffle) {
  __shared__ float buf[256];
  const int t = threadIdx.x;
  buf[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int s = 128; s > 32; s /= 2) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t < 32) {
    if (use_shuffle) {
      float v = buf[t] + buf[t + 32];
      for (int s = 16; s > 0; s /= 2) v += __shfl_down_sync(0xffffffffu, v, s);
      if (t == 0) buf[0] = v;
    } else {
      for (int s = 32; s > 0; s /= 2) {
        const float v = t < s ? buf[t] + buf[t + s] : 0.0f;
        __syncwarp();
        if (t < s) buf[t] = v;
        __syncwarp();
      }
    }
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
  bool ok = true;
  for (int mode = 0; mode < 2; ++mode) {
    block_sum<<<blocks, 256>>>(in, out, mode);
    float r[blocks];
    cudaError_t e = cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
    ok = ok && e == cudaSuccess && r[0] == 256.0f && r[3] == 256.0f;
  }
  printf("block_sum: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
