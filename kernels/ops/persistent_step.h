// The persistent training step: one cooperative launch runs a run of a lone rank's SGD steps, its
// phases separated by grid barriers instead of kernel boundaries. Three kernels (four variants)
// share this API, chosen by the plan (PersistentPlan::variant; NN_PERSISTENT_VARIANT=1|2|3|4 forces
// one):
//  1 (persistent_step.cu): every step loads its W1 tile and gathers its inputs twice; phase B a
//    warp per batch column; the tail and the loss one thread an entry.
//  2 (persistent_step2.cu, what the plan picks where it fits): each block keeps its W1 tiles in
//    shared memory for the whole launch, gathers its input slice once a step (the next step's
//    prefetched with asynchronous copies while B and C run) and reuses it in phase C; phase B a
//    block per batch column, every slice load in flight; the tail and the loss a warp an entry
//    with fixed-order shuffle sums; 16-byte shared reads, no padded columns.
//  3 (persistent_step2.cu with persistent_step2_v3.h, on request only): variant 2's arithmetic
//    (the same bits) with 16-byte windows gathered, the bytes converted four at a time, the
//    forward's shared loads a step ahead (float), and a step's tail run in the next step's phase A
//    on the warps the forward leaves idle.
//  4 (persistent_step4.cu, only with NN_PERSISTENT_VARIANT=4, compute capability 9.0): thread
//    block clusters; the split-K sums and the per-column data pass through distributed shared
//    memory inside a cluster, so a step needs one grid barrier (its file describes the phases).
// Each step:
//   A. forward partials: W1 is cut into tiles of plan.tile_h rows x plan.tile_d columns; the block
//      that owns a tile multiplies it with the batch's matching inputs (the resident uint8 images
//      through the batch's indices, / 255) into its own slice of Zp (split-K, no atomics);
//   B. (grid barrier) per batch column: Z1 = the slices summed in slice order + b1, A1 =
//      sigmoid(Z1), the scores, softmax, loss, hit and dZ2, dZ1 = (W2^T dZ2) o a1 o (1 - a1);
//   C. (grid barrier) each W1 tile stepped by its owner, W1 -= lr (dZ1 X^T + reg W1); every entry
//      of [b1 | W2 | b2] stepped from its column sums; the loss and hits added to the epoch's sums.
// The next step's phase A needs only the owner's own W1 tile: two grid barriers a step. Every
// sum has a fixed order: the result depends on the plan's tile_d (and the variant), never on the
// grid or the timing. Tested by tests/kernels/test_persistent_step.cpp against the fused step and
// float64, and tests/kernels/test_persistent_step2.cpp (the second kernel's plan and probe).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace nn {

constexpr int kPersistentTileH = 64;   // W1 rows of a tile (variant 1)
constexpr int kPersistentMaxTileD = 32;  // W1 columns (inputs) of a tile, at most (variant 1)
constexpr int kPersistentThreads = 256;
// The trainer runs the persistent step only where the forward pass's partial sums (plan.scratch
// entries) fit in this many bytes: the latency-bound shapes it is made for.
constexpr std::size_t kPersistentMaxScratch = std::size_t(64) << 20;

// How a shape is cut: tiles of W1 and the grid. From the device's SM count, shared memory and the
// kernel's occupancy (persistent_plan), never from constants of one GPU.
struct PersistentPlan {
  int tile_d = 0;   // W1 columns a tile covers (a divisor-free cut: the last slice may be short)
  int slices = 0;   // ceil(D / tile_d): the split-K slices of the forward GEMM
  int tiles = 0;    // ceil(H / tile_h) * slices
  int blocks = 0;   // the cooperative grid
  std::size_t scratch = 0;  // entries of Zp: slices * H * B
  int variant = 1;  // 1, 2, 3 or 4 (see above)
  int tile_h = kPersistentTileH;  // W1 rows a tile covers (a multiple of 4)
  // Variants 2 and 3: the tiles each block owns (their W1 in its shared memory), phase C's split of the
  // batch over thread groups, bytes per asynchronous copy (16, 8, 4; 0: plain loads), dZ1 columns
  // staged per pass, the dynamic shared memory per block.
  int tiles_per_block = 0, jsplit = 1, copy_bytes = 0, dz_cols = 0;
  std::size_t smem = 0;
  // Variant 4 (persistent_step4.cu): blocks a cluster (its input slices: slices = cluster, tile_d
  // the inputs a slice) and hidden units a cluster (tile_h = units; H / units clusters).
  int cluster = 0, units = 0;
  std::string why;  // blocks = 0 for a forced variant: why, one line (else empty)
  // A model's step times in microseconds (persistent_plan.cu: the H200's measured latencies and
  // rates), never a measurement: this plan's, and the fused step's at the same shape. 0: none.
  double predicted_us = 0, predicted_fused_us = 0;
};

// The plan for D inputs, H hidden units and batches of at most B columns; blocks = 0 when the
// device cannot run either kernel cooperatively (no cooperative launch, nothing resident). Variant
// 2 where its shared memory fits, else 1; NN_PERSISTENT_VARIANT=1, 2 or 3 in the environment
// forces one (2 or 3 where it does not fit: blocks = 0), NN_PERSISTENT_TILE=ROWSxINPUTS (e.g.
// 32x52) variant 2's (and 3's) tile.
template <class T>
PersistentPlan persistent_plan(int D, int H, int B, int device = 0);
// A plan with a given variant, grid and tile (tile_h 0, and for variants 2 and 3 tile_d 0: the
// plan's choice; a variant other than 1 or 3 is 2); blocks = 0 when it does not fit. For tests and
// benchmarks.
template <class T>
PersistentPlan persistent_plan_with(int D, int H, int B, int variant, int blocks, int tile_d, int tile_h = 0,
                                    int device = 0);
// Variant 4 (clusters of `cluster` blocks of `units` hidden units each; 0: the plan's choice, 8
// blocks and the fewest units that give one block an SM, else that fit the device at all), or
// blocks = 0 and why (one line) where it does not run: what NN_PERSISTENT_VARIANT=4 gives. Never
// chosen otherwise (untimed).
template <class T>
PersistentPlan persistent_plan_v4(int D, int H, int B, int cluster = 0, int units = 0, int device = 0,
                                  std::string* why = nullptr);
// Whether the plan's model predicts the persistent step faster than the fused step: what
// --persistent auto should ask (false for every variant-1 plan, and where nothing is predicted).
bool persistent_predicted_faster(const PersistentPlan& plan);

// Per-phase timing of the persistent step on the device (%globaltimer; the emulator's clock):
// with NN_PERSISTENT_PROBE=FILE in the environment, the first NN_PERSISTENT_PROBE_LAUNCHES
// (default 3) variant-2 or -3 launches record per step and block the end of phase A, of the first
// barrier, of phase B, of the second barrier and of phase C (variant 3 also, inside phase A: the
// copies waited for, the conversion, the next gather issued), and append to FILE one line per
// launch: each phase's median over the steps of its longest block, in microseconds (variant 3:
// A, then its parts wait, convert, gather and forward), and CSV rows (launch, step, block, mark,
// ns from the step's start; variant 3's marks: wait, convert, gather, A, barrier1, B, barrier2, C). Off (no file): no cost but a null
// pointer test a phase. The launch then synchronises its stream.

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
