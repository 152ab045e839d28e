// Device memory: each cudaMalloc is fenced from host code (runtime/devmem.cpp: a PROT_NONE
// host view, the address the program gets, and a device view that kernels and copies use),
// 0xFF-filled, with red zones; pinned and managed memory are plain host memory. A registry of
// live allocations checks kernel pointer arguments (and translates them to device views) and
// cudaMemcpy directions. Tested by tests/sim and examples/checks.cu.
#include <sys/sysinfo.h>
#include <unistd.h>
#include <sched.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <limits>

#include "internal.h"

namespace sim::detail {
namespace {
enum class Kind { Device, Host, Managed, Symbol };
struct Alloc {
  size_t size;
  Kind kind;
  DeviceMapping map{};  // Device: its two views
  DevRec* rec = nullptr;  // Device: its record for the per-access checks (checks.cpp)
  char* view() const { return map.dev + kRedzone; }
};
std::mutex& mem_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
// Never destroyed: device memory a program does not free stays reachable at exit
// (no LeakSanitizer report, as with a real device) and usable from static destructors.
// Keyed by the address the program holds (for device memory: the host view's).
std::map<uintptr_t, Alloc>& allocs() {
  static auto* a = new std::map<uintptr_t, Alloc>();
  return *a;
}
// Device view of byte 0 -> the program's address, for pointers a kernel computed and the
// host passes back (they are device memory too).
std::map<uintptr_t, uintptr_t>& views() {
  static auto* v = new std::map<uintptr_t, uintptr_t>();
  return *v;
}
// The allocation that contains p (one past the end counts), or null. *base: its start in the
// same address space as p; *view: p's device-view address. Lock held.
Alloc* find(const void* p, uintptr_t* base = nullptr, char** view = nullptr) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(p);
  auto& a = allocs();
  auto it = a.upper_bound(x);
  if (it != a.begin() && x <= std::prev(it)->first + std::prev(it)->second.size) {
    --it;
    if (base) *base = it->first;
    if (view) *view = it->second.kind == Kind::Device ? it->second.view() + (x - it->first)
                                                      : const_cast<char*>(static_cast<const char*>(p));
    return &it->second;
  }
  auto& v = views();
  auto vit = v.upper_bound(x);
  if (vit == v.begin()) return nullptr;
  --vit;
  Alloc& al = a.at(vit->second);
  if (x > vit->first + al.size) return nullptr;
  if (base) *base = vit->first;
  if (view) *view = const_cast<char*>(static_cast<const char*>(p));
  return &al;
}
bool device_like(Kind k) { return k == Kind::Device || k == Kind::Symbol || k == Kind::Managed; }

// Checks one side of a copy: `dev` says whether the API claims device memory. On success *p
// becomes the address the copy may touch (the device view for device memory).
template <class P>
bool side_ok(P*& p, size_t count, bool dev) {
  uintptr_t base = 0;
  char* view = nullptr;
  const Alloc* a = find(p, &base, &view);
  if (dev) {
    if (!a || !device_like(a->kind)) return false;
  } else {
    if (a && a->kind == Kind::Device) return false;  // device memory named as host memory
    if (!a) return true;                               // pageable host memory: unknown extent
  }
  if (reinterpret_cast<uintptr_t>(p) + count > base + a->size) return false;
  p = reinterpret_cast<P*>(view);
  return true;
}
bool copy_ok(void*& dst, const void*& src, size_t count, cudaMemcpyKind kind) {
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
// Recently freed allocations, by the address the program held (lock held): a freed pointer
// passed to a launch or to cudaFree again is named as freed, with where it was freed.
struct Freed {
  size_t size;
  Kind kind;
  const void* pc;  // the return address of the cudaFree/cudaFreeHost call
};
std::map<uintptr_t, Freed>& freed() {
  static auto* f = new std::map<uintptr_t, Freed>();
  return *f;
}
constexpr size_t kMaxFreed = 4096;
const Freed* find_freed(uintptr_t x, uintptr_t* base) {
  auto& f = freed();
  auto it = f.upper_bound(x);
  if (it == f.begin()) return nullptr;
  --it;
  if (x > it->first + it->second.size) return nullptr;
  *base = it->first;
  return &it->second;
}
std::string freed_text(uintptr_t base, const Freed& f) {
  const std::string at = code_line(f.pc);
  return strf("freed %s memory (%s allocation %p of %zu bytes, freed by %s%s%s)",
              f.kind == Kind::Device ? "device" : "host",
              f.kind == Kind::Device ? "cudaMalloc" : f.kind == Kind::Managed ? "cudaMallocManaged" : "cudaMallocHost",
              reinterpret_cast<void*>(base), f.size, f.kind == Kind::Host ? "cudaFreeHost" : "cudaFree",
              at.empty() ? "" : " at ", at.c_str());
}
cudaError_t fill_alloc(void** out, size_t size, Kind kind) {
  if (!out) return set_error(cudaErrorInvalidValue);
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (size == 0) {
    *out = nullptr;
    return cudaSuccess;
  }
  Alloc al{size, kind};
  void* p = nullptr;
  if (kind == Kind::Device) {
    install_segv_handler();  // host code touching the host view gets a clear message
    if (map_device(size, &al.map)) {
      p = al.map.host + kRedzone;
      const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      al.rec = track_device(reinterpret_cast<uintptr_t>(al.view()), size, reinterpret_cast<uintptr_t>(p),
                            reinterpret_cast<uintptr_t>(al.map.dev) - pg, al.map.file_bytes + 2 * pg);
      if (!al.rec) {
        unmap_device(al.map);
        p = nullptr;
      }
    }
  } else if ((p = kind == Kind::Host ? pinned_alloc(size) : std::malloc(size))) {
    std::memset(p, 0xFF, size);  // fresh memory is all-ones bytes: NaN for float and double
  }
  if (!p) {
    *out = nullptr;
    return set_error(cudaErrorMemoryAllocation);
  }
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    allocs()[reinterpret_cast<uintptr_t>(p)] = al;
    // Memory reused: no longer "freed" (a stale pointer into it is then simply valid again).
    auto& f = freed();
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    auto it = f.upper_bound(lo);
    if (it != f.begin() && std::prev(it)->first + std::prev(it)->second.size > lo) --it;
    while (it != f.end() && it->first < lo + size) it = f.erase(it);
    if (kind == Kind::Device)
      views()[reinterpret_cast<uintptr_t>(al.view())] = reinterpret_cast<uintptr_t>(p);
  }
  *out = p;
  return cudaSuccess;
}
void dispose(uintptr_t key, const Alloc& a) {  // lock held
  if (a.kind == Kind::Device) {
    views().erase(reinterpret_cast<uintptr_t>(a.view()));
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    untrack_device(a.rec, reinterpret_cast<uintptr_t>(a.map.dev) - pg, a.map.file_bytes + 2 * pg);
    unmap_device(a.map);
  } else if (a.kind == Kind::Host) {
    pinned_free(reinterpret_cast<void*>(key), a.size);
  } else if (a.kind != Kind::Symbol) {
    std::free(reinterpret_cast<void*>(key));
  }
}
cudaError_t release(void* p, bool host, const void* pc) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (!p) return cudaSuccess;
  std::string bad;
  size_t size = 0;
  const char* call = host ? "cudaFreeHost" : "cudaFree";
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    const uintptr_t x = reinterpret_cast<uintptr_t>(p);
    auto it = allocs().find(x);
    if (it == allocs().end() || it->second.kind == Kind::Symbol ||
        (it->second.kind == Kind::Host) != host) {
      uintptr_t base = 0;
      std::string why;
      if (it != allocs().end() && it->second.kind == Kind::Symbol) why = "a __device__ variable is not freed";
      else if (it != allocs().end()) why = host ? "not cudaMallocHost memory (use cudaFree)" : "host memory from cudaMallocHost (use cudaFreeHost)";
      else if (const Freed* f = find_freed(x, &base); f && base == x) why = "already " + freed_text(base, *f);
      else if (find(p, &base)) why = strf("not the start of an allocation (byte %zu of %p)", size_t(x - base), reinterpret_cast<void*>(base));
      else why = "not an allocation of this device";
      return refuse(cudaErrorInvalidValue, strf("%s(%p)", call, p).c_str(), "%s", why.c_str());
    }
    if (it->second.kind == Kind::Device) bad = check_redzones(it->second.map, it->second.size);
    size = it->second.size;
    // Only device memory: malloc reuses freed host memory at once, for anything.
    auto& f = freed();
    if (f.size() >= kMaxFreed) f.erase(f.begin());
    if (it->second.kind == Kind::Device) f[x] = Freed{size, it->second.kind, pc};
    dispose(it->first, it->second);
    allocs().erase(it);
  }
  if (!bad.empty())
    report_fault(cudaErrorIllegalAddress,
                 strf("out-of-bounds write into cudaMalloc allocation %p (%zu bytes), found at its "
                      "cudaFree: %s",
                      p, size, bad.c_str()));
  return cudaSuccess;
}

thread_local std::vector<uintptr_t> tl_launch_allocs;
}  // namespace

bool is_kernel_accessible(const void* p) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  return find(p) != nullptr;
}

bool device_range(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  uintptr_t base = 0;
  const Alloc* a = find(p, &base);
  return a && device_like(a->kind) && reinterpret_cast<uintptr_t>(p) - base <= a->size &&
         bytes <= a->size - (reinterpret_cast<uintptr_t>(p) - base);
}

const void* program_address(const void* p) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  const uintptr_t x = reinterpret_cast<uintptr_t>(p);
  auto& v = views();
  auto it = v.upper_bound(x);
  if (it == v.begin()) return p;
  --it;
  const Alloc& a = allocs().at(it->second);
  if (x > it->first + a.size) return p;
  return reinterpret_cast<const void*>(it->second + (x - it->first));
}

void* device_view(const void* p) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  char* view = nullptr;
  return find(p, nullptr, &view) ? view : const_cast<void*>(p);
}

void begin_launch_pointers() { tl_launch_allocs.clear(); }

std::string freed_description(const void* p) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  uintptr_t base = 0;
  if (find(p)) return "";
  const Freed* f = find_freed(reinterpret_cast<uintptr_t>(p), &base);
  return f ? freed_text(base, *f) : "";
}

bool resolve_kernel_pointer(const void* p, const void** out) {
  std::lock_guard<std::mutex> lk(mem_mutex());
  uintptr_t base = 0;
  char* view = nullptr;
  const Alloc* a = find(p, &base, &view);
  if (!a) return false;
  *out = view;
  if (a->kind == Kind::Device)
    tl_launch_allocs.push_back(reinterpret_cast<uintptr_t>(a->map.host + kRedzone));
  return true;
}

void check_launch_redzones(const char* kernel, const char* file, int line) {
  std::string msg;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    for (size_t i = 0; i < tl_launch_allocs.size(); ++i) {
      const uintptr_t key = tl_launch_allocs[i];
      bool seen = false;
      for (size_t j = 0; j < i && !seen; ++j) seen = tl_launch_allocs[j] == key;
      auto it = allocs().find(key);
      if (seen || it == allocs().end()) continue;
      const std::string bad = check_redzones(it->second.map, it->second.size);
      if (!bad.empty() && msg.empty())
        msg = strf("kernel '%s' (launched at %s:%d) wrote out of bounds of cudaMalloc allocation "
                   "%p (%zu bytes): %s",
                   kernel, file, line, reinterpret_cast<void*>(key), it->second.size, bad.c_str());
    }
    tl_launch_allocs.clear();
  }
  if (!msg.empty()) report_fault(cudaErrorIllegalAddress, msg);
}

void check_all_redzones(const char* when) {
  std::string msg;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    for (auto& [key, a] : allocs()) {
      if (a.kind != Kind::Device) continue;
      const std::string bad = check_redzones(a.map, a.size);
      if (!bad.empty() && msg.empty())
        msg = strf("out-of-bounds write into cudaMalloc allocation %p (%zu bytes), found at %s: %s",
                   reinterpret_cast<void*>(key), a.size, when, bad.c_str());
    }
  }
  if (!msg.empty()) report_fault(cudaErrorIllegalAddress, msg);
}

bool lookup_fault_address(uintptr_t x, FaultedAlloc* out) {
  // Called from the SIGSEGV handler: never block (the faulting thread might hold the lock).
  std::mutex& m = mem_mutex();
  bool locked = false;
  for (int i = 0; i < 1000 && !(locked = m.try_lock()); ++i) sched_yield();
  if (!locked) return false;
  const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bool found = false;
  for (auto& [key, a] : allocs()) {
    if (a.kind != Kind::Device) continue;
    const uintptr_t h = reinterpret_cast<uintptr_t>(a.map.host);
    const uintptr_t d = reinterpret_cast<uintptr_t>(a.map.dev);
    if (x >= h && x < h + a.map.file_bytes) {
      out->in_host_view = true;
      out->host_addr = x;
    } else if (x >= d - pg && x < d + a.map.file_bytes + pg) {
      out->in_host_view = false;
      out->host_addr = h + (x - d);  // may lie outside the host view: only for messages
    } else {
      continue;
    }
    out->base = key;
    out->size = a.size;
    out->map = a.map;
    found = true;
    break;
  }
  m.unlock();
  return found;
}

void free_all_allocations() {
  std::lock_guard<std::mutex> lk(mem_mutex());
  for (auto& [base, a] : allocs()) dispose(base, a);
  allocs().clear();
  views().clear();
}

}  // namespace sim::detail

// A library with its own device access (the emulated CUDA-aware MPI) may write anywhere in the
// allocation: initcheck counts all of it as written from here on.
void* sim::device_view(const void* p) {
  void* v = sim::detail::device_view(p);
  sim::detail::mark_allocation_written(v);
  return v;
}

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
  return release(p, false, __builtin_return_address(0));
}
cudaError_t cudaFreeHost(void* p) {
  if (lazy_streams() && !in_replay()) lazy_drain_all();  // queued copies may target it
  return release(p, true, __builtin_return_address(0));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids(nullptr, /*legacy_work=*/true)) return e;
  if (static_cast<unsigned>(kind) > 4) return set_error(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  if (!dst || !src || !copy_ok(dst, src, count, kind)) return set_error(cudaErrorInvalidValue);
  if (!in_replay()) pdl_stream_op(nullptr);  // the legacy stream: after every stream's work
  if (g_pending_write) {  // a queued copy reads what a queued collective has still to write
    const std::string why = g_pending_write(reinterpret_cast<uintptr_t>(src), count);
    if (!why.empty())
      report_fault(cudaErrorLaunchFailure,
                   strf("cudaMemcpyAsync read device memory %p (%zu bytes) before the collective that "
                        "writes it ran: %s", program_address(src), count, why.c_str()));
  }
  std::memcpy(dst, src, count);
  copy_written(dst, src, count);  // initcheck: dst is as written as src (host memory: all)
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
  // In the lazy mode a queued copy's pinned host range is fenced from host code until it runs
  // (pinned.cpp); the node releases it first.
  auto armed = std::make_shared<std::atomic<unsigned long long>>(0);
  switch (capture_node(stream, [=] {
    pin_release(armed->exchange(0));
    pdl_stream_op(stream);
    ReplayScope r;
    cudaMemcpy(dst, src, count, kind);
  })) {
    case CaptureVerdict::Captured: return cudaSuccess;
    case CaptureVerdict::Deferred: {
      uintptr_t base = 0;
      size_t size = 0;
      const void* host = nullptr;
      bool writes = false;
      {
        std::lock_guard<std::mutex> lk(mem_mutex());
        for (int side = 0; side < 2 && !host; ++side) {
          const void* h = side ? src : dst;
          const Alloc* a = find(h, &base);
          const void* other = side ? dst : src;
          if (a && a->kind == Kind::Host && count <= a->size - (reinterpret_cast<uintptr_t>(h) - base)) {
            const Alloc* o = find(other);
            if (o && o->kind == Kind::Device) host = h, writes = side == 0, size = a->size;
          }
        }
      }
      if (host)
        armed->store(pin_arm(host, count, writes, base, size, dst, src, kind, stream, __builtin_return_address(0)));
      return cudaSuccess;
    }
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  pdl_stream_op(stream);
  ReplayScope r;  // an async copy on a stream that does not capture is no sync point
  return cudaMemcpy(dst, src, count, kind);
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids(nullptr, /*legacy_work=*/true)) return e;
  if (static_cast<unsigned>(kind) > 4) return set_error(cudaErrorInvalidMemcpyDirection);
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return set_error(cudaErrorInvalidPitchValue);
  if (!dst || !src) return set_error(cudaErrorInvalidValue);
  void* dlast = static_cast<char*>(dst) + dpitch * (height - 1);
  const void* slast = static_cast<const char*>(src) + spitch * (height - 1);
  if (!copy_ok(dlast, slast, width, kind) || !copy_ok(dst, src, 1, kind))
    return set_error(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                width);
    copy_written(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  }
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t count) {
  if (const cudaError_t e = sticky_error()) return set_error(e);
  if (const cudaError_t e = capture_forbids(nullptr, /*legacy_work=*/true)) return e;
  if (count == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lk(mem_mutex());
    if (!p || !side_ok(p, count, true)) return set_error(cudaErrorInvalidValue);
  }
  if (!in_replay()) pdl_stream_op(nullptr);
  std::memset(p, value, count);
  mark_written(p, count);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t stream) {
  if (!stream_valid(stream)) return set_error(cudaErrorInvalidResourceHandle);
  switch (capture_node(stream, [=] {
    pdl_stream_op(stream);
    ReplayScope r;
    cudaMemset(p, value, count);
  })) {
    case CaptureVerdict::Captured:
    case CaptureVerdict::Deferred: return cudaSuccess;
    case CaptureVerdict::Refused: return tl_last_error;
    case CaptureVerdict::Run: break;
  }
  pdl_stream_op(stream);
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
    if (kind != cudaMemcpyDefault ? !side_ok(buf, count, buf_dev)
                                  : (find(buf) && !side_ok(buf, count, true)))
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
