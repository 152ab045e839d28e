// CUDA's pipeline primitives under the SIMT CPU emulator (sim/include/sim/async_copy.h holds the
// model): __pipeline_memcpy_async (4, 8 or 16 bytes, both addresses aligned to the size, the last
// zfill bytes zero-filled), __pipeline_commit, __pipeline_wait_prior. Tested by
// tests/sim/test_sim_async_copy.cu; sim/docs/async.md.
#pragma once
#include "sim/cuda_sim.h"
#include "sim/async_copy.h"

inline void __pipeline_memcpy_async(void* dst_shared, const void* src_global, size_t size_and_align,
                                    size_t zfill = 0, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (size_and_align != 4 && size_and_align != 8 && size_and_align != 16)
    ::sim::detail::device_fault("__pipeline_memcpy_async: size_and_align must be 4, 8 or 16");
  if (zfill > size_and_align) ::sim::detail::device_fault("__pipeline_memcpy_async: zfill larger than the copy");
  ::sim::detail::async_issue(dst_shared, src_global, size_and_align, size_and_align - zfill, size_and_align,
                             "__pipeline_memcpy_async", ::sim::detail::Site{file, line});
}
inline void __pipeline_commit(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::sim::detail::async_commit(::sim::detail::Site{file, line});
}
inline void __pipeline_wait_prior(size_t prior) { ::sim::detail::async_wait(prior); }
