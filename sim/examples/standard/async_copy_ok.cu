// expect: ok
// The correct twin of bugs/async_copy_read_before_wait.cu: each thread waits for its own copies
// (__pipeline_wait_prior), then a barrier makes every thread's copies visible to the others.
#include <cstdio>
#include <cuda_pipeline.h>

__global__ void shift(const float* in, float* out) {
  __shared__ __align__(16) float tile[1024];
  const int t = threadIdx.x;
  __pipeline_memcpy_async(&tile[4 * t], &in[4 * t], 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);  // this thread's copies have landed
  __syncthreads();           // and so have everyone's
  out[t] = tile[(4 * t + 4) % 1024];
}

int main() {
  float h[1024];
  for (int i = 0; i < 1024; ++i) h[i] = float(i);
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, sizeof h) != cudaSuccess || cudaMalloc(&out, 256 * 4) != cudaSuccess) return 2;
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  shift<<<1, 256>>>(in, out);
  float r = -1;
  const cudaError_t e = cudaMemcpy(&r, out + 3, 4, cudaMemcpyDeviceToHost);
  printf("shift: %s, out[3] = %g (want 16)\n", cudaGetErrorString(e), r);
  return e == cudaSuccess && r == 16.0f ? 0 : 1;
}
