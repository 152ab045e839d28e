// Positive tests of the CUDA runtime API, error paths included: devices, error strings and
// last-error state, memory, memset, streams, events, pinned memory, launch limits (dynamic shared
// memory above 48 KiB: test_sim_runtime_shared.cu). Valid CUDA (simcc and nvcc); runs in nn_tests
// or alone (link -lgtest_main, with test_sim_runtime_shared.cu).
#include <cstring>
#include <string>
#include <vector>

#include "sim_runtime_util.h"

namespace {

using simtest::DeviceBuffer;

__global__ void fill_kernel(int* out, int n, int value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + i;
}

__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }

__global__ void busy_kernel(float* data, int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = data[i];
  for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
  data[i] = v;
}

int read_counter(const DeviceBuffer<int>& c) { return c.download()[0]; }

// ---- devices -------------------------------------------------------------------------------------

TEST_F(SimRuntime, DeviceCountSetGetAndProperties) {
  int count = -1;
  ASSERT_CUDA_OK(cudaGetDeviceCount(&count));
  ASSERT_GE(count, 1);
  ASSERT_CUDA_OK(cudaSetDevice(0));
  int dev = -1;
  ASSERT_CUDA_OK(cudaGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof prop);
  ASSERT_CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  EXPECT_GT(std::strlen(prop.name), 0u);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.maxThreadsDim[0], 1024);
  EXPECT_EQ(prop.maxThreadsDim[1], 1024);
  EXPECT_EQ(prop.maxThreadsDim[2], 64);
  EXPECT_EQ(prop.maxGridSize[1], 65535);
  EXPECT_EQ(prop.maxGridSize[2], 65535);
  EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024u);
#ifdef SIM_EMULATOR
  EXPECT_TRUE(simtest::contains(simtest::lower(prop.name), "emulator")) << "device name: " << prop.name;
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 232448u);
#endif
}

TEST_F(SimRuntime, SetDeviceOutOfRangeIsInvalidDevice) {
  int count = 0;
  ASSERT_CUDA_OK(cudaGetDeviceCount(&count));
  const int bad = count <= 5 ? 5 : count;  // 5 on the emulator's single device
  EXPECT_EQ(cudaSetDevice(bad), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int dev = -1;
  ASSERT_CUDA_OK(cudaGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  cudaDeviceProp prop;
  EXPECT_EQ(cudaGetDeviceProperties(&prop, bad), cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  // Not sticky: the device still works.
  DeviceBuffer<int> out(8);
  fill_kernel<<<1, 8>>>(out.get(), 8, 100);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[7], 107);
}

// ---- errors ---------------------------------------------------------------------------------------

TEST_F(SimRuntime, ErrorStringsAreNonEmptyAndDistinct) {
  const cudaError_t codes[] = {cudaSuccess,
                               cudaErrorInvalidValue,
                               cudaErrorMemoryAllocation,
                               cudaErrorInvalidDevice,
                               cudaErrorInvalidConfiguration,
                               cudaErrorLaunchFailure,
                               cudaErrorIllegalAddress};
  std::vector<std::string> seen;
  for (const cudaError_t e : codes) {
    const char* s = cudaGetErrorString(e);
    ASSERT_NE(s, nullptr) << "code " << static_cast<int>(e);
    EXPECT_GT(std::strlen(s), 0u) << "code " << static_cast<int>(e);
    for (const auto& other : seen) EXPECT_NE(other, s) << "code " << static_cast<int>(e);
    seen.emplace_back(s);
  }
}

// What CUDA 13.0's runtime answers for a launch over the limits, measured on an H200 (driver
// 580.159.04, sim/docs/faults.md): cudaErrorInvalidValue, where older runtimes say
// cudaErrorInvalidConfiguration. The emulator answers the same.
constexpr cudaError_t kLaunchConfigError = cudaErrorInvalidValue;

TEST_F(SimRuntime, GetLastErrorClearsPeekDoesNot) {
  DeviceBuffer<int> counter(1);
  ASSERT_CUDA_OK(counter.fill_bytes(0));
  ASSERT_EQ(cudaPeekAtLastError(), cudaSuccess);
  count_kernel<<<1, 2048>>>(counter.get());  // too many threads per block
  EXPECT_EQ(cudaPeekAtLastError(), kLaunchConfigError);
  EXPECT_EQ(cudaPeekAtLastError(), kLaunchConfigError);
  EXPECT_EQ(cudaGetLastError(), kLaunchConfigError);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(read_counter(counter), 0);
}

// ---- memory ---------------------------------------------------------------------------------------

TEST_F(SimRuntime, MallocMemcpyRoundTrip) {
  const int n = 1000;
  std::vector<float> h(n), back(n, -1.0f);
  for (int i = 0; i < n; ++i) h[i] = 0.125f * i - 7.0f;
  float* a = nullptr;  // typed cudaMalloc(T**, size_t)
  ASSERT_CUDA_OK(cudaMalloc(&a, n * sizeof(float)));
  void* b = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&b, n * sizeof(float)));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_CUDA_OK(cudaMemcpy(a, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  EXPECT_CUDA_OK(cudaMemcpy(b, a, n * sizeof(float), cudaMemcpyDeviceToDevice));
  EXPECT_CUDA_OK(cudaMemcpy(back.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, h);
  // Copies into the middle of an allocation.
  EXPECT_CUDA_OK(
      cudaMemcpy(static_cast<float*>(b) + 10, h.data() + 500, 20 * sizeof(float), cudaMemcpyHostToDevice));
  EXPECT_CUDA_OK(cudaMemcpy(back.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], (i >= 10 && i < 30) ? h[i + 490] : h[i]) << i;
  EXPECT_CUDA_OK(cudaFree(a));
  EXPECT_CUDA_OK(cudaFree(b));
  EXPECT_CUDA_OK(cudaFree(nullptr));
}

TEST_F(SimRuntime, MemsetSetsBytes) {
  const int n = 64;
  DeviceBuffer<int> d(n);
  ASSERT_CUDA_OK(cudaMemset(d.get(), 0x3F, n * sizeof(int)));
  ASSERT_CUDA_OK(cudaMemset(d.get() + 10, 0, 20 * sizeof(int)));
  ASSERT_CUDA_OK(cudaMemset(d.get() + 40, 0x1, 1));  // one byte of element 40
  const auto h = d.download();
  for (int i = 0; i < n; ++i) {
    int want = 0x3F3F3F3F;
    if (i >= 10 && i < 30) want = 0;
    if (i == 40) want = 0x3F3F3F01;  // little-endian: the first byte is the lowest
    ASSERT_EQ(h[i], want) << i;
  }
}

TEST_F(SimRuntime, StreamAsyncCopiesMemsetAndKernel) {
  const int n = 300;
  int* pinned_in = nullptr;
  int* pinned_out = nullptr;
  ASSERT_CUDA_OK(cudaMallocHost(&pinned_in, n * sizeof(int)));
  ASSERT_CUDA_OK(cudaMallocHost(&pinned_out, n * sizeof(int)));
  for (int i = 0; i < n; ++i) {
    pinned_in[i] = 3 * i;
    pinned_out[i] = -1;
  }
  cudaStream_t stream;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  DeviceBuffer<int> a(n), b(n);
  EXPECT_CUDA_OK(cudaMemsetAsync(b.get(), 0, n * sizeof(int), stream));
  EXPECT_CUDA_OK(cudaMemcpyAsync(a.get(), pinned_in, n * sizeof(int), cudaMemcpyHostToDevice, stream));
  fill_kernel<<<(n / 2 + 63) / 64, 64, 0, stream>>>(b.get(), n / 2, 1000);  // first half of b
  EXPECT_CUDA_OK(cudaGetLastError());
  EXPECT_CUDA_OK(cudaMemcpyAsync(pinned_out, b.get(), n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) ASSERT_EQ(pinned_out[i], i < n / 2 ? 1000 + i : 0) << i;
  EXPECT_CUDA_OK(cudaMemcpyAsync(pinned_out, a.get(), n * sizeof(int), cudaMemcpyDeviceToHost, stream));
  EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) ASSERT_EQ(pinned_out[i], 3 * i) << i;
  EXPECT_CUDA_OK(cudaStreamDestroy(stream));
  EXPECT_CUDA_OK(cudaFreeHost(pinned_in));
  EXPECT_CUDA_OK(cudaFreeHost(pinned_out));
}

TEST_F(SimRuntime, EventsMeasureNonNegativeElapsedTime) {
  const int n = 4096;
  DeviceBuffer<float> d(n);
  ASSERT_CUDA_OK(d.fill_bytes(0));
  cudaStream_t stream;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  ASSERT_CUDA_OK(cudaEventCreate(&start));
  ASSERT_CUDA_OK(cudaEventCreate(&stop));
  EXPECT_CUDA_OK(cudaEventRecord(start, stream));
  busy_kernel<<<n / 256, 256, 0, stream>>>(d.get(), n, 50);
  EXPECT_CUDA_OK(cudaGetLastError());
  EXPECT_CUDA_OK(cudaEventRecord(stop, stream));
  EXPECT_CUDA_OK(cudaEventSynchronize(stop));
  float ms = -1.0f;
  EXPECT_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 0.0f);
  // The same on the default stream.
  EXPECT_CUDA_OK(cudaEventRecord(start, 0));
  busy_kernel<<<n / 256, 256>>>(d.get(), n, 10);
  EXPECT_CUDA_OK(cudaEventRecord(stop, 0));
  EXPECT_CUDA_OK(cudaEventSynchronize(stop));
  ms = -1.0f;
  EXPECT_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 0.0f);
  EXPECT_CUDA_OK(cudaEventDestroy(start));
  EXPECT_CUDA_OK(cudaEventDestroy(stop));
  EXPECT_CUDA_OK(cudaStreamDestroy(stream));
}

TEST_F(SimRuntime, PinnedHostMemoryIsAKernelArgument) {
  const int n = 200;
  int* pinned = nullptr;
  ASSERT_CUDA_OK(cudaMallocHost(&pinned, n * sizeof(int)));
  int* host_alloc = nullptr;
  ASSERT_CUDA_OK(cudaHostAlloc(&host_alloc, n * sizeof(int), cudaHostAllocDefault));
  fill_kernel<<<4, 64>>>(pinned, n, 7);
  fill_kernel<<<4, 64>>>(host_alloc, n, -50);
  ASSERT_LAUNCH_OK();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(pinned[i], 7 + i) << i;
    ASSERT_EQ(host_alloc[i], -50 + i) << i;
  }
  // Pinned memory as a copy source, too.
  DeviceBuffer<int> d(n);
  EXPECT_CUDA_OK(cudaMemcpy(d.get(), pinned, n * sizeof(int), cudaMemcpyHostToDevice));
  EXPECT_EQ(d.download()[n - 1], 7 + n - 1);
  EXPECT_CUDA_OK(cudaFreeHost(pinned));
  EXPECT_CUDA_OK(cudaFreeHost(host_alloc));
}

TEST_F(SimRuntime, DeviceSynchronizeAndReset) {
  {
    DeviceBuffer<int> d(16);
    fill_kernel<<<1, 16>>>(d.get(), 16, 1);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(d.download()[15], 16);
  }
  EXPECT_CUDA_OK(cudaDeviceReset());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The device is usable again after a reset.
  DeviceBuffer<int> d(16);
  ASSERT_CUDA_OK(d.status());
  fill_kernel<<<1, 16>>>(d.get(), 16, 2);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(d.download()[15], 17);
}

// ---- launch limits --------------------------------------------------------------------------------

struct BadConfig {
  const char* what;
  dim3 grid;
  dim3 block;
};

TEST_F(SimRuntime, LaunchLimitViolationsAreRefused) {
  const BadConfig bad[] = {
      {"1025 threads per block", dim3(1), dim3(1025)},
      {"2048 threads in a 32x32x2 block", dim3(1), dim3(32, 32, 2)},
      {"block y of 1025", dim3(1), dim3(1, 1025, 1)},
      {"block z of 65", dim3(1), dim3(1, 1, 65)},
      {"zero threads per block", dim3(1), dim3(0, 1, 1)},
      {"zero blocks", dim3(0, 1, 1), dim3(32)},
      {"grid y of 65536", dim3(1, 65536, 1), dim3(1)},
      {"grid z of 65536", dim3(1, 1, 65536), dim3(1)},
  };
  DeviceBuffer<int> counter(1);
  ASSERT_CUDA_OK(counter.fill_bytes(0));
  for (const auto& c : bad) {
    SCOPED_TRACE(c.what);
    count_kernel<<<c.grid, c.block>>>(counter.get());
    EXPECT_EQ(cudaGetLastError(), kLaunchConfigError);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());  // a configuration error is not sticky
    EXPECT_EQ(read_counter(counter), 0) << "the kernel ran";
  }
}

TEST_F(SimRuntime, LaunchesAtTheLimitsRun) {
  DeviceBuffer<int> counter(1);
  ASSERT_CUDA_OK(counter.fill_bytes(0));
  count_kernel<<<1, 1024>>>(counter.get());
  count_kernel<<<dim3(1), dim3(32, 32, 1)>>>(counter.get());
  count_kernel<<<dim3(1), dim3(1, 1, 64)>>>(counter.get());
  count_kernel<<<dim3(2, 3, 4), dim3(2, 2, 2)>>>(counter.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(read_counter(counter), 1024 + 1024 + 64 + 24 * 8);
}

}  // namespace
