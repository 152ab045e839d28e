// Launch-latency probe (CUDA only): what a kernel node, a PDL edge, a grid barrier cost.
//   nvcc -arch=sm_90 -O2 -o launch_latency bench/gpu/launch_latency.cu && ./launch_latency
// (CUDA only: cudaLaunchKernelEx and the programmatic-launch attribute are not emulated; tests/cuda/gpu_session.sh builds and runs it)
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); std::exit(1); } } while (0)

__global__ void empty_k() {}

// A dependent chain: block 0 thread 0 reads and writes buf[0] (the next kernel's input).
__global__ void chain_k(float* buf, int pdl) {
  if (pdl) cudaGridDependencySynchronize();
  if (blockIdx.x == 0 && threadIdx.x == 0) buf[0] = buf[0] + 1.0f;
  if (pdl) cudaTriggerProgrammaticLaunchCompletion();
}

__global__ void grid_sync_k(int n, float* buf) {
  cg::grid_group g = cg::this_grid();
  for (int i = 0; i < n; ++i) {
    if (blockIdx.x == (i % gridDim.x) && threadIdx.x == 0) buf[0] += 1.0f;
    g.sync();
  }
}

// A sense-reversing flag barrier (atomics + __threadfence), all blocks resident.
__global__ void flag_sync_k(int n, unsigned* count, volatile unsigned* gen, float* buf) {
  __shared__ unsigned my_gen;
  if (threadIdx.x == 0) my_gen = *gen;
  __syncthreads();
  for (int i = 0; i < n; ++i) {
    if (blockIdx.x == (i % gridDim.x) && threadIdx.x == 0) buf[0] += 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      unsigned g0 = my_gen;
      if (atomicAdd(count, 1u) == gridDim.x - 1) {
        *count = 0;
        __threadfence();
        atomicAdd((unsigned*)gen, 1u);
      } else {
        while (*gen == g0) {}
      }
      my_gen = g0 + 1;
      __threadfence();
    }
    __syncthreads();
  }
}

static float time_graph(cudaGraphExec_t ge, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* buf; CK(cudaMalloc(&buf, 4096)); CK(cudaMemset(buf, 0, 4096));
  const int N = 400;
  std::printf("SMs %d; graph of %d kernel nodes, median of 20 replays, us per node\n", sms, N);
  for (int blocks : {1, sms, 4 * sms}) {
    for (int pdl = 0; pdl < 2; ++pdl) {
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < N; ++i) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(256); cfg.stream = s;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, chain_k, buf, pdl));
      }
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      float ms = time_graph(ge, s, 20);
      std::printf("chain_k blocks %4d pdl %d: %.3f us/node\n", blocks, pdl, ms * 1000 / N);
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
  }
  {  // empty kernels, plain capture
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < N; ++i) empty_k<<<1, 32, 0, s>>>();
    CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    std::printf("empty_k 1x32: %.3f us/node\n", time_graph(ge, s, 20) * 1000 / N);
  }
  {  // stream launches, no graph
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int i = 0; i < 100; ++i) chain_k<<<sms, 256, 0, s>>>(buf, 0);
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < N; ++i) chain_k<<<sms, 256, 0, s>>>(buf, 0);
    CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    std::printf("stream launches chain_k %d blocks: %.3f us/kernel\n", sms, ms * 1000 / N);
  }
  // Grid barriers inside one cooperative kernel.
  for (int threads : {256, 512}) {
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sync_k, threads, 0));
    int n = 2000;
    void* args[] = {&n, &buf};
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    CK(cudaLaunchCooperativeKernel((void*)grid_sync_k, sms, threads, args, 0, s));
    CK(cudaEventRecord(a, s));
    CK(cudaLaunchCooperativeKernel((void*)grid_sync_k, sms, threads, args, 0, s));
    CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    std::printf("grid.sync %d blocks x %d: %.3f us/barrier (resident per SM %d)\n", sms, threads, ms * 1000 / n, per_sm);
    unsigned* cnt; CK(cudaMalloc(&cnt, 8)); CK(cudaMemset(cnt, 0, 8));
    void* args2[] = {&n, &cnt, &cnt, &buf};
    unsigned* gen = cnt + 1;
    args2[2] = &gen;
    CK(cudaLaunchCooperativeKernel((void*)flag_sync_k, sms, threads, args2, 0, s));
    CK(cudaEventRecord(a, s));
    CK(cudaLaunchCooperativeKernel((void*)flag_sync_k, sms, threads, args2, 0, s));
    CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    std::printf("flag barrier %d blocks x %d: %.3f us/barrier\n", sms, threads, ms * 1000 / n);
  }
  CK(cudaDeviceSynchronize());
  float h; CK(cudaMemcpy(&h, buf, 4, cudaMemcpyDeviceToHost));
  std::printf("buf %.0f (a count of increments; checks the kernels ran)\n", h);
  return 0;
}
