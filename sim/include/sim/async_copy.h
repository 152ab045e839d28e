// Asynchronous global-to-shared copies under the SIMT CPU emulator (cp.async on a GPU), behind
// CUDA's <cuda_pipeline.h> primitives and <cuda/pipeline>: a copy is only recorded when issued,
// its destination bytes are pending (any access to them is a fault) until the issuing thread
// waits for its group, and the wait performs it with that thread's own loads and stores, so the
// bounds, initialisation and race checks see them at the latest moment a GPU could make them.
// Runtime: runtime/async_copy.cpp; sim/docs/async.md. Tested by tests/sim/test_sim_async_copy.cu.
#pragma once
#include <cstddef>
#include <cstdint>
#include "device.h"

namespace sim::detail {
struct AsyncCopyRec {
  void* dst;
  const void* src;
  uint32_t bytes;  // written at dst
  uint32_t copy;   // of them read from src; the rest zero-filled
};
// Records a copy of `copy` bytes from src and bytes - copy zeros to dst (shared memory). `align`:
// the alignment both addresses need (0: none). what: the call's name in messages.
void async_issue(void* dst, const void* src, size_t bytes, size_t copy, size_t align, const char* what, Site s);
void async_commit(Site s);
// Takes up to max copies of this thread's committed groups but the newest `keep` (their bytes no
// longer pending); 0 when none is left. The caller performs them (async_perform).
int async_take(size_t keep, AsyncCopyRec* out, int max);
// The thread's groups committed so far (cuda::pipeline counts its stages with it).
unsigned long long async_committed();

// The copy itself, compiled into the calling .cu file: its loads and stores are checked like the
// kernel's own (simcc's instrumentation), attributed to the waiting thread. Not turned into a
// memcpy call (which the instrumentation would not see).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void async_perform(const AsyncCopyRec& c) {
  auto* d = static_cast<unsigned char*>(c.dst);
  const auto* s = static_cast<const unsigned char*>(c.src);
  uint32_t i = 0;
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 3) == 0)
    for (; i + 4 <= c.copy; i += 4) *reinterpret_cast<uint32_t*>(d + i) = *reinterpret_cast<const uint32_t*>(s + i);
  for (; i < c.copy; ++i) d[i] = s[i];
  for (; i + 4 <= c.bytes && (reinterpret_cast<uintptr_t>(d + i) & 3) == 0; i += 4) *reinterpret_cast<uint32_t*>(d + i) = 0;
  for (; i < c.bytes; ++i) d[i] = 0;
}
inline void async_wait(size_t keep) {
  AsyncCopyRec batch[32];
  for (int k; (k = async_take(keep, batch, 32)) > 0;)
    for (int i = 0; i < k; ++i) async_perform(batch[i]);
}
}  // namespace sim::detail
