// Tests of the MPI layer (src/comm): reductions and broadcasts agree on every rank.
// Runs inside the MPI-aware test main at 1-4 ranks (make test).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace nn::comm
