// Kernel launches and __shared__ memory as simcc rewrites them:
//   k<<<g, b, shmem, stream>>>(args)  ->  ::sim::launch(SIM_KREF(k), "k", __FILE__, __LINE__, g, b, shmem, stream)(args)
//   __shared__ T a[N];                ->  static ::sim::SharedSite s{...}; auto& a = *s.get<T[N]>();
// Runtime side: runtime/pool.cpp (launch) and runtime/block.cpp (shared). Tested by tests/sim.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include "device.h"
#include "runtime_api.h"

namespace sim {
struct SharedSite;

namespace detail {
struct LaunchParams {
  const char* name;  // the kernel expression as written at the launch
  const char* file;
  int line;
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  const void* fn;  // the kernel's address; null when it is only known through deduction
  // cudaLaunchCooperativeKernel: every block runs at once (each on an OS thread of its own),
  // so cooperative_groups' grid barrier can be honoured (runtime/pool.cpp, coop.cpp).
  bool cooperative = false;
  // cudaLaunchAttributeProgrammaticStreamSerialization (cudaLaunchKernelEx): the kernel may
  // start before the previous kernel of its stream completes; what it touches before
  // cudaGridDependencySynchronize() is checked against that kernel (launch_ex.h, pdl.cpp).
  bool pdl = false;
  // Thread block clusters (runtime/cluster.cpp): the shape from cudaLaunchAttributeClusterDimension,
  // all 0 when the launch gave none; launch_prepare then sets the kernel's __cluster_dims__ (or 1x1x1).
  unsigned cluster[3] = {0, 0, 0};
};
// false: the launch must not run (invalid configuration or sticky error; last error set)
bool launch_prepare(LaunchParams& p);
// For launch_prepare (runtime/api.cpp): false, the error set and the refusal printed as below,
// when the grid or block dimensions are invalid (cudaErrorInvalidValue, as CUDA 13.0 answers).
bool launch_config_ok(const LaunchParams& p);
// For launch_prepare (runtime/cluster.cpp): settles p.cluster (the attribute's shape, else the
// kernel's __cluster_dims__, else 1x1x1); false, cudaErrorInvalidClusterSize set and the refusal
// printed as below, for a shape the device refuses.
bool cluster_config_ok(LaunchParams& p);
// A launch refused before it runs: sets e as the launching thread's last error (not sticky)
// and, in abort mode only, prints one line to stderr:
//   sim: launch of kernel 'k' at f.cu:20 refused (cudaErrorInvalidValue): <why>
void launch_refused(const LaunchParams& p, cudaError_t e, const char* why_fmt, ...)
    __attribute__((format(printf, 3, 4)));
// A pointer argument must be null or device-accessible memory; *view is then the address the
// kernel gets (a cudaMalloc allocation's device view: its host address is fenced).
bool check_pointer_arg(const LaunchParams& p, int index, const void* ptr, const char* type_name,
                       const void** view);
void launch_execute(const LaunchParams& p, void (*invoke)(void*), void* state);
void* shared_alloc(SharedSite* site, size_t bytes, size_t align);
void* dynamic_shared_base();

// Stream capture (runtime/graph.cpp). While some stream captures, every launch asks
// capture_node: on the capturing stream the launch is stored as a replayable node
// (Captured); on the legacy default stream under a global-mode capture it is refused with
// cudaErrorStreamCaptureImplicit and the capture invalidated, as CUDA does (Refused).
// In the lazy stream mode (sim::set_stream_mode) work on a created stream is queued instead
// of run (Deferred), so capture_node is consulted then too.
enum class CaptureVerdict { Run, Captured, Refused, Deferred };
extern std::atomic<int> g_active_captures;
extern std::atomic<bool> g_lazy_streams;
inline bool capture_active() {
  return g_active_captures.load(std::memory_order_relaxed) > 0 ||
         g_lazy_streams.load(std::memory_order_relaxed);
}
CaptureVerdict capture_node(cudaStream_t stream, std::function<void()> node);
// A launch on a stream that is not live is never queued or captured: launch_prepare refuses it.
bool stream_valid(cudaStream_t s);

template <class T>
inline constexpr bool is_data_pointer_v =
    std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>;

// "... [with T = float*]": the type's name without RTTI (the runtime cuts it out).
template <class T>
inline const char* type_name() { return __PRETTY_FUNCTION__; }

template <class T>
inline bool check_one(const LaunchParams& p, int index, T& v) {
  if constexpr (is_data_pointer_v<T>) {
    const void* view = nullptr;
    if (!check_pointer_arg(p, index, (const void*)v, type_name<T>(), &view)) return false;
    v = (T)view;
  }
  return true;
}
// Checks the arguments and translates device pointers to device views, in place (the caller
// passes its own copy of the arguments).
template <class Tuple, size_t... I>
inline bool check_args(const LaunchParams& p, Tuple& t, std::index_sequence<I...>) {
  bool ok = true;
  ((ok = ok && check_one<std::tuple_element_t<I, Tuple>>(p, int(I) + 1, std::get<I>(t))), ...);
  return ok;
}

// Launch of a kernel template whose arguments are deduced from the call (or an
// overloaded kernel, or a call that relies on default arguments): arguments are
// stored decayed and each thread calls the kernel through `call`.
template <class L>
struct DeferredLaunch {
  L call;
  LaunchParams lp;
  template <class... A>
  void operator()(A&&... a) {
    using Tuple = std::tuple<std::decay_t<A>...>;
    Tuple t{std::forward<A>(a)...};
    if (capture_active() && stream_valid(lp.stream) &&
        capture_node(lp.stream, [call = call, lp = lp, t]() mutable { run(call, lp, t); }) !=
            CaptureVerdict::Run)
      return;
    run(call, lp, t);
  }
  template <class Tuple>
  static void run(L& call, LaunchParams lp, const Tuple& args) {
    if (!launch_prepare(lp)) return;
    Tuple t = args;
    if (!check_args(lp, t, std::make_index_sequence<std::tuple_size_v<Tuple>>{})) return;
    struct State {
      L* call;
      Tuple* t;
    } st{&call, &t};
    launch_execute(
        lp,
        [](void* s) {
          auto* x = static_cast<State*>(s);
          tl_kernel_fn = nullptr;  // not known: a template's bound is not recorded (strict.h)
          std::apply(*x->call, *x->t);
        },
        &st);
  }
};

struct NoCall {};

// Launch of a kernel whose parameter types are known: arguments are converted to
// the parameter types once, at the call, exactly like a CUDA launch. With fewer
// arguments than parameters (default arguments) it goes through `call`.
template <class L, class... P>
struct KernelLaunch {
  void (*fn)(P...);
  L call;
  LaunchParams lp;
  void operator()(P... args) {
    std::tuple<P...> t{std::move(args)...};
    if (capture_active() && stream_valid(lp.stream) &&
        capture_node(lp.stream, [fn = fn, lp = lp, t]() mutable { run(fn, lp, t); }) !=
            CaptureVerdict::Run)
      return;
    run(fn, lp, t);
  }
  // One execution of the launch (directly, or as a node of a graph being replayed).
  static void run(void (*fn)(P...), LaunchParams lp, const std::tuple<P...>& args) {
    if (!launch_prepare(lp)) return;
    std::tuple<P...> t = args;
    if (!check_args(lp, t, std::index_sequence_for<P...>{})) return;
    struct State {
      void (*fn)(P...);
      std::tuple<P...>* t;
    } st{fn, &t};
    launch_execute(
        lp,
        [](void* s) {
          auto* x = static_cast<State*>(s);
          tl_kernel_fn = reinterpret_cast<const void*>(x->fn);  // for launch_bounds (strict.h)
          std::apply(x->fn, *x->t);
        },
        &st);
  }
  template <class... A, class LL = L,
            std::enable_if_t<sizeof...(A) != sizeof...(P) && !std::is_same_v<LL, NoCall>, int> = 0>
  void operator()(A&&... a) {
    DeferredLaunch<L>{call, lp}(std::forward<A>(a)...);
  }
};

// The kernels the emulator has seen with their parameter types (runtime/launch_ex.cpp): an
// untyped launch (cudaLaunchCooperativeKernel(const void*, ...), cudaLaunchKernelExC) finds
// its kernel's typed launcher here. simcc's registration at load (below), a typed launch,
// cudaLaunchKernelEx and the typed occupancy and attribute queries enter the kernel.
using UntypedLauncher = void (*)(const void* fn, const LaunchParams& lp, void** args);
void note_kernel(const void* fn, UntypedLauncher launcher, const char* name);
UntypedLauncher find_kernel(const void* fn, const char** name);
template <class... P, size_t... I>
inline void launch_untyped_impl(const void* fn, const LaunchParams& lp, void** args, std::index_sequence<I...>) {
  KernelLaunch<NoCall, P...> k{reinterpret_cast<void (*)(P...)>(const_cast<void*>(fn)), {}, lp};
  k(*static_cast<std::remove_reference_t<P>*>(args[I])...);
}
template <class... P>
inline void launch_untyped(const void* fn, const LaunchParams& lp, void** args) {
  launch_untyped_impl<P...>(fn, lp, args, std::index_sequence_for<P...>{});
}
// Cheap after the first time: a small per-thread cache of the kernels already entered.
template <class... P>
inline void note_typed(void (*fn)(P...), const char* name) {
  static thread_local const void* seen[64] = {};
  const void* f = reinterpret_cast<const void*>(fn);
  const size_t slot = (reinterpret_cast<uintptr_t>(f) >> 4) & 63;
  if (seen[slot] == f) return;
  seen[slot] = f;
  note_kernel(f, &launch_untyped<P...>, name);
}

// The registration simcc puts at the start of every kernel body (as nvcc registers each kernel
// when the program loads): kernel_at_load<F>'s initialiser runs before main for each kernel and
// each instantiation of a kernel template whose body the program instantiates, and enters it with
// its parameter types (runtime/launch_ex.cpp). The name comes from __PRETTY_FUNCTION__
// ("... [with auto F = k<float>]"); a typed use's name replaces it.
void note_kernel_at_load(const void* fn, UntypedLauncher launcher, const char* pretty);
template <auto F>
const char* kernel_pretty() { return __PRETTY_FUNCTION__; }
// A kernel with a reference (or non-copyable) parameter is not entered: no launch could pass it.
template <class... P>
inline bool enter_at_load(void (*fn)(P...), const char* pretty) {
  if constexpr (((!std::is_reference_v<P> && std::is_copy_constructible_v<P>) && ...))
    note_kernel_at_load(reinterpret_cast<const void*>(fn), &launch_untyped<P...>, pretty);
  return true;
}
template <auto F>
inline const bool kernel_at_load = enter_at_load(F, kernel_pretty<F>());
// The overload of `f` with exactly the parameter types P (D: only to make the call dependent).
template <class D, class... P>
constexpr auto kernel_as(std::type_identity_t<void (*)(P...)> f) { return f; }

// What SIM_KREF(k) produces: the kernel's address (or nullptr when the name does
// not resolve to one function without the call's arguments) and a generic callable.
template <class F, class L>
struct KernelRef {
  F fn;
  L call;
};
template <class F, class L>
inline KernelRef<F, L> make_kref(F f, L l) { return KernelRef<F, L>{f, l}; }

template <class D, class... P>
constexpr auto fnptr(void (*f)(P...)) { return f; }
}  // namespace detail

// ::sim::launch(kernel, "name", __FILE__, __LINE__, grid, block[, shmem[, stream]])(args...)
template <class... P>
inline detail::KernelLaunch<detail::NoCall, P...> launch(void (*fn)(P...), const char* name,
                                                         const char* file, int line, dim3 grid,
                                                         dim3 block, size_t shmem = 0,
                                                         cudaStream_t stream = nullptr) {
  detail::note_typed(fn, name);
  return {fn, {}, {name, file, line, grid, block, shmem, stream, reinterpret_cast<const void*>(fn)}};
}
template <class L, class... P>
inline detail::KernelLaunch<L, P...> launch(detail::KernelRef<void (*)(P...), L> k,
                                            const char* name, const char* file, int line,
                                            dim3 grid, dim3 block, size_t shmem = 0,
                                            cudaStream_t stream = nullptr) {
  detail::note_typed(k.fn, name);
  return {k.fn, k.call,
          {name, file, line, grid, block, shmem, stream, reinterpret_cast<const void*>(k.fn)}};
}
template <class L>
inline detail::DeferredLaunch<L> launch(detail::KernelRef<std::nullptr_t, L> k, const char* name,
                                        const char* file, int line, dim3 grid, dim3 block,
                                        size_t shmem = 0, cudaStream_t stream = nullptr) {
  return {k.call, {name, file, line, grid, block, shmem, stream, nullptr}};
}

// cudaLaunchCooperativeKernel(kernel, grid, block, args, shmem, stream), CUDA's typed form:
// args[i] points to the i-th argument. Refused with cudaErrorCooperativeLaunchTooLarge (as a
// GPU refuses it) when the grid exceeds what can be resident at once by the occupancy answer
// times the SM count; otherwise launched like k<<<...>>> with every block running at once.
namespace detail {
cudaError_t cooperative_fits(const void* fn, dim3 grid, dim3 block, size_t shmem, const char* name,
                             const char* file, int line);
cudaError_t launch_error_of_call();  // the calling thread's last error, without clearing it
template <class... P, size_t... I>
inline cudaError_t launch_cooperative(void (*fn)(P...), dim3 grid, dim3 block, void** args, size_t shmem,
                                      cudaStream_t stream, const char* file, int line,
                                      std::index_sequence<I...>) {
  // The kernel's name is not known here (no macro): messages name the launch site.
  const char* name = "cooperative kernel";
  note_typed(fn);
  if (const cudaError_t e = cooperative_fits(reinterpret_cast<const void*>(fn), grid, block, shmem, name, file, line))
    return e;
  if (sizeof...(P) > 0 && !args) return cudaErrorInvalidValue;
  KernelLaunch<NoCall, P...> k{fn, {}, {name, file, line, grid, block, shmem, stream,
                                         reinterpret_cast<const void*>(fn), true}};
  k(*static_cast<std::remove_reference_t<P>*>(args[I])...);
  return launch_error_of_call();
}
}  // namespace detail
}  // namespace sim

template <class... P>
inline cudaError_t cudaLaunchCooperativeKernel(void (*fn)(P...), dim3 grid, dim3 block, void** args,
                                               size_t shmem = 0, cudaStream_t stream = nullptr,
                                               const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::sim::detail::launch_cooperative(fn, grid, block, args, shmem, stream, file, line,
                                           std::index_sequence_for<P...>{});
}

namespace sim {
// A __shared__ declaration site: its storage is allocated per block, on first use.
struct SharedSite {
  const char* file = "?";
  int line = 0;
  const char* name = "?";
  std::atomic<int> id{-1};  // index into the block's slot table, assigned on first use
  constexpr SharedSite() = default;
  constexpr SharedSite(const char* f, int l, const char* n) : file(f), line(l), name(n) {}
  template <class T, size_t Align = 0>
  T* get() {
    int i = id.load(std::memory_order_acquire);
    detail::BlockPub* b = detail::tl_block;
    if (i >= 0 && b && unsigned(i) < b->nslots) {
      if (void* p = b->slots[i]) return static_cast<T*>(p);
    }
    constexpr size_t a = Align ? Align : (alignof(T) > 16 ? alignof(T) : 16);
    return static_cast<T*>(detail::shared_alloc(this, sizeof(T), a));
  }
};

// extern __shared__ T name[];  ->  auto name = ::sim::dynamic_shared<T>();
template <class T>
inline T* dynamic_shared() { return static_cast<T*>(detail::dynamic_shared_base()); }

// File-scope `extern __shared__ T name[];` becomes a DynamicSharedRef<T>.
template <class T>
struct DynamicSharedRef {
  T* get() const { return dynamic_shared<T>(); }
  operator T*() const { return get(); }
  template <class U>
  explicit operator U*() const { return reinterpret_cast<U*>(get()); }
  T& operator[](std::ptrdiff_t i) const { return get()[i]; }
  T* operator+(std::ptrdiff_t i) const { return get() + i; }
  T& operator*() const { return *get(); }
};
// File-scope `__shared__ T name[N]...;` becomes a SharedArrayRef<T[N]...>.
template <class A>
struct SharedArrayRef {
  SharedSite site;
  using E = std::remove_extent_t<A>;
  A& array() { return *site.get<A>(); }
  E& operator[](std::ptrdiff_t i) { return array()[i]; }
  operator E*() { return array(); }
};
}  // namespace sim

// What simcc writes at the start of a kernel's body (sim/simcc, "Registration of kernels at load
// time"): `k` names the kernel (parenthesised when it holds commas), the rest are its parameter
// types. A `k` that names no single function (an overload set without the types) enters nothing.
#define SIM_KERNEL_AT_LOAD_(k)                                                                  \
  []<class SimD_ = void>() {                                                                    \
    if constexpr (requires { ::sim::detail::fnptr<SimD_>(k); })                                 \
      (void)&::sim::detail::kernel_at_load<::sim::detail::fnptr<SimD_>(k)>;                     \
  }()
#define SIM_KERNEL_AT_LOAD_AS_(k, ...)                                                          \
  []<class SimD_ = void>() {                                                                    \
    if constexpr (requires { ::sim::detail::kernel_as<SimD_ __VA_OPT__(,) __VA_ARGS__>(k); })   \
      (void)&::sim::detail::kernel_at_load<::sim::detail::kernel_as<SimD_ __VA_OPT__(,) __VA_ARGS__>(k)>; \
  }()

// The kernel expression of a launch: its address when it names exactly one
// function, and a generic callable that lets a call deduce the kernel.
#define SIM_KREF(...)                                                          \
  ([&]<class SimD_ = void>() {                                                 \
    auto sim_call_ = [&](auto&&... sim_a_) {                                   \
      (__VA_ARGS__)(static_cast<decltype(sim_a_)&&>(sim_a_)...);               \
    };                                                                         \
    if constexpr (requires { ::sim::detail::fnptr<SimD_>(__VA_ARGS__); })      \
      return ::sim::detail::make_kref(::sim::detail::fnptr<SimD_>(__VA_ARGS__), sim_call_); \
    else                                                                       \
      return ::sim::detail::make_kref(nullptr, sim_call_);                     \
  }())
