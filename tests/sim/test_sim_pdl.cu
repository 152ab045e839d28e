// Launch attributes and programmatic dependent launch (sim/include/sim/launch_ex.h,
// sim/runtime/launch_ex.cpp): cudaLaunchKernelEx with and without the PDL attribute, on a stream
// and captured into a graph, computes what plain launches compute; the untyped
// cudaLaunchCooperativeKernel and cudaLaunchKernelExC find their kernels. Emulator only: a read of
// the previous kernel's output before cudaGridDependencySynchronize() is reported (the GPU would
// give stale data), so is a write of what it read after its trigger; a copy between two kernels
// ends the overlap; an unknown untyped kernel is refused. Valid CUDA (sm_90 for the PDL calls).
#include <cooperative_groups.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

// The device calls exist from compute capability 9.0; the CUDA build also makes sm_80 code.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define cudaGridDependencySynchronize() ((void)0)
#define cudaTriggerProgrammaticLaunchCompletion() ((void)0)
#endif

namespace {

using simtest::DeviceBuffer;

__global__ void produce_kernel(float* out, int n, float v) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = v + float(i);
  cudaTriggerProgrammaticLaunchCompletion();
}
// early: reads its input before cudaGridDependencySynchronize() (the planted hazard).
__global__ void consume_kernel(const float* in, float* out, int n, int early) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  float v = 0;
  if (early && i < n) v = in[i];
  cudaGridDependencySynchronize();
  if (!early && i < n) v = in[i];
  if (i < n) out[i] = 2 * v;
}
#ifdef SIM_EMULATOR  // the hazards' kernels: their tests are the emulator's
// Writes what the producer read (its input) before waiting.
__global__ void reader_kernel(const float* in, float* out, int n) {
  cudaTriggerProgrammaticLaunchCompletion();
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + 1;  // read after the trigger
}
__global__ void overwrite_kernel(float* buf, int n, int early) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (early && i < n) buf[i] = -1;
  cudaGridDependencySynchronize();
  if (!early && i < n) buf[i] = -1;
}
#endif

cudaLaunchConfig_t config(int blocks, int threads, cudaStream_t s, cudaLaunchAttribute* attr, bool pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

class SimPdl : public simtest::SimTest {};

TEST_F(SimPdl, LaunchKernelExComputesWhatAPlainLaunchDoes) {
  const int n = 300;
  DeviceBuffer<float> a(n), b(n);
  cudaStream_t s = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&s));
  for (const bool pdl : {false, true}) {
    for (const bool graph : {false, true}) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      if (graph) ASSERT_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      produce_kernel<<<3, 128, 0, s>>>(a.get(), n, pdl ? 1.0f : 2.0f);
      cudaLaunchAttribute attr[1];
      const cudaLaunchConfig_t cfg = config(3, 128, s, attr, pdl);
      ASSERT_CUDA_OK(cudaLaunchKernelEx(&cfg, consume_kernel, static_cast<const float*>(a.get()), b.get(), n, 0));
      if (graph) {
        ASSERT_CUDA_OK(cudaStreamEndCapture(s, &g));
        ASSERT_CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
        ASSERT_CUDA_OK(cudaGraphLaunch(ge, s));
      }
      ASSERT_CUDA_OK(cudaStreamSynchronize(s));
      const std::vector<float> h = b.download();
      for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], 2 * ((pdl ? 1.0f : 2.0f) + float(i))) << i;
      if (graph) {
        ASSERT_CUDA_OK(cudaGraphExecDestroy(ge));
        ASSERT_CUDA_OK(cudaGraphDestroy(g));
      }
    }
  }
  ASSERT_CUDA_OK(cudaStreamDestroy(s));
}

__global__ void coop_sum_kernel(const int* in, int* out, int n) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  if (blockIdx.x == 0 && threadIdx.x == 0) out[1] = 7;
  grid.sync();
  if (blockIdx.x == 1 && threadIdx.x == 0) {
    int s = out[1];
    for (int i = 0; i < n; ++i) s += in[i];
    out[0] = s;
  }
}

TEST_F(SimPdl, UntypedLaunchesFindTheirKernel) {
  DeviceBuffer<int> in(std::vector<int>{1, 2, 3, 4}), out(2);
  int per_sm = 0;
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, coop_sum_kernel, 32, 0));
  ASSERT_GE(per_sm, 1);
  const int* pin = in.get();
  int* pout = out.get();
  int n = 4;
  void* args[] = {&pin, &pout, &n};
  ASSERT_CUDA_OK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(coop_sum_kernel), dim3(2), dim3(32), args,
                                             0, nullptr));
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 17);
  // cudaLaunchKernelExC with the cooperative attribute.
  ASSERT_CUDA_OK(out.fill_bytes(0));
  cudaLaunchAttribute coop[1];
  coop[0].id = cudaLaunchAttributeCooperative;
  coop[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(32);
  cfg.attrs = coop;
  cfg.numAttrs = 1;
  ASSERT_CUDA_OK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(coop_sum_kernel), args));
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 17);
}

#ifdef SIM_EMULATOR
extern "C" void __asan_init() __attribute__((weak));
#define SKIP_WITHOUT_CHECKS()                                                        \
  do {                                                                               \
    if (&__asan_init != nullptr) GTEST_SKIP() << "no per-access checks under ASan";  \
  } while (0)

std::string fault_of(cudaError_t* e) {
  *e = cudaDeviceSynchronize();
  const std::string msg = sim::last_fault();
  sim::reset();
  (void)cudaGetLastError();
  return msg;
}

// producer, then the PDL kernel `second` on a created stream; the fault message ("" if none).
template <class F>
std::string after_producer(F&& second, cudaError_t* e) {
  cudaStream_t s = nullptr;
  (void)cudaStreamCreate(&s);
  second(s);
  (void)cudaStreamSynchronize(s);
  return fault_of(e);
}

TEST_F(SimPdl, ReadOfThePreviousKernelsOutputBeforeTheWaitIsReported) {
  SKIP_WITHOUT_CHECKS();
  for (const int early : {0, 1}) {
    cudaError_t e = cudaSuccess;
    const std::string msg = after_producer(
        [&](cudaStream_t s) {
          DeviceBuffer<float> a(64), b(64);
          produce_kernel<<<2, 32, 0, s>>>(a.get(), 64, 1.0f);
          cudaLaunchAttribute attr[1];
          const cudaLaunchConfig_t cfg = config(2, 32, s, attr, true);
          (void)cudaLaunchKernelEx(&cfg, consume_kernel, static_cast<const float*>(a.get()), b.get(), 64, early);
          (void)cudaStreamSynchronize(s);
        },
        &e);
    if (!early) {
      EXPECT_EQ(e, cudaSuccess) << msg;
      continue;
    }
    EXPECT_EQ(e, cudaErrorLaunchFailure);
    EXPECT_NE(msg.find("programmatic dependent launch hazard in kernel 'consume_kernel'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("read 4 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("before its cudaGridDependencySynchronize()"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stale data"), std::string::npos) << msg;
  }
}

TEST_F(SimPdl, WriteOfWhatThePreviousKernelReadLateIsReported) {
  SKIP_WITHOUT_CHECKS();
  for (const int early : {0, 1}) {
    cudaError_t e = cudaSuccess;
    const std::string msg = after_producer(
        [&](cudaStream_t s) {
          DeviceBuffer<float> a(64), b(64);
          (void)a.fill_bytes(0);
          reader_kernel<<<2, 32, 0, s>>>(a.get(), b.get(), 64);
          cudaLaunchAttribute attr[1];
          const cudaLaunchConfig_t cfg = config(2, 32, s, attr, true);
          (void)cudaLaunchKernelEx(&cfg, overwrite_kernel, a.get(), 64, early);
          (void)cudaStreamSynchronize(s);
        },
        &e);
    if (!early) {
      EXPECT_EQ(e, cudaSuccess) << msg;
      continue;
    }
    EXPECT_EQ(e, cudaErrorLaunchFailure);
    EXPECT_NE(msg.find("wrote 4 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("read (after its cudaTriggerProgrammaticLaunchCompletion())"), std::string::npos) << msg;
  }
}

TEST_F(SimPdl, ACopyBetweenTheKernelsOrTheAttributeOffEndsTheOverlap) {
  SKIP_WITHOUT_CHECKS();
  for (const int with_copy : {0, 1}) {
    cudaError_t e = cudaSuccess;
    const std::string msg = after_producer(
        [&](cudaStream_t s) {
          DeviceBuffer<float> a(64), b(64), c(64);
          produce_kernel<<<2, 32, 0, s>>>(a.get(), 64, 1.0f);
          if (with_copy) (void)cudaMemcpyAsync(c.get(), a.get(), 64 * sizeof(float), cudaMemcpyDeviceToDevice, s);
          cudaLaunchAttribute attr[1];
          const cudaLaunchConfig_t cfg = config(2, 32, s, attr, !with_copy ? false : true);
          (void)cudaLaunchKernelEx(&cfg, consume_kernel, static_cast<const float*>(a.get()), b.get(), 64, 1);
          (void)cudaStreamSynchronize(s);
        },
        &e);
    EXPECT_EQ(e, cudaSuccess) << (with_copy ? "a copy between: " : "no PDL attribute: ") << msg;
  }
}

TEST_F(SimPdl, UnknownUntypedKernelIsRefused) {
  int dummy = 0;
  void* args[] = {&dummy};
  EXPECT_EQ(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&dummy), dim3(1), dim3(32), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // not sticky
}
#endif

}  // namespace
