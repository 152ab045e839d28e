// expect: over more blocks than can be resident
// Bug: a grid-wide barrier made by hand (atomic arrivals, a volatile generation the last block
// advances) in an ordinary launch of more blocks than the device holds at once: the blocks that
// are resident spin forever for blocks that cannot start until they end. A GPU hangs.
#include <cstdio>

__global__ void two_phases(unsigned* count, volatile unsigned* generation, int* slots, int* out) {
  const int b = blockIdx.x, nb = gridDim.x;
  if (threadIdx.x == 0) {
    slots[b] = b;
    const unsigned g0 = *generation;
    __threadfence();
    if (atomicAdd(count, 1u) == unsigned(nb) - 1u) {
      *count = 0;
      __threadfence();
      *generation = g0 + 1;
    } else {
      while (*generation == g0) {
      }
    }
    __threadfence();
    out[b] = slots[(b + 1) % nb];
  }
}

int main() {
  int per_sm = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, two_phases, 256, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = 4 * per_sm * sms;  // BUG: more than per_sm * sms can be resident
  unsigned* sync = nullptr;
  int *slots = nullptr, *out = nullptr;
  if (cudaMalloc(&sync, 8) != cudaSuccess || cudaMalloc(&slots, blocks * 4) != cudaSuccess ||
      cudaMalloc(&out, blocks * 4) != cudaSuccess)
    return 2;
  cudaMemset(sync, 0, 8);
  two_phases<<<blocks, 256>>>(sync, sync + 1, slots, out);
  int r = -1;
  const cudaError_t e = cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost);
  printf("two_phases: %s, out[0] = %d (want 1)\n", cudaGetErrorString(e), r);
  return e == cudaSuccess && r == 1 ? 0 : 1;
}
