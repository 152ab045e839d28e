// The CUDA runtime API apart from memory: error strings, device queries, device
// reset, streams and events (lazy-mode queues: lazy.cpp), function attributes.
// Tested by tests/sim and sim/examples/checks.cu.
#include <unistd.h>
#include <cstdio>
#include <limits>
#include "internal.h"

namespace sim::detail {
namespace {
bool event_valid(cudaEvent_t e) {
  std::lock_guard<std::mutex> lk(G().m);
  return e && G().events.count(e) != 0;
}
struct ErrorInfo {
  cudaError_t e;
  const char* name;
  const char* text;
};
#define SIM_E(n, t) {n, #n, t}
const ErrorInfo kErrors[] = {
    SIM_E(cudaSuccess, "no error"),
    SIM_E(cudaErrorInvalidValue, "invalid argument"),
    SIM_E(cudaErrorMemoryAllocation, "out of memory"),
    SIM_E(cudaErrorInitializationError, "initialization error"),
    SIM_E(cudaErrorCudartUnloading, "driver shutting down"),
    SIM_E(cudaErrorProfilerDisabled, "profiler disabled while using external profiling tool"),
    SIM_E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    SIM_E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    SIM_E(cudaErrorInvalidSymbol, "invalid device symbol"),
    SIM_E(cudaErrorInvalidHostPointer, "invalid host pointer"),
    SIM_E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    SIM_E(cudaErrorInvalidTexture, "invalid texture reference"),
    SIM_E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    SIM_E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    SIM_E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    SIM_E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    SIM_E(cudaErrorInvalidDevice, "invalid device ordinal"),
    SIM_E(cudaErrorStartupFailure, "system not yet initialized"),
    SIM_E(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    SIM_E(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    SIM_E(cudaErrorUnsupportedLimit, "limit is not supported on this architecture"),
    SIM_E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    SIM_E(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    SIM_E(cudaErrorSymbolNotFound, "named symbol not found"),
    SIM_E(cudaErrorNotReady, "device not ready"),
    SIM_E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    SIM_E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    SIM_E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    SIM_E(cudaErrorAssert, "device-side assert triggered"),
    SIM_E(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    SIM_E(cudaErrorMisalignedAddress, "misaligned address"),
    SIM_E(cudaErrorLaunchFailure, "unspecified launch failure"),
    SIM_E(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    SIM_E(cudaErrorNotPermitted, "operation not permitted"),
    SIM_E(cudaErrorNotSupported, "operation not supported"),
    SIM_E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    SIM_E(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    SIM_E(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream"),
    SIM_E(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another thread"),
    SIM_E(cudaErrorUnknown, "unknown error"),
};
#undef SIM_E
const ErrorInfo* error_info(cudaError_t e) {
  for (const auto& i : kErrors)
    if (i.e == e) return &i;
  return nullptr;
}
#define SIM_STICKY_CHECK() \
  if (const cudaError_t e_ = sticky_error()) return set_error(e_)
}  // namespace
}  // namespace sim::detail

using namespace sim::detail;

extern "C" {
const char* cudaGetErrorString(cudaError_t e) {
  const ErrorInfo* i = error_info(e);
  return i ? i->text : "unrecognized error code";
}
const char* cudaGetErrorName(cudaError_t e) {
  const ErrorInfo* i = error_info(e);
  return i ? i->name : "cudaErrorUnknown";
}
cudaError_t cudaGetLastError(void) {
  if (const cudaError_t e = sticky_error()) return e;
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) {
  if (const cudaError_t e = sticky_error()) return e;
  return tl_last_error;
}

// SIM_DEVICES devices (settings().devices), all the same emulator on the same host memory.
// As in CUDA, each host thread has its own current device, 0 until it sets another.
namespace {
thread_local int tl_device = 0;
bool valid_device(int device) { return device >= 0 && device < settings().devices; }
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  SIM_STICKY_CHECK();
  if (!count) return set_error(cudaErrorInvalidValue);
  *count = settings().devices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  SIM_STICKY_CHECK();
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  tl_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  SIM_STICKY_CHECK();
  if (!device) return set_error(cudaErrorInvalidValue);
  *device = tl_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  SIM_STICKY_CHECK();
  if (!p) return set_error(cudaErrorInvalidValue);
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  const int w = settings().workers;
  std::snprintf(p->name, sizeof p->name, "SIMT CPU emulator (%d workers)", w);
  p->pciBusID = 1 + device;  // one bus per device, as on a multi-GPU node; domain and slot 0
  p->totalGlobalMem = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<size_t>(sysconf(_SC_PAGESIZE));
  p->sharedMemPerBlock = kDefaultSmem;
  p->sharedMemPerBlockOptin = kOptinSmem;
  p->sharedMemPerMultiprocessor = 233472;
  p->reservedSharedMemPerBlock = 1024;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->totalConstMem = 65536;
  p->major = 9;
  p->minor = 0;
  p->textureAlignment = 512;
  p->multiProcessorCount = w;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxBlocksPerMultiProcessor = 32;
  p->canMapHostMemory = 1;
  p->unifiedAddressing = 1;
  p->managedMemory = 1;
  p->concurrentKernels = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  SIM_STICKY_CHECK();
  if (!value) return set_error(cudaErrorInvalidValue);
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, device);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrTotalConstantMemory: *value = static_cast<int>(p.totalConstMem); break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(kOptinSmem); break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentKernels: *value = 1; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    default: *value = 0; break;  // clock rates, bus width, L2 size: not meaningful here
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  SIM_STICKY_CHECK();
  if (const cudaError_t e = capture_forbids()) return e;
  check_all_redzones("cudaDeviceSynchronize");
  return sticky_error();
}
cudaError_t cudaDeviceReset(void) {
  free_all_allocations();
  Global& g = G();
  {
    std::lock_guard<std::mutex> lk(g.m);
    for (auto* s : g.streams) delete s;
    for (auto* e : g.events) delete e;
    g.streams.clear();
    g.events.clear();
    g.dyn_limits.clear();
    g.static_smem.clear();
    g.limits.clear();
    g.sticky.store(0);
    g.last_fault.clear();
  }
  tl_last_error = cudaSuccess;
  return cudaSuccess;
}
cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  SIM_STICKY_CHECK();
  std::lock_guard<std::mutex> lk(G().m);
  G().limits[limit] = value;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  SIM_STICKY_CHECK();
  if (!value) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(G().m);
  auto it = G().limits.find(limit);
  *value = it != G().limits.end() ? it->second : limit == cudaLimitStackSize ? 1024 : 1u << 20;
  return cudaSuccess;
}
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) {
  SIM_STICKY_CHECK();
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  SIM_STICKY_CHECK();
  if (!s) return set_error(cudaErrorInvalidValue);
  *s = new CUstream_st{flags};
  std::lock_guard<std::mutex> lk(G().m);
  G().streams.insert(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  SIM_STICKY_CHECK();
  // As on a GPU, work already queued on the stream still runs (lazy mode: now).
  if (is_created_stream(s) && stream_valid(s)) lazy_forget_stream(s);
  std::lock_guard<std::mutex> lk(G().m);
  if (!G().streams.erase(s)) return set_error(cudaErrorInvalidResourceHandle);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (const cudaError_t e = capture_forbids(s)) return e;
  return stream_valid(s) ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}
// Queries in the lazy mode: with work still pending the answer is cudaErrorNotReady, and the
// device then takes one step (runs one queued item), as a GPU progresses between two polls; a
// polling loop therefore sees "not ready" rounds and still ends. cudaErrorNotReady is an
// answer, not an error: CUDA does not record it as the thread's last error, and neither do
// these. The capture rules are those of the synchronising calls.
cudaError_t cudaStreamQuery(cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (const cudaError_t e = capture_check(s)) return e;
  if (!stream_valid(s)) return set_error(cudaErrorInvalidResourceHandle);
  // The legacy and per-thread streams run their work at the call: never pending.
  if (lazy_streams() && !in_replay() && is_created_stream(s) &&
      lazy_step(s, std::numeric_limits<unsigned long long>::max())) {
    if (const cudaError_t e = sticky_error()) return set_error(e);  // a fault in that step
    return cudaErrorNotReady;
  }
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  SIM_STICKY_CHECK();
  if (!stream_valid(s) || !event_valid(e)) return set_error(cudaErrorInvalidResourceHandle);
  // Synchronous work has nothing to order: in a capture a wait is no node at all. In the
  // lazy mode the wait is a node of s that first runs the event's stream up to the record.
  if (lazy_streams() && !in_replay() && e->lazy_stream) {
    CUstream_st* const src = e->lazy_stream;
    const unsigned long long upto = e->lazy_seq;
    if (!is_created_stream(s)) {
      lazy_drain(src, upto);
    } else if (capture_node(s, [src, upto] { lazy_drain(src, upto); }) ==
               CaptureVerdict::Captured) {
      return cudaSuccess;  // (a captured node; the graph's replay runs the drain)
    }
  }
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  SIM_STICKY_CHECK();
  if (!e) return set_error(cudaErrorInvalidValue);
  *e = new CUevent_st{flags, false, {}};
  std::lock_guard<std::mutex> lk(G().m);
  G().events.insert(*e);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (!event_valid(e) || !stream_valid(s)) return set_error(cudaErrorInvalidResourceHandle);
  // On a capturing stream the record becomes a node: the time is taken at replay.
  switch (capture_node(s, [e] {
    e->recorded = true;
    e->t = std::chrono::steady_clock::now();
  })) {
    case CaptureVerdict::Captured: e->in_graph = true; return cudaSuccess;
    case CaptureVerdict::Deferred:  // lazy mode: done once s reaches this position
      e->lazy_stream = s;
      e->lazy_seq = lazy_last_enqueued();
      return cudaSuccess;
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  e->lazy_stream = nullptr;
  e->recorded = true;
  e->t = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  SIM_STICKY_CHECK();
  if (const cudaError_t c = capture_check()) return c;
  if (!event_valid(e)) return set_error(cudaErrorInvalidResourceHandle);
  if (lazy_streams() && !in_replay()) {
    if (e->in_graph)
      lazy_drain_all();  // recorded by a graph node: its queue position is unknown
    else if (e->lazy_stream)
      lazy_drain(e->lazy_stream, e->lazy_seq);
  }
  return sticky_error() == cudaSuccess ? cudaSuccess : set_error(sticky_error());
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  SIM_STICKY_CHECK();
  if (const cudaError_t c = capture_check()) return c;
  if (!event_valid(e)) return set_error(cudaErrorInvalidResourceHandle);
  if (lazy_streams() && !in_replay()) {
    // Recorded by a graph node: its queue position is unknown, so any pending work counts.
    const bool pending = e->in_graph       ? lazy_step_any()
                         : e->lazy_stream ? lazy_step(e->lazy_stream, e->lazy_seq)
                                          : false;
    if (pending) {
      if (const cudaError_t f = sticky_error()) return set_error(f);
      return cudaErrorNotReady;
    }
  }
  return sticky_error() == cudaSuccess ? cudaSuccess : set_error(sticky_error());
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  SIM_STICKY_CHECK();
  if (!ms) return set_error(cudaErrorInvalidValue);
  if (!event_valid(a) || !event_valid(b) || !a->recorded || !b->recorded ||
      ((a->flags | b->flags) & cudaEventDisableTiming))
    return set_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  SIM_STICKY_CHECK();
  // CUDA allows destroying an event whose record has not happened yet; the queued record
  // node writes to the event, so in the lazy mode it runs first.
  if (lazy_streams() && event_valid(e) && e->lazy_stream) lazy_drain(e->lazy_stream, e->lazy_seq);
  std::lock_guard<std::mutex> lk(G().m);
  if (!G().events.erase(e)) return set_error(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}

cudaError_t sim_cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  SIM_STICKY_CHECK();
  if (!func) return set_error(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kOptinSmem) return set_error(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(G().m);
    G().dyn_limits[func] = value;
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
    return (value >= -1 && value <= 100) ? cudaSuccess : set_error(cudaErrorInvalidValue);
  return set_error(cudaErrorInvalidValue);
}
cudaError_t sim_cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  SIM_STICKY_CHECK();
  if (!a) return set_error(cudaErrorInvalidValue);
  if (!func) return set_error(cudaErrorInvalidDeviceFunction);
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = static_cast<int>(dyn_smem_limit(func));
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}
cudaError_t sim_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num, int block_size,
                                                              size_t dyn_smem) {
  SIM_STICKY_CHECK();
  if (!num || block_size <= 0) return set_error(cudaErrorInvalidValue);
  int n = std::min(32, 2048 / block_size);
  if (dyn_smem) n = std::min(n, static_cast<int>(233472 / dyn_smem));
  *num = n;
  return cudaSuccess;
}
}  // extern "C"
