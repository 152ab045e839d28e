// expect: out-of-bounds shared memory
// Bug: a classic tiled GEMM with 16x16 shared tiles, launched with 32x32 blocks (the block size
// was raised for occupancy, the tile was not). Threads with threadIdx.x or .y >= 16 index the
// tiles out of bounds (compute-sanitizer: "Invalid __shared__ write of size 4").
#include <cstdio>
#define TILE 16

__global__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    As[threadIdx.y][threadIdx.x] = A[row * n + t + threadIdx.x];  // BUG: blockDim is 32x32
    Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

int main() {
  const int n = 32;
  float *A = nullptr, *B = nullptr, *C = nullptr;
  if (cudaMalloc(&A, n * n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&B, n * n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&C, n * n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(A, 0, n * n * sizeof(float));
  cudaMemset(B, 0, n * n * sizeof(float));
  matmul<<<dim3(n / 32, n / 32), dim3(32, 32)>>>(A, B, C, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("matmul: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
