// CUDA Graphs through stream capture: recorded, not run, while capturing; replayed in order
// with the arguments as captured; synchronous calls and legacy-stream launches during a
// global capture are refused and invalidate it, as on a GPU. Valid CUDA (simcc and nvcc).
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

class SimGraph : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    ASSERT_CUDA_OK(cudaStreamCreate(&s_));
  }
  void TearDown() override {
    (void)cudaGetLastError();
    cudaStreamDestroy(s_);
    simtest::SimTest::TearDown();
  }
  cudaStream_t s_ = nullptr;
};

__global__ void add_kernel(int* v, int n, int amount) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] += amount;
}
__global__ void scale_kernel(int* v, int n, int factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] *= factor;
}

TEST_F(SimGraph, CapturedWorkRunsOnlyAtEachLaunchInCaptureOrder) {
  const int n = 100;
  DeviceBuffer<int> v(std::vector<int>(n, 1));
  ASSERT_CUDA_OK(v.status());
  std::vector<int> host(n, -1);
  int amount = 2;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  ASSERT_CUDA_OK(cudaStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, cudaStreamCaptureStatusActive);
  add_kernel<<<1, 128, 0, s_>>>(v.get(), n, amount);    // v = 1 + 2
  scale_kernel<<<4, 32, 0, s_>>>(v.get(), n, 10);       // v = 30
  amount = 1000;                                          // arguments were taken at capture
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost, s_));
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(s_, &g));
  ASSERT_NE(g, nullptr);
  size_t nodes = 0;
  ASSERT_CUDA_OK(cudaGraphGetNodes(g, nullptr, &nodes));
  EXPECT_EQ(nodes, 3u);
  // Nothing ran during the capture.
  EXPECT_EQ(v.download(), std::vector<int>(n, 1));
  EXPECT_EQ(host, std::vector<int>(n, -1));
  cudaGraphExec_t x = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, s_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(s_));
  EXPECT_EQ(host, std::vector<int>(n, 30));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, s_));  // (30 + 2) * 10
  ASSERT_CUDA_OK(cudaStreamSynchronize(s_));
  EXPECT_EQ(host, std::vector<int>(n, 320));
  EXPECT_CUDA_OK(cudaGraphExecDestroy(x));
  EXPECT_CUDA_OK(cudaGraphDestroy(g));
}

TEST_F(SimGraph, SynchronousCopyDuringGlobalCaptureIsRefusedAndInvalidates) {
  DeviceBuffer<int> v(std::vector<int>(8, 0));
  std::vector<int> host(8, 5);
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  add_kernel<<<1, 8, 0, s_>>>(v.get(), 8, 1);
  // Work on the legacy stream during a global capture: CUDA 13.0 answers
  // cudaErrorStreamCaptureImplicit (an H200: sim/docs/faults.md), not ...Unsupported.
  EXPECT_EQ(cudaMemcpy(v.get(), host.data(), 8 * sizeof(int), cudaMemcpyHostToDevice),
            cudaErrorStreamCaptureImplicit);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  ASSERT_CUDA_OK(cudaStreamIsCapturing(s_, &st));
  EXPECT_EQ(st, cudaStreamCaptureStatusInvalidated);
  cudaGraph_t g = reinterpret_cast<cudaGraph_t>(0x1);
  EXPECT_EQ(cudaStreamEndCapture(s_, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  (void)cudaGetLastError();
  EXPECT_EQ(v.download(), std::vector<int>(8, 0));  // neither the kernel nor the copy ran
}

TEST_F(SimGraph, LegacyStreamLaunchDuringGlobalCaptureIsRefused) {
  DeviceBuffer<int> v(std::vector<int>(8, 0));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  add_kernel<<<1, 8>>>(v.get(), 8, 1);  // default stream: would depend on the capture
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureImplicit);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s_, &g), cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  EXPECT_EQ(v.download(), std::vector<int>(8, 0));
}

TEST_F(SimGraph, OtherStreamsRunAtOnceAndRelaxedModeAllowsAllocation) {
  cudaStream_t other = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&other));
  DeviceBuffer<int> v(std::vector<int>(8, 0));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeRelaxed));
  add_kernel<<<1, 8, 0, other>>>(v.get(), 8, 4);  // not captured: runs now
  ASSERT_CUDA_OK(cudaGetLastError());
  int* extra = nullptr;
  EXPECT_CUDA_OK(cudaMalloc(&extra, 16));  // relaxed mode permits it
  EXPECT_CUDA_OK(cudaFree(extra));
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(s_, &g));
  size_t nodes = 99;
  ASSERT_CUDA_OK(cudaGraphGetNodes(g, nullptr, &nodes));
  EXPECT_EQ(nodes, 0u);
  EXPECT_EQ(v.download(), std::vector<int>(8, 4));
  EXPECT_CUDA_OK(cudaGraphDestroy(g));
  EXPECT_CUDA_OK(cudaStreamDestroy(other));
}

TEST_F(SimGraph, CaptureNeedsANonLegacyStreamAndOneCaptureAtATime) {
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_NE(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal), cudaSuccess);
  (void)cudaGetLastError();
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(s_, &g));
  EXPECT_CUDA_OK(cudaGraphDestroy(g));
  EXPECT_NE(cudaStreamEndCapture(s_, &g), cudaSuccess);  // no capture in progress
  (void)cudaGetLastError();
}

}  // namespace
