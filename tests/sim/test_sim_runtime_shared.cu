// The CUDA runtime API and dynamic shared memory above 48 KiB: up to 48 KiB needs no attribute,
// more is refused (an ordinary, non-sticky launch error) until cudaFuncSetAttribute raises the
// kernel's limit, never above the device's maximum; the same with static shared memory added.
// Valid CUDA (simcc and nvcc).
#include <vector>

#include "sim_runtime_util.h"

namespace {

using simtest::DeviceBuffer;

// Tag makes distinct kernels, so one test's cudaFuncSetAttribute cannot help another test.
template <int Tag>
__global__ void big_dynamic_shared_kernel(float* out, int nfloats) {
  extern __shared__ float big_dyn[];
  for (int i = threadIdx.x; i < nfloats; i += blockDim.x) big_dyn[i] = static_cast<float>(i);
  __syncthreads();
  float acc = 0.0f;
  for (int i = threadIdx.x; i < nfloats; i += blockDim.x) acc += big_dyn[nfloats - 1 - i];
  if (blockIdx.x == 0) out[threadIdx.x] = acc;  // one block writes: blocks are never ordered (global racecheck)
}

std::vector<float> expected_big_sums(int nfloats, int threads) {
  std::vector<float> want(threads, 0.0f);
  for (int t = 0; t < threads; ++t)
    for (int i = t; i < nfloats; i += threads) want[t] += static_cast<float>(nfloats - 1 - i);
  return want;
}

constexpr int kBigThreads = 256;

TEST_F(SimRuntime, DynamicSharedUpTo48KiBNeedsNoAttribute) {
  const int bytes = 48 * 1024, nfloats = bytes / 4;
  DeviceBuffer<float> out(kBigThreads);
  big_dynamic_shared_kernel<0><<<1, kBigThreads, bytes>>>(out.get(), nfloats);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), expected_big_sums(nfloats, kBigThreads));
}

TEST_F(SimRuntime, DynamicSharedAbove48KiBIsRefusedWithoutAttribute) {
  const int bytes = 64 * 1024;
  DeviceBuffer<float> out(kBigThreads);
  ASSERT_CUDA_OK(out.fill_bytes(0));
  big_dynamic_shared_kernel<1><<<1, kBigThreads, bytes>>>(out.get(), bytes / 4);
  EXPECT_NE(cudaGetLastError(), cudaSuccess)
      << "64 KiB of dynamic shared memory accepted without cudaFuncSetAttribute";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(out.download(), std::vector<float>(kBigThreads, 0.0f)) << "the refused kernel ran";
}

TEST_F(SimRuntime, DynamicSharedAbove48KiBAfterFuncSetAttribute) {
  const int bytes = 100 * 1024, nfloats = bytes / 4;
  ASSERT_CUDA_OK(
      cudaFuncSetAttribute(big_dynamic_shared_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  DeviceBuffer<float> out(kBigThreads);
  big_dynamic_shared_kernel<2><<<2, kBigThreads, bytes>>>(out.get(), nfloats);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), expected_big_sums(nfloats, kBigThreads));
  // More than the attribute allows is still refused.
  big_dynamic_shared_kernel<2><<<1, kBigThreads, bytes + 1024>>>(out.get(), nfloats);
  EXPECT_NE(cudaGetLastError(), cudaSuccess) << "launch above the attribute's limit accepted";
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
}

TEST_F(SimRuntime, FuncSetAttributeAboveTheDeviceMaximumFails) {
  EXPECT_NE(cudaFuncSetAttribute(big_dynamic_shared_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 300 * 1024),
            cudaSuccess);
  (void)cudaGetLastError();
#ifdef SIM_EMULATOR
  // The emulator's maximum is the H100's opt-in limit, 232448 bytes, usable in full.
  const int bytes = 232448, nfloats = bytes / 4;
  ASSERT_CUDA_OK(
      cudaFuncSetAttribute(big_dynamic_shared_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  DeviceBuffer<float> out(kBigThreads);
  big_dynamic_shared_kernel<3><<<1, kBigThreads, bytes>>>(out.get(), nfloats);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), expected_big_sums(nfloats, kBigThreads));
  EXPECT_NE(cudaFuncSetAttribute(big_dynamic_shared_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 bytes + 1),
            cudaSuccess);
  (void)cudaGetLastError();
#endif
}

// 16 KiB of static shared memory plus dynamic shared memory.
template <int Tag>
__global__ void static_plus_dynamic_kernel(float* out, int ndyn) {
  __shared__ float fixed_part[4096];
  extern __shared__ float spd_dyn[];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) fixed_part[i] = 1.0f;
  for (int i = threadIdx.x; i < ndyn; i += blockDim.x) spd_dyn[i] = 2.0f;
  __syncthreads();
  float acc = 0.0f;
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) acc += fixed_part[4095 - i];
  for (int i = threadIdx.x; i < ndyn; i += blockDim.x) acc += spd_dyn[ndyn - 1 - i];
  out[threadIdx.x] = acc;
}

constexpr int kSpdDynBytes = 40 * 1024;  // 16 KiB static + 40 KiB dynamic = 56 KiB

// As for launch limits, a refused launch is an ordinary, non-sticky launch error.
TEST_F(SimRuntime, StaticPlusDynamicSharedAbove48KiBIsRefusedWithoutAttribute) {
  DeviceBuffer<float> out(kBigThreads);
  ASSERT_CUDA_OK(out.fill_bytes(0));
  static_plus_dynamic_kernel<0><<<1, kBigThreads, kSpdDynBytes>>>(out.get(), kSpdDynBytes / 4);
  EXPECT_NE(cudaGetLastError(), cudaSuccess)
      << "56 KiB of shared memory accepted without cudaFuncSetAttribute";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the refused launch left a sticky error";
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(out.download(), std::vector<float>(kBigThreads, 0.0f)) << "the refused kernel ran";
}

TEST_F(SimRuntime, StaticPlusDynamicSharedAbove48KiBAfterFuncSetAttribute) {
  const int ndyn = kSpdDynBytes / 4;
  DeviceBuffer<float> out(kBigThreads);
  ASSERT_CUDA_OK(cudaFuncSetAttribute(static_plus_dynamic_kernel<1>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, kSpdDynBytes));
  static_plus_dynamic_kernel<1><<<1, kBigThreads, kSpdDynBytes>>>(out.get(), ndyn);
  ASSERT_LAUNCH_OK();
  const float want = 4096.0f / kBigThreads * 1.0f + static_cast<float>(ndyn / kBigThreads) * 2.0f;
  EXPECT_EQ(out.download(), std::vector<float>(kBigThreads, want));
}

}  // namespace
