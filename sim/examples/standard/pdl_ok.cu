// expect: ok
// The correct twin of bugs/pdl_read_before_wait.cu: the dependent kernel waits with
// cudaGridDependencySynchronize() before it reads what the kernel before it wrote; only its
// index arithmetic overlaps that kernel.
#include <cstdio>

__global__ void scale(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
  cudaTriggerProgrammaticLaunchCompletion();
}
__global__ void offset(const float* y, float* z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  cudaGridDependencySynchronize();  // everything scale wrote is visible from here on
  const float v = i < n ? y[i] : 0.0f;
  if (i < n) z[i] = v + 1.0f;
}

int main() {
  const int n = 1024;
  float *x = nullptr, *y = nullptr, *z = nullptr;
  if (cudaMalloc(&x, n * 4) != cudaSuccess || cudaMalloc(&y, n * 4) != cudaSuccess || cudaMalloc(&z, n * 4) != cudaSuccess)
    return 2;
  cudaMemset(x, 0, n * 4);
  cudaStream_t s;
  cudaStreamCreate(&s);
  scale<<<n / 256, 256, 0, s>>>(x, y, n);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(n / 256);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, offset, static_cast<const float*>(y), z, n);
  const cudaError_t e = cudaStreamSynchronize(s);
  float h = -1;
  cudaMemcpy(&h, z + 7, 4, cudaMemcpyDeviceToHost);
  printf("offset: %s, z[7] = %g (want 1)\n", cudaGetErrorString(e), h);
  return e == cudaSuccess && h == 1.0f ? 0 : 1;
}
