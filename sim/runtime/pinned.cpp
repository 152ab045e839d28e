// Host access to pinned memory that a queued cudaMemcpyAsync still reads or writes. In the lazy
// stream mode (runtime/lazy.cpp) an async copy between device memory and cudaMallocHost memory
// waits in its stream's queue until something forces it. While it waits, the pages of its host
// range are protected: PROT_NONE when the copy will write them (device to host: the host must
// neither read nor write them yet), PROT_READ when it will read them (host to device: the host
// must not overwrite them). The copy unprotects them when it runs, i.e. once the stream, an
// event recorded after the copy, or a synchronous call forced it. A host access before that
// faults, and the SIGSEGV handler here names the access, the allocation and offset, and the
// copy (its call site and stream): what a GPU does silently (the host reads stale data or
// corrupts what the copy sends). cudaMallocHost memory is mmap'd per allocation (its own
// pages); a page that also holds bytes outside any pending copy's range is given back to the
// program at the first such access (then that page is not checked until its copies ran).
// Accesses by device work (another queued copy, a kernel) are never faults here.
// Tested by tests/sim/test_sim_pinned.cu, sim/examples/bugs/pinned_read_before_sync.cu.
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>

#include "internal.h"

namespace sim::detail {

namespace {
struct PinCopy {
  uintptr_t lo, hi;  // the host range
  bool copy_writes;  // device to host
  const void* dst;
  const void* src;
  size_t count;
  int kind;
  const void* stream;
  const void* pc;   // the cudaMemcpyAsync call
  uintptr_t alloc;  // the cudaMallocHost allocation
  size_t alloc_size;
};
struct PageState {
  int none = 0, ro = 0;  // pending copies that write / read the page
  bool loose = false;    // given back to the program (an access outside every pending range)
};
std::mutex g_m;
std::map<unsigned long long, PinCopy> g_copies;
std::map<uintptr_t, PageState> g_pages;
unsigned long long g_next = 0;
struct sigaction g_previous {};
std::atomic<bool> g_installed{false};

size_t page_size() {
  static const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return pg;
}
void apply(uintptr_t page, const PageState& s) {  // g_m held
  const int prot = s.loose || (!s.none && !s.ro) ? PROT_READ | PROT_WRITE : s.none ? PROT_NONE : PROT_READ;
  mprotect(reinterpret_cast<void*>(page), page_size(), prot);
}
template <class F>
void each_page(uintptr_t lo, uintptr_t hi, F f) {
  const size_t pg = page_size();
  for (uintptr_t p = lo & ~(pg - 1); p < hi; p += pg) f(p);
}

const char* kind_text(int k) {
  switch (k) {
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
    default: return "?";
  }
}

void chain(int sig, siginfo_t* si, void* uc) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, si, uc);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);  // returning re-raises the fault with the default action
}

void segv(int sig, siginfo_t* si, void* uc) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
  const uintptr_t page = a & ~(page_size() - 1);
  bool is_write = false;
#if defined(__x86_64__)
  if (uc) is_write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
  int spins = 0;
  while (!g_m.try_lock())
    if (++spins > 1000000) return chain(sig, si, uc);
  auto it = g_pages.find(page);
  if (it == g_pages.end()) {
    g_m.unlock();
    return chain(sig, si, uc);
  }
  const Worker* w = tl_worker;
  const bool device_work = in_replay() || (w && w->in_block);
  const PinCopy* hit = nullptr;
  if (!device_work)
    for (const auto& [id, c] : g_copies)
      if (a >= c.lo && a < c.hi && (c.copy_writes || is_write)) {
        hit = &c;
        break;
      }
  PinCopy c{};
  if (hit) c = *hit;
  // Device work, an access outside every pending range, or (record mode) after the report:
  // the page is the program's again; the access is retried.
  it->second.loose = true;
  apply(page, it->second);
  g_m.unlock();
  if (!hit) return;
  const std::string at = code_line(c.pc);
  report_fault(cudaErrorLaunchFailure,
               strf("host code %s pinned memory at %p, byte %zu of cudaMallocHost allocation %p (%zu bytes), "
                    "while cudaMemcpyAsync(%p, %p, %zu, %s) on stream %p%s%s is still queued to %s it: "
                    "synchronise the stream (cudaStreamSynchronize) or an event recorded after the copy "
                    "(cudaEventSynchronize) first (a GPU %s silently)",
                    is_write ? "wrote" : "read", si->si_addr, static_cast<size_t>(a - c.alloc),
                    reinterpret_cast<void*>(c.alloc), c.alloc_size, c.dst, c.src, c.count, kind_text(c.kind),
                    c.stream, at.empty() ? "" : " called at ", at.c_str(), c.copy_writes ? "write" : "read",
                    c.copy_writes ? (is_write ? "overwrites the host's data with the copy's later"
                                              : "gives the host stale data")
                                  : "copies the host's new data instead of the old"));
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
    g_installed.store(true);
  });
}
}  // namespace

void* pinned_alloc(size_t size) {
  const size_t pg = page_size();
  void* p = mmap(nullptr, (size + pg - 1) / pg * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
void pinned_free(void* p, size_t size) {
  const size_t pg = page_size();
  {
    std::lock_guard<std::mutex> lk(g_m);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + size;
    each_page(lo, hi, [](uintptr_t q) { g_pages.erase(q); });
    // Copies dropped unrun (cudaDeviceReset deletes queues) must not name later allocations.
    for (auto it = g_copies.begin(); it != g_copies.end();)
      it = it->second.lo < hi && it->second.hi > lo ? g_copies.erase(it) : std::next(it);
  }
  munmap(p, (size + pg - 1) / pg * pg);
}

unsigned long long pin_arm(const void* host, size_t n, bool copy_writes, uintptr_t alloc, size_t alloc_size,
                           const void* dst, const void* src, int kind, const void* stream, const void* pc) {
  if (!n) return 0;
  install();
  std::lock_guard<std::mutex> lk(g_m);
  const unsigned long long id = ++g_next;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(host);
  g_copies[id] = PinCopy{lo, lo + n, copy_writes, dst, src, n, kind, stream, pc, alloc, alloc_size};
  each_page(lo, lo + n, [&](uintptr_t q) {
    PageState& s = g_pages[q];
    ++(copy_writes ? s.none : s.ro);
    apply(q, s);
  });
  return id;
}

void pin_release(unsigned long long id) {
  if (!id) return;
  std::lock_guard<std::mutex> lk(g_m);
  auto it = g_copies.find(id);
  if (it == g_copies.end()) return;
  const PinCopy c = it->second;
  g_copies.erase(it);
  each_page(c.lo, c.hi, [&](uintptr_t q) {
    auto p = g_pages.find(q);
    if (p == g_pages.end()) return;
    PageState& s = p->second;
    --(c.copy_writes ? s.none : s.ro);
    if (!s.none && !s.ro) s.loose = false;
    apply(q, s);
    if (!s.none && !s.ro) g_pages.erase(p);
  });
}

}  // namespace sim::detail
