// The runtime side of sim/strict.h: launches over a kernel's __launch_bounds__ are refused.
// Tested by tests/sim/test_sim_bounds_align.cu.
#include <cstdio>
#include <cstdlib>
#include "fiber.h"

namespace sim::detail {

// A GPU refuses such a launch. The CUDA C++ Programming Guide (launch bounds): "A kernel
// will fail to launch if it is executed with more threads per block than its launch bound
// maxThreadsPerBlock"; cudaFuncAttributes::maxThreadsPerBlock is documented as "the maximum
// number of threads per block, beyond which a launch of the function would fail", and the
// runtime's error for that is cudaErrorLaunchOutOfResources (701, "too many resources
// requested for launch": "... the kernel launch specifies too many threads for the kernel's
// register count"), a launch error that leaves the context usable (not sticky).
void launch_bounds_exceeded(const Bounds& b, unsigned long long threads, const char* file, int line) {
  Worker* w = tl_worker;
  if (!w || !w->in_block || !w->L) return;
  Launch& L = *w->L;
  int none = 0;
  if (L.refused.compare_exchange_strong(none, cudaErrorLaunchOutOfResources) &&
      settings().fault_mode == FaultMode::Abort) {
    const std::string bounds =
        b.min_blocks || b.max_cluster
            ? strf("%lld, %lld%s", b.max_threads, b.min_blocks,
                   b.max_cluster ? strf(", %lld", b.max_cluster).c_str() : "")
            : strf("%lld", b.max_threads);
    std::fprintf(stderr,
                 "sim: launch of kernel '%s' at %s:%d refused (cudaErrorLaunchOutOfResources): "
                 "block of %llu threads (%ux%ux%u) is over the kernel's __launch_bounds__(%s) "
                 "at %s:%d\n",
                 L.name, L.file, L.line, threads, L.block.x, L.block.y, L.block.z, bounds.c_str(),
                 file, line);
  }
  L.aborted.store(true);
  throw FiberAbort{};  // first statement of the kernel: nothing of it has run
}

}  // namespace sim::detail
