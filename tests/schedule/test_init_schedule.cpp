// Tests of src/model/: the PRNG against published known-answer vectors, init reproducibility
// and moments, and the batch schedule (permutations, batch cover, rank slices).
// GoogleTest, no main here (the project's MPI-aware main links in); runs in well under a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "schedule/init.h"
#include "schedule/rng.h"
#include "schedule/schedule.h"

namespace {

using nn::schedule::Rng;

// Chi-square statistic of observed counts against a uniform expectation.
double chi_square(const std::vector<double>& counts) {
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const double expect = total / double(counts.size());
  double chi = 0.0;
  for (double c : counts) chi += (c - expect) * (c - expect) / expect;
  return chi;
}

// ---------------------------------------------------------------- PRNG

TEST(ModelRng, Splitmix64MatchesPublishedVector) {
  // First outputs of Vigna's splitmix64.c from state 0, as published/used by many ports.
  std::uint64_t s = 0;
  EXPECT_EQ(nn::schedule::splitmix64_next(s), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(nn::schedule::splitmix64_next(s), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(nn::schedule::splitmix64_next(s), 0x06C45D188009454FULL);
  EXPECT_EQ(nn::schedule::splitmix64_next(s), 0xF88BB8A8724C81ECULL);
}

TEST(ModelRng, Xoshiro256StarStarMatchesPublishedVector) {
  // Reference outputs of xoshiro256** 1.0 from state {1, 2, 3, 4} (the vector used by
  // e.g. Rust's rand_xoshiro and other independent ports).
  const std::array<std::uint64_t, 10> expected = {11520ULL,
                                                  0ULL,
                                                  1509978240ULL,
                                                  1215971899390074240ULL,
                                                  1216172134540287360ULL,
                                                  607988272756665600ULL,
                                                  16172922978634559625ULL,
                                                  8476171486693032832ULL,
                                                  10595114339597558777ULL,
                                                  2904607092377533576ULL};
  Rng r(1, 2, 3, 4);
  for (std::uint64_t v : expected) EXPECT_EQ(r.next_u64(), v);
}

TEST(ModelRng, SeedingFillsStateFromSplitmix) {
  // Rng(0) must be xoshiro256** started from the first four splitmix64(0) outputs.
  Rng a(0);
  Rng b(0xE220A8397B1DCDAFULL, 0x6E789E6AA1B965F4ULL, 0x06C45D188009454FULL, 0xF88BB8A8724C81ECULL);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
}

TEST(ModelRng, UniformIsTop53BitsInUnitInterval) {
  Rng a(42), b(42);
  double sum = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = a.uniform();
    const std::uint64_t bits = b.next_u64() >> 11;
    ASSERT_EQ(u, double(bits) / 9007199254740992.0);  // exact: 2^53
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of U[0,1) has sd sqrt(1/12/n) ~ 9e-4; 6 sd.
  EXPECT_NEAR(sum / n, 0.5, 6 * std::sqrt(1.0 / 12.0 / n));
}

TEST(ModelRng, BelowIsInRangeAndUnbiased) {
  Rng r(7);
  EXPECT_THROW(r.below(0), std::invalid_argument);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.below(1), 0u);
  // A bound just above 2^63 rejects almost half the raw draws: exercises the rejection loop.
  const std::uint64_t big = (1ULL << 63) + 12345;
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(big), big);
  // n = 7 (not a power of two): chi-square, 6 dof; 40 is p ~ 1e-6.
  std::vector<double> counts(7, 0.0);
  for (int i = 0; i < 70000; ++i) counts[r.below(7)] += 1;
  EXPECT_LT(chi_square(counts), 40.0);
}

TEST(ModelRng, DerivedSeedsSeparateStreams) {
  using nn::schedule::derive_seed;
  using nn::schedule::Stream;
  EXPECT_EQ(derive_seed(5, Stream::kShuffle, 3), derive_seed(5, Stream::kShuffle, 3));
  EXPECT_NE(derive_seed(5, Stream::kShuffle, 3), derive_seed(5, Stream::kShuffle, 4));
  EXPECT_NE(derive_seed(5, Stream::kShuffle, 0), derive_seed(5, Stream::kInit, 0));
  EXPECT_NE(derive_seed(5, Stream::kInit, 0), derive_seed(6, Stream::kInit, 0));
}

// ---------------------------------------------------------------- init

TEST(ModelInit, ShapesBiasesAndReproducibility) {
  const auto p = nn::schedule::init_params(7, 5, 3, 123);
  EXPECT_EQ(p.W1.size(), 35u);
  EXPECT_EQ(p.W2.size(), 15u);
  EXPECT_EQ(p.b1, std::vector<double>(5, 0.0));
  EXPECT_EQ(p.b2, std::vector<double>(3, 0.0));
  const auto q = nn::schedule::init_params(7, 5, 3, 123);
  EXPECT_EQ(p.W1, q.W1);  // bitwise: == on doubles
  EXPECT_EQ(p.W2, q.W2);
  const auto r = nn::schedule::init_params(7, 5, 3, 124);
  EXPECT_NE(p.W1, r.W1);
  EXPECT_NE(p.W2, r.W2);
  EXPECT_THROW(nn::schedule::init_params(0, 5, 3, 1), std::invalid_argument);
}

TEST(ModelInit, FollowsDocumentedDrawOrder) {
  // The header's contract (which the GPU trainer may re-implement): one Rng from
  // derive_seed(seed, kInit), W1 column-major, then W2 column-major, each a * (2u - 1).
  const int D = 6, H = 4, C = 3;
  const auto p = nn::schedule::init_params(D, H, C, 99);
  Rng rng(nn::schedule::derive_seed(99, nn::schedule::Stream::kInit));
  const double a1 = std::sqrt(6.0 / (D + H)), a2 = std::sqrt(6.0 / (H + C));
  for (double w : p.W1) ASSERT_EQ(w, a1 * (2.0 * rng.uniform() - 1.0));
  for (double w : p.W2) ASSERT_EQ(w, a2 * (2.0 * rng.uniform() - 1.0));
}

TEST(ModelInit, GlorotBoundsAndMoments) {
  // The MNIST shapes: 401,408 draws in W1 and 5,120 in W2.
  const int D = 784, H = 512, C = 10;
  const auto p = nn::schedule::init_params(D, H, C, 2024);
  struct Layer {
    const std::vector<double>* w;
    double a;
  };
  for (const Layer& L : {Layer{&p.W1, std::sqrt(6.0 / (D + H))}, Layer{&p.W2, std::sqrt(6.0 / (H + C))}}) {
    EXPECT_EQ(L.a, nn::schedule::glorot_limit(L.w == &p.W1 ? D : H, L.w == &p.W1 ? H : C));
    const double n = double(L.w->size());
    double s1 = 0.0, s2 = 0.0;
    std::vector<double> hist(16, 0.0);
    for (double w : *L.w) {
      ASSERT_GE(w, -L.a);
      ASSERT_LT(w, L.a);  // 2u - 1 < 1 and rounding cannot reach a (see init.h)
      s1 += w;
      s2 += w * w;
      hist[std::min<std::size_t>(15, std::size_t((w + L.a) / (2 * L.a) * 16))] += 1;
    }
    // U(-a, a): mean 0 with sd a/sqrt(3n); E[w^2] = a^2/3 with sd a^2 sqrt(4/45/n). 6 sd each.
    EXPECT_NEAR(s1 / n, 0.0, 6 * L.a / std::sqrt(3 * n));
    EXPECT_NEAR(s2 / n, L.a * L.a / 3, 6 * L.a * L.a * std::sqrt(4.0 / 45.0 / n));
    // Flat histogram: chi-square with 15 dof; 50 is p ~ 1e-5.
    EXPECT_LT(chi_square(hist), 50.0);
  }
}

// ---------------------------------------------------------------- schedule

TEST(ModelSchedule, EpochOrderIsPermutationAndReproducible) {
  using nn::schedule::epoch_order;
  const std::size_t n = 1000;
  const auto o = epoch_order(n, 11, 0, true);
  ASSERT_EQ(o.size(), n);
  std::vector<std::uint32_t> sorted = o, id(n);
  std::sort(sorted.begin(), sorted.end());
  std::iota(id.begin(), id.end(), 0u);
  EXPECT_EQ(sorted, id);
  EXPECT_NE(o, id);
  EXPECT_EQ(o, epoch_order(n, 11, 0, true));   // same (seed, epoch)
  EXPECT_NE(o, epoch_order(n, 11, 1, true));   // different epoch
  EXPECT_NE(o, epoch_order(n, 12, 0, true));   // different seed
  EXPECT_EQ(epoch_order(n, 11, 3, false), id);  // no shuffle: identity
  EXPECT_TRUE(epoch_order(0, 1, 0, true).empty());
  EXPECT_EQ(epoch_order(1, 1, 0, true), std::vector<std::uint32_t>{0});
}

TEST(ModelSchedule, FisherYatesIsUnbiased) {
  // All 6 orders of 3 items should be equally likely over epochs; chi-square, 5 dof, 60000
  // draws; 35 is p ~ 2e-6. The classic biased shuffle (j drawn from [0, n) instead of
  // [0, i]) has cell probabilities 4/27 or 5/27, giving an expected statistic near 740.
  std::map<std::vector<std::uint32_t>, double> seen;
  for (int e = 0; e < 60000; ++e) seen[nn::schedule::epoch_order(3, 5, e, true)] += 1;
  ASSERT_EQ(seen.size(), 6u);
  std::vector<double> counts;
  for (const auto& kv : seen) counts.push_back(kv.second);
  EXPECT_LT(chi_square(counts), 35.0);
}

TEST(ModelSchedule, BatchesCoverRangeOnce) {
  using nn::schedule::batches;
  EXPECT_THROW(batches(10, 0), std::invalid_argument);
  EXPECT_TRUE(batches(0, 4).empty());
  for (std::size_t n : {1u, 9u, 10u, 11u, 600u, 60000u}) {
    for (std::size_t B : {1u, 3u, 10u, 800u}) {
      const auto bs = batches(n, B);
      ASSERT_EQ(bs.size(), (n + B - 1) / B);
      std::size_t next = 0;
      for (std::size_t k = 0; k < bs.size(); ++k) {
        EXPECT_EQ(bs[k].begin, next);
        EXPECT_EQ(bs[k].count, k + 1 < bs.size() ? B : n - B * (bs.size() - 1));
        EXPECT_GT(bs[k].count, 0u);
        next += bs[k].count;
      }
      EXPECT_EQ(next, n);
    }
  }
  const auto bs = batches(10, 3);  // 3, 3, 3, 1
  ASSERT_EQ(bs.size(), 4u);
  EXPECT_EQ(bs.back().begin, 9u);
  EXPECT_EQ(bs.back().count, 1u);
}

TEST(ModelSchedule, RankSlicesPartitionBatch) {
  using nn::schedule::rank_slice;
  EXPECT_THROW(rank_slice(10, 0, 0), std::invalid_argument);
  EXPECT_THROW(rank_slice(10, 2, 2), std::invalid_argument);
  EXPECT_THROW(rank_slice(10, -1, 2), std::invalid_argument);
  for (std::size_t count = 0; count <= 40; ++count) {
    for (int p = 1; p <= 9; ++p) {
      std::size_t next = 0, lo = std::numeric_limits<std::size_t>::max(), hi = 0;
      for (int r = 0; r < p; ++r) {
        const auto s = rank_slice(count, r, p);
        EXPECT_EQ(s.begin, next);  // contiguous, in rank order
        // The first count % p ranks carry the extra sample.
        EXPECT_EQ(s.count, count / std::size_t(p) + (std::size_t(r) < count % std::size_t(p) ? 1 : 0));
        next += s.count;
        lo = std::min(lo, s.count);
        hi = std::max(hi, s.count);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - lo, 1u);
      if (std::size_t(p) > count) {
        EXPECT_EQ(lo, 0u);  // some ranks get nothing
      }
    }
  }
  // 800 over 3 ranks: 267, 267, 266.
  EXPECT_EQ(rank_slice(800, 0, 3).count, 267u);
  EXPECT_EQ(rank_slice(800, 2, 3).begin, 534u);
  EXPECT_EQ(rank_slice(800, 2, 3).count, 266u);
}

}  // namespace
