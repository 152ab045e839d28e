// cudaMemsetAsync in stream order on GPGPU-Sim, in the pattern of the trainer's step: a kernel
// accumulates into a buffer, then the same stream clears it with cudaMemsetAsync and a second
// kernel adds to the cleared buffer. The unpatched simulator cleared the memory at the call, on
// the host thread, while the first kernel could still be running in the simulation thread: its
// later writes survived the clear (the trainer's gradients then held the previous step's sums,
// now and then, depending on the two threads' timing). The first kernel here runs long enough to
// be still running at the clear every time.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

__global__ void accumulate(float* a, int n, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] += 1.0f;
}

int main() {
  const int n = 4096;
  float* d;
  cudaMalloc(&d, n * sizeof(float));
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaMemsetAsync(d, 0, n * sizeof(float), s);
  accumulate<<<4, 128, 0, s>>>(d, n, 200);  // long: still running when the host goes on
  cudaMemsetAsync(d, 0, n * sizeof(float), s);
  accumulate<<<4, 128, 0, s>>>(d, n, 1);
  float h[n];
  cudaStreamSynchronize(s);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (h[i] != 1.0f && bad++ < 3) printf("FAIL d[%d] = %g after the clear and one round, want 1\n", i, h[i]);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  bad += e != cudaSuccess;
  printf("memset_order: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
