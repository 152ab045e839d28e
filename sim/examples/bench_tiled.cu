// Emulator speed check: a 16x16 shared-memory tiled SGEMM (C = A*B, n^3) and the
// cost of one __syncthreads per thread. Valid CUDA (nvcc -c compiles it).
// Build: sim/simcc -O2 sim/examples/bench_tiled.cu -o bench && ./bench [n]
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

constexpr int TILE = 16;

__global__ void tiled_gemm(int n, const float* A, const float* B, float* C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

__global__ void barrier_loop(int iters, int* out) {
  int x = threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    x += i;
    __syncthreads();
  }
  if (x == -1) *out = x;
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU time of the process: with one worker, unaffected by other load on the machine.
static double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 512;
  std::vector<float> hA(size_t(n) * n), hB(size_t(n) * n), hC(size_t(n) * n);
  for (size_t i = 0; i < hA.size(); ++i) {
    hA[i] = float((i * 7) % 13) - 6.0f;
    hB[i] = float((i * 5) % 11) - 5.0f;
  }
  float *A, *B, *C;
  cudaMalloc(&A, hA.size() * sizeof(float));
  cudaMalloc(&B, hB.size() * sizeof(float));
  cudaMalloc(&C, hC.size() * sizeof(float));
  cudaMemcpy(A, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice);

  const dim3 block(TILE, TILE), grid(n / TILE, n / TILE);
  double t0 = now_s(), c0 = cpu_s();
  tiled_gemm<<<grid, block>>>(n, A, B, C);
  cudaError_t err = cudaDeviceSynchronize();
  double t1 = now_s(), c1 = cpu_s();
  cudaMemcpy(hC.data(), C, hC.size() * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i += 37)
    for (int j = 0; j < n; j += 29) {
      double ref = 0;
      for (int k = 0; k < n; ++k) ref += double(hA[size_t(i) * n + k]) * hB[size_t(k) * n + j];
      if (std::fabs(ref - hC[size_t(i) * n + j]) > 1e-3 * (1 + std::fabs(ref))) ++bad;
    }
  const double gflops = 2.0 * n * n * n / (t1 - t0) / 1e9;
  std::printf("tiled_gemm %dx%dx%d: %.3f s wall, %.3f GFLOP/s (%.3f GFLOP/s per CPU second), %s (%s)\n",
              n, n, n, t1 - t0, gflops, 2.0 * n * n * n / (c1 - c0) / 1e9, bad ? "WRONG" : "correct",
              cudaGetErrorString(err));

  int* out;
  cudaMalloc(&out, sizeof(int));
  const int iters = 2000, threads = 256, blocks = 8;
  t0 = now_s();
  c0 = cpu_s();
  barrier_loop<<<blocks, threads>>>(iters, out);
  cudaDeviceSynchronize();
  t1 = now_s();
  c1 = cpu_s();
  const double events = double(iters) * threads * blocks;
  std::printf("__syncthreads: %.1f ns wall (%.1f ns CPU) per thread per barrier (%d threads/block)\n",
              (t1 - t0) * 1e9 / events, (c1 - c0) * 1e9 / events, threads);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(out);
  return bad ? 1 : 0;
}
