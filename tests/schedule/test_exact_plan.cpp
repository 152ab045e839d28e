// Tests of the exact plan (src/schedule/exact_plan.h): chunk rule, columns, owners and shards,
// the global batches at every rank count, the ranks' chunks reassembling them, the shuffle
// formula, empty ranks and bad inputs. Pure arithmetic: every rank runs the same checks.
// Runs inside the MPI-aware test main (make test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedule/exact_plan.h"
#include "schedule/rng.h"
#include "schedule/schedule.h"
#include "schedule/shards.h"

namespace nn::schedule {
namespace {

using Indices = std::vector<std::uint32_t>;

struct Case {
  std::size_t n, B, chunk;  // chunk 0: exact_chunk(B)
};
// Full batches only; a partial last batch with fewer slots (2 of 4, 1 of 4, 1 of 3, 3 of 16,
// 1 of 5, 1 of 1); B not a multiple of c (100 = 3*32 + 4, 70, 600 = 15*38 + 30, 30 = 4*7 + 2);
// one column (B <= 32); one batch; an explicit chunk size.
const Case kCases[] = {{1000, 100, 0}, {1037, 100, 0}, {1010, 100, 0}, {500, 70, 0},
                       {1300, 600, 0}, {95, 30, 7},    {45, 20, 0},   {64, 64, 0}};
const std::uint64_t kSeeds[] = {1, 7, 12345};
constexpr int kMaxRanks = 5;

std::string label(const Case& c) {
  return "n=" + std::to_string(c.n) + " B=" + std::to_string(c.B) + " chunk=" + std::to_string(c.chunk);
}

Indices iota_from(std::size_t begin, std::size_t count) {
  Indices v(count);
  std::iota(v.begin(), v.end(), static_cast<std::uint32_t>(begin));
  return v;
}

Indices slice(const Indices& v, Range r) {
  return {v.begin() + static_cast<std::ptrdiff_t>(r.begin), v.begin() + static_cast<std::ptrdiff_t>(r.begin + r.count)};
}

TEST(ExactPlanLayout, ChunkSlotsTileEveryBatch) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const ExactPlan plan = make_exact_plan(c.n, c.B, 1, 1, true, c.chunk);
    for (std::size_t k = 0; k < plan.num_batches(); ++k) {
      SCOPED_TRACE("k=" + std::to_string(k));
      const std::size_t ck = plan.batch_count(k), slots = plan.chunk_slots(k);
      EXPECT_EQ(slots, (ck + plan.c - 1) / plan.c);
      EXPECT_LE(slots, plan.num_columns());
      if (ck == plan.B) {
        EXPECT_EQ(slots, plan.num_columns());
      }
      std::size_t next = 0;
      for (std::size_t j = 0; j < slots; ++j) {
        const Range r = plan.chunk_range(k, j);
        EXPECT_EQ(r.begin, next);
        EXPECT_EQ(r.begin, j * plan.c);
        EXPECT_GT(r.count, 0u);
        if (j + 1 < slots) {
          EXPECT_EQ(r.count, plan.c);  // only the last slot can be short
        } else {
          EXPECT_LE(r.count, plan.c);
        }
        next += r.count;
      }
      EXPECT_EQ(next, ck);
    }
  }
}

TEST(ExactPlanLayout, ColumnsHoldSlotJOfEveryBatch) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const ExactPlan plan = make_exact_plan(c.n, c.B, 1, 1, true, c.chunk);
    std::size_t total = 0;
    for (std::size_t j = 0; j < plan.num_columns(); ++j) {
      Indices expect;
      for (std::size_t k = 0; k < plan.num_batches(); ++k) {
        if (j >= plan.chunk_slots(k)) continue;
        const Range r = plan.chunk_range(k, j);
        const Indices part = iota_from(k * plan.B + r.begin, r.count);
        expect.insert(expect.end(), part.begin(), part.end());
      }
      EXPECT_EQ(column_indices(plan, j), expect) << "column " << j;
      EXPECT_EQ(plan.column_size(j), expect.size());
      total += expect.size();
    }
    EXPECT_EQ(total, c.n);
  }
}

TEST(ExactPlanLayout, ShardsPartitionTheImagesByColumnBlocks) {
  for (const Case& c : kCases)
    for (int p = 1; p <= kMaxRanks; ++p) {
      SCOPED_TRACE(label(c) + " p=" + std::to_string(p));
      const ExactPlan plan = make_exact_plan(c.n, c.B, p, 1, true, c.chunk);
      std::vector<int> seen(c.n, 0);
      std::size_t next_column = 0, total = 0;
      for (int r = 0; r < p; ++r) {
        const Range cols = plan.rank_columns(r);
        const Slice s = rank_slice(plan.num_columns(), r, p);
        EXPECT_EQ(cols.begin, s.begin);  // the contiguous block rule, in rank order
        EXPECT_EQ(cols.count, s.count);
        EXPECT_EQ(cols.begin, next_column);
        next_column += cols.count;
        Indices expect;
        for (std::size_t j = cols.begin; j < cols.begin + cols.count; ++j) {
          EXPECT_EQ(plan.column_owner(j), r);
          const Indices col = column_indices(plan, j);
          expect.insert(expect.end(), col.begin(), col.end());
        }
        const Indices idx = shard_indices(plan, r);
        EXPECT_EQ(idx, expect);  // the shard is its columns, concatenated in column order
        EXPECT_EQ(idx.size(), shard_size(plan, r));
        for (auto i : idx) {
          ASSERT_LT(i, c.n);
          ++seen[i];
        }
        total += idx.size();
      }
      EXPECT_EQ(next_column, plan.num_columns());
      EXPECT_EQ(total, c.n);
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }));
    }
}

TEST(ExactPlan, GlobalBatchesDoNotDependOnTheRankCount) {
  for (const Case& c : kCases)
    for (bool shuffle : {true, false})
      for (std::uint64_t seed : kSeeds) {
        SCOPED_TRACE(label(c) + " shuffle=" + std::to_string(shuffle) + " seed=" + std::to_string(seed));
        const ExactPlan one = make_exact_plan(c.n, c.B, 1, seed, shuffle, c.chunk);
        for (int e = 0; e < 2; ++e) {
          const Indices ref = global_epoch_order(one, e);
          for (int p = 2; p <= kMaxRanks; ++p) {
            SCOPED_TRACE("e=" + std::to_string(e) + " p=" + std::to_string(p));
            const ExactPlan plan = make_exact_plan(c.n, c.B, p, seed, shuffle, c.chunk);
            EXPECT_EQ(plan.c, one.c);  // the chunk depends on B alone
            EXPECT_EQ(global_epoch_order(plan, e), ref);
            for (std::size_t k = 0; k < plan.num_batches(); ++k)
              EXPECT_EQ(global_batch(plan, e, k), global_batch(one, e, k)) << "k=" << k;
          }
        }
      }
}

TEST(ExactPlan, RankChunksReassembleTheGlobalBatch) {
  for (const Case& c : kCases)
    for (bool shuffle : {true, false})
      for (std::uint64_t seed : kSeeds)
        for (int p = 1; p <= kMaxRanks; ++p) {
          SCOPED_TRACE(label(c) + " shuffle=" + std::to_string(shuffle) + " seed=" + std::to_string(seed) +
                       " p=" + std::to_string(p));
          const ExactPlan plan = make_exact_plan(c.n, c.B, p, seed, shuffle, c.chunk);
          std::vector<Indices> shard(p);
          for (int r = 0; r < p; ++r) shard[r] = shard_indices(plan, r);
          for (int e = 0; e < 2; ++e) {
            std::vector<std::vector<std::vector<Chunk>>> chunks(p);
            for (int r = 0; r < p; ++r) chunks[r] = rank_epoch_chunks(plan, r, e);
            for (std::size_t k = 0; k < plan.num_batches(); ++k) {
              SCOPED_TRACE("e=" + std::to_string(e) + " k=" + std::to_string(k));
              const Indices gb = global_batch(plan, e, k);
              ASSERT_EQ(gb.size(), plan.batch_count(k));
              std::vector<Indices> by_slot(plan.chunk_slots(k));
              std::vector<int> computed(plan.chunk_slots(k), 0);
              for (int r = 0; r < p; ++r) {
                const std::vector<Chunk> mine = rank_chunks(plan, r, e, k);
                ASSERT_EQ(mine.size(), chunks[r][k].size());
                for (std::size_t q = 0; q < mine.size(); ++q) {  // both entry points agree
                  EXPECT_EQ(mine[q].slot, chunks[r][k][q].slot);
                  EXPECT_EQ(mine[q].positions, chunks[r][k][q].positions);
                  if (q > 0) {
                    EXPECT_LT(mine[q - 1].slot, mine[q].slot);  // slot order
                  }
                }
                for (const Chunk& ch : mine) {
                  ASSERT_LT(ch.slot, by_slot.size());
                  EXPECT_EQ(plan.column_owner(ch.slot), r);
                  ++computed[ch.slot];
                  for (auto pos : ch.positions) {
                    ASSERT_LT(pos, shard[r].size());
                    by_slot[ch.slot].push_back(shard[r][pos]);
                  }
                }
              }
              Indices joined;
              for (std::size_t j = 0; j < by_slot.size(); ++j) {
                EXPECT_EQ(computed[j], 1) << "slot " << j;  // every chunk computed by one rank
                EXPECT_EQ(by_slot[j], slice(gb, plan.chunk_range(k, j))) << "slot " << j;
                joined.insert(joined.end(), by_slot[j].begin(), by_slot[j].end());
              }
              EXPECT_EQ(joined, gb);
            }
          }
        }
}

TEST(ExactPlan, EveryImageOncePerEpochAndAlwaysInItsColumn) {
  for (const Case& c : kCases)
    for (std::uint64_t seed : kSeeds) {
      SCOPED_TRACE(label(c) + " seed=" + std::to_string(seed));
      const ExactPlan plan = make_exact_plan(c.n, c.B, 3, seed, true, c.chunk);
      for (int e = 0; e < 3; ++e) {
        Indices all = global_epoch_order(plan, e);
        std::vector<std::set<std::uint32_t>> slot_images(plan.num_columns());
        for (std::size_t k = 0; k < plan.num_batches(); ++k) {
          const Indices gb = global_batch(plan, e, k);
          EXPECT_EQ(gb, slice(all, {k * plan.B, plan.batch_count(k)}));
          for (std::size_t j = 0; j < plan.chunk_slots(k); ++j)
            for (auto i : slice(gb, plan.chunk_range(k, j))) slot_images[j].insert(i);
        }
        for (std::size_t j = 0; j < plan.num_columns(); ++j) {
          const Indices col = column_indices(plan, j);
          EXPECT_EQ(slot_images[j], std::set<std::uint32_t>(col.begin(), col.end())) << "column " << j;
        }
        std::sort(all.begin(), all.end());
        EXPECT_EQ(all, iota_from(0, c.n));
      }
    }
}

TEST(ExactPlanShuffle, EpochsDifferFromEachOtherAndFromFileOrder) {
  for (const Case& c : kCases)
    for (std::uint64_t seed : kSeeds) {
      SCOPED_TRACE(label(c) + " seed=" + std::to_string(seed));
      const ExactPlan plan = make_exact_plan(c.n, c.B, 2, seed, true, c.chunk);
      const Indices e0 = global_epoch_order(plan, 0), e1 = global_epoch_order(plan, 1);
      EXPECT_NE(e0, e1);
      EXPECT_NE(e0, iota_from(0, c.n));
      EXPECT_NE(e1, iota_from(0, c.n));
      EXPECT_EQ(e0, global_epoch_order(plan, 0));  // deterministic
      if (plan.num_batches() > 1) {
        // Batches mix images from different file-order batches (not only reorder them).
        bool mixed = false;
        for (std::size_t k = 0; k < plan.num_batches() && !mixed; ++k)
          for (auto i : global_batch(plan, 0, k)) mixed = mixed || i / plan.B != k;
        EXPECT_TRUE(mixed);
      }
      const ExactPlan other = make_exact_plan(c.n, c.B, 2, seed + 1, true, c.chunk);
      EXPECT_NE(global_epoch_order(other, 0), e0);  // another seed
    }
}

TEST(ExactPlanShuffle, WithoutShuffleBatchesAreFileOrder) {
  for (const Case& c : kCases)
    for (int p = 1; p <= kMaxRanks; ++p) {
      SCOPED_TRACE(label(c) + " p=" + std::to_string(p));
      const ExactPlan plan = make_exact_plan(c.n, c.B, p, 3, false, c.chunk);
      for (int e : {0, 5})
        for (std::size_t k = 0; k < plan.num_batches(); ++k)
          EXPECT_EQ(global_batch(plan, e, k), iota_from(k * c.B, plan.batch_count(k)));
      for (std::size_t j = 0; j < plan.num_columns(); ++j)
        EXPECT_EQ(column_order(plan, j, 2), iota_from(0, plan.column_size(j)));
    }
}

TEST(ExactPlanShuffle, ColumnPermutationFollowsTheDocumentedFormula) {
  const ExactPlan plan = make_exact_plan(1037, 100, 3, 42, true);
  for (int e = 0; e < 3; ++e)
    for (std::size_t j = 0; j < plan.num_columns(); ++j) {
      const std::size_t m = plan.column_size(j);
      Indices expect = iota_from(0, m);
      Rng rng(shuffle_key(42, e, static_cast<int>(j)));  // (seed, epoch, column): no rank
      for (std::size_t i = m - 1; i > 0; --i) std::swap(expect[i], expect[rng.below(i + 1)]);
      EXPECT_EQ(column_order(plan, j, e), expect) << "e=" << e << " j=" << j;
    }
  EXPECT_NE(column_order(plan, 0, 0), column_order(plan, 1, 0));  // columns draw their own streams
}

TEST(ExactPlanShuffle, OneColumnReproducesTheEpochOrder) {
  // B <= 32 gives one chunk a batch, so the plan is the reference trainer's schedule.
  for (int p = 1; p <= 3; ++p) {
    const ExactPlan plan = make_exact_plan(97, 10, p, 42, true);
    ASSERT_EQ(plan.num_columns(), 1u);
    for (int e = 0; e < 3; ++e) EXPECT_EQ(global_epoch_order(plan, e), epoch_order(97, 42, e, true));
  }
}

TEST(ExactPlan, MoreRanksThanColumnsLeaveEmptyShards) {
  const ExactPlan plan = make_exact_plan(1037, 100, 7, 5, true);  // C = 4 columns
  ASSERT_EQ(plan.num_columns(), 4u);
  for (int r = 0; r < 7; ++r) {
    SCOPED_TRACE("r=" + std::to_string(r));
    const Range cols = plan.rank_columns(r);
    EXPECT_EQ(cols.count, r < 4 ? 1u : 0u);
    if (r < 4) {
      EXPECT_EQ(cols.begin, static_cast<std::size_t>(r));
      EXPECT_EQ(plan.column_owner(static_cast<std::size_t>(r)), r);
    }
    EXPECT_EQ(shard_size(plan, r) == 0, r >= 4);
    EXPECT_EQ(shard_indices(plan, r).empty(), r >= 4);
    const auto epoch = rank_epoch_chunks(plan, r, 0);
    for (std::size_t k = 0; k < plan.num_batches(); ++k) {
      // The last batch (37 images) has slots 0 and 1 only.
      const bool has = r < 4 && (k + 1 < plan.num_batches() || r < 2);
      EXPECT_EQ(rank_chunks(plan, r, 0, k).size(), has ? 1u : 0u) << "k=" << k;
      EXPECT_EQ(epoch[k].size(), has ? 1u : 0u) << "k=" << k;
    }
  }
  // One column (B <= 32): only rank 0 has a shard.
  const ExactPlan small = make_exact_plan(100, 32, 4, 5, true);
  EXPECT_EQ(shard_size(small, 0), 100u);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(shard_size(small, r), 0u);
}

TEST(ExactPlanChunkRule, ValuesAndCap) {
  const std::pair<std::size_t, std::size_t> values[] = {{1, 1},     {10, 10},   {32, 32},   {33, 32},
                                                        {100, 32},  {512, 32},  {513, 33},  {600, 38},
                                                        {1000, 63}, {1024, 64}, {60000, 3750}};
  for (auto [B, c] : values) EXPECT_EQ(exact_chunk(B), c) << "B=" << B;
  // Slots of a full batch: B = 100 -> 4, 33 -> 2, 512 -> 16, 1000 -> 16 (15 of 63 + 55).
  EXPECT_EQ(make_exact_plan(1000, 100, 1, 0, true).num_columns(), 4u);
  EXPECT_EQ(make_exact_plan(1000, 33, 1, 0, true).num_columns(), 2u);
  EXPECT_EQ(make_exact_plan(1000, 512, 1, 0, true).num_columns(), 16u);
  const ExactPlan big = make_exact_plan(1000, 1000, 1, 0, true);
  EXPECT_EQ(big.num_columns(), 16u);
  EXPECT_EQ(big.chunk_range(0, 15).count, 55u);
  for (std::size_t B = 1; B <= 5000; ++B) {
    const std::size_t c = exact_chunk(B), slots = (B + c - 1) / c;
    ASSERT_LE(c, B) << "B=" << B;                             // capped at the batch
    ASSERT_GE(c, std::min<std::size_t>(B, 32)) << "B=" << B;  // at least 32 unless B is smaller
    ASSERT_LE(slots, 16u) << "B=" << B;                       // at most 16 chunks: 16 useful ranks
    if (B > 512) {
      ASSERT_EQ(c, (B + 15) / 16) << "B=" << B;
    }
  }
  // An explicit chunk size replaces the rule.
  const ExactPlan given = make_exact_plan(95, 30, 2, 0, true, 7);
  EXPECT_EQ(given.c, 7u);
  EXPECT_EQ(given.num_columns(), 5u);
  EXPECT_EQ(make_exact_plan(95, 30, 2, 0, true, 30).num_columns(), 1u);
}

TEST(ExactPlan, KnownAnswers) {
  // n = 10, B = 5, c = 2: slots of 2, 2, 1; columns {0,1,5,6}, {2,3,7,8}, {4,9}; at p = 2
  // rank 0 owns columns 0 and 1, rank 1 column 2.
  const ExactPlan plan = make_exact_plan(10, 5, 2, 1, false, 2);
  EXPECT_EQ(column_indices(plan, 1), (Indices{2, 3, 7, 8}));
  EXPECT_EQ(shard_indices(plan, 0), (Indices{0, 1, 5, 6, 2, 3, 7, 8}));
  EXPECT_EQ(shard_indices(plan, 1), (Indices{4, 9}));
  const std::vector<Chunk> r0 = rank_chunks(plan, 0, 0, 1);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].slot, 0u);
  EXPECT_EQ(r0[0].positions, (Indices{2, 3}));
  EXPECT_EQ(r0[1].slot, 1u);
  EXPECT_EQ(r0[1].positions, (Indices{6, 7}));
  const std::vector<Chunk> r1 = rank_chunks(plan, 1, 0, 1);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].slot, 2u);
  EXPECT_EQ(r1[0].positions, (Indices{1}));
  // Pins the shuffle formula: a change would silently alter every exact run.
  const ExactPlan shuffled = make_exact_plan(10, 5, 2, 1, true, 2);
  EXPECT_EQ(column_order(shuffled, 0, 1), (Indices{3, 2, 1, 0}));
  EXPECT_EQ(global_epoch_order(shuffled, 1), (Indices{6, 5, 7, 8, 4, 1, 0, 3, 2, 9}));
}

TEST(ExactPlan, RejectsBadInputs) {
  EXPECT_THROW(make_exact_plan(10, 0, 1, 1, true), std::invalid_argument);
  EXPECT_THROW(make_exact_plan(10, 11, 1, 1, true), std::invalid_argument);
  EXPECT_THROW(make_exact_plan(10, 2, 0, 1, true), std::invalid_argument);
  EXPECT_THROW(make_exact_plan(10, 4, 1, 1, true, 5), std::invalid_argument);  // chunk > B
  EXPECT_THROW(make_exact_plan(std::size_t{1} << 32, 10, 1, 1, true), std::invalid_argument);
  EXPECT_THROW(exact_chunk(0), std::invalid_argument);
  const ExactPlan plan = make_exact_plan(10, 5, 2, 1, true, 2);  // slots 2, 2, 1
  EXPECT_EQ(plan.num_batches(), 2u);
  EXPECT_THROW(plan.batch_count(2), std::out_of_range);
  EXPECT_THROW(plan.chunk_slots(2), std::out_of_range);
  EXPECT_THROW(plan.chunk_range(0, 3), std::out_of_range);
  EXPECT_THROW(plan.chunk_range(2, 0), std::out_of_range);
  EXPECT_THROW(plan.column_size(3), std::out_of_range);
  EXPECT_THROW(plan.column_owner(3), std::out_of_range);
  EXPECT_THROW(column_indices(plan, 3), std::out_of_range);
  EXPECT_THROW(column_order(plan, 3, 0), std::out_of_range);
  EXPECT_THROW(plan.rank_columns(-1), std::invalid_argument);
  EXPECT_THROW(plan.rank_columns(2), std::invalid_argument);
  EXPECT_THROW(shard_indices(plan, 2), std::invalid_argument);
  EXPECT_THROW(rank_chunks(plan, 0, 0, 2), std::out_of_range);
  EXPECT_THROW(global_batch(plan, 0, 2), std::out_of_range);
  // No images: no batches, empty shards, an empty epoch.
  const ExactPlan empty = make_exact_plan(0, 5, 2, 1, true);
  EXPECT_EQ(empty.num_batches(), 0u);
  EXPECT_EQ(shard_size(empty, 0), 0u);
  EXPECT_TRUE(global_epoch_order(empty, 0).empty());
  EXPECT_TRUE(rank_epoch_chunks(empty, 1, 0).empty());
}

}  // namespace
}  // namespace nn::schedule
