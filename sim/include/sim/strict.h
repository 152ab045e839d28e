// Two checks a GPU makes that a CPU would forgive, for the SIMT CPU emulator:
//  - __launch_bounds__(maxThreads[, minBlocks[, maxBlocksPerCluster]]): simcc keeps the
//    attribute (it expands to nothing) and inserts, right after the opening `{` of the
//    kernel's body and on the same line, a check of the launch's block size against it
//    (`::sim::detail::launch_bounds`). A launch over the bound is refused with
//    cudaErrorInvalidValue before any kernel code runs (runtime/strict.cpp).
//    cudaFuncGetAttributes reports the bound as maxThreadsPerBlock: simcc registers a
//    non-template kernel's bound at static initialisation (SIM_LAUNCH_BOUNDS_REGISTER_ after
//    the kernel's body, same line), and the check records a kernel template instantiation's
//    bound when it first runs.
//  - Misaligned addresses: simcc compiles .cu files with -fsanitize=alignment and the
//    runtime defines the UBSan handler (runtime/strict.cpp): a misaligned load or store in
//    a kernel is a sticky cudaErrorMisalignedAddress fault. Atomics check their operand's
//    natural alignment here (the compiler does not instrument __atomic builtins).
// Included by sim/device.h after the thread/block records are declared; not on its own.
// Tested by tests/sim/test_sim_bounds_align.cu and sim/examples/bugs/.
#pragma once
#include <cstddef>
#include <cstdint>

namespace sim::detail {

// The arguments of __launch_bounds__. The constexpr variable simcc declares from them
// makes a non-constant bound a compile error, as it is for nvcc.
struct Bounds {
  long long max_threads, min_blocks, max_cluster;
  constexpr Bounds(long long t, long long b = 0, long long c = 0)
      : max_threads(t), min_blocks(b), max_cluster(c) {}
};

// Refuses the running launch: records cudaErrorInvalidValue for the launching
// thread (not sticky), prints a line in abort mode, abandons the launch (throws
// out of the kernel; nothing of it has run yet).
void launch_bounds_exceeded(const Bounds& b, unsigned long long threads, const char* file, int line);

// The kernel each thread runs, set by the launch (sim/launch.h) right before it calls the
// kernel on this OS thread: its address, or null when the launch deduced it.
extern __thread const void* tl_kernel_fn;
extern __thread const void* tl_bounds_noted;  // the kernel whose bound was last recorded here
// The bound of kernel fn (cudaFuncGetAttributes' maxThreadsPerBlock): first record wins.
bool register_launch_bounds(const void* fn, const Bounds& b);
void note_launch_bounds(const Bounds& b);  // records tl_kernel_fn's bound
long long registered_max_threads(const void* fn);  // 0: no bound known for fn

// What simcc inserts as the first statement of a kernel with launch bounds
// (file/line: where the __launch_bounds__ is written).
inline void launch_bounds(const Bounds& b, const char* file, int line) {
  const BlockPub* blk = tl_block;
  if (!blk) return;  // the kernel called as a plain function, not launched
  if (tl_kernel_fn != tl_bounds_noted) note_launch_bounds(b);  // once per run of blocks of a kernel
  const unsigned long long n =
      static_cast<unsigned long long>(blk->block_dim.x) * blk->block_dim.y * blk->block_dim.z;
  if (b.max_threads > 0 && n > static_cast<unsigned long long>(b.max_threads))
    launch_bounds_exceeded(b, n, file, line);
}

// An atomic on an address that is not a multiple of its operand size: a sticky
// cudaErrorMisalignedAddress fault in a kernel; a message and abort() in host code.
// An atomic's operand: bounds and initialisation like any access (runtime/checks.cpp), but
// never part of a shared-memory race.
void atomic_access(const void* p, std::size_t n);

// A misaligned atomic or whole vector access (sim::load_whole): the fault, or abort() in host code.
[[noreturn]] void misaligned_access(const void* p, std::size_t align, const char* op, const char* file, int line);

template <class T>
inline void check_atomic_align(const T* p, const char* op, const char* file, int line) {
  static_assert((sizeof(T) & (sizeof(T) - 1)) == 0, "atomic operand size is a power of two");
  if (reinterpret_cast<std::uintptr_t>(p) & (sizeof(T) - 1)) misaligned_access(p, sizeof(T), op, file, line);
}

}  // namespace sim::detail

// What simcc writes after the body of a non-template kernel with launch bounds (on the line of
// its closing brace): registers the bound at static initialisation, so cudaFuncGetAttributes
// knows it before the first launch. `k` that names no single function (an overload set, a
// template) registers nothing.
#define SIM_LB_CAT2_(a, b) a##b
#define SIM_LB_CAT_(a, b) SIM_LB_CAT2_(a, b)
#define SIM_LAUNCH_BOUNDS_REGISTER_(k, ...)                                                  \
  [[maybe_unused]] static const bool SIM_LB_CAT_(sim_lb_reg_, __COUNTER__) =                 \
      ::sim::detail::register_launch_bounds(                                                  \
          []<class SimD_ = void>() -> const void* {                                           \
            if constexpr (requires { ::sim::detail::fnptr<SimD_>(k); })                       \
              return reinterpret_cast<const void*>(::sim::detail::fnptr<SimD_>(k));          \
            else                                                                              \
              return nullptr;                                                                 \
          }(),                                                                                \
          ::sim::detail::Bounds{__VA_ARGS__})

// Trailing parameters of the atomics: the call site, for the misalignment message.
#define SIM_ATOMIC_SITE_ , const char* sim_file_ = __builtin_FILE(), int sim_line_ = __builtin_LINE()
#define SIM_ATOMIC_CHECK_(op) \
  (::sim::detail::check_atomic_align(a, op, sim_file_, sim_line_), ::sim::detail::atomic_access(a, sizeof(*a)))
