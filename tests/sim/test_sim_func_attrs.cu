// Kernel attributes from __launch_bounds__, kernels defined in headers, and the messages of
// refused calls (sim/strict.h, runtime/strict.cpp, runtime/api.cpp, simcc).
// (a) cudaFuncGetAttributes reports a kernel's __launch_bounds__ as maxThreadsPerBlock (1024
//     without), before its first launch too; a kernel template's instantiation from its first
//     launch on (emulator limit). The occupancy call has no active blocks over the bound.
// (b) A kernel defined in a quote-included header (bounded_kernel.cuh) has its bound enforced:
//     simcc rewrites the header like a .cu file.
// (c) In abort mode a call the emulator refuses prints one line, `sim: <call> returned
//     <error>: <why>`, and the program goes on; record mode prints nothing.
// The parts outside #ifdef SIM_EMULATOR are valid CUDA and also build under nvcc.
// Runs in nn_tests (--gtest_filter='SimFuncAttrs*') or alone (link -lgtest_main).
#include <algorithm>
#include <string>
#include <vector>

#include "bounded_kernel.cuh"
#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;
using simtest_header::header_bounded_count;
using simtest_header::kHeaderBound;

class SimFuncAttrs : public simtest::SimTest {};

constexpr int kAttrBound = 96;

__global__ void __launch_bounds__(kAttrBound) attr_never_launched(unsigned* count) {
  atomicAdd(count, 1u);
}
__global__ void __launch_bounds__(kAttrBound, 2) attr_bounded(unsigned* count) { atomicAdd(count, 1u); }
__global__ void attr_unbounded(unsigned* count) { atomicAdd(count, 1u); }
template <int N>
__global__ void __launch_bounds__(N) attr_template(unsigned* count) {
  atomicAdd(count, 1u);
}

template <class K>
int max_threads(K* kernel) {
  cudaFuncAttributes a{};
  EXPECT_EQ(cudaFuncGetAttributes(&a, kernel), cudaSuccess);
  return a.maxThreadsPerBlock;
}

unsigned launch_and_count(void (*kernel)(unsigned*), DeviceBuffer<unsigned>& count, int threads,
                          cudaError_t* launch_error) {
  EXPECT_EQ(cudaMemset(count.get(), 0, count.bytes()), cudaSuccess);
  kernel<<<2, threads>>>(count.get());
  *launch_error = cudaGetLastError();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not sticky";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return count.download()[0];
}

TEST_F(SimFuncAttrs, AttributesReportTheBoundBeforeTheFirstLaunch) {
  EXPECT_EQ(max_threads(attr_never_launched), kAttrBound);
  EXPECT_EQ(max_threads(attr_bounded), kAttrBound) << "(N, minBlocks): the thread bound";
  EXPECT_EQ(max_threads(header_bounded_count), kHeaderBound) << "a kernel defined in a header";
  EXPECT_EQ(max_threads(attr_unbounded), 1024) << "no bounds: the device's limit";
}

TEST_F(SimFuncAttrs, AttributesAfterLaunchesAndWithoutBounds) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  cudaError_t e = cudaSuccess;
  EXPECT_EQ(launch_and_count(attr_bounded, count, kAttrBound, &e), 2u * kAttrBound);
  EXPECT_EQ(e, cudaSuccess);
  EXPECT_EQ(max_threads(attr_bounded), kAttrBound);
  EXPECT_EQ(launch_and_count(attr_unbounded, count, 256, &e), 2u * 256);
  EXPECT_EQ(e, cudaSuccess);
  EXPECT_EQ(max_threads(attr_unbounded), 1024);
#ifdef SIM_EMULATOR
  // Limit: a template instantiation's bound is known from its first launch on.
  EXPECT_EQ(max_threads(attr_template<128>), 1024);
#endif
  EXPECT_EQ(launch_and_count(attr_template<128>, count, 64, &e), 2u * 64);
  EXPECT_EQ(e, cudaSuccess);
  EXPECT_EQ(max_threads(attr_template<128>), 128);
  EXPECT_EQ(launch_and_count(attr_template<128>, count, 129, &e), 0u);
  EXPECT_EQ(e, cudaErrorInvalidValue);
}

TEST_F(SimFuncAttrs, HeaderKernelOverItsBoundIsRefused) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  cudaError_t e = cudaSuccess;
  EXPECT_EQ(launch_and_count(header_bounded_count, count, kHeaderBound + 1, &e), 0u)
      << "no thread of a refused launch may run";
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_EQ(launch_and_count(header_bounded_count, count, kHeaderBound, &e), 2u * kHeaderBound);
  EXPECT_EQ(e, cudaSuccess);
  EXPECT_EQ(launch_and_count(header_bounded_count, count, 1024, &e), 0u);
  EXPECT_EQ(e, cudaErrorInvalidValue);
}

#ifdef SIM_EMULATOR

TEST_F(SimFuncAttrs, OccupancyHasNoBlocksOverTheBound) {
  int n = -1;
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attr_bounded, kAttrBound, 0));
  EXPECT_GT(n, 0);
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attr_bounded, kAttrBound + 32, 0));
  EXPECT_EQ(n, 0);
  ASSERT_CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attr_unbounded, 1024, 0));
  EXPECT_EQ(n, 2);
}

TEST_F(SimFuncAttrs, HeaderKernelRefusalNamesTheHeader) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  sim::set_fault_mode(sim::FaultMode::Abort);  // a refused launch does not abort
  ::testing::internal::CaptureStderr();
  header_bounded_count<<<1, 64>>>(count.get());
  const cudaError_t e = cudaGetLastError();
  const std::string err = ::testing::internal::GetCapturedStderr();
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(err.find("launch of kernel 'header_bounded_count' at "), std::string::npos) << err;
  EXPECT_NE(err.find("test_sim_func_attrs.cu:"), std::string::npos) << err;
  EXPECT_NE(err.find("__launch_bounds__(48) at "), std::string::npos) << err;
  EXPECT_NE(err.find("bounded_kernel.cuh:" + std::to_string(simtest_header::kHeaderBoundsLine)),
            std::string::npos)
      << err;
}

// The calls refused in the test below, each once; returns their errors.
int device_count() {
  int count = 0;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  return count;
}
std::vector<cudaError_t> refused_calls() {
  const int count = device_count();
  auto* bad_stream = reinterpret_cast<cudaStream_t>(0x10);
  auto* bad_event = reinterpret_cast<cudaEvent_t>(0x20);
  return {cudaSetDevice(count),
          cudaStreamSynchronize(bad_stream),
          cudaEventDestroy(bad_event),
          cudaFuncSetAttribute(attr_bounded, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 20)};
}
const std::vector<cudaError_t> kRefusedErrors = {cudaErrorInvalidDevice, cudaErrorInvalidResourceHandle,
                                                 cudaErrorInvalidResourceHandle, cudaErrorInvalidValue};

TEST_F(SimFuncAttrs, RefusedCallsPrintOneLineEachInAbortModeOnly) {
  sim::set_fault_mode(sim::FaultMode::Abort);  // refused calls do not abort
  ::testing::internal::CaptureStderr();
  const std::vector<cudaError_t> errors = refused_calls();
  const std::string err = ::testing::internal::GetCapturedStderr();
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_EQ(errors, kRefusedErrors);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "the last refusal";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not sticky";
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 4) << err;
  EXPECT_NE(err.find("sim: cudaSetDevice returned cudaErrorInvalidDevice: device " +
                     std::to_string(device_count()) + " does not exist"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("sim: cudaStreamSynchronize returned cudaErrorInvalidResourceHandle: stream "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("sim: cudaEventDestroy returned cudaErrorInvalidResourceHandle: event "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("sim: cudaFuncSetAttribute returned cudaErrorInvalidValue: "
                     "cudaFuncAttributeMaxDynamicSharedMemorySize = 1048576"),
            std::string::npos)
      << err;
  int device = -1;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0) << "the current device is unchanged";

  ::testing::internal::CaptureStderr();  // record mode (the tests' mode): the same errors, silently
  EXPECT_EQ(refused_calls(), kRefusedErrors);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  (void)cudaGetLastError();
}

TEST_F(SimFuncAttrs, OverTheLimitsPrintsOneLineInAbortMode) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  sim::set_fault_mode(sim::FaultMode::Abort);  // a refused launch does not abort
  ::testing::internal::CaptureStderr();
  attr_unbounded<<<1, 1025>>>(count.get());
  const cudaError_t e = cudaGetLastError();
  const std::string err = ::testing::internal::GetCapturedStderr();
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(err.find("sim: launch of kernel 'attr_unbounded' at "), std::string::npos) << err;
  EXPECT_NE(err.find(" refused (cudaErrorInvalidValue): 1025 threads per block, over the "
                     "limit of 1024"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

#endif  // SIM_EMULATOR

}  // namespace
