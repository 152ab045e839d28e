// Streams and events on GPGPU-Sim, in the pattern of the trainer's gradient exchange: kernels on
// a compute stream record events; a copy stream waits for them and copies two regions to pinned
// host memory; the host waits with cudaEventSynchronize, changes the data and copies it back for
// a kernel to check. The unpatched simulator's cudaEventSynchronize returned at once (its empty
// wait loop was removed by the compiler), so the host read the buffer before the copies ran.
// Built by make test-gpgpusim with the CUDA build's flags; run: tests/gpgpusim/run.sh PROGRAM
#include <cstdio>
#include <cuda_runtime.h>

__global__ void fill(float* a, int n, float base) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = base + i;
}
__global__ void check(const float* a, int n, float base, unsigned* errors) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (a[i] != base + i) atomicAdd(errors, 1u);
}

int main() {
  const int n = 25450, n1 = 25120;  // the trainer's gradient at H=32: layer 1, then layer 2
  float *d, *h;
  unsigned* d_errors;
  cudaMalloc(&d, n * sizeof(float));
  cudaMallocHost(&h, n * sizeof(float));
  cudaMalloc(&d_errors, sizeof(unsigned));
  cudaMemset(d_errors, 0, sizeof(unsigned));
  cudaStream_t compute, copy;
  cudaStreamCreate(&compute);
  cudaStreamCreate(&copy);
  cudaEvent_t layer2, all, copied2, copied_all;
  for (cudaEvent_t* e : {&layer2, &all, &copied2, &copied_all}) cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  int host_bad = 0;
  for (int it = 0; it < 4; ++it) {
    const float base = 1000.0f * it;
    fill<<<4, 128, 0, compute>>>(d + n1, n - n1, base + n1);
    cudaEventRecord(layer2, compute);
    fill<<<64, 128, 0, compute>>>(d, n1, base);
    cudaEventRecord(all, compute);
    cudaStreamWaitEvent(copy, layer2, 0);
    cudaMemcpyAsync(h + n1, d + n1, (n - n1) * sizeof(float), cudaMemcpyDeviceToHost, copy);
    cudaEventRecord(copied2, copy);
    cudaStreamWaitEvent(copy, all, 0);
    cudaMemcpyAsync(h, d, n1 * sizeof(float), cudaMemcpyDeviceToHost, copy);
    cudaEventRecord(copied_all, copy);
    cudaEventSynchronize(copied_all);  // both copies, in stream order, are done
    for (int i = 0; i < n; ++i)
      if (h[i] != base + i && host_bad++ < 3) printf("FAIL iteration %d: h[%d] = %g, want %g\n", it, i, h[i], base + i);
    for (int i = 0; i < n; ++i) h[i] += 1.0f;
    cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, compute);
    check<<<8, 128, 0, compute>>>(d, n, base + 1.0f, d_errors);
    cudaStreamSynchronize(compute);  // h is rewritten by the next iteration's copy
  }
  unsigned device_bad = 0;
  cudaMemcpy(&device_bad, d_errors, sizeof device_bad, cudaMemcpyDeviceToHost);
  printf("host reads after cudaEventSynchronize: %d wrong; device reads after the upload: %u wrong\n", host_bad,
         device_bad);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) printf("FAIL CUDA error: %s\n", cudaGetErrorString(e));
  const int bad = host_bad + int(device_bad) + (e != cudaSuccess);
  printf("events: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
