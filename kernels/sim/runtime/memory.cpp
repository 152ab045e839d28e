// Device memory: each cudaMalloc is its own exact-size, 0xFF-filled heap block (ASan
// sees kernel overflows); a registry of live allocations checks kernel pointer
// arguments and cudaMemcpy directions. Tested by tests/sim and examples/checks.cu.
#include <sys/sysinfo.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <map>
#include <limits>

#include "internal.h"

namespace sim::detail {
namespace {
enum class Kind { Device, Host, Managed, Symbol };
struct Alloc {
  size_t size;
  Kind kind;
};
std::mutex& mem_mutex() {
  static std::mutex m;
  return m;
}
// Never destroyed: device memory a program does not free stays reachable at exit
// (no LeakSanitizer report, as with a real device) and usable from static destructors.
std::map<uintptr_t, Alloc>& allocs() {
  static auto* a = new std::map<uintptr_t, Alloc>();
  return *a;
}
// The allocation that contains p (one past the end counts), or null. Lock held.
const Alloc* find(const void* p, uintptr_t* base = nullptr) {
  auto& a = allocs();
  const uintptr_t x = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(x);
  if (it == a.begin()) return nullptr;
  --it;
  if (x > it->first + it->second.size) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}
bool device_like(Kind k) { return k == Kind::Device || k == Kind::Symbol || k == Kind::Managed; }

// Checks one side of a copy: `dev` says whether the API claims device memory.
bool side_ok(const void* p, size_t count, bool dev) {
  uintptr_t base = 0;
  const Alloc* a = find(p, &base);
  if (dev) {
    if (!a || !device_like(a->kind)) return false;
  } else {
    if (a && a->kind == Kind::Device) return false;  // device memory named as host memory
    if (!a) return true;                               // pageable host memory: unknown extent
  }
  return reinterpret_cast<uintptr_t>(p) + count <= base + a->size;
}
bool copy_ok(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  bool ddev = false, sdev = false;
  switch (kind) {
    case cudaMemcpyHostToHost: break;
    case cudaMemcpyHostToDevice: ddev = true; break;
    case cudaMemcpyDeviceToHost: sdev = true; break;
    case cudaMemcpyDeviceToDevice: ddev = sdev = true; break;
    default: {
      const Alloc* d = find(dst);
      const Alloc* s = find(src);
      ddev = d && device_like(d->kind);
      sdev = s && device_like(s->kind);
    }
  }
  return side_ok(dst, count, ddev) && side_ok(src, count, sdev);
}
cudaError_t fill_alloc(void** out, size_t size, Kind kind) {
  if (!out) return set_error(cudaErrorInvalidValue);
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (size == 0) {
    *out = nullptr;
    return cudaSuccess;
  }
  void* p = std::malloc(size);
  if (!p) {
    *out = nullptr;
    return set_error(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xFF, size);  // fresh memory is all-ones bytes: NaN for float and double
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    allocs()[reinterpret_cast<uintptr_t>(p)] = Alloc{size, kind};
  }
  *out = p;
  return cudaSuccess;
}
cudaError_t release(void* p, bool host) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!p) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    auto it = allocs().find(reinterpret_cast<uintptr_t>(p));
    if (it == allocs().end() || it->second.kind == Kind::Symbol ||
        (it->second.kind == Kind::Host) != host)
      return set_error(cudaErrorInvalidValue);
    allocs().erase(it);
  }
  std::free(p);
  return cudaSuccess;
}
}  // namespace

bool is_kernel_accessible(const void* p) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  return find(p) != nullptr;
}

void* device_view(const void* p) { return const_cast<void*>(p); }  // fenced views: next commit

void free_all_allocations() {
  std::lock_guard<std::mutex> lk(mem_mutex());
  for (auto& [base, a] : allocs())
    if (a.kind != Kind::Symbol) std::free(reinterpret_cast<void*>(base));
  allocs().clear();
}

}  // namespace sim::detail

void* sim::device_view(const void* p) { return sim::detail::device_view(p); }

using namespace sim::detail;

extern "C" {
cudaError_t cudaMalloc(void** p, size_t size) {
  if (const cudaError_t e = capture_forbids()) return e;
  return fill_alloc(p, size, Kind::Device);
}
cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int) {
  return fill_alloc(p, size, Kind::Managed);
}
cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  if (!pitch) return set_error(cudaErrorInvalidValue);
  *pitch = (width + 255) / 256 * 256;
  return fill_alloc(p, *pitch * height, Kind::Device);
}
cudaError_t cudaMallocHost(void** p, size_t size) { return fill_alloc(p, size, Kind::Host); }
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) {
  return fill_alloc(p, size, Kind::Host);
}
cudaError_t cudaFree(void* p) {
  if (const cudaError_t e = capture_forbids()) return e;
  return release(p, false);
}
cudaError_t cudaFreeHost(void* p) {
  if (lazy_streams() && !in_replay()) lazy_drain_all();  // queued copies may target it
  return release(p, true);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids()) return e;
  if (static_cast<unsigned>(kind) > 4) return set_error(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  if (!dst || !src || !copy_ok(dst, src, count, kind)) return set_error(cudaErrorInvalidValue);
  std::memcpy(dst, src, count);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!stream_valid(stream)) return set_error(cudaErrorInvalidResourceHandle);
  // Host-to-host copies are fully synchronous with the host in CUDA: in the lazy mode the
  // stream's earlier work runs first, then the copy, at the call.
  if (kind == cudaMemcpyHostToHost && lazy_streams() && !in_replay() && !capture_active_on(stream)) {
    if (is_created_stream(stream))
      lazy_drain(stream, std::numeric_limits<unsigned long long>::max());
    else
      lazy_drain_all();
    ReplayScope r;
    return cudaMemcpy(dst, src, count, kind);
  }
  switch (capture_node(stream, [=] { ReplayScope r; cudaMemcpy(dst, src, count, kind); })) {
    case CaptureVerdict::Captured:
    case CaptureVerdict::Deferred: return cudaSuccess;
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  ReplayScope r;  // an async copy on a stream that does not capture is no sync point
  return cudaMemcpy(dst, src, count, kind);
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids()) return e;
  if (static_cast<unsigned>(kind) > 4) return set_error(cudaErrorInvalidMemcpyDirection);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return set_error(cudaErrorInvalidPitchValue);
  if (!dst || !src ||
      !copy_ok(dst, src, 1, kind) ||
      !copy_ok(static_cast<char*>(dst) + dpitch * (height - 1),
               static_cast<const char*>(src) + spitch * (height - 1), width, kind))
    return set_error(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                width);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids()) return e;
  if (count == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    if (!p || !side_ok(p, count, true)) return set_error(cudaErrorInvalidValue);
  }
  std::memset(p, value, count);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (!stream_valid(stream)) return set_error(cudaErrorInvalidResourceHandle);
  switch (capture_node(stream, [=] { ReplayScope r; cudaMemset(p, value, count); })) {
    case CaptureVerdict::Captured:
    case CaptureVerdict::Deferred: return cudaSuccess;
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  ReplayScope r;
  return cudaMemset(p, value, count);
}

cudaError_t sim_cudaMemcpySymbol(void* symbol, size_t symbol_size, void* buf, size_t count,
                                 size_t offset, cudaMemcpyKind kind, int to_symbol) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  // Symbol copies run at the call (also the *Async forms); in the lazy mode all queued work
  // runs first, so a queued kernel never sees a value written after its launch.
  if (lazy_streams() && !in_replay()) lazy_drain_all();
  if (offset > symbol_size || count > symbol_size - offset || (count && !buf))
    return set_error(cudaErrorInvalidValue);
  const bool ok_kind = to_symbol ? (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice ||
                                    kind == cudaMemcpyDefault)
                                 : (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
                                    kind == cudaMemcpyDefault);
  if (!ok_kind) return set_error(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    const bool buf_dev = kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && !side_ok(buf, count, buf_dev))
      return set_error(cudaErrorInvalidValue);
  }
  char* s = static_cast<char*>(symbol) + offset;
  if (to_symbol)
    std::memcpy(s, buf, count);
  else
    std::memcpy(buf, s, count);
  return cudaSuccess;
}

cudaError_t sim_cudaGetSymbolAddress(void** p, void* symbol, size_t symbol_size) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!p) return set_error(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(mem_mutex());
  if (!find(symbol)) allocs()[reinterpret_cast<uintptr_t>(symbol)] = Alloc{symbol_size, Kind::Symbol};
  *p = symbol;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!free_bytes || !total_bytes) return set_error(cudaErrorInvalidValue);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  *total_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  *free_bytes = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
  return cudaSuccess;
}
}  // extern "C"
