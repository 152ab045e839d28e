// The data layout of exact training: batches whose images, and their order, are the same at
// any rank count p, shuffled every epoch, while rank 0 still scatters the training images ONCE.
// Pure integer arithmetic (no MPI, no CUDA); tested by tests/schedule/test_exact_plan.cpp.
//
// Batches. The n training images (file order, after the validation hold-out) form batches
// k = 0 .. K-1 of c_k = min(B, n - kB) images each (only the last may be smaller), as in
// shards.h.
//
// Chunks. Each batch is cut into chunks of c images, c = exact_chunk(B) unless given (it
// depends on B alone, never on p). Batch k has chunk_slots(k) = ceil(c_k / c) slots; slot j
// holds the batch positions [jc, min((j+1)c, c_k)) (chunk_range(k, j)). A full batch has
// C = ceil(B / c) slots; only the last slot of a batch and the slots of the last batch can be
// shorter than c, and the last batch can lack the high slots altogether. A chunk is the unit
// of work: a rank computes whole chunks, so a batch is the same list of chunks at any p.
//
// Columns. Column j is slot j of every batch: in file order, the images at batch positions
// chunk_range(k, j) of each batch k that has slot j, i.e. file indices kB + jc + i. Every
// full batch puts w_j = min(c, B - jc) images in it, so batch k's chunk starts at column
// position k * w_j; column sizes differ only through the partial last batch (column_size).
//
// Owners. Column j belongs to rank column_owner(j): the contiguous block rule of rank_slice
// over the C columns (ranks 0 .. C%p - 1 get one column more). When p > C, ranks C .. p-1
// own no column: their shard is empty and they compute no chunk. So C is the number of
// useful ranks, which the chunk rule caps at 16.
// Rank r's SHARD is the concatenation, in column order, of its columns' file-order images
// (shard_indices): rank 0 scatters every shard once and no image ever moves again.
//
// Shuffling (epoch e). Each column j is permuted on its own by the Fisher-Yates permutation
// perm_{e,j} of its positions [0, column_size(j)) -- i from m-1 down to 1, swap with
// Rng::below(i + 1) -- drawn from Rng(shuffle_key(seed, e, j)) (shards.h: the column takes
// the place of the rank, so column 0's key is the unmixed epoch seed, and a plan with one
// column visits the images in nn::schedule::epoch_order(n, seed, e)). The key depends on
// (seed, epoch, column), never on the rank. In epoch e, position i of chunk (k, j) holds
//   column_j[perm_{e,j}[k * w_j + i]],   0 <= i < chunk_range(k, j).count,
// where column_j lists column j's file indices (column_indices). Without shuffling perm is
// the identity and batch k is file order [kB, kB + c_k).
//
// What depends on p: only which rank owns each column, hence the shards and the shard
// positions rank_chunks reports. What does not: the chunks, the columns, every batch's
// images and their order in every epoch (global_batch), with or without shuffling. Shuffling
// mixes images across batches but keeps each image in its column: an image always sits in
// the same slot j, at varying batches and positions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nn::schedule {

// Positions [begin, begin + count) of a batch or of a column's list of chunks.
struct Range {
  std::size_t begin, count;
};

struct ExactPlan {
  std::size_t n = 0;       // training images (file order 0..n-1)
  std::size_t B = 0;       // global batch size
  std::size_t c = 0;       // chunk size, 1 <= c <= B
  int p = 1;               // ranks
  std::uint64_t seed = 0;  // shuffle seed (the run's --seed)
  bool shuffle = true;

  std::size_t num_batches() const { return B ? (n + B - 1) / B : 0; }  // K
  std::size_t batch_count(std::size_t k) const;                         // c_k
  std::size_t num_columns() const { return c ? (B + c - 1) / c : 0; }   // C
  // Slots of batch k: ceil(c_k / c). Throws std::out_of_range for k >= K.
  std::size_t chunk_slots(std::size_t k) const;
  // Batch positions of slot j of batch k. Throws std::out_of_range unless k < K and
  // j < chunk_slots(k).
  Range chunk_range(std::size_t k, std::size_t j) const;
  // Images in column j (all batches). Throws std::out_of_range for j >= C.
  std::size_t column_size(std::size_t j) const;
  // The rank that owns column j. Throws std::out_of_range for j >= C.
  int column_owner(std::size_t j) const;
  // The columns of rank r: [begin, begin + count), count == 0 when r >= C.
  // Throws std::invalid_argument unless 0 <= r < p.
  Range rank_columns(int r) const;
};

// The chunk size of a batch of B images: c = max(32, ceil(B / 16)), capped at B.
// The floor of 32 keeps each chunk's matrix products wide enough to use a GPU; the B/16 term
// bounds a full batch at 16 chunks (ceil(B / c) <= 16), which bounds the useful ranks at 16.
// B <= 32 gives one chunk (c = B): exact training then runs on one rank.
// Examples: B = 100 -> c = 32 (4 slots), B = 512 -> 32 (16), B = 1000 -> 63 (16).
// Throws std::invalid_argument if B == 0.
std::size_t exact_chunk(std::size_t B);

// chunk == 0 chooses exact_chunk(B); any other value is the chunk size c itself.
// Throws std::invalid_argument if B == 0, p < 1, B > n (when n > 0), n >= 2^32 or chunk > B.
ExactPlan make_exact_plan(std::size_t n, std::size_t B, int p, std::uint64_t seed, bool shuffle,
                          std::size_t chunk = 0);

// File indices of column j in column-position order (file order). Throws for j >= C.
std::vector<std::uint32_t> column_indices(const ExactPlan& plan, std::size_t j);

// Number of images in rank r's shard (the sizes of its columns).
std::size_t shard_size(const ExactPlan& plan, int r);

// The file-order image indices of rank r's shard, in shard-position order: its columns'
// column_indices, concatenated in column order.
std::vector<std::uint32_t> shard_indices(const ExactPlan& plan, int r);

// perm_{e,j}: column j's positions in the order epoch e visits them (identity without shuffle).
std::vector<std::uint32_t> column_order(const ExactPlan& plan, std::size_t j, int epoch);

// One chunk a rank computes: its slot j in the batch and the shard positions of its images,
// in batch order (the images of batch positions chunk_range(k, slot)).
struct Chunk {
  std::size_t slot;
  std::vector<std::uint32_t> positions;
};

// The chunks of batch k of epoch e that rank r computes, in slot order; empty when r owns no
// column, or none that batch k has. Draws r's column permutations: O(shard_size) per call.
// Throws std::out_of_range for k >= K.
std::vector<Chunk> rank_chunks(const ExactPlan& plan, int r, int epoch, std::size_t k);

// rank_chunks of every batch of epoch e (entry k is batch k), drawing each permutation once:
// O(shard_size) for the whole epoch.
std::vector<std::vector<Chunk>> rank_epoch_chunks(const ExactPlan& plan, int r, int epoch);

// All global batches of epoch e, concatenated: batch k is entries [kB, kB + c_k). O(n).
std::vector<std::uint32_t> global_epoch_order(const ExactPlan& plan, int epoch);

// File indices of global batch k of epoch e in slot order (chunk (k, 0) first): the reference
// replay computes each chunk's images as the entries chunk_range(k, j) of it. O(n).
// Throws std::out_of_range for k >= K.
std::vector<std::uint32_t> global_batch(const ExactPlan& plan, int epoch, std::size_t k);

}  // namespace nn::schedule
