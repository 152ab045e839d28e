// Tests of comm::NodeShared (src/comm/node_shared.cpp): every rank's part of the shared window
// is seen by every rank at its own address, writes before sync() are read after it, parts are
// page-aligned and apart, a rank may bring no memory, and several windows live side by side.
// Runs inside the MPI-aware test main at 1-4 ranks (make test), all on one machine; over
// several nodes (make test-multinode) a window cannot span them: refused on every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <stdexcept>
#include <vector>

#include "comm/comm.h"

namespace nn::comm {
namespace {

// Over several nodes: the constructor throws on every rank (collectively, nobody waits).
bool skip_unless_one_node() {
  if (one_node()) return false;
  EXPECT_THROW(NodeShared(64), std::runtime_error);
  return true;
}

// one_node() against the machines' own names: every rank's host name, gathered on rank 0.
TEST(NodeShared, OneNodeMeansEveryRankOnThisNode) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  const std::size_t h = std::hash<std::string>{}(std::string(name));
  // Two halves of the hash, each exact in a double.
  const std::vector<double> all = gather_to_root({double(h >> 32), double(h & 0xffffffffu)});
  bool same = true;
  for (std::size_t i = 2; i + 1 < all.size(); i += 2) same = same && all[i] == all[0] && all[i + 1] == all[1];
  EXPECT_EQ(one_node(), broadcast_value(same));
}

TEST(NodeShared, EachRankSeesEveryPartAfterSync) {
  if (skip_unless_one_node()) GTEST_SKIP() << "ranks on several nodes share no memory";
  const int p = size(), r = rank();
  // Parts of different sizes (r + 1 thousand values), none a whole number of pages.
  const auto count = [](int q) { return std::size_t(q + 1) * 1000; };
  NodeShared w(count(r) * sizeof(std::uint32_t));
  ASSERT_NE(w.mine(), nullptr);
  EXPECT_EQ(w.mine(), w.of(r));
  for (int q = 0; q < p; ++q) {
    ASSERT_NE(w.of(q), nullptr) << "rank " << q;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.of(q)) % 4096, 0u) << "rank " << q << "'s part is not page-aligned";
  }
  // Parts never overlap: each holds at least its own bytes before the next begins.
  for (int q = 0; q < p; ++q)
    for (int o = 0; o < p; ++o) {
      if (o == q) continue;
      const auto a = reinterpret_cast<std::uintptr_t>(w.of(q)), b = reinterpret_cast<std::uintptr_t>(w.of(o));
      EXPECT_TRUE(a + count(q) * 4 <= b || b + count(o) * 4 <= a) << "parts of ranks " << q << " and " << o;
    }
  auto* mine = static_cast<std::uint32_t*>(w.mine());
  for (std::size_t i = 0; i < count(r); ++i) mine[i] = std::uint32_t(r) * 1000003u + std::uint32_t(i);
  w.sync();
  for (int q = 0; q < p; ++q) {
    const auto* part = static_cast<const std::uint32_t*>(w.of(q));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count(q); ++i) wrong += part[i] != std::uint32_t(q) * 1000003u + std::uint32_t(i);
    EXPECT_EQ(wrong, 0u) << "values of rank " << q << " read on rank " << r;
  }
  // A second round through the same memory: rank r now writes into the next rank's part, and
  // every rank reads the result after the fence-collective-fence form of sync.
  w.sync();  // nobody still reads the first round
  auto* next = static_cast<std::uint32_t*>(w.of((r + 1) % p));
  next[0] = 7u + std::uint32_t(r);
  w.fence();
  barrier();
  w.fence();
  EXPECT_EQ(static_cast<const std::uint32_t*>(w.of(0))[0], 7u + std::uint32_t((p - 1) % p));
  EXPECT_THROW(w.of(p), std::out_of_range);
  EXPECT_THROW(w.of(-1), std::out_of_range);
}

TEST(NodeShared, ARankMayBringNoMemory) {
  if (skip_unless_one_node()) GTEST_SKIP() << "ranks on several nodes share no memory";
  const int p = size(), r = rank();
  // Only rank 0 brings memory (the trainer's parameters); everybody writes a slice of it.
  NodeShared w(r == 0 ? std::size_t(p) * sizeof(double) : 0);
  ASSERT_NE(w.of(0), nullptr);
  for (int q = 1; q < p; ++q) EXPECT_EQ(w.of(q), nullptr) << "rank " << q << " brought no bytes";
  auto* v = static_cast<double*>(w.of(0));
  v[r] = 0.5 + r;
  w.sync();
  for (int q = 0; q < p; ++q) EXPECT_EQ(v[q], 0.5 + q);
}

TEST(NodeShared, TwoWindowsAreIndependent) {
  if (skip_unless_one_node()) GTEST_SKIP() << "ranks on several nodes share no memory";
  const int r = rank();
  NodeShared a(64), b(64);
  static_cast<char*>(a.mine())[0] = 'a';
  static_cast<char*>(b.mine())[0] = 'b';
  a.sync();
  b.sync();
  for (int q = 0; q < size(); ++q) {
    EXPECT_EQ(static_cast<const char*>(a.of(q))[0], 'a');
    EXPECT_EQ(static_cast<const char*>(b.of(q))[0], 'b');
  }
  EXPECT_NE(a.of(r), b.of(r));
}

}  // namespace
}  // namespace nn::comm
