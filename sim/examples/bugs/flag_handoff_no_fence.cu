// expect: global memory race
// Bug: block 0 hands a result to block 1 through a volatile flag, as the CUDA Programming Guide
// shows, but without the __threadfence() between the data and the flag: block 1 may see the flag
// before the data (the reader's side needs its fence too). A GPU shows this only now and then.
#include <cstdio>

__global__ void handoff(float* data, volatile unsigned* flag, float* out) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    data[0] = 42.0f;
    *flag = 1;  // BUG: __threadfence() before this store
  } else {
    while (*flag == 0) {
    }
    __threadfence();
    out[0] = data[0];
  }
}

int main() {
  float *data = nullptr, *out = nullptr;
  unsigned* flag = nullptr;
  if (cudaMalloc(&data, 4) != cudaSuccess || cudaMalloc(&out, 4) != cudaSuccess || cudaMalloc(&flag, 4) != cudaSuccess)
    return 2;
  cudaMemset(flag, 0, 4);
  volatile unsigned* vflag = flag;
  void* args[] = {&data, &vflag, &out};
  // Both blocks must be resident together: a cooperative launch guarantees it (sized, as usual,
  // from the kernel's occupancy).
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, handoff, 32, 0);
  if (per_sm < 1) return 2;
  cudaLaunchCooperativeKernel((void*)handoff, dim3(2), dim3(32), args, 0, nullptr);
  float r = -1;
  const cudaError_t e = cudaMemcpy(&r, out, 4, cudaMemcpyDeviceToHost);
  printf("handoff: %s, %g (want 42)\n", cudaGetErrorString(e), r);
  return e == cudaSuccess && r == 42.0f ? 0 : 1;
}
