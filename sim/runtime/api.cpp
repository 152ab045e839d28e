// The CUDA runtime API apart from memory: error strings, device queries, device
// reset, streams and events (lazy-mode queues: lazy.cpp), function attributes; the refusal
// messages of abort mode (refuse, launch_refused) and the launch configuration check.
// Tested by tests/sim and sim/examples/checks.cu.
#include <unistd.h>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include "internal.h"

namespace sim::detail {
namespace {
bool event_valid(cudaEvent_t e) {
  std::lock_guard<std::mutex> lk(G().m);
  return e && G().events.count(e) != 0;
}
cudaError_t refuse_stream(const char* call, cudaStream_t s) {
  return refuse(cudaErrorInvalidResourceHandle, call,
                "stream %p is not a live stream (destroyed, or never created)", static_cast<void*>(s));
}
cudaError_t refuse_event(const char* call, cudaEvent_t e) {
  return refuse(cudaErrorInvalidResourceHandle, call,
                e ? "event %p is not a live event (destroyed, or never created)" : "event %p is NULL",
                static_cast<void*>(e));
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
    SIM_E(cudaErrorInvalidClusterSize, "invalid cluster size"),
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

std::string vstrf(const char* fmt, va_list ap) {
  char buf[512];
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, copy);
  va_end(copy);
  if (n < static_cast<int>(sizeof buf)) return std::string(buf, n < 0 ? 0 : n);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  out.resize(static_cast<size_t>(n));
  return out;
}
}  // namespace

cudaError_t refuse(cudaError_t e, const char* call, const char* why_fmt, ...) {
  if (settings().fault_mode == FaultMode::Abort) {
    va_list ap;
    va_start(ap, why_fmt);
    const std::string why = vstrf(why_fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "sim: %s returned %s: %s\n", call, cudaGetErrorName(e), why.c_str());
  }
  return set_error(e);
}

void launch_refused(const LaunchParams& p, cudaError_t e, const char* why_fmt, ...) {
  if (settings().fault_mode == FaultMode::Abort) {
    va_list ap;
    va_start(ap, why_fmt);
    const std::string why = vstrf(why_fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "sim: launch of kernel '%s' at %s:%d refused (%s): %s\n", p.name, p.file,
                 p.line, cudaGetErrorName(e), why.c_str());
  }
  set_error(e);
}

// CUDA's limits: at most 1024 threads per block, block dimensions up to {1024, 1024, 64},
// grid dimensions up to {2^31 - 1, 65535, 65535}, none of them 0. The error is
// cudaErrorInvalidValue: what CUDA 13.0's runtime returned for each of these cases on an H200
// (driver 580.159.04, tests/sim/test_sim_runtime.cu); older runtimes, and the
// programming guide's examples, say cudaErrorInvalidConfiguration.
bool launch_config_ok(const LaunchParams& p) {
  const dim3 b = p.block, g = p.grid;
  const unsigned long long threads = static_cast<unsigned long long>(b.x) * b.y * b.z;
  const cudaError_t e = cudaErrorInvalidValue;
  if (b.x == 0 || b.y == 0 || b.z == 0)
    launch_refused(p, e, "block (%ux%ux%u) has a zero dimension", b.x, b.y, b.z);
  else if (threads > kMaxThreads)
    launch_refused(p, e, "%llu threads per block, over the limit of %d", threads, kMaxThreads);
  else if (b.x > 1024 || b.y > 1024 || b.z > 64)
    launch_refused(p, e, "block (%ux%ux%u) is over the limits of 1024x1024x64", b.x, b.y, b.z);
  else if (g.x == 0 || g.y == 0 || g.z == 0)
    launch_refused(p, e, "grid (%ux%ux%u) has a zero dimension", g.x, g.y, g.z);
  else if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    launch_refused(p, e, "grid (%ux%ux%u) is over the limits of 2147483647x65535x65535", g.x, g.y,
                   g.z);
  else
    return true;
  return false;
}
}  // namespace sim::detail

using namespace sim::detail;

namespace sim::detail {
namespace {
// cudaDeviceReset calls so far (cuBLAS handles compare it with their creation's).
std::atomic<unsigned long long> g_device_resets{0};
}
unsigned long long device_resets() { return g_device_resets.load(); }
}  // namespace sim::detail

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
cudaError_t refuse_device(const char* call, int device) {
  const int n = settings().devices;
  return refuse(cudaErrorInvalidDevice, call, "device %d does not exist (%d device%s: 0..%d; SIM_DEVICES)",
                device, n, n == 1 ? "" : "s", n - 1);
}
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  SIM_STICKY_CHECK();
  if (!count) return refuse(cudaErrorInvalidValue, "cudaGetDeviceCount", "count is NULL");
  *count = settings().devices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  SIM_STICKY_CHECK();
  if (!valid_device(device)) return refuse_device("cudaSetDevice", device);
  tl_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  SIM_STICKY_CHECK();
  if (!device) return refuse(cudaErrorInvalidValue, "cudaGetDevice", "device is NULL");
  *device = tl_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  SIM_STICKY_CHECK();
  if (!p) return refuse(cudaErrorInvalidValue, "cudaGetDeviceProperties", "prop is NULL");
  if (!valid_device(device)) return refuse_device("cudaGetDeviceProperties", device);
  *p = cudaDeviceProp{};
  const int w = settings().workers;
  std::snprintf(p->name, sizeof p->name, "SIMT CPU emulator (%d workers)", w);
  p->pciBusID = 1 + settings().bus[device];  // one bus per node GPU (CUDA_VISIBLE_DEVICES); domain, slot 0
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
  p->major = settings().cc_major;  // SIM_COMPUTE_CAPABILITY, 9.0 by default
  p->minor = settings().cc_minor;
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
  if (!value) return refuse(cudaErrorInvalidValue, "cudaDeviceGetAttribute", "value is NULL");
  if (!valid_device(device)) return refuse_device("cudaDeviceGetAttribute", device);
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
    case cudaDevAttrCooperativeLaunch: *value = 1; break;  // cudaLaunchCooperativeKernel (coop.cpp)
    case cudaDevAttrClusterLaunch: *value = 1; break;      // thread block clusters (cluster.cpp)
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
  sim::detail::pdl_reset();
  sim::detail::g_device_resets.fetch_add(1);
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
  if (!value) return refuse(cudaErrorInvalidValue, "cudaDeviceGetLimit", "value is NULL");
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
  if (!v) return refuse(cudaErrorInvalidValue, "cudaRuntimeGetVersion", "runtimeVersion is NULL");
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return refuse(cudaErrorInvalidValue, "cudaDriverGetVersion", "driverVersion is NULL");
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  SIM_STICKY_CHECK();
  if (!s) return refuse(cudaErrorInvalidValue, "cudaStreamCreate", "pStream is NULL");
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
  {
    std::lock_guard<std::mutex> lk(G().m);
    if (G().streams.erase(s)) {
      delete s;
      return cudaSuccess;
    }
  }
  return refuse_stream("cudaStreamDestroy", s);
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (const cudaError_t e = capture_forbids(s)) return e;
  return stream_valid(s) ? cudaSuccess : refuse_stream("cudaStreamSynchronize", s);
}
// Queries in the lazy mode: with work still pending the answer is cudaErrorNotReady, and the
// device then takes one step (runs one queued item), as a GPU progresses between two polls; a
// polling loop therefore sees "not ready" rounds and still ends. cudaErrorNotReady is an
// answer, not an error: CUDA does not record it as the thread's last error, and neither do
// these. The capture rules are those of the synchronising calls.
cudaError_t cudaStreamQuery(cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (const cudaError_t e = capture_check(s)) return e;
  if (!stream_valid(s)) return refuse_stream("cudaStreamQuery", s);
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
  if (!stream_valid(s)) return refuse_stream("cudaStreamWaitEvent", s);
  if (!event_valid(e)) return refuse_event("cudaStreamWaitEvent", e);
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
  if (!e) return refuse(cudaErrorInvalidValue, "cudaEventCreate", "event is NULL");
  *e = new CUevent_st{flags, false, {}};
  std::lock_guard<std::mutex> lk(G().m);
  G().events.insert(*e);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  SIM_STICKY_CHECK();
  if (!event_valid(e)) return refuse_event("cudaEventRecord", e);
  if (!stream_valid(s)) return refuse_stream("cudaEventRecord", s);
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
  if (!event_valid(e)) return refuse_event("cudaEventSynchronize", e);
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
  if (!event_valid(e)) return refuse_event("cudaEventQuery", e);
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
  if (!ms) return refuse(cudaErrorInvalidValue, "cudaEventElapsedTime", "ms is NULL");
  if (!event_valid(a)) return refuse_event("cudaEventElapsedTime", a);
  if (!event_valid(b)) return refuse_event("cudaEventElapsedTime", b);
  if (!a->recorded || !b->recorded)
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                  "event %p has not been recorded", static_cast<void*>(a->recorded ? b : a));
  if ((a->flags | b->flags) & cudaEventDisableTiming)
    return refuse(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                  "event %p was created with cudaEventDisableTiming",
                  static_cast<void*>(a->flags & cudaEventDisableTiming ? a : b));
  *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  SIM_STICKY_CHECK();
  // CUDA allows destroying an event whose record has not happened yet; the queued record
  // node writes to the event, so in the lazy mode it runs first.
  if (lazy_streams() && event_valid(e) && e->lazy_stream) lazy_drain(e->lazy_stream, e->lazy_seq);
  {
    std::lock_guard<std::mutex> lk(G().m);
    if (G().events.erase(e)) {
      delete e;
      return cudaSuccess;
    }
  }
  return refuse_event("cudaEventDestroy", e);
}

namespace {
// cudaFuncAttributes::maxThreadsPerBlock: the kernel's __launch_bounds__ when known (strict.h:
// registered before main for non-template kernels, at the first run for template
// instantiations), else the device's 1024.
int max_threads_of(const void* func) {
  const long long bound = registered_max_threads(func);
  return bound > 0 && bound < kMaxThreads ? static_cast<int>(bound) : kMaxThreads;
}
}  // namespace

cudaError_t sim_cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  SIM_STICKY_CHECK();
  if (!func) return refuse(cudaErrorInvalidDeviceFunction, "cudaFuncSetAttribute", "func is NULL");
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kOptinSmem)
      return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                    "cudaFuncAttributeMaxDynamicSharedMemorySize = %d is not in 0..%zu", value,
                    kOptinSmem);
    std::lock_guard<std::mutex> lk(G().m);
    G().dyn_limits[func] = value;
    return cudaSuccess;
  }
  if (attr >= cudaFuncAttributeClusterDimMustBeSet && attr <= cudaFuncAttributeClusterSchedulingPolicyPreference)
    return cluster_func_attribute(func, attr, value);  // cluster.cpp
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
    return (value >= -1 && value <= 100)
               ? cudaSuccess
               : refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                        "cudaFuncAttributePreferredSharedMemoryCarveout = %d is not in -1..100",
                        value);
  return refuse(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                "attribute %d is not one the emulator knows", static_cast<int>(attr));
}
cudaError_t sim_cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  SIM_STICKY_CHECK();
  if (!a) return refuse(cudaErrorInvalidValue, "cudaFuncGetAttributes", "attr is NULL");
  if (!func) return refuse(cudaErrorInvalidDeviceFunction, "cudaFuncGetAttributes", "func is NULL");
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = max_threads_of(func);
  a->numRegs = 32;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = static_cast<int>(dyn_smem_limit(func));
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}
// A block larger than the kernel can be launched with (its __launch_bounds__, or 1024) has no
// active blocks, as CUDA's occupancy calculator answers.
cudaError_t sim_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num, const void* func,
                                                              int block_size, size_t dyn_smem) {
  SIM_STICKY_CHECK();
  if (!num)
    return refuse(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                  "numBlocks is NULL");
  if (!func)
    return refuse(cudaErrorInvalidDeviceFunction, "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                  "func is NULL");
  if (block_size <= 0)
    return refuse(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                  "blockSize = %d", block_size);
  int n = block_size > max_threads_of(func) ? 0 : std::min(32, 2048 / block_size);
  if (dyn_smem) n = std::min(n, static_cast<int>(233472 / dyn_smem));
  *num = n;
  return cudaSuccess;
}
}  // extern "C"
