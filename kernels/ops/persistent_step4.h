// Internal to kernels/ops: the fourth persistent-step kernel (persistent_step4.cu): thread block
// clusters and distributed shared memory, one grid barrier a step. Its shape, its shared-memory
// layout (which the plan, persistent_plan.cu, sizes) and its launcher. The phases are in
// persistent_step4_phases.h and persistent_step4_update.h; persistent_step.h describes all variants.
// Tested by tests/kernels/test_persistent_cluster.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "ops/persistent_step.h"

namespace nn::persist4 {

constexpr int kThreads = kPersistentThreads;
constexpr int kMaxC = 10;      // classes (ops layer2's kLayer2MaxClasses)
constexpr int kMaxCluster = 8;  // the portable cluster size

__host__ __device__ inline int round4(int v) { return (v + 3) / 4 * 4; }

// Offsets (bytes) into a block's dynamic shared memory, each a multiple of 16. Per block: its W1
// tile (td inputs x U units, [d][u]), the step's inputs of its slice ([j][d]), and per batch column
// ([j][u] or [j][c]) the partial Z1 over its slice (read by the cluster), A1, dZ1 and dZ2 (its own
// columns computed, the others copied from their owners), the columns' losses and hits; its copy of
// W2's and b1's rows for the cluster's units and of b2; phase C's partial sums; byte / 255.
struct Layout {
  std::size_t w, x, zp, a1, dz1, dz2, loss, hit, w2, b1, b2, red, lut, total;
  int ldx;
};
template <class T>
__host__ __device__ inline Layout layout(int td, int U, int B, int jsplit) {
  Layout L;
  auto up = [](std::size_t v) { return (v + 15) / 16 * 16; };
  const std::size_t b4 = std::size_t(round4(B)), t = sizeof(T);
  L.ldx = round4(td);
  std::size_t o = 0;
  L.w = o;    o += up(std::size_t(L.ldx) * U * t);
  L.x = o;    o += up(b4 * L.ldx * t);
  L.zp = o;   o += up(b4 * U * t);
  L.a1 = o;   o += up(b4 * U * t);
  L.dz1 = o;  o += up(b4 * U * t);
  L.dz2 = o;  o += up(b4 * kMaxC * t);
  L.loss = o; o += up(b4 * sizeof(double));
  L.hit = o;  o += up(b4 * sizeof(unsigned));
  L.w2 = o;   o += up(std::size_t(U) * kMaxC * t);
  L.b1 = o;   o += up(std::size_t(U) * t);
  L.b2 = o;   o += up(kMaxC * t);
  const std::size_t pairs = std::size_t(U / 4) * (L.ldx / 4);
  L.red = o;  o += up(std::size_t(jsplit > 1 ? jsplit - 1 : 0) * pairs * 16 * t);
  L.lut = o;  o += up(256 * t);
  L.total = o;
  return L;
}

// Phase C's split of the batch over thread groups: as many parts (at most 4) as 256 threads hold
// thread tiles of 4 units x 4 inputs.
__host__ __device__ inline int jsplit_of(int td, int U) {
  const int pairs = U / 4 * (round4(td) / 4);
  const int j = pairs > 0 ? kThreads / pairs : 1;
  return j < 1 ? 1 : j > 4 ? 4 : j;
}

template <class T>
struct Shape4 {
  PersistentShape<T> a;
  int CL, U, NC, td, jsplit;  // blocks a cluster, units a cluster, clusters, inputs a slice
  Layout L;
};

// The cooperative cluster launch (persistent_step4.cu); scratch holds the clusters' partial scores,
// 2 (step parity) x NC x B x kMaxC entries.
template <class T>
void run(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
         const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, double* stats, unsigned* counts,
         cudaStream_t s);
// How many clusters of cl blocks with smem bytes of shared memory each can run at once on the
// device (0 when none can, or the kernel has no code for it), for the plan.
template <class T>
int max_clusters(int cl, std::size_t smem, int device);

}  // namespace nn::persist4
