// The fused training step's layer-2 kernels (kernels/ops/layer2.cu): everything between the
// forward GEMM and the dW1 GEMM in one kernel, and one small kernel that sums its per-tile
// parts and steps (or writes the gradient of) [b1 | W2 | b2]. The GPU counterpart of the CPU
// backend's cpu::layer2_block. Tested by tests/kernels/test_layer2.cpp against float64.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace nn {

// The most classes the fused kernels handle (the scores of a column live in registers).
constexpr int kLayer2MaxClasses = 10;
// Batch columns per tile of layer2_fused: each tile writes one set of parts.
constexpr int kLayer2TileCols = 16;

// Entries of one tile's parts: [db1 (H) | dW2 (C x H, column-major) | db2 (C)], the layout of
// the packed parameters' tail [b1 | W2 | b2] (model/param_layout.h), so the finish kernel
// treats both as one vector.
__host__ __device__ inline std::size_t layer2_part_size(int H, int C) { return std::size_t(H) * (C + 1) + std::size_t(C); }
__host__ __device__ inline int layer2_tiles(int b) { return (b + kLayer2TileCols - 1) / kLayer2TileCols; }

// For the b columns of the hidden activations A1 (H x b, ld H, sigmoid outputs), with
// W2 (C x H), b2 (C) and the column j's label labels[cols[j]], 1 <= C <= kLayer2MaxClasses:
//   z = W2 a1 + b2; yhat = softmax(z); dZ2 = (yhat - onehot(label)) * inv_B;
//   A1 is overwritten with dZ1 = (W2^T dZ2) o a1 o (1 - a1) (in place: each column is read
//   before it is written, by the block that owns it);
//   tile t's parts (t = 0 .. layer2_tiles(b) - 1, parts + t * layer2_part_size(H, C)) hold
//   the sums over its columns of dZ1 (db1), dZ2 a1^T (dW2) and dZ2 (db2); loss_parts[t] the
//   cross-entropy sum (max + log sum exp - z[label], in double, as softmax_xent) and
//   hit_parts[t] the columns whose argmax (lowest index on ties) is the label.
// Every output depends only on its tile's columns: no atomics, the same bits for any grid.
template <class T>
void layer2_fused(T* A1, int H, int C, int b, const T* W2, const T* b2, const std::uint8_t* labels,
                  const std::uint32_t* cols, T inv_B, T* parts, double* loss_parts, unsigned* hit_parts,
                  cudaStream_t s = 0);

// Sums the `tiles` parts in tile order, g = sum (+ reg * W2 on the W2 entries), over the
// n = layer2_part_size(H, C) entries of P = [b1 | W2 | b2]:
//   G null: P -= lr * g in place (the SGD step, the same roundings as ops sgd_update on a
//           GEMM-made gradient);
//   else:   G = g (the gradient, for the exchange between ranks); P is only read.
// One thread then adds the tiles' losses and hits in tile order to stats[0] (loss, double)
// and counts[0] (hits); counts[1] counts the calls and counts[2] keeps the first call
// (1-based) whose loss was not finite (0: none): the trainer reads them at the epoch's end.
template <class T>
void layer2_finish(const T* parts, int tiles, int H, int C, T reg, T lr, T* P, T* G, const double* loss_parts,
                   const unsigned* hit_parts, double* stats, unsigned* counts, cudaStream_t s = 0);

}  // namespace nn
