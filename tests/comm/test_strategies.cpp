// The communication primitives behind the strategies (src/comm/gradients.cpp, strategies.cpp): the
// non-blocking allreduce equals the sum, the parameter server adds in rank order,
// gather_to_root concatenates uneven pieces in rank order. Collective, at 1-4 ranks.
#include <gtest/gtest.h>

#include <vector>

#include "comm/comm.h"

namespace nn::comm {
namespace {

TEST(CommStrategies, IallreduceSumsEveryRanksValues) {
  const int p = size(), r = rank();
  std::vector<double> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(r + 1) * double(i);
  Request q = iallreduce_sum(v.data(), v.size());
  while (!q.test()) {
  }
  q.wait();  // a finished request waits for nothing
  const double ranks = double(p) * double(p + 1) / 2;
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], ranks * double(i)) << i;
}

TEST(CommStrategies, TwoRequestsInFlightAtOnce) {
  std::vector<float> a(64, 1.0f), b(3, 2.0f);
  Request qa = iallreduce_sum(a.data(), a.size());
  Request qb = iallreduce_sum(b.data(), b.size());
  qb.wait();
  qa.wait();
  EXPECT_EQ(a, std::vector<float>(64, float(size())));
  EXPECT_EQ(b, std::vector<float>(3, 2.0f * float(size())));
}

TEST(CommStrategies, ParameterServerAddsInRankOrder) {
  const int p = size(), r = rank();
  // Values whose float sum depends on the order: rank 0 holds 1, the others 2^-24 each.
  std::vector<float> v(5, r == 0 ? 1.0f : 0x1p-24f);
  ps_sum(v.data(), v.size());
  float expect = 1.0f;
  for (int q = 1; q < p; ++q) expect += 0x1p-24f;  // rounds back to 1 each time
  for (float x : v) EXPECT_EQ(x, expect);
  std::vector<double> d(7, double(r));
  ps_sum(d.data(), d.size());
  for (double x : d) EXPECT_EQ(x, double(p) * double(p - 1) / 2);
}

TEST(CommStrategies, GatherToRootConcatenatesUnevenPieces) {
  const int p = size(), r = rank();
  const std::vector<double> mine(static_cast<std::size_t>(r), static_cast<double>(r));  // r copies of r
  const std::vector<double> all = gather_to_root(mine);
  if (r != 0) {
    EXPECT_TRUE(all.empty());
    return;
  }
  std::vector<double> expect;
  for (int q = 0; q < p; ++q) expect.insert(expect.end(), std::size_t(q), double(q));
  EXPECT_EQ(all, expect);
}

}  // namespace
}  // namespace nn::comm
