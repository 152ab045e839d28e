// expect: misaligned address: atomicAdd on
// Bug: a histogram of 32-bit counters packed after a 2-byte tag in one byte buffer. Atomics
// need their operand's natural alignment (4 bytes here); the GPU faults with
// cudaErrorMisalignedAddress.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void histogram(const unsigned char* data, int n, unsigned char* blob) {
  unsigned* bins = reinterpret_cast<unsigned*>(blob + 2);  // after the 2-byte tag
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&bins[data[i] & 15], 1u);
}

int main() {
  const int n = 4096;
  unsigned char *data = nullptr, *blob = nullptr;
  if (cudaMalloc(&data, n) != cudaSuccess) return 2;
  if (cudaMalloc(&blob, 2 + 16 * sizeof(unsigned)) != cudaSuccess) return 2;
  cudaMemset(data, 7, n);
  cudaMemset(blob, 0, 2 + 16 * sizeof(unsigned));
  histogram<<<8, 128>>>(data, n, blob);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  if (launch != cudaSuccess || sync != cudaSuccess) {
    std::printf("histogram failed: launch: %s, sync: %s\n", cudaGetErrorString(launch),
                cudaGetErrorString(sync));
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
