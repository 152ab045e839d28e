// Asynchronous global-to-shared copies (sim/include/sim/async_copy.h, cuda_pipeline_primitives.h,
// cuda/pipeline; sim/runtime/async_copy.cpp): __pipeline_memcpy_async with its commits and waits,
// double buffering with __pipeline_wait_prior(1), zero fill, and cuda::memcpy_async on a
// thread-scope cuda::pipeline copy what plain loads copy, under every schedule. Emulator only: a
// read of the destination before the issuing thread's wait, a read by another thread with no
// barrier after the wait, a misaligned copy and a destination outside shared memory are faults.
// Valid CUDA (sm_80 or later).
#include <cuda/pipeline>
#include <cuda_pipeline.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

constexpr int kThreads = 64;

// Each block stages 4 floats a thread (16-byte copies) and writes its neighbour's out.
// bug 1: reads before its wait; bug 2: no __syncthreads() after the wait.
__global__ void stage_kernel(const float* in, float* out, int bug) {
  __shared__ __align__(16) float s[4 * kThreads];
  const int t = int(threadIdx.x), base = int(blockIdx.x) * 4 * kThreads;
  __pipeline_memcpy_async(&s[4 * t], &in[base + 4 * t], 16);
  __pipeline_commit();
  float early = 0;
  if (bug == 1) early = s[4 * t];
  __pipeline_wait_prior(0);
  if (bug != 2) __syncthreads();
  out[base + t] = s[(4 * t + 4) % (4 * kThreads)] + early;
}

// Two tiles in flight: tile k + 1 is copied while tile k is summed.
__global__ void double_buffer_kernel(const float* in, int tiles, float* out) {
  __shared__ __align__(16) float s[2][kThreads];
  const int t = int(threadIdx.x);
  __pipeline_memcpy_async(&s[0][t], &in[t], 4);
  __pipeline_commit();
  float acc = 0;
  for (int k = 0; k < tiles; ++k) {
    if (k + 1 < tiles) __pipeline_memcpy_async(&s[(k + 1) & 1][t], &in[(k + 1) * kThreads + t], 4);
    __pipeline_commit();
    __pipeline_wait_prior(1);  // tile k has landed; tile k + 1 may still be in flight
    __syncthreads();
    acc += s[k & 1][(t + 1) % kThreads];
    __syncthreads();  // the buffer is tile k + 2's next
  }
  out[t] = acc;
}

// 8 of each 16 bytes copied, the rest zero-filled.
__global__ void zfill_kernel(const float* in, float* out) {
  __shared__ __align__(16) float s[4 * kThreads];
  const int t = int(threadIdx.x);
  __pipeline_memcpy_async(&s[4 * t], &in[4 * t], 16, 8);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  for (int k = 0; k < 4; ++k) out[4 * t + k] = s[4 * ((t + 1) % kThreads) + k];
}

// cuda::memcpy_async of 12 bytes a thread through a thread-scope pipeline.
__global__ void pipeline_kernel(const float* in, float* out) {
  __shared__ __align__(16) float s[3 * kThreads];
  const int t = int(threadIdx.x);
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  pipe.producer_acquire();
  cuda::memcpy_async(&s[3 * t], &in[3 * t], 3 * sizeof(float), pipe);
  pipe.producer_commit();
  pipe.consumer_wait();
  __syncthreads();
  for (int k = 0; k < 3; ++k) out[3 * t + k] = s[3 * ((t + 2) % kThreads) + k];
  pipe.consumer_release();
}

#ifdef SIM_EMULATOR  // its test is the emulator's
__global__ void misaligned_kernel(const float* in, float* out) {
  __shared__ __align__(16) float s[8];
  __pipeline_memcpy_async(&s[1], &in[0], 16);  // the destination is 4 bytes off
  __pipeline_commit();
  __pipeline_wait_prior(0);
  out[0] = s[1];
}
#endif

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[std::size_t(i)] = float(i) + 0.5f;
  return v;
}

class SimAsyncCopy : public simtest::SimTest {};

TEST_F(SimAsyncCopy, StagedCopiesMatchPlainLoads) {
  const std::vector<float> h = iota(3 * 4 * kThreads);
  DeviceBuffer<float> in(h), out(3 * 4 * kThreads);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0));
    stage_kernel<<<3, kThreads>>>(in.get(), out.get(), 0);
    ASSERT_LAUNCH_OK();
    const std::vector<float> r = out.download();
    for (int b = 0; b < 3; ++b)
      for (int t = 0; t < kThreads; ++t)
        ASSERT_EQ(r[std::size_t(b * 4 * kThreads + t)], h[std::size_t(b * 4 * kThreads + (4 * t + 4) % (4 * kThreads))])
            << b << " " << t << " " << sched;
  });
}

TEST_F(SimAsyncCopy, DoubleBufferingWithWaitPriorOne) {
  const int tiles = 5;
  const std::vector<float> h = iota(tiles * kThreads);
  DeviceBuffer<float> in(h), out(kThreads);
  simtest::for_each_schedule([&](const std::string& sched) {
    double_buffer_kernel<<<1, kThreads>>>(in.get(), tiles, out.get());
    ASSERT_LAUNCH_OK();
    const std::vector<float> r = out.download();
    for (int t = 0; t < kThreads; ++t) {
      float want = 0;
      for (int k = 0; k < tiles; ++k) want += h[std::size_t(k * kThreads + (t + 1) % kThreads)];
      ASSERT_EQ(r[std::size_t(t)], want) << t << " " << sched;
    }
  });
}

TEST_F(SimAsyncCopy, ZeroFillAndThreadScopePipeline) {
  const std::vector<float> h = iota(4 * kThreads);
  DeviceBuffer<float> in(h), out(4 * kThreads);
  zfill_kernel<<<1, kThreads>>>(in.get(), out.get());
  ASSERT_LAUNCH_OK();
  std::vector<float> r = out.download();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(r[std::size_t(4 * t + k)], k < 2 ? h[std::size_t(4 * ((t + 1) % kThreads) + k)] : 0.0f) << t << " " << k;
  pipeline_kernel<<<1, kThreads>>>(in.get(), out.get());
  ASSERT_LAUNCH_OK();
  r = out.download();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < 3; ++k) ASSERT_EQ(r[std::size_t(3 * t + k)], h[std::size_t(3 * ((t + 2) % kThreads) + k)]);
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

std::string stage_fault(int bug, cudaError_t* e) {
  {
    DeviceBuffer<float> in(iota(4 * kThreads)), out(4 * kThreads);
    stage_kernel<<<1, kThreads>>>(in.get(), out.get(), bug);
    (void)cudaDeviceSynchronize();
  }
  return fault_of(e);
}

TEST_F(SimAsyncCopy, ReadBeforeTheWaitIsAFault) {
  SKIP_WITHOUT_CHECKS();
  cudaError_t e = cudaSuccess;
  const std::string msg = stage_fault(1, &e);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("before the asynchronous copy that writes it completed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("issued it at"), std::string::npos) << msg;
}

TEST_F(SimAsyncCopy, ReadWithoutABarrierAfterTheWaitIsARace) {
  SKIP_WITHOUT_CHECKS();
  cudaError_t e = cudaSuccess;
  const std::string msg = stage_fault(2, &e);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  // Either the neighbour's copy was still pending, or it landed with no barrier between.
  const bool pending = msg.find("before the asynchronous copy") != std::string::npos;
  const bool race = msg.find("shared memory race") != std::string::npos;
  EXPECT_TRUE(pending || race) << msg;
}

TEST_F(SimAsyncCopy, MisalignedCopyFaults) {
  cudaError_t e = cudaSuccess;
  std::string msg;
  {
    DeviceBuffer<float> in(iota(8)), out(1);
    misaligned_kernel<<<1, 1>>>(in.get(), out.get());
    msg = fault_of(&e);
  }
  EXPECT_EQ(e, cudaErrorMisalignedAddress);
  EXPECT_NE(msg.find("which both need 16-byte alignment"), std::string::npos) << msg;
}
#endif

}  // namespace
