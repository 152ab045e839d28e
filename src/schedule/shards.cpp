// Shard plan: per-rank shards of the global batches, per-epoch shard permutations, and the
// global batch composition they imply (see shards.h for the exact definitions).
// Tested by tests/schedule/test_shards.cpp.
#include "schedule/shards.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "schedule/rng.h"
#include "schedule/schedule.h"

namespace nn::schedule {

std::size_t ShardPlan::batch_count(std::size_t k) const {
  if (k >= num_batches()) throw std::out_of_range("ShardPlan: batch index out of range");
  return std::min(B, n - k * B);
}

ShardPlan make_plan(std::size_t n, std::size_t B, int p, std::uint64_t seed, bool shuffle) {
  if (B == 0) throw std::invalid_argument("make_plan: batch size must be positive");
  if (p < 1) throw std::invalid_argument("make_plan: need at least one rank");
  if (n > 0 && B > n) throw std::invalid_argument("make_plan: batch size exceeds the images");
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("make_plan: n does not fit 32-bit indices");
  return ShardPlan{n, B, p, seed, shuffle};
}

Part part(const ShardPlan& plan, int r, std::size_t k) {
  const std::size_t K = plan.num_batches();
  if (k >= K) throw std::out_of_range("part: batch index out of range");
  // Every batch but the last has B images, so rank r holds the same count of each of them:
  // its part of batch k starts after k full parts.
  const std::size_t full = schedule::rank_slice(plan.B, r, plan.p).count;
  return {k * full, schedule::rank_slice(plan.batch_count(k), r, plan.p).count};
}

std::size_t shard_size(const ShardPlan& plan, int r) {
  const std::size_t K = plan.num_batches();
  if (K == 0) return 0;
  const Part last = part(plan, r, K - 1);
  return last.offset + last.count;
}

std::vector<std::uint32_t> shard_indices(const ShardPlan& plan, int r) {
  std::vector<std::uint32_t> out;
  out.reserve(shard_size(plan, r));
  for (std::size_t k = 0; k < plan.num_batches(); ++k) {
    const schedule::Slice s = schedule::rank_slice(plan.batch_count(k), r, plan.p);
    for (std::size_t j = 0; j < s.count; ++j)
      out.push_back(static_cast<std::uint32_t>(k * plan.B + s.begin + j));
  }
  return out;
}

std::uint64_t shuffle_key(std::uint64_t seed, int epoch, int r) {
  // The epoch and rank are reinterpreted as 32/64 unsigned bits (as in schedule::epoch_order).
  return schedule::derive_seed(seed, schedule::Stream::kShuffle, static_cast<std::uint32_t>(epoch)) ^
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r)) * 0x9E3779B97F4A7C15ULL);
}

std::vector<std::uint32_t> shard_order(const ShardPlan& plan, int r, int epoch) {
  const std::size_t m = shard_size(plan, r);
  std::vector<std::uint32_t> order(m);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  if (!plan.shuffle || m < 2) return order;
  // The same Fisher-Yates as schedule::epoch_order, so p = 1 reproduces it exactly.
  schedule::Rng rng(shuffle_key(plan.seed, epoch, r));
  for (std::size_t i = m - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<std::uint32_t> global_epoch_order(const ShardPlan& plan, int epoch) {
  std::vector<std::vector<std::uint32_t>> shard(plan.p), perm(plan.p);
  for (int r = 0; r < plan.p; ++r) {
    shard[r] = shard_indices(plan, r);
    perm[r] = shard_order(plan, r, epoch);
  }
  std::vector<std::uint32_t> out;
  out.reserve(plan.n);
  for (std::size_t k = 0; k < plan.num_batches(); ++k)
    for (int r = 0; r < plan.p; ++r) {
      const Part pt = part(plan, r, k);
      for (std::size_t j = 0; j < pt.count; ++j) out.push_back(shard[r][perm[r][pt.offset + j]]);
    }
  return out;
}

std::vector<std::uint32_t> global_batch(const ShardPlan& plan, int epoch, std::size_t k) {
  const std::size_t c = plan.batch_count(k);  // throws for a bad k
  const std::vector<std::uint32_t> all = global_epoch_order(plan, epoch);
  return {all.begin() + static_cast<std::ptrdiff_t>(k * plan.B),
          all.begin() + static_cast<std::ptrdiff_t>(k * plan.B + c)};
}

}  // namespace nn::schedule
