// expect: ok
// The correct twin of bugs/shared_uninit_read.cu: threads past the block's end stage zeros,
// so the tree reduction over 256 entries reads only written ones (the buffer is padded to a
// power of two by the block itself).
#include <cstdio>

__global__ void block_sum(const float* in, float* out) {
  __shared__ float buf[256];
  const int t = threadIdx.x;
  for (int i = t; i < 256; i += blockDim.x) buf[i] = i < int(blockDim.x) ? in[blockIdx.x * blockDim.x + i] : 0.0f;
  __syncthreads();
  for (int s = 128; s > 0; s /= 2) {
    for (int i = t; i < s; i += blockDim.x) buf[i] += buf[i + s];
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
  const bool ok = e == cudaSuccess && r[0] == threads && r[3] == threads;
  printf("block_sum: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
