// expect: uninitialised global memory read
// Bug: the weighted sum out[i] += w[k] * in_k[i] without zeroing the output first: the first
// launch adds to whatever the fresh cudaMalloc memory held (often zeros on a GPU, so the bug
// can hide for a long time; compute-sanitizer --tool initcheck: "Uninitialized __global__
// memory read").
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

__global__ void accumulate(float* out, const float* in, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += w * in[i];
}

int main() {
  const int n = 5000, inputs = 3;
  const float w[inputs] = {0.5f, -2.0f, 4.0f};
  std::vector<float> h_in(inputs * n), h_out(n);
  for (int i = 0; i < inputs * n; ++i) h_in[i] = float(i % 11);
  float *d_in = nullptr, *d_out = nullptr;
  CHECK(cudaMalloc(&d_in, inputs * n * sizeof(float)));
  CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CHECK(cudaMemcpy(d_in, h_in.data(), inputs * n * sizeof(float), cudaMemcpyHostToDevice));
  // BUG: missing CHECK(cudaMemset(d_out, 0, n * sizeof(float)));
  for (int k = 0; k < inputs; ++k) {
    accumulate<<<(n + 255) / 256, 256>>>(d_out, d_in + k * n, w[k], n);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaMemcpy(h_out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  for (int i = 0; i < n; ++i) {
    float want = 0.0f;
    for (int k = 0; k < inputs; ++k) want += w[k] * h_in[k * n + i];
    if (h_out[i] != want) {
      printf("accumulate: WRONG at %d: %g, expected %g\n", i, h_out[i], want);
      return 1;
    }
  }
  printf("accumulate: %d inputs of %d floats summed correctly, out[1] = %g\n", inputs, n, h_out[1]);
  return 0;
}
