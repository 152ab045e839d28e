// The persistent training step (kernels/ops/persistent_step.cu): one cooperative launch runs a
// run of a lone rank's SGD steps, its phases separated by grid barriers instead of kernel
// boundaries. Each step:
//   A. forward partials: W1 is cut into tiles of kPersistentTileH rows x plan.tile_d columns;
//      the block that owns a tile multiplies it with the batch's matching input rows (read from
//      the resident uint8 images through the batch's indices, / 255) into its own slice of
//      Zp (split-K over the 784 inputs, no atomics);
//   B. (grid barrier) one warp per batch column: Z1 = the slices summed in slice order + b1,
//      A1 = sigmoid(Z1), the scores, softmax, loss, hit and dZ2 (ops layer2's column_scores),
//      dZ1 = (W2^T dZ2) o a1 o (1 - a1);
//   C. (grid barrier) each W1 tile stepped by the block that owns it, W1 -= lr (dZ1 X^T + reg W1),
//      and every entry of [b1 | W2 | b2] by one thread (its column sums in column order), the
//      loss and hits added to the epoch's sums in column order by one thread.
// The next step's phase A needs only the owner's own W1 tile, so two grid barriers a step
// suffice. Every sum has a fixed order: the result does not depend on the grid or the timing.
// Tested by tests/kernels/test_persistent_step.cpp against the fused step and float64.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace nn {

constexpr int kPersistentTileH = 64;   // W1 rows of a tile
constexpr int kPersistentMaxTileD = 32;  // W1 columns (inputs) of a tile, at most
constexpr int kPersistentThreads = 256;
// The trainer runs the persistent step only where the forward pass's partial sums (plan.scratch
// entries) fit in this many bytes: the latency-bound shapes it is made for.
constexpr std::size_t kPersistentMaxScratch = std::size_t(64) << 20;

// How a shape is cut: tiles of W1 and the grid. From the device's SM count and the kernel's
// occupancy (persistent_plan), never from constants of one GPU.
struct PersistentPlan {
  int tile_d = 0;   // W1 columns a tile covers (a divisor-free cut: the last slice may be short)
  int slices = 0;   // ceil(D / tile_d): the split-K slices of the forward GEMM
  int tiles = 0;    // ceil(H / kPersistentTileH) * slices
  int blocks = 0;   // the cooperative grid
  std::size_t scratch = 0;  // entries of Zp: slices * H * B
};

// The plan for D inputs, H hidden units and batches of at most B columns; blocks = 0 when the
// device cannot run the kernel cooperatively (no cooperative launch, nothing resident).
template <class T>
PersistentPlan persistent_plan(int D, int H, int B, int device = 0);

// The scalar arguments of a run of steps.
template <class T>
struct PersistentShape {
  int D = 0, H = 0, C = 0;
  int B = 0;                   // batch size; step s covers order[offset + s B .. + count_s)
  int steps = 0;               // steps in this launch
  unsigned long long n = 0;    // entries of order (the shard): count_s = min(B, n - offset_s)
  unsigned long long offset = 0;
  T lr = 0, reg = 0;
  int tile_d = 0, slices = 0;  // from the plan
};

// Runs shape.steps steps in one cooperative launch of plan.blocks blocks on stream s. P =
// [W1 | b1 | W2 | b2] (model/param_layout.h) is stepped in place; scratch holds plan.scratch
// entries; A1 and dZ1 H x B each, dZ2 C x B, loss_cols and hit_cols B each (B = shape.B);
// stats[0] and counts[0..2] accumulate as layer2_finish's do (loss, hits, calls, first
// non-finite call). Throws std::runtime_error when the launch is refused.
template <class T>
void persistent_steps(const PersistentPlan& plan, const PersistentShape<T>& shape, const std::uint8_t* images,
                      const std::uint8_t* labels, const std::uint32_t* order, T* P, T* scratch, T* A1, T* dZ1,
                      T* dZ2, double* loss_cols, unsigned* hit_cols, double* stats, unsigned* counts,
                      cudaStream_t s = 0);

}  // namespace nn
