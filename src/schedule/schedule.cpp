// Epoch orders (Fisher-Yates with the project PRNG), batch boundaries and rank slices.
// Everything is integer arithmetic, so every rank and every platform agrees on the schedule.
// Tested in tests/schedule/test_init_schedule.cpp.
#include "schedule/schedule.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "schedule/rng.h"

namespace nn::schedule {

std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, int epoch, bool shuffle) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("epoch_order: n does not fit 32-bit indices");
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  if (!shuffle || n < 2) return order;
  // The epoch is reinterpreted as 32 unsigned bits, so negative epochs are distinct streams too.
  Rng rng(derive_seed(seed, Stream::kShuffle, static_cast<std::uint32_t>(epoch)));
  for (std::size_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<Batch> batches(std::size_t n, std::size_t B) {
  if (B == 0) throw std::invalid_argument("batches: batch size must be positive");
  std::vector<Batch> out;
  out.reserve((n + B - 1) / B);
  for (std::size_t begin = 0; begin < n; begin += B) out.push_back({begin, std::min(B, n - begin)});
  return out;
}

Slice rank_slice(std::size_t batch_count, int rank, int p) {
  if (p <= 0 || rank < 0 || rank >= p) throw std::invalid_argument("rank_slice: need 0 <= rank < p");
  const auto r = static_cast<std::size_t>(rank), np = static_cast<std::size_t>(p);
  const std::size_t base = batch_count / np, extra = batch_count % np;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

}  // namespace nn::schedule
