// Launches with attributes and untyped launches under the SIMT CPU emulator: cudaLaunchKernelEx
// (typed, also inside a stream capture), cudaLaunchKernelExC, cudaLaunchKernel and
// cudaLaunchCooperativeKernel with `const void*` kernels, and programmatic dependent launch (PDL):
// cudaLaunchAttributeProgrammaticStreamSerialization, cudaGridDependencySynchronize() and
// cudaTriggerProgrammaticLaunchCompletion(). Runtime: runtime/launch_ex.cpp, runtime/checks.cpp
// (the PDL hazard); sim/docs/async.md describes the model. Tested by tests/sim/test_sim_pdl.cu.
#pragma once
#include <cstddef>
#include <utility>
#include "launch.h"

enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0,
  cudaLaunchAttributeAccessPolicyWindow = 1,
  cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeSynchronizationPolicy = 3,
  cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeClusterSchedulingPolicyPreference = 5,
  cudaLaunchAttributeProgrammaticStreamSerialization = 6,
  cudaLaunchAttributeProgrammaticEvent = 7,
  cudaLaunchAttributePriority = 8
};
typedef enum cudaLaunchAttributeID cudaLaunchAttributeID;
typedef union cudaLaunchAttributeValue {
  char pad[64];
  int cooperative;
  int programmaticStreamSerializationAllowed;
  int priority;
  struct {
    unsigned int x, y, z;
  } clusterDim;
} cudaLaunchAttributeValue;
typedef struct cudaLaunchAttribute_st {
  cudaLaunchAttributeID id;
  char pad[8 - sizeof(cudaLaunchAttributeID)];
  cudaLaunchAttributeValue val;
} cudaLaunchAttribute;
typedef struct cudaLaunchConfig_st {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
} cudaLaunchConfig_t;

namespace sim::detail {
// The attributes of a launch: false (last error set, one line printed in abort mode) for one the
// emulator refuses (clusters larger than one block, an unknown id); cooperative checks the grid
// against what can be resident. `what` names the call in messages.
bool launch_attributes(const cudaLaunchConfig_t* cfg, const void* fn, const char* what, Site s, LaunchParams* lp);
// "k<float>" out of the launch's argument text "&cfg, k<float>, a, b" (kept for the process).
const char* kernel_name_from_args(const char* text);
cudaError_t untyped_launch(const void* fn, const LaunchParams& lp, void** args, const char* what);

// cudaLaunchKernelEx with the kernel's name given (launch helpers that know it).
template <class... P, class... A>
inline cudaError_t launch_ex_named(Site s, const char* name, const cudaLaunchConfig_t* cfg, void (*fn)(P...),
                                   A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "cudaLaunchKernelEx: the arguments do not match the kernel's parameters");
  note_typed(fn, name);
  LaunchParams lp{name, s.file, s.line, dim3(), dim3(), 0, nullptr, reinterpret_cast<const void*>(fn)};
  if (!launch_attributes(cfg, lp.fn, "cudaLaunchKernelEx", s, &lp)) return launch_error_of_call();
  KernelLaunch<NoCall, P...> k{fn, {}, lp};
  k(static_cast<P>(std::forward<A>(args))...);
  return launch_error_of_call();
}
// cudaLaunchKernelEx(&cfg, kernel, args...) as written: the name from the call's text.
template <class... P, class... A>
inline cudaError_t launch_ex(Site s, const char* text, const cudaLaunchConfig_t* cfg, void (*fn)(P...),
                             A&&... args) {
  return launch_ex_named(s, kernel_name_from_args(text), cfg, fn, std::forward<A>(args)...);
}

// PDL inside a kernel (runtime/launch_ex.cpp): the calling thread now sees everything the kernels
// before it on its stream wrote; its block lets the next kernel start.
void pdl_wait(Site s);
void pdl_trigger(Site s);
}  // namespace sim::detail

template <class... P, class... A>
inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* cfg, void (*fn)(P...), A&&... args) {
  return ::sim::detail::launch_ex(::sim::detail::Site{"?", 0}, "", cfg, fn, std::forward<A>(args)...);
}
// The same with the call site and the kernel's name in the emulator's messages.
#define cudaLaunchKernelEx(...) ::sim::detail::launch_ex(SIM_SITE_, #__VA_ARGS__, __VA_ARGS__)

inline cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* cfg, const void* fn, void** args,
                                       const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::sim::detail::LaunchParams lp{"kernel", file, line, dim3(), dim3(), 0, nullptr, fn};
  if (!::sim::detail::launch_attributes(cfg, fn, "cudaLaunchKernelExC", ::sim::detail::Site{file, line}, &lp))
    return ::sim::detail::launch_error_of_call();
  return ::sim::detail::untyped_launch(fn, lp, args, "cudaLaunchKernelExC");
}

// CUDA's untyped launch, (void*)kernel and args[i] pointing to argument i; the kernel is known with
// its types (find_kernel) from the program's start (simcc's registration) or from a typed use.
inline cudaError_t cudaLaunchKernel(const void* fn, dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                    cudaStream_t stream = nullptr, const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
  ::sim::detail::LaunchParams lp{"kernel", file, line, grid, block, shmem, stream, fn};
  return ::sim::detail::untyped_launch(fn, lp, args, "cudaLaunchKernel");
}
// The typed form CUDA's header adds (a template over the kernel's type).
template <class... P>
inline cudaError_t cudaLaunchKernel(void (*fn)(P...), dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                    cudaStream_t stream = nullptr, const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
  ::sim::detail::note_typed(fn);
  return cudaLaunchKernel(reinterpret_cast<const void*>(fn), grid, block, args, shmem, stream, file, line);
}

// CUDA's untyped cooperative launch, (void*)kernel and args[i] pointing to argument i. The kernel
// is known to the emulator with its types (find_kernel) as for cudaLaunchKernel above.
inline cudaError_t cudaLaunchCooperativeKernel(const void* fn, dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                               cudaStream_t stream = nullptr, const char* file = __builtin_FILE(),
                                               int line = __builtin_LINE()) {
  cudaLaunchAttribute coop;
  coop.id = cudaLaunchAttributeCooperative;
  coop.val.cooperative = 1;
  const cudaLaunchConfig_t cfg{grid, block, shmem, stream, &coop, 1};
  ::sim::detail::LaunchParams lp{"cooperative kernel", file, line, dim3(), dim3(), 0, nullptr, fn};
  if (!::sim::detail::launch_attributes(&cfg, fn, "cudaLaunchCooperativeKernel", ::sim::detail::Site{file, line}, &lp))
    return ::sim::detail::launch_error_of_call();
  return ::sim::detail::untyped_launch(fn, lp, args, "cudaLaunchCooperativeKernel");
}

// ---- thread block clusters (runtime/cluster.cpp, sim/docs/clusters.md) ----------------------
// `__cluster_dims__(x[, y[, z]])` on a kernel definition expands to nothing; simcc writes
// SIM_CLUSTER_DIMS_REGISTER_(kernel, x, y, z) after the body of a non-template kernel (same
// line), which registers the shape at static initialisation: a <<<...>>> launch of the kernel
// then runs clusters of that shape, and cudaLaunchAttributeClusterDimension may not differ.
#define __cluster_dims__(...)
namespace sim::detail {
struct ClusterDims {
  long long x, y, z;
  constexpr ClusterDims(long long a, long long b = 1, long long c = 1) : x(a), y(b), z(c) {}
};
bool register_cluster_dims(const void* fn, const ClusterDims& d, const char* file, int line);
// The clusters of cfg's shape (attribute or the kernel's own) that can be resident at once.
cudaError_t occupancy_max_active_clusters(int* n, const void* fn, const cudaLaunchConfig_t* cfg);
}  // namespace sim::detail
#define SIM_CLUSTER_DIMS_REGISTER_(k, ...)                                                    \
  [[maybe_unused]] static const bool SIM_LB_CAT_(sim_cd_reg_, __COUNTER__) =                  \
      ::sim::detail::register_cluster_dims(                                                    \
          []<class SimD_ = void>() -> const void* {                                            \
            if constexpr (requires { ::sim::detail::fnptr<SimD_>(k); })                        \
              return reinterpret_cast<const void*>(::sim::detail::fnptr<SimD_>(k));           \
            else                                                                               \
              return nullptr;                                                                  \
          }(),                                                                                 \
          ::sim::detail::ClusterDims{__VA_ARGS__}, __FILE__, __LINE__)

template <class T>
inline cudaError_t cudaOccupancyMaxActiveClusters(int* numClusters, T* func, const cudaLaunchConfig_t* config) {
  ::sim::detail::note_if_kernel(func);
  return ::sim::detail::occupancy_max_active_clusters(numClusters, reinterpret_cast<const void*>(func), config);
}

// Device side (griddepcontrol.wait / griddepcontrol.launch_dependents on a GPU).
inline void cudaGridDependencySynchronize() { ::sim::detail::pdl_wait(::sim::detail::Site{"?", 0}); }
inline void cudaTriggerProgrammaticLaunchCompletion() { ::sim::detail::pdl_trigger(::sim::detail::Site{"?", 0}); }
#define cudaGridDependencySynchronize() ::sim::detail::pdl_wait(SIM_SITE_)
#define cudaTriggerProgrammaticLaunchCompletion() ::sim::detail::pdl_trigger(SIM_SITE_)
