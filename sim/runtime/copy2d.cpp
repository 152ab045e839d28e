// cudaMemcpy2DAsync: cudaMemcpy2D queued on a stream, like cudaMemcpyAsync in memory.cpp (it
// belongs there; kept in its own file while memory.cpp is being reworked). Captured into graphs
// and deferred by the lazy stream mode; host-to-host copies are synchronous, as in CUDA. Used
// by kernels/gemm/gemm.cu (variant 0, C != D); tested by tests/sim/test_sim_cublas_results.cu.
#include <limits>

#include "internal.h"

using namespace sim::detail;

extern "C" cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  if (!stream_valid(stream)) return set_error(cudaErrorInvalidResourceHandle);
  // What can be refused at the call is refused there; range checks happen when it runs.
  if (static_cast<unsigned>(kind) > 4) return set_error(cudaErrorInvalidMemcpyDirection);
  if (width != 0 && height != 0 && (width > dpitch || width > spitch))
    return set_error(cudaErrorInvalidPitchValue);
  if (kind == cudaMemcpyHostToHost && lazy_streams() && !in_replay() &&
      !capture_active_on(stream)) {
    if (is_created_stream(stream))
      lazy_drain(stream, std::numeric_limits<unsigned long long>::max());
    else
      lazy_drain_all();
    ReplayScope r;
    return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
  }
  switch (capture_node(stream, [=] {
    pdl_stream_op(stream);
    ReplayScope r;
    cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
  })) {
    case CaptureVerdict::Captured:
    case CaptureVerdict::Deferred: return cudaSuccess;
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  pdl_stream_op(stream);
  ReplayScope r;  // an async copy is no sync point
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
