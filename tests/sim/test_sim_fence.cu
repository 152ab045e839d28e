// Device memory fenced from host code, and out-of-bounds writes (sim/runtime/devmem.cpp):
// a host read or write of cudaMalloc memory dies naming the allocation, as a GPU program
// segfaults; pinned and managed memory stay host memory; kernels, copies and memsets reach
// device memory (also through pointers a launch cannot translate); red zones report writes
// past either end, naming the kernel; far accesses hit guard pages. Emulator-only.
#include <cstring>
#include <string>
#include <vector>

#include "sim_test_util.h"

#ifdef SIM_EMULATOR

namespace {

using simtest::contains;
using simtest::DeviceBuffer;

class SimFence : public simtest::SimTest {};

// Under AddressSanitizer (make test SANITIZE=1) the red zones are poisoned, so ASan itself
// reports these deliberate out-of-bounds writes and ends the run; examples/verify.sh checks that.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() GTEST_SKIP() << "ASan reports the write itself (see examples/verify.sh)"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif
using SimFenceDeathTest = SimFence;

struct Span {  // a device pointer inside a struct argument: the launch cannot translate it
  float* p;
  int n;
};
__global__ void fill_span_kernel(Span s, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < s.n) s.p[i] = v + static_cast<float>(i);
}
__global__ void fill_kernel(float* p, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
// Follows a table of device pointers stored in device memory.
__global__ void gather_kernel(float* const* table, int tables, float* out) {
  const int t = threadIdx.x;
  if (t < tables) out[t] = table[t][t];
}
__global__ void write_at_kernel(float* p, long long i, float v) {
  if (threadIdx.x == 0) p[i] = v;
}
__global__ void unguarded_kernel(float* p) { p[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }

TEST_F(SimFenceDeathTest, HostReadOfDeviceMemoryDiesNamingTheAllocation) {
  GTEST_FLAG_SET(death_test_style, "fast");
  sim::set_fault_mode(sim::FaultMode::Abort);
  DeviceBuffer<float> d(std::vector<float>(16, 1.0f));
  float* p = d.get();
  EXPECT_DEATH(
      {
        volatile float x = p[3];
        (void)x;
      },
      "host code read device memory at 0x[0-9a-f]+, byte 12 of cudaMalloc allocation 0x[0-9a-f]+ "
      "\\(64 bytes\\): device memory is not host memory");
  sim::set_fault_mode(sim::FaultMode::Record);
}

TEST_F(SimFenceDeathTest, HostWriteOfDeviceMemoryDies) {
  GTEST_FLAG_SET(death_test_style, "fast");
  sim::set_fault_mode(sim::FaultMode::Abort);
  DeviceBuffer<int> d(4);
  int* p = d.get();
  EXPECT_DEATH({ p[0] = 1; }, "host code wrote device memory");
  // A plain host copy (what a first GPU program often does instead of cudaMemcpy) too.
  std::vector<int> h(4, 7);
  EXPECT_DEATH({ std::memcpy(p, h.data(), 16); }, "host code wrote device memory");
  sim::set_fault_mode(sim::FaultMode::Record);
}

TEST_F(SimFenceDeathTest, StillFencedAfterAKernelOpenedTheHostView) {
  GTEST_FLAG_SET(death_test_style, "fast");
  DeviceBuffer<float> d(64);
  fill_span_kernel<<<2, 32>>>(Span{d.get(), 64}, 1.0f);  // opens the host view during the launch
  ASSERT_LAUNCH_OK();
  sim::set_fault_mode(sim::FaultMode::Abort);
  float* p = d.get();
  EXPECT_DEATH(
      {
        volatile float x = p[0];
        (void)x;
      },
      "host code read device memory");
  sim::set_fault_mode(sim::FaultMode::Record);
}

TEST_F(SimFence, PinnedAndManagedMemoryStayHostMemory) {
  float* pinned = nullptr;
  float* managed = nullptr;
  ASSERT_CUDA_OK(cudaMallocHost(&pinned, 8 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMallocManaged(&managed, 8 * sizeof(float)));
  for (int i = 0; i < 8; ++i) pinned[i] = managed[i] = -1.0f;  // host access is fine
  fill_kernel<<<1, 8>>>(managed, 8, 3.0f);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(managed[7], 3.0f);
  EXPECT_EQ(sim::device_view(pinned), pinned);
  EXPECT_EQ(sim::device_view(managed), managed);
  ASSERT_CUDA_OK(cudaFreeHost(pinned));
  ASSERT_CUDA_OK(cudaFree(managed));
}

TEST_F(SimFence, KernelsCopiesAndMemsetsReachDeviceMemory) {
  DeviceBuffer<float> a(32), b(32);
  ASSERT_CUDA_OK(cudaMemset(a.get(), 0, a.bytes()));
  fill_kernel<<<1, 16>>>(a.get(), 16, 2.0f);
  ASSERT_LAUNCH_OK();
  ASSERT_CUDA_OK(cudaMemcpy(b.get(), a.get(), a.bytes(), cudaMemcpyDeviceToDevice));
  std::vector<float> want(32, 0.0f);
  std::fill(want.begin(), want.begin() + 16, 2.0f);
  EXPECT_EQ(b.download(), want);
  // 2-D copy: 4 rows of 3 floats with pitch 8 floats, out of b into a host matrix.
  std::vector<float> h(12, -1.0f);
  ASSERT_CUDA_OK(cudaMemcpy2D(h.data(), 3 * sizeof(float), b.get(), 8 * sizeof(float),
                              3 * sizeof(float), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h, (std::vector<float>{2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}));
  // The device view is another address, and the kernel's view of the pointer.
  EXPECT_NE(sim::device_view(a.get()), static_cast<void*>(a.get()));
  EXPECT_EQ(sim::device_view(sim::device_view(a.get())), sim::device_view(a.get()));
}

TEST_F(SimFence, PointersTheLaunchCannotTranslateStillWork) {
  DeviceBuffer<float> a(40), b(40), out(2);
  fill_span_kernel<<<2, 32>>>(Span{a.get(), 40}, 10.0f);  // pointer inside a struct
  ASSERT_LAUNCH_OK();
  std::vector<float> want(40);
  for (int i = 0; i < 40; ++i) want[i] = 10.0f + static_cast<float>(i);
  EXPECT_EQ(a.download(), want);
  ASSERT_CUDA_OK(b.upload(want));
  // A table of device pointers in device memory, as the host wrote them.
  float* table_host[2] = {a.get(), b.get()};
  DeviceBuffer<float*> table(2);
  ASSERT_CUDA_OK(cudaMemcpy(table.get(), table_host, sizeof table_host, cudaMemcpyHostToDevice));
  gather_kernel<<<1, 2>>>(table.get(), 2, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), (std::vector<float>{10.0f, 11.0f}));
}

TEST_F(SimFence, WriteOnePastTheEndIsReportedNamingKernelAndAllocation) {
  SKIP_UNDER_ASAN();
  DeviceBuffer<float> d(100);
  unguarded_kernel<<<1, 101>>>(d.get());  // the classic missing `if (i < n)`
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  const std::string f = sim::last_fault();
  EXPECT_TRUE(contains(f, "kernel 'unguarded_kernel'")) << f;
  EXPECT_TRUE(contains(f, "400 bytes")) << f;
  EXPECT_TRUE(contains(f, "4 bytes past its end")) << f;
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", static_cast<void*>(d.get()));
  EXPECT_TRUE(contains(f, addr)) << f << " should name " << addr;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);  // sticky, as on a GPU
  sim::reset();
}

TEST_F(SimFence, WriteBeforeTheStartIsReported) {
  SKIP_UNDER_ASAN();
  DeviceBuffer<double> d(8);
  write_at_kernel<<<1, 1>>>(reinterpret_cast<float*>(d.get()), -3, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(sim::last_fault(), "12 bytes before its start")) << sim::last_fault();
  sim::reset();
}

TEST_F(SimFence, OutOfBoundsWriteThroughAStructIsFoundAtTheNextSync) {
  SKIP_UNDER_ASAN();
  DeviceBuffer<float> d(10);
  fill_span_kernel<<<1, 32>>>(Span{d.get(), 11}, 0.0f);  // n one too large
  ASSERT_CUDA_OK(cudaGetLastError());  // the launch itself cannot see it ...
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);  // ... the sync does
  EXPECT_TRUE(contains(sim::last_fault(), "found at cudaDeviceSynchronize")) << sim::last_fault();
  sim::reset();
}

TEST_F(SimFence, OutOfBoundsWriteIsFoundAtCudaFree) {
  SKIP_UNDER_ASAN();
  float* p = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&p, 10 * sizeof(float)));
  fill_span_kernel<<<1, 32>>>(Span{p, 12}, 0.0f);
  ASSERT_CUDA_OK(cudaGetLastError());
  EXPECT_CUDA_OK(cudaFree(p));
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(sim::last_fault(), "found at its cudaFree")) << sim::last_fault();
  sim::reset();
}

TEST_F(SimFence, InBoundsWorkLeavesNoFault) {
  DeviceBuffer<float> d(1000);
  for (int rep = 0; rep < 3; ++rep) {
    fill_kernel<<<4, 256>>>(d.get(), 1000, static_cast<float>(rep));
    ASSERT_LAUNCH_OK();
  }
  EXPECT_EQ(d.download(), std::vector<float>(1000, 2.0f));
}

TEST_F(SimFenceDeathTest, FarOutOfBoundsAccessHitsAGuardPage) {
  SKIP_UNDER_ASAN();
  GTEST_FLAG_SET(death_test_style, "fast");
  DeviceBuffer<float> d(16);
  float* p = d.get();
  EXPECT_DEATH(
      {
        write_at_kernel<<<1, 1>>>(p, 1000, 1.0f);  // into the guard page after the red zone
        (void)cudaDeviceSynchronize();
      },
      "kernel 'write_at_kernel' \\(launched at .*\\): out-of-bounds write of global memory .*"
      "past the end of cudaMalloc allocation");
  EXPECT_DEATH(
      {
        write_at_kernel<<<1, 1>>>(p, -100, 1.0f);  // the guard page before it
        (void)cudaDeviceSynchronize();
      },
      "kernel 'write_at_kernel' .*before the start of cudaMalloc allocation");
}

}  // namespace

#endif  // SIM_EMULATOR
