// The data layout that lets rank 0 scatter the training images ONCE: each rank's shard,
// where every global batch's part lies inside it, and the per-epoch, per-rank shuffles.
// Pure integer arithmetic (no MPI, no CUDA); tested by tests/schedule/test_shards.cpp.
//
// Layout. The n training images (file order, after the validation hold-out) form batches
// k = 0 .. K-1 of c_k = min(B, n - kB) images each (only the last may be smaller). Rank r's
// part of batch k is nn::schedule::rank_slice(c_k, r, p): the first c_k % p ranks get one image
// more, and an empty part is legal (p > c_k). Rank r's SHARD is the concatenation over k of
// the file-order indices of its parts, so its part of batch k is the contiguous range
// [off_r(k), off_r(k) + cnt_r(k)) of shard positions, and the shard is the same every epoch.
//
// Shuffling (epoch e, rank r): a Fisher-Yates permutation perm_{e,r} of the shard positions
// [0, n_r) -- i from n_r-1 down to 1, swap with j = Rng::below(i + 1) -- drawn from
//   Rng(derive_seed(seed, Stream::kShuffle, e) ^ (r * 0x9E3779B97F4A7C15))
// (the odd multiplier maps distinct ranks to distinct keys; rank 0's key is the unmixed
// epoch seed, so at p = 1 the epoch order is exactly nn::schedule::epoch_order(n, seed, e)).
// Every rank can compute every other rank's permutation: the reference replay does.
// Global batch k of epoch e = concatenation over r = 0..p-1 of
//   shard_r[perm_{e,r}[off_r(k) + j]], j < cnt_r(k).
// Without shuffling perm is the identity and global batch k is file order [kB, kB + c_k).
//
// With shuffling, a batch only mixes images within each rank's shard, so the composition
// of the batches depends on p (the price of scattering once and never moving images again;
// the gradient of a given batch does not depend on p). Without shuffling nothing depends on p.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nn::schedule {

struct ShardPlan {
  std::size_t n = 0;       // training images (file order 0..n-1)
  std::size_t B = 0;       // global batch size
  int p = 1;               // ranks
  std::uint64_t seed = 0;  // shuffle seed (the run's --seed)
  bool shuffle = true;

  std::size_t num_batches() const { return B ? (n + B - 1) / B : 0; }
  std::size_t batch_count(std::size_t k) const;  // c_k
};

// Throws std::invalid_argument if B == 0, p < 1, B > n (when n > 0) or n >= 2^32.
ShardPlan make_plan(std::size_t n, std::size_t B, int p, std::uint64_t seed, bool shuffle);

// Rank r's part of batch k, as a range of its shard positions.
struct Part {
  std::size_t offset, count;
};
Part part(const ShardPlan& plan, int r, std::size_t k);

// Number of images in rank r's shard (sum of its parts).
std::size_t shard_size(const ShardPlan& plan, int r);

// The file-order image indices of rank r's shard, in shard-position order.
std::vector<std::uint32_t> shard_indices(const ShardPlan& plan, int r);

// perm_{e,r}: shard positions in the order epoch e visits them (identity without shuffle).
std::vector<std::uint32_t> shard_order(const ShardPlan& plan, int r, int epoch);

// All global batches of epoch e, concatenated: batch k is entries [kB, kB + c_k). O(n).
std::vector<std::uint32_t> global_epoch_order(const ShardPlan& plan, int epoch);

// File-order image indices of global batch k of epoch e (the reference replay and tests).
std::vector<std::uint32_t> global_batch(const ShardPlan& plan, int epoch, std::size_t k);

// The shuffle key of (seed, epoch, rank) described above.
std::uint64_t shuffle_key(std::uint64_t seed, int epoch, int r);

}  // namespace nn::schedule
