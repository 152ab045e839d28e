// Tests of the MPI layer (src/comm): reductions, broadcasts, gathers and the shard scatter
// agree on every rank.
// Runs inside the MPI-aware test main at 1-4 ranks (make test).
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "comm/comm.h"

namespace nn::comm {
namespace {

TEST(Comm, RankAndSizeAreConsistent) {
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), size());
  EXPECT_GE(local_rank(), 0);
  EXPECT_LE(local_rank(), rank());  // all ranks of a local run share the node
  EXPECT_FALSE(processor_name().empty());
}

TEST(Comm, SumsOverRanks) {
  const int p = size(), r = rank();
  std::vector<double> d{1.0, static_cast<double>(r)};
  sum(d);
  EXPECT_EQ(d[0], p);
  EXPECT_EQ(d[1], p * (p - 1) / 2.0);
  std::vector<float> f{0.5f};
  sum(f);
  EXPECT_EQ(f[0], 0.5f * p);
  EXPECT_EQ(sum(std::uint64_t{3}), 3u * p);
}

TEST(Comm, AllOkIsALogicalAnd) {
  EXPECT_TRUE(all_ok(true));
  // Only the last rank says no: everyone must hear it.
  EXPECT_FALSE(all_ok(rank() != size() - 1));
}

TEST(Comm, AnyOfEachIsAnElementwiseOr) {
  std::vector<int> flags{0, rank() == 0 ? 1 : 0, rank() == size() - 1 ? 1 : 0};
  any_of_each(flags);
  EXPECT_EQ(flags, (std::vector<int>{0, 1, 1}));
}

TEST(Comm, BroadcastCarriesRankZerosString) {
  const std::string mine = "from rank " + std::to_string(rank());
  EXPECT_EQ(broadcast(mine), "from rank 0");
  EXPECT_EQ(broadcast(rank() == 0 ? std::string() : mine), "");
}

TEST(Comm, AllreduceSumAddsEveryRanksBuffer) {
  const int p = size(), r = rank();
  std::vector<float> f(1000);
  std::vector<double> d(1000);
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>(i) + 0.25f * static_cast<float>(r);
    d[i] = 0.5 * static_cast<double>(i) - static_cast<double>(r);
  }
  allreduce_sum(f.data(), f.size());
  allreduce_sum(d.data(), d.size());
  const double rsum = p * (p - 1) / 2.0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(f[i], static_cast<float>(p * static_cast<double>(i) + 0.25 * rsum)) << i;
    ASSERT_EQ(d[i], p * 0.5 * static_cast<double>(i) - rsum) << i;
  }
  allreduce_sum(static_cast<float*>(nullptr), 0);  // an empty buffer is a no-op, not an error
}

TEST(Comm, BroadcastOfValuesAndVectors) {
  struct Pod {
    std::uint64_t a;
    double b;
    int c;
  };
  const Pod mine{static_cast<std::uint64_t>(rank()) + 7, 0.5 * rank(), -rank()};
  const Pod got = broadcast_value(mine);
  EXPECT_EQ(got.a, 7u);
  EXPECT_EQ(got.b, 0.0);
  EXPECT_EQ(got.c, 0);
  std::vector<double> v(rank() == 0 ? 5 : 2, static_cast<double>(rank()) + 1.5);  // lengths differ
  broadcast(v);
  EXPECT_EQ(v, std::vector<double>(5, 1.5));
}

TEST(Comm, ScattervBytesGivesEachRankItsBlock) {
  const int p = size(), r = rank();
  // Rank q gets 3q bytes (rank 0 gets none: an empty block is legal), value q + position.
  std::vector<std::uint8_t> send;
  std::vector<std::size_t> counts;
  if (r == 0)
    for (int q = 0; q < p; ++q) {
      counts.push_back(3 * static_cast<std::size_t>(q));
      for (int j = 0; j < 3 * q; ++j) send.push_back(static_cast<std::uint8_t>(q * 16 + j));
    }
  const std::vector<std::uint8_t> got = scatterv_bytes(send, counts);
  ASSERT_EQ(got.size(), 3u * r);
  for (int j = 0; j < 3 * r; ++j) EXPECT_EQ(got[j], static_cast<std::uint8_t>(r * 16 + j));
}

TEST(Comm, GatherStringsInRankOrder) {
  const auto all = gather_strings(std::string(rank(), 'x') + std::to_string(rank()));
  if (rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<std::size_t>(size()));
    for (int q = 0; q < size(); ++q) EXPECT_EQ(all[q], std::string(q, 'x') + std::to_string(q));
  } else {
    EXPECT_TRUE(all.empty());
  }
}

}  // namespace
}  // namespace nn::comm
