// Device-side surface of the SIMT CPU emulator: CUDA qualifiers, threadIdx & co,
// barriers and warp intrinsics (macros that pass the call site to the runtime),
// atomics, fast-math intrinsics and CUDA's global min/max. Tested by tests/sim.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include "vector_types.h"

// ---- qualifiers --------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __device_builtin__

inline constexpr int warpSize = 32;

namespace sim::detail {
struct Site {
  const char* file;
  int line;
};
// Public prefixes of the runtime's per-thread and per-block records.
struct ThreadPub {
  uint3 thread_idx;
};
struct BlockPub {
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  void** slots;        // static __shared__ storage of this block, by site id
  unsigned nslots;
  void* dyn_smem;      // dynamic (extern) __shared__ storage of this block
};
extern __thread ThreadPub* tl_thread;  // the running CUDA thread (null on the host)
extern __thread BlockPub* tl_block;    // the running block (null on the host)

enum WarpKind : int {
  kSyncwarp = 1, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll,
  kReduceAdd, kReduceMin, kReduceMax, kReduceAnd, kReduceOr, kReduceXor, kMatchAny, kMatchAll,
  // WMMA (<mma.h>): the value each lane passes is a WarpCall*; the last lane to arrive runs
  // its fn on all lanes' records (runtime/warp.cpp), then every lane goes on.
  kWmmaLoad = 32, kWmmaStore, kWmmaMma, kMmaSync
};
// A lane's record for the WMMA warp ops: lanes[l] is lane l's record (null for lanes
// outside mask). fn may fault (device_fault); it runs on the last lane's fiber.
struct WarpCall {
  void (*fn)(void* const* lanes, unsigned mask);
};

void syncthreads(Site s);
int syncthreads_pred(Site s, int kind, int pred);  // kind: 1 count, 2 and, 3 or
unsigned long long warp_op(Site s, int kind, unsigned mask, unsigned long long value,
                           unsigned size, int param, int width);
unsigned activemask();
[[noreturn]] void device_fault(const char* what);

template <class T>
inline T warp_shfl(Site s, int kind, unsigned mask, T v, int param, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>,
                "shuffle of a type larger than 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = warp_op(s, kind, mask, bits, sizeof(T), param, width);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
inline void warp_sync(Site s, unsigned mask = 0xffffffffu) { warp_op(s, kSyncwarp, mask, 0, 0, 0, 32); }
inline unsigned warp_vote(Site s, int kind, unsigned mask, int pred) {
  return static_cast<unsigned>(warp_op(s, kind, mask, pred ? 1u : 0u, 4, 0, 32));
}
template <class T>
inline T warp_reduce(Site s, int kind, unsigned mask, T v) {
  static_assert(std::is_integral_v<T> && sizeof(T) == 4, "__reduce_*_sync takes int or unsigned");
  return static_cast<T>(warp_op(s, kind | (std::is_signed_v<T> ? 0x100 : 0), mask,
                                static_cast<unsigned long long>(static_cast<long long>(v)), 4, 0, 32));
}
template <class T>
inline unsigned warp_match(Site s, int kind, unsigned mask, T v, int* pred = nullptr) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  unsigned long long r = warp_op(s, kind, mask, bits, sizeof(T), 0, 32);
  if (pred) *pred = static_cast<int>(r >> 32);
  return static_cast<unsigned>(r);
}
}  // namespace sim::detail

#define SIM_SITE_ ::sim::detail::Site{__FILE__, __LINE__}
#include "strict.h"  // launch bounds and alignment checks (needs the records above)

// ---- built-in index variables (of the fiber that is running) ------------------
#define threadIdx (static_cast<const ::uint3&>(::sim::detail::tl_thread->thread_idx))
#define blockIdx (static_cast<const ::uint3&>(::sim::detail::tl_block->block_idx))
// blockDim and gridDim expand to one identifier each, per OS thread the running block's (set with
// tl_block), so that cudaLaunchConfig_t's members of those names still work (launch_ex.h).
extern __thread ::dim3 sim_blockDim_, sim_gridDim_;
#define blockDim sim_blockDim_
#define gridDim sim_gridDim_

// ---- barriers and warp intrinsics ---------------------------------------------
// Plain functions (site unknown) first, so that &__shfl_sync or __shfl_sync<T>(...)
// still work; then same-named macros that record the call site.
inline void __syncthreads() { ::sim::detail::syncthreads(::sim::detail::Site{"?", 0}); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::sim::detail::warp_sync({"?", 0}, mask); }
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::sim::detail::warp_shfl({"?", 0}, ::sim::detail::kShflIdx, mask, v, src, width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::sim::detail::warp_shfl({"?", 0}, ::sim::detail::kShflUp, mask, v, int(delta), width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::sim::detail::warp_shfl({"?", 0}, ::sim::detail::kShflDown, mask, v, int(delta), width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::sim::detail::warp_shfl({"?", 0}, ::sim::detail::kShflXor, mask, v, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return ::sim::detail::warp_vote({"?", 0}, ::sim::detail::kBallot, mask, pred);
}
inline int __any_sync(unsigned mask, int pred) {
  return int(::sim::detail::warp_vote({"?", 0}, ::sim::detail::kAny, mask, pred));
}
inline int __all_sync(unsigned mask, int pred) {
  return int(::sim::detail::warp_vote({"?", 0}, ::sim::detail::kAll, mask, pred));
}
inline unsigned __activemask() { return ::sim::detail::activemask(); }

#define __syncthreads() ::sim::detail::syncthreads(SIM_SITE_)
#define __syncthreads_count(p) ::sim::detail::syncthreads_pred(SIM_SITE_, 1, (p) ? 1 : 0)
#define __syncthreads_and(p) ::sim::detail::syncthreads_pred(SIM_SITE_, 2, (p) ? 1 : 0)
#define __syncthreads_or(p) ::sim::detail::syncthreads_pred(SIM_SITE_, 3, (p) ? 1 : 0)
#define __syncwarp(...) ::sim::detail::warp_sync(SIM_SITE_ __VA_OPT__(, ) __VA_ARGS__)
#define __shfl_sync(...) ::sim::detail::warp_shfl(SIM_SITE_, ::sim::detail::kShflIdx, __VA_ARGS__)
#define __shfl_up_sync(...) ::sim::detail::warp_shfl(SIM_SITE_, ::sim::detail::kShflUp, __VA_ARGS__)
#define __shfl_down_sync(...) \
  ::sim::detail::warp_shfl(SIM_SITE_, ::sim::detail::kShflDown, __VA_ARGS__)
#define __shfl_xor_sync(...) ::sim::detail::warp_shfl(SIM_SITE_, ::sim::detail::kShflXor, __VA_ARGS__)
#define __ballot_sync(mask, p) ::sim::detail::warp_vote(SIM_SITE_, ::sim::detail::kBallot, (mask), (p))
#define __any_sync(mask, p) int(::sim::detail::warp_vote(SIM_SITE_, ::sim::detail::kAny, (mask), (p)))
#define __all_sync(mask, p) int(::sim::detail::warp_vote(SIM_SITE_, ::sim::detail::kAll, (mask), (p)))
#define __reduce_add_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceAdd, (mask), (v))
#define __reduce_min_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceMin, (mask), (v))
#define __reduce_max_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceMax, (mask), (v))
#define __reduce_and_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceAnd, (mask), (v))
#define __reduce_or_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceOr, (mask), (v))
#define __reduce_xor_sync(mask, v) ::sim::detail::warp_reduce(SIM_SITE_, ::sim::detail::kReduceXor, (mask), (v))
#define __match_any_sync(mask, v) ::sim::detail::warp_match(SIM_SITE_, ::sim::detail::kMatchAny, (mask), (v))
#define __match_all_sync(mask, v, pred) \
  ::sim::detail::warp_match(SIM_SITE_, ::sim::detail::kMatchAll, (mask), (v), (pred))

namespace sim::detail {
void note_threadfence();  // the global race check's release point (runtime/checks.cpp)
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ::sim::detail::note_threadfence();
}
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ::sim::detail::note_threadfence();
}
inline long long clock64() {
#if defined(__x86_64__) || defined(__i386__)
  return static_cast<long long>(__builtin_ia32_rdtsc());
#else
  return 0;
#endif
}
inline void __nanosleep(unsigned) {}
inline void __trap() { ::sim::detail::device_fault("__trap() called"); }

// ---- atomics (blocks may run on several OS threads; GCC __atomic builtins) ----
// Not instrumented by the per-access checks (an atomic is no race); SIM_ATOMIC_CHECK_ checks
// alignment, bounds and initialisation explicitly (runtime/checks.cpp).
#define SIM_ATOMIC_FN inline __attribute__((no_sanitize("kernel-address")))
namespace sim::detail {
// After the atomic operation itself: the global race check orders a block's accesses after
// its atomics from this point (runtime/checks.cpp), never before the operation took place.
// `old` is the value the atomic returned (its bits), `operands` a digest of its operands: an
// atomic that left the word as it found it, with the same operands as the thread's atomic before
// it on that word, counts as one more read of a spin (runtime/checks.cpp, "spins").
void atomic_done(const void* p, unsigned n, unsigned long long old, unsigned long long operands);
template <class T>
SIM_ATOMIC_FN unsigned long long atomic_bits(T v) {
  static_assert(sizeof(T) <= sizeof(unsigned long long), "atomic operand of at most 8 bytes");
  unsigned long long b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T, class... O>
SIM_ATOMIC_FN T after_atomic(const T* p, T v, O... operands) {
  unsigned long long digest = 0;
  ((digest = digest * 0x9E3779B97F4A7C15ull + atomic_bits(operands) + 1), ...);
  atomic_done(p, sizeof(T), atomic_bits(v), digest);
  return v;
}
}  // namespace sim::detail
// Each checks its address's alignment first (sim/strict.h); the defaulted trailing
// parameters are the call site.
namespace sim::detail {
template <class T>
SIM_ATOMIC_FN T atomic_cas_loop_add(T* p, T v) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T want = old + v;
  while (!__atomic_compare_exchange(p, &old, &want, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    want = old + v;
  return old;
}
template <class T, class F>
SIM_ATOMIC_FN T atomic_update(T* p, F f) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T want = f(old);
  while (!__atomic_compare_exchange(p, &old, &want, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    want = f(old);
  return old;
}
template <class T>
SIM_ATOMIC_FN T atomic_exchange(T* p, T v) {
  T old;
  __atomic_exchange(p, &v, &old, __ATOMIC_SEQ_CST);
  return old;
}
template <class T>
SIM_ATOMIC_FN T atomic_cas(T* p, T cmp, T v) {
  __atomic_compare_exchange(p, &cmp, &v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;  // the old value either way
}
}  // namespace sim::detail

#define SIM_ATOMIC_ADD(T, IMPL)                                                    \
  SIM_ATOMIC_FN T atomicAdd(T* a, T v SIM_ATOMIC_SITE_) {                                 \
    SIM_ATOMIC_CHECK_("atomicAdd");                                                 \
    return ::sim::detail::after_atomic(a, IMPL, v);                                                                    \
  }                                                                                 \
  SIM_ATOMIC_FN T atomicAdd_block(T* a, T v SIM_ATOMIC_SITE_) {                           \
    SIM_ATOMIC_CHECK_("atomicAdd_block");                                           \
    return ::sim::detail::after_atomic(a, IMPL, v);                                                                    \
  }                                                                                 \
  SIM_ATOMIC_FN T atomicAdd_system(T* a, T v SIM_ATOMIC_SITE_) {                          \
    SIM_ATOMIC_CHECK_("atomicAdd_system");                                          \
    return ::sim::detail::after_atomic(a, IMPL, v);                                                                    \
  }
SIM_ATOMIC_ADD(int, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))
SIM_ATOMIC_ADD(unsigned int, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))
SIM_ATOMIC_ADD(unsigned long long, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))
SIM_ATOMIC_ADD(float, ::sim::detail::atomic_cas_loop_add(a, v))
SIM_ATOMIC_ADD(double, ::sim::detail::atomic_cas_loop_add(a, v))
#undef SIM_ATOMIC_ADD
SIM_ATOMIC_FN int atomicSub(int* a, int v SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicSub");
  return ::sim::detail::after_atomic(a, __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST), v);
}
SIM_ATOMIC_FN unsigned atomicSub(unsigned* a, unsigned v SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicSub");
  return ::sim::detail::after_atomic(a, __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST), v);
}

#define SIM_ATOMIC_INT_OPS(T)                                                                     \
  SIM_ATOMIC_FN T atomicExch(T* a, T v SIM_ATOMIC_SITE_) {                                               \
    SIM_ATOMIC_CHECK_("atomicExch");                                                              \
    return ::sim::detail::after_atomic(a, ::sim::detail::atomic_exchange(a, v), v);                                                  \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicCAS(T* a, T cmp, T v SIM_ATOMIC_SITE_) {                                         \
    SIM_ATOMIC_CHECK_("atomicCAS");                                                               \
    return ::sim::detail::after_atomic(a, ::sim::detail::atomic_cas(a, cmp, v), cmp, v);                                                  \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicMin(T* a, T v SIM_ATOMIC_SITE_) {                                                \
    SIM_ATOMIC_CHECK_("atomicMin");                                                               \
    return ::sim::detail::after_atomic(a, ::sim::detail::atomic_update(a, [v](T o) { return v < o ? v : o; }), v);                   \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicMax(T* a, T v SIM_ATOMIC_SITE_) {                                                \
    SIM_ATOMIC_CHECK_("atomicMax");                                                               \
    return ::sim::detail::after_atomic(a, ::sim::detail::atomic_update(a, [v](T o) { return v > o ? v : o; }), v);                   \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicAnd(T* a, T v SIM_ATOMIC_SITE_) {                                                \
    SIM_ATOMIC_CHECK_("atomicAnd");                                                               \
    return ::sim::detail::after_atomic(a, __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST), v);                                            \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicOr(T* a, T v SIM_ATOMIC_SITE_) {                                                 \
    SIM_ATOMIC_CHECK_("atomicOr");                                                                \
    return ::sim::detail::after_atomic(a, __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST), v);                                             \
  }                                                                                               \
  SIM_ATOMIC_FN T atomicXor(T* a, T v SIM_ATOMIC_SITE_) {                                                \
    SIM_ATOMIC_CHECK_("atomicXor");                                                               \
    return ::sim::detail::after_atomic(a, __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST), v);                                            \
  }
SIM_ATOMIC_INT_OPS(int)
SIM_ATOMIC_INT_OPS(unsigned int)
SIM_ATOMIC_INT_OPS(unsigned long long)
SIM_ATOMIC_INT_OPS(long long)
#undef SIM_ATOMIC_INT_OPS
SIM_ATOMIC_FN float atomicExch(float* a, float v SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicExch");
  return ::sim::detail::after_atomic(a, ::sim::detail::atomic_exchange(a, v), v);
}
SIM_ATOMIC_FN unsigned short atomicCAS(unsigned short* a, unsigned short cmp, unsigned short v SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicCAS");
  return ::sim::detail::after_atomic(a, ::sim::detail::atomic_cas(a, cmp, v), cmp, v);
}
SIM_ATOMIC_FN unsigned atomicInc(unsigned* a, unsigned limit SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicInc");
  return ::sim::detail::after_atomic(a, ::sim::detail::atomic_update(a, [limit](unsigned o) { return o >= limit ? 0u : o + 1; }), limit);
}
SIM_ATOMIC_FN unsigned atomicDec(unsigned* a, unsigned limit SIM_ATOMIC_SITE_) {
  SIM_ATOMIC_CHECK_("atomicDec");
  return ::sim::detail::after_atomic(
      a, ::sim::detail::atomic_update(a, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; }),
      limit);
}

// ---- math and bit intrinsics ---------------------------------------------------
// glibc's <math.h> already declares __expf & co. (without defining them): define
// them with the same C linkage.
extern "C" {
inline float __expf(float x) noexcept { return ::expf(x); }
inline float __exp10f(float x) noexcept { return ::exp10f(x); }
inline float __logf(float x) noexcept { return ::logf(x); }
inline float __log2f(float x) noexcept { return ::log2f(x); }
inline float __log10f(float x) noexcept { return ::log10f(x); }
inline float __powf(float x, float y) noexcept { return ::powf(x, y); }
inline float __sinf(float x) noexcept { return ::sinf(x); }
inline float __cosf(float x) noexcept { return ::cosf(x); }
inline float __tanf(float x) noexcept { return ::tanf(x); }
inline void __sincosf(float x, float* s, float* c) noexcept { *s = ::sinf(x); *c = ::cosf(x); }
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return ::sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / ::sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / ::cbrtf(x); }
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }  // NaN -> 0
inline float __fmaf_rn(float a, float b, float c) { return ::fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return ::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
inline int __float_as_int(float f) { return __builtin_bit_cast(int, f); }
inline float __uint_as_float(unsigned i) { return __builtin_bit_cast(float, i); }
inline unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
inline double __longlong_as_double(long long i) { return __builtin_bit_cast(double, i); }
inline long long __double_as_longlong(double d) { return __builtin_bit_cast(long long, d); }
inline int __float2int_rn(float x) { return static_cast<int>(::nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(::floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(::ceilf(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(::nearbyintf(x)); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(::nearbyintf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline int __double2int_rn(double x) { return static_cast<int>(::nearbyint(x)); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
// ---- whole accesses -----------------------------------------------------------
// A GPU moves a float4 (int4, double2, ...) in one 16-byte access. Here GCC splits a struct
// copy such as `float4 v = *p` into its fields (SRA) before simcc's per-access checks are
// inserted, so it costs four checked 4-byte accesses. sim::load_whole/store_whole move it as
// one access with one check, as the GPU does, and fault on a misaligned address as `*p` does
// (cudaErrorMisalignedAddress, naming the caller's line). The __ldg family uses them; kernel
// code reaches them through its own helper (kernels/common/vector_access.h).
// Tested by tests/sim/test_sim_checks_vector.cu (WholeVector*).
namespace sim::detail {
[[noreturn]] void misaligned_access(const void* p, std::size_t align, const char* op, const char* file, int line);
}
namespace sim {
// always_inline: the access must sit in the caller (a DEBUG=1 build, -O0, still names its line).
template <class T>
__attribute__((always_inline)) inline T load_whole(const T* p, const char* file = __builtin_FILE(),
                                                   int line = __builtin_LINE()) {
  static_assert(std::is_trivially_copyable_v<T>, "a whole access copies the bytes");
  if (reinterpret_cast<std::uintptr_t>(p) & (alignof(T) - 1)) [[unlikely]]
    detail::misaligned_access(p, alignof(T), "load", file, line);
  T v;
  std::memcpy(&v, __builtin_assume_aligned(p, alignof(T)), sizeof(T));
  return v;
}
template <class T>
__attribute__((always_inline)) inline void store_whole(T* p, T v, const char* file = __builtin_FILE(),
                                                       int line = __builtin_LINE()) {
  static_assert(std::is_trivially_copyable_v<T>, "a whole access copies the bytes");
  if (reinterpret_cast<std::uintptr_t>(p) & (alignof(T) - 1)) [[unlikely]]
    detail::misaligned_access(p, alignof(T), "store", file, line);
  std::memcpy(__builtin_assume_aligned(p, alignof(T)), &v, sizeof(T));
}
}  // namespace sim

#define SIM_WHOLE_LOAD(name)                                                              \
  template <class T>                                                                      \
  __attribute__((always_inline)) inline T name(const T* p, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { \
    return sim::load_whole(p, file, line);                                                \
  }
#define SIM_WHOLE_STORE(name)                                                                   \
  template <class T>                                                                            \
  __attribute__((always_inline)) inline void name(T* p, T v, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { \
    sim::store_whole(p, v, file, line);                                                         \
  }
SIM_WHOLE_LOAD(__ldg)
SIM_WHOLE_LOAD(__ldcg)
SIM_WHOLE_LOAD(__ldcs)
SIM_WHOLE_LOAD(__ldlu)
SIM_WHOLE_STORE(__stcg)
SIM_WHOLE_STORE(__stcs)
SIM_WHOLE_STORE(__stwt)
#undef SIM_WHOLE_LOAD
#undef SIM_WHOLE_STORE

// CUDA's global min/max overloads (the non-templates win over std::min/std::max
// when both are visible, so `using namespace std;` code still compiles).
#define SIM_MINMAX(A, B, R)                                                    \
  inline R min(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); } \
  inline R max(A a, B b) { return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); }
SIM_MINMAX(int, int, int)
SIM_MINMAX(unsigned int, unsigned int, unsigned int)
SIM_MINMAX(int, unsigned int, unsigned int)
SIM_MINMAX(unsigned int, int, unsigned int)
SIM_MINMAX(long, long, long)
SIM_MINMAX(unsigned long, unsigned long, unsigned long)
SIM_MINMAX(long, unsigned long, unsigned long)
SIM_MINMAX(unsigned long, long, unsigned long)
SIM_MINMAX(long long, long long, long long)
SIM_MINMAX(unsigned long long, unsigned long long, unsigned long long)
SIM_MINMAX(long long, unsigned long long, unsigned long long)
SIM_MINMAX(unsigned long long, long long, unsigned long long)
#undef SIM_MINMAX
inline float min(float a, float b) { return ::fminf(a, b); }
inline float max(float a, float b) { return ::fmaxf(a, b); }
inline double min(double a, double b) { return ::fmin(a, b); }
inline double max(double a, double b) { return ::fmax(a, b); }
inline double min(float a, double b) { return ::fmin(a, b); }
inline double max(float a, double b) { return ::fmax(a, b); }
inline double min(double a, float b) { return ::fmin(a, b); }
inline double max(double a, float b) { return ::fmax(a, b); }
