// RAII owners of a CUDA stream, an event and an instantiated CUDA graph, for the trainer's
// compute/copy streams, the overlap events and the --graph replays. Same code in the CUDA
// and the emulator build (sim implements streams, events and stream capture).
#pragma once
#include <cstddef>
#include <utility>

#include "common/check.h"

namespace nn {

class Stream {
 public:
  // A blocking stream (cudaStreamDefault): the synchronous cudaMemcpy of DeviceBuffer, on
  // the legacy stream, stays ordered with the work queued here.
  Stream() { CUDA_CHECK(cudaStreamCreate(&s_)); }
  ~Stream() {
    if (s_) CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }
  ~Event() {
    if (e_) CUDA_CHECK_NOTHROW(cudaEventDestroy(e_));
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(e_, s)); }
  void sync() const { CUDA_CHECK(cudaEventSynchronize(e_)); }
  // True once the work before the record has finished; never blocks.
  bool done() const {
    const cudaError_t r = cudaEventQuery(e_);
    if (r == cudaErrorNotReady) return false;  // an answer, never recorded as the last error
    CUDA_CHECK(r);
    return true;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// One captured and instantiated sequence of launches (cudaStreamBeginCapture .. End).
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec() {
    if (x_) CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(x_));
  }
  GraphExec(GraphExec&& o) noexcept
      : x_(std::exchange(o.x_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    std::swap(x_, o.x_);
    std::swap(nodes_, o.nodes_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  explicit operator bool() const { return x_ != nullptr; }
  std::size_t nodes() const { return nodes_; }

  // Records whatever fn queues on s (nothing runs), then instantiates it.
  template <class F>
  void capture(cudaStream_t s, F&& fn) {
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    fn();
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes_));
    const cudaError_t e = cudaGraphInstantiate(&x_, g, 0);
    CUDA_CHECK_NOTHROW(cudaGraphDestroy(g));
    CUDA_CHECK(e);
  }
  void launch(cudaStream_t s) const { CUDA_CHECK(cudaGraphLaunch(x_, s)); }

 private:
  cudaGraphExec_t x_ = nullptr;
  std::size_t nodes_ = 0;
};

}  // namespace nn
