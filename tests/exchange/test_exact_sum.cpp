// ExactSum (src/exchange/exact_sum.h) over the ranks: the chunks of one batch, dealt to the ranks
// in blocks or round robin, added in any order, give byte for byte what one process computes
// from every chunk with the format alone, on every rank, with MPI's all-reduce and with the
// parameter server; a rank without a chunk takes part; a NaN in one rank's chunk stops every
// rank; the result is within the format's bound of a float64 sum. Collective: run at 1-4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "comm/comm.h"
#include "exchange/exact_sum.h"
#include "schedule/rng.h"

namespace nn::exchange {
namespace {

using Segments = std::vector<ExactSegment>;
const Segments kSegments{{0, 300}, {300, 20}, {320, 200}, {520, 10}};  // W1, b1, W2, b2
constexpr std::size_t kValues = 530;

// Chunk c's gradient: the same on every rank; magnitudes over 40 binades, both signs, zeros.
template <class T>
std::vector<T> chunk_gradient(int c) {
  schedule::Rng rng(schedule::derive_seed(1234, schedule::Stream::kTest, std::uint32_t(c)));
  std::vector<T> g(kValues);
  for (std::size_t i = 0; i < kValues; ++i) {
    const double u = double(rng.next_u64() >> 11) * 0x1p-53;
    const int e = int(rng.below(40)) - 30;
    const double v = (rng.below(2) ? -1.0 : 1.0) * (1.0 + u) * std::ldexp(1.0, e);
    g[i] = rng.below(13) == 0 ? T(0) : T(v);
  }
  return g;
}

// The chunks rank r computes: a block of the C chunks (as exact_plan.h deals its columns), or
// every p-th from r.
std::vector<int> my_chunks(int C, bool round_robin) {
  const int p = comm::size(), r = comm::rank();
  std::vector<int> mine;
  if (round_robin) {
    for (int c = r; c < C; c += p) mine.push_back(c);
  } else {
    const int base = C / p, extra = C % p;
    const int first = r * base + std::min(r, extra), count = base + (r < extra ? 1 : 0);
    for (int c = first; c < first + count; ++c) mine.push_back(c);
  }
  return mine;
}

// One process, every chunk, the format's functions alone: what any partition must give.
template <class T>
std::vector<T> reference(int C) {
  std::vector<std::vector<T>> g;
  for (int c = 0; c < C; ++c) g.push_back(chunk_gradient<T>(c));
  std::vector<T> out(kValues);
  for (const auto& s : kSegments) {
    int e = fixed::kAllZero;
    for (const auto& v : g) e = std::max(e, fixed::max_exponent(v.data() + s.begin, s.count));
    const auto f = fixed::make_format<T>(e, std::uint64_t(C));
    std::vector<std::uint64_t> words(s.count * fixed::Format<T>::words, 0);
    for (const auto& v : g) EXPECT_EQ(fixed::accumulate(v.data() + s.begin, s.count, f, words.data()), 0u);
    EXPECT_EQ(fixed::round_back(words.data(), s.count, f, out.data() + s.begin), 0u);
  }
  return out;
}

template <class T>
std::vector<T> exact(int C, bool round_robin, bool reverse, comm::Reduction<std::uint64_t> reduce) {
  ExactSum<T> sum(Segments(kSegments.begin(), kSegments.end()), std::uint64_t(C), reduce);
  std::vector<int> mine = my_chunks(C, round_robin);
  std::vector<std::vector<T>> g;
  for (int c : mine) g.push_back(chunk_gradient<T>(c));
  for (const auto& v : g) sum.note(v.data());
  sum.agree();
  if (reverse)
    for (auto it = g.rbegin(); it != g.rend(); ++it) sum.add(it->data());
  else
    for (const auto& v : g) sum.add(v.data());
  std::vector<T> out(kValues);
  sum.finish(out.data());
  return out;
}

// Every rank holds rank 0's bytes.
template <class T>
bool same_on_every_rank(const std::vector<T>& v) {
  std::vector<double> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = double(v[i]);
  std::vector<double> root = bits;
  comm::broadcast(root);
  return comm::all_ok(std::memcmp(root.data(), bits.data(), bits.size() * sizeof(double)) == 0);
}

template <class T>
void expect_bytes(const std::vector<T>& got, const std::vector<T>& want) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)), 0);
}

TEST(ExactSum, AnyPartitionGivesTheReferenceBytes) {
  for (int C : {1, 3, 7, 16}) {
    const auto want = reference<float>(C);
    for (bool rr : {false, true})
      for (bool rev : {false, true}) {
        const auto got = exact<float>(C, rr, rev, comm::allreduce_reduction<std::uint64_t>());
        expect_bytes(got, want);
        EXPECT_TRUE(same_on_every_rank(got)) << "C=" << C;
      }
  }
}

TEST(ExactSum, DoubleAndTheParameterServerToo) {
  expect_bytes(exact<double>(7, true, false, comm::allreduce_reduction<std::uint64_t>()), reference<double>(7));
  expect_bytes(exact<float>(7, false, true, comm::ps_reduction<std::uint64_t>()), reference<float>(7));
  expect_bytes(exact<double>(5, false, false, comm::ps_reduction<std::uint64_t>()), reference<double>(5));
}

TEST(ExactSum, WithinTheFormatsBoundOfAFloat64Sum) {
  const int C = 7;
  const auto got = exact<float>(C, false, false, comm::allreduce_reduction<std::uint64_t>());
  std::vector<double> s(kValues, 0.0), a(kValues, 0.0);
  for (int c = 0; c < C; ++c) {
    const auto g = chunk_gradient<float>(c);
    for (std::size_t i = 0; i < kValues; ++i) {
      s[i] += double(g[i]);
      a[i] += std::abs(double(g[i]));
    }
  }
  // Every value lies within the format's exact range (40 binades), so the result is the exact
  // sum rounded once to float: within half a float ulp of it, and the float64 sum is within
  // 7 * 2^-53 * sum |v| of the exact sum.
  for (std::size_t i = 0; i < kValues; ++i)
    EXPECT_NEAR(double(got[i]), s[i], std::abs(s[i]) * 0x1p-24 + a[i] * 0x1p-50) << i;
}

TEST(ExactSum, ARankWithoutAChunkTakesPart) {
  // Two chunks: at 3 and 4 ranks, ranks 2 and 3 compute none but still agree and sum.
  expect_bytes(exact<float>(2, false, false, comm::allreduce_reduction<std::uint64_t>()), reference<float>(2));
}

TEST(ExactSum, ANaNInOneRanksChunkStopsEveryRank) {
  const int C = 4;
  ExactSum<float> sum(Segments(kSegments.begin(), kSegments.end()), C, comm::allreduce_reduction<std::uint64_t>());
  for (int c : my_chunks(C, false)) {
    auto g = chunk_gradient<float>(c);
    if (c == C - 1) g[310] = std::numeric_limits<float>::quiet_NaN();  // b1, on the last chunk's rank
    sum.note(g.data());
  }
  EXPECT_THROW(sum.agree(), std::runtime_error);
}

TEST(ExactSum, AddBeforeAgreeIsACallersError) {
  ExactSum<float> sum(Segments(kSegments.begin(), kSegments.end()), 2, comm::allreduce_reduction<std::uint64_t>());
  const auto g = chunk_gradient<float>(0);
  EXPECT_THROW(sum.add(g.data()), std::logic_error);
  EXPECT_EQ(sum.wire_bytes(), kValues * 2 * sizeof(std::uint64_t));
}

}  // namespace
}  // namespace nn::exchange
