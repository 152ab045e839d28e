// The emulator's lazy stream mode (sim/runtime/lazy.cpp, the default): work on a
// created stream waits until something forces it, so a consumer stream that forgets
// cudaStreamWaitEvent reads stale data, and one that waits reads the producer's result;
// stream and event queries answer cudaErrorNotReady while work is pending. Emulator only
// (the mode is the emulator's; on a GPU the same programs are timing-dependent).
#include <vector>

#include "sim_test_util.h"

#ifdef SIM_EMULATOR
namespace {

using simtest::DeviceBuffer;

__global__ void fill_kernel(int* v, int n, int value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = value;
}
__global__ void add_kernel(int* v, int n, int amount) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] += amount;
}
__global__ void scale_kernel(int* v, int n, int factor) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] *= factor;
}
// What device memory holds right now, without a sync (host code cannot read it directly:
// the emulator fences device memory from the host, so look through its device view).
std::vector<int> peek(const int* p, int n) {
  const int* v = static_cast<const int*>(sim::device_view(p));
  return std::vector<int>(v, v + n);
}

class SimLazy : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_ = sim::stream_mode();
    sim::set_stream_mode(sim::StreamMode::Lazy);
    ASSERT_CUDA_OK(cudaStreamCreate(&producer_));
    ASSERT_CUDA_OK(cudaStreamCreate(&consumer_));
    ASSERT_CUDA_OK(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
  }
  void TearDown() override {
    (void)cudaGetLastError();
    cudaEventDestroy(ev_);
    cudaStreamDestroy(producer_);
    cudaStreamDestroy(consumer_);
    sim::set_stream_mode(saved_);
    simtest::SimTest::TearDown();
  }
  // producer: v = 7; consumer: copy v to host (with or without waiting for the producer).
  std::vector<int> produce_then_copy(bool wait) {
    const int n = 64;
    DeviceBuffer<int> v(std::vector<int>(n, 1));
    std::vector<int> host(n, -1);
    fill_kernel<<<2, 32, 0, producer_>>>(v.get(), n, 7);
    EXPECT_CUDA_OK(cudaEventRecord(ev_, producer_));
    if (wait) {
      EXPECT_CUDA_OK(cudaStreamWaitEvent(consumer_, ev_, 0));
    }
    EXPECT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                   consumer_));
    EXPECT_CUDA_OK(cudaStreamSynchronize(consumer_));
    const std::vector<int> seen = host;
    EXPECT_CUDA_OK(cudaDeviceSynchronize());  // the producer's work runs before v is freed
    EXPECT_EQ(v.download(), std::vector<int>(n, 7));
    return seen;
  }
  sim::StreamMode saved_ = sim::StreamMode::Sync;
  cudaStream_t producer_ = nullptr, consumer_ = nullptr;
  cudaEvent_t ev_ = nullptr;
};

TEST_F(SimLazy, MissingWaitReadsStaleDataAndTheWaitFixesIt) {
  EXPECT_EQ(produce_then_copy(false), std::vector<int>(64, 1));  // the bug is visible
  EXPECT_EQ(produce_then_copy(true), std::vector<int>(64, 7));
}

TEST_F(SimLazy, NothingRunsUntilForcedThenInStreamOrder) {
  const int n = 40;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  std::vector<int> host(n, -1);
  fill_kernel<<<1, 64, 0, producer_>>>(v.get(), n, 3);
  add_kernel<<<1, 64, 0, producer_>>>(v.get(), n, 4);
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                 producer_));
  EXPECT_EQ(host, std::vector<int>(n, -1));  // queued, not run
  ASSERT_CUDA_OK(cudaStreamSynchronize(producer_));
  EXPECT_EQ(host, std::vector<int>(n, 7));
}

TEST_F(SimLazy, EventSynchronizeRunsOnlyUpToTheRecord) {
  const int n = 16;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  std::vector<int> host(n, -1);
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                 producer_));
  ASSERT_CUDA_OK(cudaEventRecord(ev_, producer_));
  fill_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 9);  // after the record
  ASSERT_CUDA_OK(cudaEventSynchronize(ev_));
  EXPECT_EQ(host, std::vector<int>(n, 0));
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 0));  // the fill after the record: not yet
  ASSERT_CUDA_OK(cudaEventQuery(ev_));  // done: the record has run
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 0));  // a done event's query runs nothing
  ASSERT_CUDA_OK(cudaStreamSynchronize(producer_));
  EXPECT_EQ(v.download(), std::vector<int>(n, 9));
}

// Queries answer cudaErrorNotReady while work is pending, and each such answer lets the
// device take one step (one queued item runs): polling loops see "not ready" rounds and end.
TEST_F(SimLazy, StreamQueryIsNotReadyUntilItsQueueRanOneItemPerQuery) {
  const int n = 24;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  std::vector<int> host(n, -1);
  ASSERT_CUDA_OK(cudaStreamQuery(producer_));  // nothing queued
  fill_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 3);
  add_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 4);
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                 producer_));
  ASSERT_EQ(cudaStreamQuery(producer_), cudaErrorNotReady);
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 3));  // the fill ran, not the add
  // "Not ready" is an answer, not an error: it is not the thread's last error.
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamQuery(producer_), cudaErrorNotReady);
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 7));
  EXPECT_EQ(host, std::vector<int>(n, -1));  // the copy: not yet
  ASSERT_EQ(cudaStreamQuery(producer_), cudaErrorNotReady);
  EXPECT_EQ(host, std::vector<int>(n, 7));
  ASSERT_CUDA_OK(cudaStreamQuery(producer_));
  ASSERT_CUDA_OK(cudaStreamQuery(producer_));  // and stays done
  // The legacy stream's work runs at its call: a query never finds it pending.
  ASSERT_CUDA_OK(cudaStreamQuery(nullptr));
  ASSERT_CUDA_OK(cudaStreamQuery(cudaStreamPerThread));
}

TEST_F(SimLazy, EventQueryPollingLoopSeesNotReadyRoundsAndStopsAtTheRecord) {
  const int n = 16;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  DeviceBuffer<int> w(std::vector<int>(n, 0));
  fill_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 5);
  add_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 1);
  ASSERT_CUDA_OK(cudaEventRecord(ev_, producer_));
  fill_kernel<<<1, 32, 0, producer_>>>(w.get(), n, 9);  // after the record
  int rounds = 0;
  cudaError_t r;
  while ((r = cudaEventQuery(ev_)) == cudaErrorNotReady) ++rounds;
  ASSERT_CUDA_OK(r);
  EXPECT_EQ(rounds, 3);  // the fill, the add, the record: one step per "not ready"
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 6));
  EXPECT_EQ(peek(w.get(), n), std::vector<int>(n, 0));  // past the record: not run
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  rounds = 0;
  while ((r = cudaStreamQuery(producer_)) == cudaErrorNotReady) ++rounds;
  ASSERT_CUDA_OK(r);
  EXPECT_EQ(rounds, 1);
  EXPECT_EQ(peek(w.get(), n), std::vector<int>(n, 9));
}

// A wait node is one step: it runs the waited stream up to its record at once. Polling the
// consumer then gives the producer's data, never stale data.
TEST_F(SimLazy, PollingAConsumerRunsItsWaitThenItsCopy) {
  const int n = 32;
  DeviceBuffer<int> v(std::vector<int>(n, 1));
  std::vector<int> host(n, -1);
  fill_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 4);
  add_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 4);
  ASSERT_CUDA_OK(cudaEventRecord(ev_, producer_));
  ASSERT_CUDA_OK(cudaStreamWaitEvent(consumer_, ev_, 0));
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                 consumer_));
  cudaEvent_t copied = nullptr;
  ASSERT_CUDA_OK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  ASSERT_CUDA_OK(cudaEventRecord(copied, consumer_));
  ASSERT_EQ(cudaEventQuery(copied), cudaErrorNotReady);  // the wait: the producer's work ran
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 8));
  EXPECT_EQ(host, std::vector<int>(n, -1));
  ASSERT_CUDA_OK(cudaEventQuery(ev_));  // the producer is done up to its record
  ASSERT_EQ(cudaEventQuery(copied), cudaErrorNotReady);  // the copy
  EXPECT_EQ(host, std::vector<int>(n, 8));
  ASSERT_EQ(cudaEventQuery(copied), cudaErrorNotReady);  // the record
  ASSERT_CUDA_OK(cudaEventQuery(copied));
  ASSERT_CUDA_OK(cudaEventDestroy(copied));
}

// A fault in the step a query runs is the query's error (sticky), not "not ready".
TEST_F(SimLazy, AFaultRunByAQueryIsItsError) {
  const int n = 8;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  std::vector<int> host(n, 0);
  fill_kernel<<<1, 8, 0, producer_>>>(host.data(), n, 1);  // a host pointer: faults when it runs
  ASSERT_CUDA_OK(cudaGetLastError());  // queued: nothing checked yet
  EXPECT_EQ(cudaStreamQuery(producer_), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaEventQuery(ev_), cudaErrorIllegalAddress);  // sticky
  EXPECT_NE(sim::last_fault().find("is not a device pointer"), std::string::npos) << sim::last_fault();
  // Start over for TearDown (the reset destroyed the fixture's streams and event).
  sim::reset();
  ASSERT_CUDA_OK(cudaStreamCreate(&producer_));
  ASSERT_CUDA_OK(cudaStreamCreate(&consumer_));
  ASSERT_CUDA_OK(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
}

// Querying the capturing stream is illegal in every capture mode: refused, capture invalidated.
TEST_F(SimLazy, QueryingACapturingStreamIsRefused) {
  const int n = 8;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(producer_, cudaStreamCaptureModeRelaxed));
  add_kernel<<<1, 8, 0, producer_>>>(v.get(), n, 1);
  EXPECT_EQ(cudaStreamQuery(producer_), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(producer_, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  (void)cudaGetLastError();
  EXPECT_EQ(v.download(), std::vector<int>(n, 0));  // captured, never run
}

TEST_F(SimLazy, SyncModeQueriesAreAlwaysReady) {
  sim::set_stream_mode(sim::StreamMode::Sync);
  const int n = 8;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  fill_kernel<<<1, 8, 0, producer_>>>(v.get(), n, 2);
  ASSERT_CUDA_OK(cudaEventRecord(ev_, producer_));
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 2));  // ran at the launch
  ASSERT_CUDA_OK(cudaEventQuery(ev_));
  ASSERT_CUDA_OK(cudaStreamQuery(producer_));
}

TEST_F(SimLazy, SynchronousCallsAndTheLegacyStreamRunEverything) {
  const int n = 8;
  DeviceBuffer<int> a(std::vector<int>(n, 0)), b(std::vector<int>(n, 0));
  std::vector<int> host(n, -1);
  fill_kernel<<<1, 8, 0, producer_>>>(a.get(), n, 5);
  fill_kernel<<<1, 8, 0, consumer_>>>(b.get(), n, 6);
  ASSERT_CUDA_OK(cudaMemcpy(host.data(), a.get(), n * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host, std::vector<int>(n, 5));
  ASSERT_CUDA_OK(cudaMemcpy(host.data(), b.get(), n * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host, std::vector<int>(n, 6));
  add_kernel<<<1, 8, 0, producer_>>>(a.get(), n, 1);
  EXPECT_EQ(peek(a.get(), n), std::vector<int>(n, 5));  // queued
  scale_kernel<<<1, 8>>>(a.get(), n, 10);  // legacy stream: after the producer's add
  EXPECT_EQ(peek(a.get(), n), std::vector<int>(n, 60));  // (5 + 1) * 10, at the launch
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(a.download(), std::vector<int>(n, 60));
}

TEST_F(SimLazy, GraphLaunchIsQueuedLikeAnyWork) {
  const int n = 32;
  DeviceBuffer<int> v(std::vector<int>(n, 1));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(producer_, cudaStreamCaptureModeGlobal));
  add_kernel<<<1, 32, 0, producer_>>>(v.get(), n, 2);
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(producer_, &g));
  cudaGraphExec_t x = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, producer_));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, producer_));
  ASSERT_CUDA_OK(cudaGraphExecDestroy(x));  // legal before the launches ran
  ASSERT_CUDA_OK(cudaGraphDestroy(g));
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 1));  // both launches queued, not run
  ASSERT_CUDA_OK(cudaEventRecord(ev_, producer_));
  ASSERT_CUDA_OK(cudaStreamWaitEvent(consumer_, ev_, 0));
  std::vector<int> host(n, -1);
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), v.get(), n * sizeof(int), cudaMemcpyDeviceToHost,
                                 consumer_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(consumer_));
  EXPECT_EQ(host, std::vector<int>(n, 5));
}

// CUDA allows destroying an event whose record is still queued (the record node must not
// write to a freed event: make test SANITIZE=1 runs this under AddressSanitizer), and
// freeing pinned memory a queued copy still targets runs the copy first.
TEST_F(SimLazy, EventDestroyAndFreeHostRunTheWorkThatNeedsThem) {
  const int n = 8;
  DeviceBuffer<int> v(std::vector<int>(n, 3));
  cudaEvent_t e = nullptr;
  ASSERT_CUDA_OK(cudaEventCreate(&e));
  fill_kernel<<<1, 8, 0, producer_>>>(v.get(), n, 8);
  ASSERT_CUDA_OK(cudaEventRecord(e, producer_));
  ASSERT_CUDA_OK(cudaEventDestroy(e));
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 8));
  int* pinned = nullptr;
  ASSERT_CUDA_OK(cudaMallocHost(&pinned, n * sizeof(int)));
  ASSERT_CUDA_OK(cudaMemcpyAsync(pinned, v.get(), n * sizeof(int), cudaMemcpyDeviceToHost, consumer_));
  std::vector<int> host(n, -1);
  ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), pinned, n * sizeof(int), cudaMemcpyHostToHost, consumer_));
  EXPECT_EQ(host, std::vector<int>(n, 8));  // host to host: synchronous, after the D2H
  ASSERT_CUDA_OK(cudaFreeHost(pinned));
  ASSERT_CUDA_OK(cudaStreamSynchronize(consumer_));
}

TEST_F(SimLazy, DestroyingAStreamRunsItsWorkAndSwitchingToSyncDrains) {
  const int n = 8;
  DeviceBuffer<int> v(std::vector<int>(n, 0));
  cudaStream_t s = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&s));
  fill_kernel<<<1, 8, 0, s>>>(v.get(), n, 4);
  ASSERT_CUDA_OK(cudaEventRecord(ev_, s));
  ASSERT_CUDA_OK(cudaStreamDestroy(s));
  ASSERT_CUDA_OK(cudaEventSynchronize(ev_));  // the event outlives its stream
  EXPECT_EQ(v.download(), std::vector<int>(n, 4));
  add_kernel<<<1, 8, 0, producer_>>>(v.get(), n, 1);
  sim::set_stream_mode(sim::StreamMode::Sync);
  EXPECT_EQ(sim::stream_mode(), sim::StreamMode::Sync);
  // No synchronising call: the switch itself ran the queue.
  EXPECT_EQ(peek(v.get(), n), std::vector<int>(n, 5));
}

}  // namespace
#endif  // SIM_EMULATOR
