// expect: stream_race: MISMATCH
// A user bug: a kernel on stream 1 produces a buffer, and a cudaMemcpyAsync on stream 2 copies
// it to the host without waiting for stream 1 (no cudaEventRecord + cudaStreamWaitEvent).
// Nothing orders the two streams, so the copy may read the buffer before the kernel wrote it.
// On a GPU that is a timing-dependent race; the emulator's lazy streams (the default) run
// stream 1's kernel only when something forces it, so the copy always sees the old contents,
// and the check below reports the mismatch. The fix is two lines (see the comment in main).
// Build: sim/simcc -O2 stream_race.cu -o stream_race   (or nvcc stream_race.cu)
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

__global__ void produce(int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = 3 * i + 1;
}

int main() {
  const int n = 1 << 16;
  int* d = nullptr;
  int* h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMallocHost(&h, n * sizeof(int)));  // pinned: the copy below is truly asynchronous
  CHECK(cudaMemset(d, 0, n * sizeof(int)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));  // blocking streams: both come after the memset
  CHECK(cudaStreamCreate(&s2));

  produce<<<64, 256, 0, s1>>>(d, n);
  CHECK(cudaGetLastError());
  // BUG: missing
  //   cudaEvent_t done; cudaEventCreate(&done); cudaEventRecord(done, s1);
  //   cudaStreamWaitEvent(s2, done, 0);
  CHECK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s2));
  CHECK(cudaStreamSynchronize(s2));

  int bad = 0, first = -1;
  for (int i = 0; i < n; ++i)
    if (h[i] != 3 * i + 1) {
      if (first < 0) first = i;
      ++bad;
    }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(d));
  if (bad) {
    std::printf("stream_race: MISMATCH at element %d (%d of %d wrong): the copy on stream 2 did "
                "not wait for the kernel on stream 1\n", first, bad, n);
    return 1;
  }
  std::printf("stream_race: all %d elements right (the race went the lucky way)\n", n);
  return 0;
}
