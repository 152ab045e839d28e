// Fiber stacks (mmap with a guard page, allocated once per worker and reused),
// fiber entry points for both backends, and the per-OS-thread Worker.
// Tested by tests/sim and the examples in sim/examples.
#include "fiber.h"
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>

namespace sim::detail {

__thread Worker* tl_worker = nullptr;
__thread ThreadPub* tl_thread = nullptr;
__thread BlockPub* tl_block = nullptr;
}  // namespace sim::detail
__thread ::dim3 sim_blockDim_, sim_gridDim_;
namespace sim::detail {

namespace {
#if SIM_FIBER_UCONTEXT
void fiber_entry_uc() {
  Worker* w = tl_worker;
  SIM_FINISH_SWITCH(nullptr, &w->sched_stack_lo, &w->sched_stack_size);
  for (;;) {
    w->run_thread();
    w->yield();
  }
}
#else
void fiber_entry_fc(boost::context::detail::transfer_t t) {
  Worker* w = static_cast<Worker*>(t.data);
  w->sched_fc = t.fctx;
  SIM_FINISH_SWITCH(nullptr, &w->sched_stack_lo, &w->sched_stack_size);
  for (;;) {
    w->run_thread();
    w->yield();
  }
}
#endif
}  // namespace

// A kernel thread that overflows its fiber stack hits the guard page: say so (called by the
// SIGSEGV handler in devmem.cpp).
bool describe_stack_overflow(uintptr_t addr) {
  const Worker* w = tl_worker;
  const char* a = reinterpret_cast<const char*>(addr);
  if (!w) return false;
  for (int i = 0; i < w->nfibers; ++i) {
    const Fiber& f = w->fibers[i];
    if (a >= f.map && a < f.stack_lo + 4096) {
      char buf[512];
      const int n = std::snprintf(
          buf, sizeof buf,
          "sim: fiber stack overflow in kernel '%s' (launched at %s:%d): a thread used more "
          "than its %zu KiB stack; raise SIM_STACK_KB\n",
          w->L ? w->L->name : "?", w->L ? w->L->file : "?", w->L ? w->L->line : 0,
          settings().stack_bytes / 1024);
      if (n > 0) (void)!write(2, buf, static_cast<size_t>(n));
      return true;
    }
  }
  return false;
}

namespace {
// The handler runs on an alternate stack: a fiber that overflowed has none left.
void install_overflow_handler() {
  install_segv_handler();

  stack_t cur {};
  if (sigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return;  // has one
  thread_local std::unique_ptr<char[]> alt(new char[65536]);
  stack_t ss {};
  ss.ss_sp = alt.get();
  ss.ss_size = 65536;
  sigaltstack(&ss, nullptr);
}
}  // namespace

Worker::Worker()
    : ctx(new ThreadCtx[kMaxThreads]()),
      warps(new WarpState[kMaxThreads / 32]()),
      ready(new int[kMaxThreads]),
      list(new int[kMaxThreads]),
      fibers(new Fiber[kMaxThreads]) {
  block.slots = nullptr;
  block.nslots = 0;
  block.dyn_smem = nullptr;
}

Worker::~Worker() {
  if (tl_worker == this) tl_worker = nullptr;
  async_free(*this);
  for (int i = 0; i < nfibers; ++i) {
#if SIM_ASAN
    // A fiber's frames leave AddressSanitizer's stack poison in the shadow of its stack; a later
    // mapping at the same addresses (a cooperative launch's blocks start and end workers) would
    // inherit it and be reported as a stack-buffer-underflow.
    __asan_unpoison_memory_region(fibers[i].map, fibers[i].map_size);
#endif
    munmap(fibers[i].map, fibers[i].map_size);
  }
}

void Worker::reset_fiber(int i) {
  Fiber& f = fibers[i];
#if SIM_ASAN
  // An abandoned fiber may leave poisoned stack redzones behind.
  __asan_unpoison_memory_region(f.stack_lo, f.stack_size);
#endif
  f.fake_stack = nullptr;
  // Cache colouring: stacks are a power-of-two-ish distance apart, so their tops
  // would share cache sets; start each fiber's stack at a different offset.
  const size_t color = (static_cast<size_t>(i) * 17 * 64) % 65536;
  const size_t usable = f.stack_size - color;
#if SIM_FIBER_UCONTEXT
  getcontext(&f.uc);
  f.uc.uc_stack.ss_sp = f.stack_lo;
  f.uc.uc_stack.ss_size = usable;
  f.uc.uc_link = nullptr;
  makecontext(&f.uc, fiber_entry_uc, 0);
#else
  f.fc = boost::context::detail::make_fcontext(f.stack_lo + usable, usable, fiber_entry_fc);
#endif
}

void Worker::ensure_fibers(int count) {
  if (count <= nfibers) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // + 64 KiB for the cache colouring offsets of reset_fiber
  const size_t size = (settings().stack_bytes + 65536 + page - 1) / page * page;
  for (; nfibers < count; ++nfibers) {
    Fiber& f = fibers[nfibers];
    f.map_size = size + page;
    void* m = mmap(nullptr, f.map_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "sim: cannot map a fiber stack of %zu bytes\n", f.map_size);
      std::abort();
    }
    f.map = static_cast<char*>(m);
    mprotect(f.map, page, PROT_NONE);  // guard page: a stack overflow faults
    f.stack_lo = f.map + page;
    f.stack_size = size;
    reset_fiber(nfibers);
  }
}

void Worker::run_thread() {
  ThreadCtx* c = &ctx[cur];
  try {
    L->invoke(L->state);
    c->state = kExited;
  } catch (const FiberAbort&) {
    c->state = kFaulted;
  } catch (const std::exception& e) {
    report_fault(cudaErrorLaunchFailure,
                 strf("uncaught exception in %s: %s", where().c_str(), e.what()));
    c->state = kFaulted;
  } catch (...) {
    report_fault(cudaErrorLaunchFailure, strf("uncaught exception in %s", where().c_str()));
    c->state = kFaulted;
  }
}

Worker* this_worker() {
  thread_local std::unique_ptr<Worker> w;
  if (!w) {
    w.reset(new Worker());
    tl_worker = w.get();
    install_overflow_handler();
  }
  return w.get();
}

}  // namespace sim::detail
