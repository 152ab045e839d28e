// Device memory that host code cannot touch, as on a GPU. Each cudaMalloc is a memfd mapped
// twice: the HOST VIEW, whose address cudaMalloc returns, is PROT_NONE, so host code that
// dereferences a device pointer faults at once; the DEVICE VIEW, always read-write and fenced
// by guard pages, is what kernels (their pointer arguments are translated at the launch),
// copies and the emulated cuBLAS use. Red zones on both sides of the bytes are checked after
// every kernel that was given the allocation, at cudaFree and at cudaDeviceSynchronize.
// One SIGSEGV handler names the allocation a host access or a far out-of-bounds access hit.
// Tested by tests/sim/test_sim_fence.cu and sim/examples/bugs.
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "internal.h"
#include "sim/sim_api.h"

#if SIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace sim::detail {

namespace {
size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Red-zone filling and checking read bytes that AddressSanitizer (in SANITIZE builds) has
// poisoned on purpose, so these helpers are not instrumented and use no intercepted calls.
// (volatile: GCC must not turn the loop into a memset call, which ASan would check.)
__attribute__((no_sanitize_address)) void fill_bytes(unsigned char* p, size_t n, unsigned char v) {
  volatile unsigned char* q = p;
  for (size_t i = 0; i < n; ++i) q[i] = v;
}
// Index of the first byte in [p, p+n) that is not v, or n.
__attribute__((no_sanitize_address)) size_t first_not(const unsigned char* p, size_t n,
                                                      unsigned char v) {
  size_t i = 0;
  uint64_t pat;
  std::memset(&pat, v, sizeof pat);
  for (; i < n && (reinterpret_cast<uintptr_t>(p + i) & 7); ++i)
    if (p[i] != v) return i;
  for (; i + 8 <= n; i += 8)
    if (*reinterpret_cast<const uint64_t*>(p + i) != pat) break;
  for (; i < n; ++i)
    if (p[i] != v) return i;
  return n;
}
// Index of the last byte in [p, p+n) that is not v, or n.
__attribute__((no_sanitize_address)) size_t last_not(const unsigned char* p, size_t n,
                                                     unsigned char v) {
  for (size_t i = n; i-- > 0;)
    if (p[i] != v) return i;
  return n;
}

void poison(void* p, size_t n) {
#if SIM_ASAN
  __asan_poison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}
void unpoison(void* p, size_t n) {
#if SIM_ASAN
  __asan_unpoison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}
}  // namespace

bool map_device(size_t size, DeviceMapping* m) {
  const size_t pg = page_size();
  const size_t file = (kRedzone + size + kRedzone + pg - 1) / pg * pg;
  const int fd = memfd_create("sim-device-memory", MFD_CLOEXEC);
  if (fd < 0) return false;
  void* host = MAP_FAILED;
  void* reserve = MAP_FAILED;
  bool ok = ftruncate(fd, static_cast<off_t>(file)) == 0;
  if (ok) {
    host = mmap(nullptr, file, PROT_NONE, MAP_SHARED, fd, 0);
    reserve = mmap(nullptr, file + 2 * pg, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ok = host != MAP_FAILED && reserve != MAP_FAILED &&
         mmap(static_cast<char*>(reserve) + pg, file, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
  }
  close(fd);
  if (!ok) {
    if (host != MAP_FAILED) munmap(host, file);
    if (reserve != MAP_FAILED) munmap(reserve, file + 2 * pg);
    return false;
  }
  m->host = static_cast<char*>(host);
  m->dev = static_cast<char*>(reserve) + pg;
  m->file_bytes = file;
  auto* d = reinterpret_cast<unsigned char*>(m->dev);
  // ASan: the addresses may have been something else before (a fiber stack, say) whose
  // shadow is still poisoned; the new mapping starts clean.
  unpoison(d, file);
  fill_bytes(d, kRedzone, kRedzoneByte);
  std::memset(d + kRedzone, 0xFF, size);  // fresh memory is all-ones bytes: NaN for float/double
  fill_bytes(d + kRedzone + size, file - kRedzone - size, kRedzoneByte);
  poison(d, kRedzone);
  poison(d + kRedzone + size, file - kRedzone - size);
  return true;
}

void unmap_device(const DeviceMapping& m) {
  const size_t pg = page_size();
  unpoison(m.dev, m.file_bytes);  // a later mapping may reuse the addresses
  munmap(m.host, m.file_bytes);
  munmap(m.dev - pg, m.file_bytes + 2 * pg);
}

std::string check_redzones(const DeviceMapping& m, size_t size) {
  auto* d = reinterpret_cast<unsigned char*>(m.dev);
  const size_t tail = m.file_bytes - kRedzone - size;
  const size_t f = first_not(d, kRedzone, kRedzoneByte);
  const size_t t = last_not(d + kRedzone + size, tail, kRedzoneByte);
  std::string what;
  if (f < kRedzone)
    what = strf("a write %zu bytes before its start", kRedzone - f);
  if (t < tail)
    what += strf("%sa write %zu bytes past its end (byte offset %zu of a %zu-byte allocation)",
                 what.empty() ? "" : " and ", t + 1, size + t, size);
  if (!what.empty()) {  // restore, so the same corruption is reported once
    fill_bytes(d, kRedzone, kRedzoneByte);
    fill_bytes(d + kRedzone + size, tail, kRedzoneByte);
  }
  return what;
}

// ---- host views opened for kernels ---------------------------------------------------
// A kernel may reach device memory through a pointer the launch could not translate (one
// stored in device memory, or inside a struct argument). Its first touch faults; the handler
// opens that allocation's host view for the rest of the launch, and the launch closes it.
namespace {
constexpr int kMaxOpened = 256;
std::atomic<char*> g_opened[kMaxOpened];
std::atomic<size_t> g_opened_len[kMaxOpened];
std::atomic<int> g_nopened{0};
std::mutex& open_mutex() {  // taken by the launching thread only, never in the handler
  static auto* m = new std::mutex();
  return *m;
}

bool open_host_view(char* base, size_t len) {
  const int i = g_nopened.fetch_add(1);
  if (i >= kMaxOpened) {
    g_nopened.fetch_sub(1);
    return false;
  }
  if (mprotect(base, len, PROT_READ | PROT_WRITE) != 0) return false;
  g_opened_len[i].store(len);
  g_opened[i].store(base);
  return true;
}
}  // namespace

void close_opened_host_views() {
  if (g_nopened.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lk(open_mutex());
  const int n = std::min(g_nopened.load(), kMaxOpened);
  for (int i = 0; i < n; ++i) {
    if (char* b = g_opened[i].exchange(nullptr)) mprotect(b, g_opened_len[i].load(), PROT_NONE);
  }
  g_nopened.store(0);
}

// ---- the SIGSEGV handler --------------------------------------------------------------
namespace {
struct sigaction g_previous {};

void say(const char* s, int n) {
  if (n > 0) (void)!write(2, s, static_cast<size_t>(std::min<int>(n, 1023)));
}

[[noreturn]] void die() {
  signal(SIGABRT, SIG_DFL);
  abort();
}

void chain(int sig, siginfo_t* si, void* uc) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, si, uc);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);  // returning re-raises the fault with the default action
}

// "12 bytes past the end of", "inside", "8 bytes before the start of".
int relation(char* out, size_t cap, uintptr_t a, uintptr_t base, size_t size) {
  if (a < base) return std::snprintf(out, cap, "%zu bytes before the start of", size_t(base - a));
  if (a >= base + size)
    return std::snprintf(out, cap, "%zu bytes past the end of", size_t(a - (base + size)));
  return std::snprintf(out, cap, "byte %zu of", size_t(a - base));
}

void segv_handler(int sig, siginfo_t* si, void* uc) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
  bool is_write = false;
#if defined(__x86_64__)
  if (uc) is_write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
  const Worker* w = tl_worker;
  const bool in_kernel = w && w->in_block;
  FaultedAlloc f;
  if (lookup_fault_address(a, &f)) {
    char rel[96];
    char buf[1024];
    int n = 0;
    if (f.in_host_view) {
      if (in_kernel && open_host_view(f.map.host, f.map.file_bytes)) return;  // retry the access
      relation(rel, sizeof rel, a, f.base, f.size);
      n = std::snprintf(
          buf, sizeof buf,
          "sim: host code %s device memory at %p, %s cudaMalloc allocation %p (%zu bytes): device "
          "memory is not host memory (a GPU program segfaults here). Copy it with cudaMemcpy, or "
          "allocate with cudaMallocHost/cudaMallocManaged for host access\n",
          is_write ? "wrote" : "read", si->si_addr, rel, reinterpret_cast<void*>(f.base), f.size);
    } else {
      relation(rel, sizeof rel, f.host_addr, f.base, f.size);
      const char* acc = is_write ? "write" : "read";
      if (in_kernel && w->L)
        n = std::snprintf(buf, sizeof buf,
                          "sim: kernel '%s' (launched at %s:%d): out-of-bounds %s of global memory "
                          "at %p, %s cudaMalloc allocation %p (%zu bytes) (cudaErrorIllegalAddress)\n",
                          w->L->name, w->L->file, w->L->line, acc,
                          reinterpret_cast<void*>(f.host_addr), rel,
                          reinterpret_cast<void*>(f.base), f.size);
      else
        n = std::snprintf(buf, sizeof buf,
                          "sim: out-of-bounds %s of device memory at %p, %s cudaMalloc allocation "
                          "%p (%zu bytes)\n",
                          acc, reinterpret_cast<void*>(f.host_addr), rel,
                          reinterpret_cast<void*>(f.base), f.size);
    }
    say(buf, n);
    die();
  }
  if (describe_stack_overflow(a)) {
    signal(sig, SIG_DFL);
    return;
  }
  if (in_kernel && w->L) {  // an address in no allocation: a wild or far out-of-bounds pointer
    char buf[512];
    const int n = std::snprintf(
        buf, sizeof buf,
        "sim: kernel '%s' (launched at %s:%d): %s of address %p, which is in no device "
        "allocation (out of bounds or a wild pointer; cudaErrorIllegalAddress)\n",
        w->L->name, w->L->file, w->L->line, is_write ? "write" : "read", si->si_addr);
    say(buf, n);
    die();
  }
  chain(sig, si, uc);
}
}  // namespace

void install_segv_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
  });
}

}  // namespace sim::detail
