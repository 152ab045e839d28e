// Tests of the shard plan (src/schedule/shards.h): partition, batch composition, file order
// without shuffling, empty parts, determinism. Pure arithmetic: every rank runs the same checks.
// Runs inside the MPI-aware test main (make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

#include "schedule/rng.h"
#include "schedule/schedule.h"
#include "schedule/shards.h"

namespace nn::schedule {
namespace {

struct Case {
  std::size_t n, B;
  int p;
};
// B not divisible by p, n not divisible by B, p larger than some or all batches, p = 1.
const Case kCases[] = {{60, 7, 1}, {60, 7, 2}, {60, 7, 3}, {60, 7, 4}, {20, 3, 4},
                       {10, 10, 3}, {1, 1, 5}, {101, 25, 4}, {5, 2, 7}};

std::string label(const Case& c) {
  return "n=" + std::to_string(c.n) + " B=" + std::to_string(c.B) + " p=" + std::to_string(c.p);
}

TEST(Shards, ShardsPartitionTheImagesExactly) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const ShardPlan plan = make_plan(c.n, c.B, c.p, 7, true);
    std::vector<int> seen(c.n, 0);
    std::size_t total = 0;
    for (int r = 0; r < c.p; ++r) {
      const auto idx = shard_indices(plan, r);
      EXPECT_EQ(idx.size(), shard_size(plan, r));
      for (auto i : idx) {
        ASSERT_LT(i, c.n);
        ++seen[i];
      }
      total += idx.size();
      // Parts tile the shard in batch order without gaps.
      std::size_t next = 0;
      for (std::size_t k = 0; k < plan.num_batches(); ++k) {
        const Part pt = part(plan, r, k);
        EXPECT_EQ(pt.offset, next);
        EXPECT_EQ(pt.count, schedule::rank_slice(plan.batch_count(k), r, c.p).count);
        next += pt.count;
      }
      EXPECT_EQ(next, idx.size());
    }
    EXPECT_EQ(total, c.n);
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }));
  }
}

TEST(Shards, BatchPartsUnionIsTheGlobalBatch) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const ShardPlan plan = make_plan(c.n, c.B, c.p, 11, true);
    for (int e = 0; e < 2; ++e) {
      std::vector<std::vector<std::uint32_t>> shard(c.p), perm(c.p);
      for (int r = 0; r < c.p; ++r) {
        shard[r] = shard_indices(plan, r);
        perm[r] = shard_order(plan, r, e);
        // perm is a permutation of the shard positions
        std::vector<std::uint32_t> sorted = perm[r];
        std::sort(sorted.begin(), sorted.end());
        std::vector<std::uint32_t> iota(sorted.size());
        std::iota(iota.begin(), iota.end(), 0u);
        EXPECT_EQ(sorted, iota);
      }
      std::set<std::uint32_t> epoch_images;
      for (std::size_t k = 0; k < plan.num_batches(); ++k) {
        std::vector<std::uint32_t> joined;
        for (int r = 0; r < c.p; ++r) {
          const Part pt = part(plan, r, k);
          for (std::size_t j = 0; j < pt.count; ++j) joined.push_back(shard[r][perm[r][pt.offset + j]]);
        }
        const auto gb = global_batch(plan, e, k);
        EXPECT_EQ(joined, gb);
        EXPECT_EQ(gb.size(), plan.batch_count(k));
        epoch_images.insert(gb.begin(), gb.end());
      }
      EXPECT_EQ(epoch_images.size(), c.n);  // every image once per epoch
    }
  }
}

TEST(Shards, WithoutShuffleBatchesAreFileOrder) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const ShardPlan plan = make_plan(c.n, c.B, c.p, 3, false);
    for (std::size_t k = 0; k < plan.num_batches(); ++k) {
      std::vector<std::uint32_t> expect(plan.batch_count(k));
      std::iota(expect.begin(), expect.end(), std::uint32_t(k * c.B));
      EXPECT_EQ(global_batch(plan, 5, k), expect);
    }
  }
}

TEST(Shards, OneRankReproducesTheEpochOrder) {
  // At p = 1 the shuffle is nn::schedule::epoch_order, the reference trainer's schedule.
  const ShardPlan plan = make_plan(97, 10, 1, 42, true);
  for (int e = 0; e < 3; ++e) EXPECT_EQ(global_epoch_order(plan, e), schedule::epoch_order(97, 42, e, true));
}

TEST(Shards, MoreRanksThanImagesGiveEmptyParts) {
  const ShardPlan plan = make_plan(20, 3, 4, 1, true);  // batches of 3, last of 2
  for (std::size_t k = 0; k < plan.num_batches(); ++k) EXPECT_EQ(part(plan, 3, k).count, 0u);
  EXPECT_EQ(shard_size(plan, 3), 0u);
  EXPECT_TRUE(shard_order(plan, 3, 0).empty());
  EXPECT_EQ(part(plan, 2, plan.num_batches() - 1).count, 0u);  // the last batch has 2 images
  EXPECT_EQ(part(plan, 1, plan.num_batches() - 1).count, 1u);
  EXPECT_EQ(shard_size(plan, 0), 7u);  // 6 full batches + the last
}

TEST(Shards, DeterministicAndSeedEpochRankSensitive) {
  const ShardPlan a = make_plan(500, 32, 3, 9, true), b = make_plan(500, 32, 3, 9, true);
  EXPECT_EQ(global_epoch_order(a, 2), global_epoch_order(b, 2));
  EXPECT_EQ(shard_order(a, 1, 2), shard_order(b, 1, 2));
  EXPECT_NE(shard_order(a, 1, 2), shard_order(a, 1, 3));  // another epoch
  const ShardPlan c = make_plan(500, 32, 3, 10, true);
  EXPECT_NE(shard_order(a, 1, 2), shard_order(c, 1, 2));  // another seed
  EXPECT_NE(shuffle_key(9, 2, 0), shuffle_key(9, 2, 1));  // ranks draw different streams
  EXPECT_EQ(shuffle_key(9, 2, 0), schedule::derive_seed(9, schedule::Stream::kShuffle, 2));
}

TEST(Shards, KnownAnswers) {
  // Pins the documented layout and shuffle formula: a change would silently alter every run
  // (and make old metrics incomparable), so it must show up here.
  EXPECT_EQ(shard_indices(make_plan(10, 3, 2, 1, true), 0), (std::vector<std::uint32_t>{0, 1, 3, 4, 6, 7, 9}));
  EXPECT_EQ(shard_indices(make_plan(10, 3, 2, 1, true), 1), (std::vector<std::uint32_t>{2, 5, 8}));
  EXPECT_EQ(shard_order(make_plan(10, 5, 2, 1, true), 1, 0), (std::vector<std::uint32_t>{2, 0, 3, 1}));
  EXPECT_EQ(global_epoch_order(make_plan(10, 3, 2, 1, true), 1),
            (std::vector<std::uint32_t>{1, 9, 2, 7, 3, 8, 4, 6, 5, 0}));
}

TEST(Shards, RejectsBadPlans) {
  EXPECT_THROW(make_plan(10, 0, 1, 1, true), std::invalid_argument);
  EXPECT_THROW(make_plan(10, 11, 1, 1, true), std::invalid_argument);
  EXPECT_THROW(make_plan(10, 2, 0, 1, true), std::invalid_argument);
  const ShardPlan plan = make_plan(10, 3, 2, 1, true);
  EXPECT_EQ(plan.num_batches(), 4u);
  EXPECT_EQ(plan.batch_count(3), 1u);
  EXPECT_THROW(plan.batch_count(4), std::out_of_range);
  EXPECT_THROW(part(plan, 0, 4), std::out_of_range);
  EXPECT_TRUE(make_plan(0, 5, 2, 1, true).num_batches() == 0);
}

}  // namespace
}  // namespace nn::schedule
