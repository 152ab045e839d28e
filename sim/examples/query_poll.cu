// Overlapping host work with the device by polling an event, as a user would write it:
//   while (cudaEventQuery(done) == cudaErrorNotReady) do_host_work();
// The loop must see "not ready" rounds (otherwise nothing overlapped) and still end. A GPU
// progresses in the background; the emulator's lazy streams (the default) answer
// cudaErrorNotReady while the event's work is pending and run one queued item per query, so
// the loop takes one round per kernel here. "Not ready" is an answer, not an error: it must
// not become the thread's last error. The program fails if it sees no round, a wrong
// result or a last error.
// Build: sim/simcc -O2 query_poll.cu -o query_poll   (or nvcc query_poll.cu)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));     \
      std::exit(2);                                                                        \
    }                                                                                      \
  } while (0)

__global__ void add_one(float* v, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    v[i] += 1.0f;
}

int main() {
  const int n = 1 << 18, kernels = 4;
  float* d = nullptr;
  float* h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMallocHost(&h, n * sizeof(float)));
  CHECK(cudaMemset(d, 0, n * sizeof(float)));
  cudaStream_t s;
  cudaEvent_t done;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));

  for (int k = 0; k < kernels; ++k) add_one<<<64, 256, 0, s>>>(d, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CHECK(cudaEventRecord(done, s));

  long rounds = 0;
  double host_work = 0;
  cudaError_t r;
  while ((r = cudaEventQuery(done)) == cudaErrorNotReady) {
    ++rounds;
    for (int i = 1; i <= 1000; ++i) host_work += 1.0 / i;  // the overlapped host work
  }
  CHECK(r);
  const cudaError_t last = cudaGetLastError();

  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != float(kernels);
  CHECK(cudaEventDestroy(done));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(d));
  std::printf("query_poll: %ld not-ready rounds (host work %.3f), %d wrong elements, last error %s\n",
              rounds, host_work, bad, cudaGetErrorName(last));
  if (rounds == 0) {
    std::printf("query_poll: FAIL: cudaEventQuery never answered cudaErrorNotReady\n");
    return 1;
  }
  if (bad || last != cudaSuccess) {
    std::printf("query_poll: FAIL\n");
    return 1;
  }
  std::printf("query_poll: ok\n");
  return 0;
}
