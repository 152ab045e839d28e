// The runtime side of sim/strict.h: launches over a kernel's __launch_bounds__ are refused
// (and the bounds are kept by kernel address for cudaFuncGetAttributes),
// misaligned atomics and (through GCC's -fsanitize=alignment, which simcc turns on for .cu
// files) misaligned loads and stores in kernels are cudaErrorMisalignedAddress faults.
// Tested by tests/sim/test_sim_bounds_align.cu and sim/examples/bugs/.
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include "fiber.h"

namespace sim::detail {

__thread const void* tl_kernel_fn = nullptr;
__thread const void* tl_bounds_noted = nullptr;

// The launch bounds known by kernel address: registered by simcc's static initialisers
// (non-template kernels) or recorded by the check when a kernel template's instantiation
// first runs. Read by cudaFuncGetAttributes and the occupancy calls (api.cpp).
namespace {
struct BoundsRegistry {
  std::mutex m;
  std::unordered_map<const void*, long long> max_threads;
};
BoundsRegistry& bounds_registry() {  // constructed on first use: static initialisers call it
  static BoundsRegistry* r = new BoundsRegistry();
  return *r;
}
}  // namespace

bool register_launch_bounds(const void* fn, const Bounds& b) {
  if (!fn || b.max_threads <= 0) return false;
  BoundsRegistry& r = bounds_registry();
  std::lock_guard<std::mutex> lk(r.m);
  r.max_threads.emplace(fn, b.max_threads);
  return true;
}
void note_launch_bounds(const Bounds& b) {
  register_launch_bounds(tl_kernel_fn, b);
  tl_bounds_noted = tl_kernel_fn;
}
long long registered_max_threads(const void* fn) {
  BoundsRegistry& r = bounds_registry();
  std::lock_guard<std::mutex> lk(r.m);
  auto it = r.max_threads.find(fn);
  return it == r.max_threads.end() ? 0 : it->second;
}

namespace {
// True when the caller runs on the stack of the worker's current kernel thread (not on the
// scheduler's stack, and not in host code).
bool on_kernel_fiber(const Worker* w) {
  if (!w || !w->in_block || w->cur < 0 || w->cur >= w->nfibers) return false;
  const Fiber& f = w->fibers[w->cur];
  const char* frame = static_cast<const char*>(__builtin_frame_address(0));
  return frame >= f.stack_lo && frame < f.stack_lo + f.stack_size;
}

// Leaves the fiber of a thread whose fault was reported, for good: the scheduler sees a
// faulted thread and abandons the block (its fibers are reset, never resumed). No
// exception: GCC declares the UBSan handlers nothrow, so unwinding through their callers
// would terminate the process. Whatever the caller's frames own is not released: callers
// destroy their own strings first.
[[noreturn]] void park_faulted(Worker* w) {
  w->ctx[w->cur].state = kFaulted;
  w->yield();
  std::fprintf(stderr, "sim: a faulted kernel thread was resumed\n");
  std::abort();
}
}  // namespace

// A GPU refuses such a launch. The CUDA C++ Programming Guide (launch bounds): "A kernel
// will fail to launch if it is executed with more threads per block than its launch bound
// maxThreadsPerBlock"; cudaFuncAttributes::maxThreadsPerBlock is documented as "the maximum
// number of threads per block, beyond which a launch of the function would fail". The error
// is cudaErrorInvalidValue, a launch error that leaves the context usable (not sticky): what
// CUDA 13.0's runtime returned on an H200 (driver 580.159.04, tests/sim/test_sim_bounds_align.cu),
// not the 701 that the documentation of cudaErrorLaunchOutOfResources ("too many threads for
// the kernel's register count") suggests.
void launch_bounds_exceeded(const Bounds& b, unsigned long long threads, const char* file, int line) {
  Worker* w = tl_worker;
  if (!w || !w->in_block || !w->L) return;
  Launch& L = *w->L;
  int none = 0;
  if (L.refused.compare_exchange_strong(none, cudaErrorInvalidValue) &&
      settings().fault_mode == FaultMode::Abort) {
    const std::string bounds =
        b.min_blocks || b.max_cluster
            ? strf("%lld, %lld%s", b.max_threads, b.min_blocks,
                   b.max_cluster ? strf(", %lld", b.max_cluster).c_str() : "")
            : strf("%lld", b.max_threads);
    std::fprintf(stderr,
                 "sim: launch of kernel '%s' at %s:%d refused (cudaErrorInvalidValue): "
                 "block of %llu threads (%ux%ux%u) is over the kernel's __launch_bounds__(%s) "
                 "at %s:%d\n",
                 L.name, L.file, L.line, threads, L.block.x, L.block.y, L.block.z, bounds.c_str(),
                 file, line);
  }
  L.aborted.store(true);
  throw FiberAbort{};  // first statement of the kernel: nothing of it has run
}

void misaligned_access(const void* p, std::size_t align, const char* op, const char* file, int line) {
  Worker* w = tl_worker;
  if (!on_kernel_fiber(w)) {
    std::fprintf(stderr, "sim: misaligned address in host code: %s on %p, which needs %zu-byte "
                 "alignment, at %s:%d\n", op, p, align, file, line);
    std::abort();
  }
  const ThreadCtx& c = w->ctx[w->cur];
  w->fiber_fault(cudaErrorMisalignedAddress,
                 strf("misaligned address: %s on %p, which needs %zu-byte alignment, at %s:%d, "
                      "thread %s of %s",
                      op, program_address(p), align, file, line, tid_str(c).c_str(),
                      w->where().c_str()));
}

}  // namespace sim::detail

// ---- the UBSan handler for -fsanitize=alignment (also reached for null pointers and
// object sizes when the build adds -fsanitize=undefined) ----------------------------------
// GCC's data record for a type-mismatch check (the same layout as the "v1" record of
// LLVM's compiler-rt UBSan runtime, whose libubsan GCC uses).
namespace {
struct UbsanLocation {
  const char* file;
  unsigned line, column;
};
struct UbsanType {
  unsigned short kind, info;
  char name[1];  // NUL-terminated; GCC writes it quoted ('const float4')
};
struct UbsanTypeMismatch {
  UbsanLocation loc;
  const UbsanType* type;
  unsigned char log_alignment;
  unsigned char check_kind;
};
using UbsanHandler = void (*)(UbsanTypeMismatch*, std::uintptr_t);

const char* check_kind_name(unsigned k) {
  static const char* const names[] = {"load of", "store to", "reference binding to",
                                      "member access within", "member call on",
                                      "constructor call on", "downcast of", "downcast of",
                                      "upcast of", "cast to virtual base of",
                                      "_Nonnull binding to", "dynamic operation on"};
  return k < sizeof names / sizeof names[0] ? names[k] : "access to";
}

std::string type_text(const UbsanType* t) {
  std::string s = t ? t->name : "?";
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') s = s.substr(1, s.size() - 2);
  for (size_t i; (i = s.find("struct ")) != std::string::npos;) s.erase(i, 7);
  return s;
}

// Called for a failed check. Misalignment in a kernel thread is a device fault. Everything
// else goes to GCC's libubsan when the program has it (a -fsanitize=undefined build:
// our definition wins the link, so its reports keep working through this), or is reported
// here, followed by abort().
__attribute__((no_sanitize_undefined)) void type_mismatch(UbsanTypeMismatch* d, std::uintptr_t ptr,
                                                          const char* next_name) {
  using namespace sim::detail;
  const std::uintptr_t align = std::uintptr_t(1) << d->log_alignment;
  const bool misaligned = ptr != 0 && (ptr & (align - 1)) != 0;
  Worker* w = tl_worker;
  if (misaligned && on_kernel_fiber(w)) {
    report_fault(cudaErrorMisalignedAddress,  // does not return in FaultMode::Abort
                 strf("misaligned address: %s %p (type %s), which needs %zu-byte alignment, "
                      "at %s:%u:%u, thread %s of %s",
                      check_kind_name(d->check_kind),
                      program_address(reinterpret_cast<const void*>(ptr)),
                      type_text(d->type).c_str(), static_cast<size_t>(align), d->loc.file,
                      d->loc.line, d->loc.column, tid_str(w->ctx[w->cur]).c_str(),
                      w->where().c_str()));
    park_faulted(w);  // the message's temporaries are gone: nothing on this frame leaks
  }
  if (auto next = reinterpret_cast<UbsanHandler>(dlsym(RTLD_NEXT, next_name))) {
    next(d, ptr);  // libubsan reports (and, for the _abort variant, exits)
    return;
  }
  if (misaligned)
    std::fprintf(stderr, "sim: misaligned address in host code at %s:%u:%u: %s %p (type %s), "
                 "which needs %zu-byte alignment\n", d->loc.file, d->loc.line, d->loc.column,
                 check_kind_name(d->check_kind), reinterpret_cast<void*>(ptr),
                 type_text(d->type).c_str(), static_cast<size_t>(align));
  else
    std::fprintf(stderr, "sim: %s:%u:%u: %s %s %p (type %s)\n", d->loc.file, d->loc.line,
                 d->loc.column, check_kind_name(d->check_kind),
                 ptr ? "an address with too little space for" : "null pointer",
                 reinterpret_cast<void*>(ptr), type_text(d->type).c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace

extern "C" {
// -fsanitize-recover=alignment (GCC's default; simcc turns it off): the access goes on if
// this returns, which it does only after libubsan's report in a -fsanitize=undefined build.
__attribute__((no_sanitize_undefined)) void __ubsan_handle_type_mismatch_v1(void* data, std::uintptr_t ptr) {
  type_mismatch(static_cast<UbsanTypeMismatch*>(data), ptr, "__ubsan_handle_type_mismatch_v1");
}
// -fno-sanitize-recover (simcc's choice, and the project's SANITIZE=1 build): no return.
__attribute__((no_sanitize_undefined, noreturn)) void __ubsan_handle_type_mismatch_v1_abort(
    void* data, std::uintptr_t ptr) {
  type_mismatch(static_cast<UbsanTypeMismatch*>(data), ptr, "__ubsan_handle_type_mismatch_v1_abort");
  std::abort();
}
}

// ---- the UBSan handler for -fsanitize=integer-divide-by-zero (simcc's flags for .cu files) ---
// GCC calls it before an integer '/' or '%' whose divisor is zero (or, for signed types,
// INT_MIN / -1, which x86 traps on too). In a kernel thread: a sticky cudaErrorLaunchFailure
// naming the thread and line (a GPU computes garbage silently; the CPU would die of SIGFPE).
namespace {
struct UbsanOverflow {
  UbsanLocation loc;
  const UbsanType* type;
};
using UbsanDivHandler = void (*)(UbsanOverflow*, std::uintptr_t, std::uintptr_t);

// The operand's value for the message: GCC passes integers up to the pointer width inline
// (type info: bit 0 signed, log2 of the bit width above it).
std::string int_text(const UbsanType* t, std::uintptr_t v) {
  if (!t || t->kind != 0) return "?";
  const unsigned bits = 1u << (t->info >> 1);
  if (bits > 64) return "?";
  const bool sgn = t->info & 1;
  std::uint64_t u = v;
  if (bits < 64) u &= (std::uint64_t(1) << bits) - 1;
  if (sgn) {
    std::int64_t x = bits < 64 && (u >> (bits - 1)) ? static_cast<std::int64_t>(u | ~((std::uint64_t(1) << bits) - 1))
                                                   : static_cast<std::int64_t>(u);
    return std::to_string(x);
  }
  return std::to_string(u);
}

__attribute__((no_sanitize_undefined)) void divrem(UbsanOverflow* d, std::uintptr_t lhs, std::uintptr_t rhs,
                                                   const char* next_name) {
  using namespace sim::detail;
  Worker* w = tl_worker;
  const std::string r = int_text(d->type, rhs);
  const char* what = r == "0" ? "integer division or remainder by zero" : "integer division overflow";
  if (on_kernel_fiber(w)) {
    report_fault(cudaErrorLaunchFailure,  // does not return in FaultMode::Abort
                 strf("%s at %s:%u:%u: %s / %s (type %s), thread %s of %s (a GPU computes "
                      "garbage silently; cudaErrorLaunchFailure)",
                      what, d->loc.file, d->loc.line, d->loc.column, int_text(d->type, lhs).c_str(),
                      r.c_str(), type_text(d->type).c_str(), tid_str(w->ctx[w->cur]).c_str(),
                      w->where().c_str()));
    park_faulted(w);
  }
  if (auto next = reinterpret_cast<UbsanDivHandler>(dlsym(RTLD_NEXT, next_name))) {
    next(d, lhs, rhs);
    return;
  }
  std::fprintf(stderr, "sim: %s in host code at %s:%u:%u: %s / %s (type %s)\n", what, d->loc.file,
               d->loc.line, d->loc.column, int_text(d->type, lhs).c_str(), r.c_str(),
               type_text(d->type).c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace

extern "C" {
__attribute__((no_sanitize_undefined)) void __ubsan_handle_divrem_overflow(void* data, std::uintptr_t lhs,
                                                                          std::uintptr_t rhs) {
  divrem(static_cast<UbsanOverflow*>(data), lhs, rhs, "__ubsan_handle_divrem_overflow");
}
__attribute__((no_sanitize_undefined, noreturn)) void __ubsan_handle_divrem_overflow_abort(
    void* data, std::uintptr_t lhs, std::uintptr_t rhs) {
  divrem(static_cast<UbsanOverflow*>(data), lhs, rhs, "__ubsan_handle_divrem_overflow_abort");
  std::abort();
}
}
