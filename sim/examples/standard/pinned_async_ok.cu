// expect: ok
// The correct twin of bugs/pinned_read_before_sync.cu: the host reads the pinned results only
// after an event recorded after the copy completed, refills the input buffer only after the
// stream finished reading it, and polls with cudaEventQuery.
#include <cstdio>

__global__ void square(float* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = v[i] * v[i];
}

int main() {
  const int n = 1 << 16;
  float *in = nullptr, *out = nullptr, *d = nullptr;
  cudaStream_t s;
  cudaEvent_t copied;
  if (cudaMallocHost(&in, n * sizeof(float)) != cudaSuccess || cudaMallocHost(&out, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&d, n * sizeof(float)) != cudaSuccess)
    return 2;
  cudaStreamCreate(&s);
  cudaEventCreate(&copied);
  bool ok = true;
  for (int round = 1; round <= 2; ++round) {
    for (int i = 0; i < n; ++i) in[i] = float(round);
    cudaMemcpyAsync(d, in, n * sizeof(float), cudaMemcpyHostToDevice, s);
    square<<<n / 256, 256, 0, s>>>(d, n);
    cudaMemcpyAsync(out, d, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    cudaEventRecord(copied, s);
    if (round == 1) {
      cudaEventSynchronize(copied);
    } else {
      while (cudaEventQuery(copied) == cudaErrorNotReady) {
      }
    }
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += out[i];
    ok = ok && sum == double(round) * round * n;
  }
  printf("pinned async: %s\n", ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
