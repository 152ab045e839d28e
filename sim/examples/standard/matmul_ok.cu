// expect: ok
// Tiled SGEMM C = A * B (M x K times K x N, row-major) with the tile width chosen at run time:
// both tiles live in one dynamic shared buffer (As, then Bs), and the launch passes its size.
// Sizes are not multiples of the tile: out-of-range tile elements are loaded as zeros.
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t err_ = (call);                                                         \
    if (err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));    \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

// blockDim = (T, T); dynamic shared memory: 2 * T * T floats.
__global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float smem[];
  const int T = blockDim.x;
  float* As = smem;          // T x T
  float* Bs = smem + T * T;  // T x T
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[ty * T + tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty * T + tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[ty * T + k] * Bs[k * T + tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

int main() {
  const int M = 70, N = 50, K = 45, T = 16;
  std::vector<float> a(M * K), b(K * N), c(M * N);
  for (int i = 0; i < M * K; ++i) a[i] = float(i % 7) - 3.0f;  // small integers: exact sums
  for (int i = 0; i < K * N; ++i) b[i] = float(i % 5) - 2.0f;
  float *dA = nullptr, *dB = nullptr, *dC = nullptr;
  CHECK(cudaMalloc(&dA, M * K * sizeof(float)));
  CHECK(cudaMalloc(&dB, K * N * sizeof(float)));
  CHECK(cudaMalloc(&dC, M * N * sizeof(float)));
  CHECK(cudaMemcpy(dA, a.data(), M * K * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, b.data(), K * N * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  size_t shmem = 2 * T * T * sizeof(float);
  matmul_tiled<<<grid, block, shmem>>>(dA, dB, dC, M, N, K);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(c.data(), dC, M * N * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float want = 0.0f;
      for (int k = 0; k < K; ++k) want += a[i * K + k] * b[k * N + j];
      if (c[i * N + j] != want) {
        printf("matmul: WRONG at (%d, %d): %g, expected %g\n", i, j, c[i * N + j], want);
        return 1;
      }
    }
  printf("matmul: %dx%d * %dx%d with %dx%d tiles correct, C(0,0) = %g\n", M, K, K, N, T, T, c[0]);
  return 0;
}
