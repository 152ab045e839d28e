// expect: ok
// The correct twin of bugs/handmade_barrier_too_many_blocks.cu: the hand-made barrier in a
// cooperative launch of no more blocks than can be resident together, so every block runs.
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
  const int blocks = per_sm * sms < 8 ? per_sm * sms : 8;  // all resident at once
  unsigned* sync = nullptr;
  int *slots = nullptr, *out = nullptr;
  if (cudaMalloc(&sync, 8) != cudaSuccess || cudaMalloc(&slots, blocks * 4) != cudaSuccess ||
      cudaMalloc(&out, blocks * 4) != cudaSuccess)
    return 2;
  cudaMemset(sync, 0, 8);
  unsigned* count = sync;
  volatile unsigned* generation = sync + 1;
  void* args[] = {&count, &generation, &slots, &out};
  cudaLaunchCooperativeKernel((void*)two_phases, dim3(blocks), dim3(256), args, 0, nullptr);
  int r = -1;
  const cudaError_t e = cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost);
  printf("two_phases: %s, out[0] = %d (want 1)\n", cudaGetErrorString(e), r);
  return e == cudaSuccess && r == 1 ? 0 : 1;
}
