// expect: shared memory race
// Bug: a tiled matrix multiply without the second __syncthreads() in its loop. A warp that is
// done with tile t loads tile t + 1 into As/Bs while other warps still read tile t: a
// write-after-read race on shared memory (compute-sanitizer --tool racecheck: "Race reported
// between Read access ... and Write access"), wrong results on some runs.
#include <cstdio>
#define TILE 16

__global__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE], Bs[TILE][TILE];
  int ty = threadIdx.y, tx = threadIdx.x;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    // BUG: missing __syncthreads(); before the next iteration overwrites the tiles
  }
  C[row * n + col] = acc;
}

int main() {
  const int n = 64;
  float *A = nullptr, *B = nullptr, *C = nullptr;
  if (cudaMalloc(&A, n * n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&B, n * n * sizeof(float)) != cudaSuccess) return 2;
  if (cudaMalloc(&C, n * n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(A, 0, n * n * sizeof(float));
  cudaMemset(B, 0, n * n * sizeof(float));
  matmul<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(A, B, C, n);
  cudaError_t e = cudaDeviceSynchronize();
  printf("matmul: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
