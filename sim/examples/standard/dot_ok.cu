// expect: ok
// Dot product x . y and the squared norm x . x: grid-stride partial sums per thread, a
// warp-shuffle reduction inside each warp, one shared slot per warp, the first warp reduces
// the slots, and thread 0 of each block adds the block's sum to the result with atomicAdd.
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

__inline__ __device__ float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// blockDim.x must be a multiple of 32, at most 1024; *result must be zeroed first.
__global__ void dot(const float* x, const float* y, int n, float* result) {
  __shared__ float warp_sums[32];
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += x[i] * y[i];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
    v = warp_sum(v);
    if (lane == 0) atomicAdd(result, v);
  }
}

float device_dot(const float* d_x, const float* d_y, int n, float* d_result) {
  CHECK(cudaMemset(d_result, 0, sizeof(float)));
  dot<<<64, 256>>>(d_x, d_y, n, d_result);
  CHECK(cudaGetLastError());
  float r = 0.0f;
  CHECK(cudaMemcpy(&r, d_result, sizeof r, cudaMemcpyDeviceToHost));
  return r;
}

int main() {
  const int n = 300000;
  std::vector<float> x(n), y(n);
  double want_xy = 0.0, want_xx = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 5) - 2.0f;  // small integers: the float sums are exact in any order
    y[i] = float(i * 3 % 5) - 2.0f;
    want_xy += double(x[i]) * y[i];
    want_xx += double(x[i]) * x[i];
  }
  float *d_x = nullptr, *d_y = nullptr, *d_result = nullptr;
  CHECK(cudaMalloc(&d_x, n * sizeof(float)));
  CHECK(cudaMalloc(&d_y, n * sizeof(float)));
  CHECK(cudaMalloc(&d_result, sizeof(float)));
  CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_y, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  float xy = device_dot(d_x, d_y, n, d_result);
  CHECK(cudaFree(d_y));
  float xx = device_dot(d_x, d_x, n, d_result);
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_result));
  printf("dot: x.y = %g (expected %g), x.x = %g (expected %g)\n", xy, want_xy, xx, want_xx);
  if (xy != want_xy || xx != want_xx) {
    printf("dot: WRONG\n");
    return 1;
  }
  return 0;
}
