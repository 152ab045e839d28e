// Triggers one emulator fault in the default (abort) mode, to see its report:
//   sim/simcc -g sim/examples/faults.cu -o faults
//   ./faults divergence | hostptr | warp | smem | ok
// and with AddressSanitizer (ucontext fibers):
//   sim/simcc -g -fsanitize=address,undefined sim/examples/faults.cu -o faults_asan
//   ./faults_asan oob        (out-of-bounds write to a cudaMalloc'd buffer inside a kernel)
// Valid CUDA: nvcc -c compiles it.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

__global__ void early_return(float* out, int n) {
  __shared__ float tile[128];
  if (threadIdx.x >= n) return;  // threads past n leave before the barrier
  tile[threadIdx.x] = 2.0f * threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % n];
}

__global__ void scale(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= 2.0f;
}

__global__ void overflow(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i] = 1.0f;  // no bounds check: writes past n
  (void)n;
}

__global__ void half_warp_shuffle(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_down_sync(0xffffffffu, v, 1);  // lanes 16..31 never join
  out[threadIdx.x] = v;
}

#ifdef SIM_EMULATOR  // ptxas rejects this kernel at compile time; the emulator at run time
__global__ void big_static_shared(float* out) {
  __shared__ float a[8192];
  __shared__ float b[8192];  // 64 KiB of static shared memory: over the 48 KiB limit
  a[threadIdx.x] = b[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}
#endif

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "ok";
  float* d;
  cudaMalloc(&d, 100 * sizeof(float));
  cudaMemset(d, 0, 100 * sizeof(float));  // kernels read it (initcheck)
  if (!std::strcmp(what, "divergence")) {
    early_return<<<1, 128>>>(d, 100);
  } else if (!std::strcmp(what, "hostptr")) {
    std::vector<float> host(100);
    scale<<<1, 128>>>(host.data(), 100);
  } else if (!std::strcmp(what, "oob")) {
    overflow<<<1, 128>>>(d, 100);
  } else if (!std::strcmp(what, "warp")) {
    int* o;
    cudaMalloc(&o, 32 * sizeof(int));
    half_warp_shuffle<<<1, 32>>>(o);
#ifdef SIM_EMULATOR
  } else if (!std::strcmp(what, "smem")) {
    big_static_shared<<<1, 32>>>(d);
#endif
  } else {
    scale<<<1, 128>>>(d, 100);
  }
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s: %s\n", what, cudaGetErrorString(e));
  cudaFree(d);
  return e == cudaSuccess ? 0 : 1;
}
