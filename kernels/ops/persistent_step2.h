// Internal to kernels/ops: the second persistent-step kernel's shared-memory layout (which the plan,
// persistent_plan.cu, sizes) and its launcher (persistent_step2.cu). The kernel and its phases are
// described in persistent_step.h; tested by tests/kernels/test_persistent_step*.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "ops/persistent_step.h"

namespace nn::persist2 {

constexpr int kThreads = kPersistentThreads;
constexpr int kMaxC = 10;       // classes (ops layer2's kLayer2MaxClasses)
constexpr int kMaxHPerThread = 4;  // phase B keeps a thread's hidden units in registers: H <= 1024
constexpr int kProbeMarks = 6;  // per step and block: start, A, barrier 1, B, barrier 2, C
// Variant 3 splits phase A: start, the copies waited for, converted, the next gather issued, A,
// barrier 1, B, barrier 2, C.
constexpr int kProbeMarks3 = 9;
inline int probe_marks(int variant) { return variant == 3 ? kProbeMarks3 : kProbeMarks; }

__host__ __device__ inline int round4(int v) { return (v + 3) / 4 * 4; }
// Row stride of the converted inputs (T per batch column): a multiple of 4 (16-byte rows) that is
// an odd multiple of 4 words mod 32, so 8 consecutive rows hit 8 different groups of banks.
__host__ __device__ inline int x_stride(int td) {
  int ld = round4(td);
  while ((ld / 4) % 2 == 0) ld += 4;
  return ld;
}
// Bytes a gathered column takes (a multiple of 16, every copy aligned). window (variant 3): the
// column holds the 16-byte-aligned window [floor16(d0), ceil16(d0 + td)) of an image row around
// a slice starting anywhere at a multiple of 4, up to 16 bytes more.
__host__ __device__ inline int xb_stride(int td, bool window = false) {
  return (td + 15) / 16 * 16 + (window && td % 16 != 0 ? 16 : 0);
}

// Offsets (bytes) into the block's dynamic shared memory, each a multiple of 16.
struct Layout {
  std::size_t w, x, xb, dz, red, lut, col, idx, total;
  int ldx, ldxb;
};
template <class T>
__host__ __device__ inline Layout layout(int td, int th, int B, int tpb, int dz_cols, int jsplit,
                                         bool window = false) {
  Layout L;
  auto up = [](std::size_t v) { return (v + 15) / 16 * 16; };
  L.ldx = x_stride(td);
  L.ldxb = xb_stride(td, window);
  const int b4 = round4(B);
  std::size_t o = 0;
  L.w = o;    o += up(std::size_t(tpb) * round4(td) * th * sizeof(T));        // W1 tiles, [d][h]
  L.x = o;    o += up(std::size_t(tpb) * b4 * L.ldx * sizeof(T));            // inputs, [j][d]
  L.xb = o;   o += up(std::size_t(tpb) * B * L.ldxb);                        // gathered bytes
  L.dz = o;   o += up(std::size_t(dz_cols) * th * sizeof(T));                // dZ1 columns, [j][h]
  const int pairs = th / 4 * (round4(td) / 4);
  L.red = o;  o += up(std::size_t(jsplit > 1 ? jsplit - 1 : 0) * pairs * 16 * sizeof(T));
  L.lut = o;  o += up(256 * sizeof(T));                                      // byte / 255
  L.col = o;  o += up((kThreads / 32) * kMaxC * sizeof(T) + 2 * kMaxC * sizeof(T));
  L.idx = o;  o += up(std::size_t(B) * sizeof(std::uint32_t));                // next step's images
  L.total = o;
  return L;
}

// Whether a plan gathers 16-byte windows (variant 3 with 16-byte copies), and its layout.
inline bool windowed(const PersistentPlan& p) { return p.variant == 3 && p.copy_bytes == 16; }
template <class T>
Layout layout_of(const PersistentPlan& p, int B) {
  return layout<T>(p.tile_d, p.tile_h, B, p.tiles_per_block, p.dz_cols, p.jsplit, windowed(p));
}

// The device's cooperative launch of the second kernel (persistent_step2.cu); probe: null, or
// steps x plan.blocks x probe_marks(plan.variant) timestamps. Variant 2 or 3 (plan.variant).
template <class T>
void run(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
         const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, T* A1, T* dZ1, T* dZ2,
         double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts, unsigned long long* probe,
         cudaStream_t s);
// The kernel's occupancy at the plan's shared memory (0 when it cannot be resident), for the plan.
template <class T>
int blocks_per_sm(std::size_t smem, int variant = 2);

}  // namespace nn::persist2
