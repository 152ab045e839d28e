// expect: freed device memory
// Bug: the scratch buffer is freed at the end of the first pass, but the second pass still
// launches a kernel on it (use after free; on a GPU the launch may even "work" until the memory
// is reused; compute-sanitizer: "Invalid __global__ write ... Address is out of bounds").
#include <cstdio>

__global__ void fill(float* v, float x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = x;
}

int main() {
  const int n = 1024;
  float* scratch = nullptr;
  if (cudaMalloc(&scratch, n * sizeof(float)) != cudaSuccess) return 2;
  fill<<<n / 256, 256>>>(scratch, 1.0f, n);  // first pass
  cudaError_t e1 = cudaDeviceSynchronize();
  cudaFree(scratch);
  fill<<<n / 256, 256>>>(scratch, 2.0f, n);  // BUG: second pass on the freed buffer
  cudaError_t e2 = cudaGetLastError();
  cudaError_t e3 = cudaDeviceSynchronize();
  printf("fill: %s, %s, %s\n", cudaGetErrorString(e1), cudaGetErrorString(e2), cudaGetErrorString(e3));
  return e1 == cudaSuccess && e2 == cudaSuccess && e3 == cudaSuccess ? 0 : 1;
}
