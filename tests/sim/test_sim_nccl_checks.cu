// The emulator's NCCL, what it refuses and reports: another stream writing an all-reduce's
// buffers or reading its result before the all-reduce's stream reached it (record mode: the
// fault names ncclAllReduce), two ranks on one device ("Duplicate GPU detected"), out-of-range
// ranks, unemulated types and host buffers, capture, ncclCommAbort (no wait: the queued
// all-reduce is abandoned) and ncclCommDestroy. Any rank count (make test: 1..4). Emulator only.
#include "sim_nccl_util.h"

#ifdef SIM_EMULATOR
#include <string>
#include <thread>
#include <vector>

#include "sim_checks_util.h"

namespace {

using simtest::contains;
using simtest::DeviceBuffer;

__global__ void set_kernel(float* v, int n, float x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = x;
}
__global__ void read_kernel(const float* v, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v[i] * 2.0f;
}

class SimNcclChecks : public SimNccl {
 protected:
  void SetUp() override {
    SimNccl::SetUp();
    saved_initcheck_ = sim::initcheck();
    sim::set_initcheck(true);
    ASSERT_CUDA_OK(cudaStreamCreate(&other_));
  }
  void TearDown() override {
    if (!reset_) {
      EXPECT_CUDA_OK(cudaStreamDestroy(other_));
    }
    sim::set_initcheck(saved_initcheck_);
    SimNccl::TearDown();
  }
  // The fault the last step recorded, then cleared (and the streams with it).
  std::string take_fault() {
    const std::string f = sim::last_fault();
    clear_fault();
    return f;
  }
  cudaStream_t other_ = nullptr;
  bool saved_initcheck_ = true;
};

TEST_F(SimNcclChecks, WriteToSendBufferWhilePendingIsReported) {
  const int n = 512;
  DeviceBuffer<float> send(std::vector<float>(n, 1.0f)), recv(n);
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), recv.get(), n, ncclFloat, ncclSum, comm_, stream_));
  set_kernel<<<4, 128, 0, other_>>>(send.get(), n, 7.0f);  // no wait for the all-reduce
  ASSERT_CUDA_OK(cudaStreamSynchronize(other_));
  EXPECT_EQ(sim::last_fault(), "");
  (void)cudaStreamSynchronize(stream_);  // the all-reduce's item finds its send bytes changed
  const std::string f = take_fault();
  EXPECT_TRUE(contains(f, "ncclAllReduce(")) << f;
  EXPECT_TRUE(contains(f, "its send buffer was written (byte 2 changed)")) << f;
  EXPECT_TRUE(contains(f, "test_sim_nccl_checks.cu:")) << f;
}

TEST_F(SimNcclChecks, WriteToRecvBufferWhilePendingIsReported) {
  const int n = 512;
  DeviceBuffer<float> send(std::vector<float>(n, 1.0f)), recv(std::vector<float>(n, 0.0f));
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), recv.get(), n, ncclFloat, ncclSum, comm_, stream_));
  ASSERT_CUDA_OK(cudaMemsetAsync(recv.get() + 100, 0x3f, 16, other_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(other_));
  (void)cudaStreamSynchronize(stream_);
  const std::string f = take_fault();
  EXPECT_TRUE(contains(f, "its receive buffer was written (byte 400 changed)")) << f;
}

TEST_F(SimNcclChecks, KernelReadingResultBeforeItRanIsReported) {
  SKIP_WITHOUT_CHECKS();
  const int n = 256;
  DeviceBuffer<float> buf(std::vector<float>(n, 1.0f)), out(n);
  ASSERT_NCCL_OK(ncclAllReduce(buf.get(), buf.get(), n, ncclFloat, ncclSum, comm_, stream_));
  read_kernel<<<2, 128, 0, other_>>>(buf.get(), n, out.get());  // no wait for the all-reduce
  (void)cudaStreamSynchronize(other_);
  const std::string f = sim::last_fault();
  EXPECT_TRUE(contains(f, "before the collective that writes it ran")) << f;
  EXPECT_TRUE(contains(f, "ncclAllReduce(")) << f;
  EXPECT_TRUE(contains(f, "kernel 'read_kernel'")) << f;
  (void)cudaStreamSynchronize(stream_);  // the MPI side completes on every rank
  clear_fault();
}

TEST_F(SimNcclChecks, QueuedCopyOfResultBeforeItRanIsReported) {
  const int n = 256;
  DeviceBuffer<float> send(std::vector<float>(n, 1.0f)), recv(n), copy(n);
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), recv.get(), n, ncclFloat, ncclSum, comm_, stream_));
  ASSERT_CUDA_OK(cudaMemcpyAsync(copy.get(), recv.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, other_));
  (void)cudaStreamSynchronize(other_);
  const std::string f = sim::last_fault();
  EXPECT_TRUE(contains(f, "cudaMemcpyAsync read device memory")) << f;
  EXPECT_TRUE(contains(f, "ncclAllReduce(")) << f;
  (void)cudaStreamSynchronize(stream_);
  clear_fault();
}

TEST_F(SimNcclChecks, OrderedAccessIsNotReported) {
  const int n = 256;
  DeviceBuffer<float> buf(std::vector<float>(n, 1.0f)), out(n);
  cudaEvent_t done;
  ASSERT_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ASSERT_NCCL_OK(ncclAllReduce(buf.get(), buf.get(), n, ncclFloat, ncclSum, comm_, stream_));
  ASSERT_CUDA_OK(cudaEventRecord(done, stream_));
  ASSERT_CUDA_OK(cudaStreamWaitEvent(other_, done, 0));
  read_kernel<<<2, 128, 0, other_>>>(buf.get(), n, out.get());
  set_kernel<<<2, 128, 0, other_>>>(buf.get(), n, 3.0f);
  ASSERT_CUDA_OK(cudaStreamSynchronize(other_));
  EXPECT_EQ(sim::last_fault(), "");
  for (float x : download(out.get(), n)) ASSERT_EQ(x, 2.0f * size_);
  ASSERT_CUDA_OK(cudaEventDestroy(done));
}

TEST_F(SimNcclChecks, TwoRanksOnOneDeviceAreRefused) {
  ncclComm_t c = nullptr;
  EXPECT_EQ(init(&c, size_), ncclInvalidArgument);  // rank out of range: refused locally
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "out of range"));
  EXPECT_EQ(c, nullptr);
  if (size_ < 2) GTEST_SKIP() << "needs two ranks";
  ASSERT_CUDA_OK(cudaSetDevice(0));  // every rank on device 0 of this host
  EXPECT_EQ(init(&c), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "Duplicate GPU detected")) << ncclGetLastError(nullptr);
  EXPECT_EQ(c, nullptr);
}

TEST_F(SimNcclChecks, BadArgumentsAreRefused) {
  DeviceBuffer<float> buf(std::vector<float>(8, 1.0f));
  std::vector<float> host(8);
  EXPECT_EQ(ncclAllReduce(buf.get(), buf.get(), 4, ncclFloat16, ncclSum, comm_, stream_), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(host.data(), buf.get(), 8, ncclFloat, ncclSum, comm_, stream_), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(comm_), "is not device memory"));
  EXPECT_EQ(ncclAllReduce(buf.get(), buf.get(), 8, ncclFloat, static_cast<ncclRedOp_t>(9), comm_, stream_),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(buf.get(), buf.get(), 8, ncclFloat, ncclSum, nullptr, stream_), ncclInvalidArgument);
}

TEST_F(SimNcclChecks, CaptureIsRefused) {
  DeviceBuffer<float> buf(std::vector<float>(8, 1.0f));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(ncclAllReduce(buf.get(), buf.get(), 8, ncclFloat, ncclSum, comm_, stream_), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(comm_), "capturing a graph"));
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream_, &g));
  ASSERT_CUDA_OK(cudaGraphDestroy(g));
}

// Abort from another thread, with an all-reduce queued: it returns at once and the queued item
// does nothing. A destroy after a completed run returns.
TEST_F(SimNcclChecks, AbortAbandonsAndDestroyReturns) {
  const int n = 64;
  DeviceBuffer<float> send(std::vector<float>(n, 1.0f)), recv(std::vector<float>(n, -1.0f));
  ncclComm_t c = nullptr;
  ASSERT_NCCL_OK(init(&c));
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), recv.get(), n, ncclFloat, ncclSum, c, stream_));
  ncclResult_t aborted = ncclInternalError;
  std::thread([&] { aborted = ncclCommAbort(c); }).join();
  EXPECT_EQ(aborted, ncclSuccess);
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  for (float x : download(recv.get(), n)) ASSERT_EQ(x, -1.0f) << "an abandoned all-reduce writes nothing";
  MPI_Barrier(MPI_COMM_WORLD);  // every rank posted it: it completes in the background
  ASSERT_NCCL_OK(init(&c));
  ASSERT_NCCL_OK(ncclAllReduce(send.get(), recv.get(), n, ncclFloat, ncclSum, c, stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  for (float x : download(recv.get(), n)) ASSERT_EQ(x, static_cast<float>(size_));
}

}  // namespace
#endif
