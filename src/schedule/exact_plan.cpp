// Exact plan: chunks of every batch, the columns they form, each rank's columns and shard,
// per-epoch column permutations and the global batches they imply (see exact_plan.h for the
// exact definitions). Tested by tests/schedule/test_exact_plan.cpp.
#include "schedule/exact_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "schedule/rng.h"
#include "schedule/schedule.h"
#include "schedule/shards.h"

namespace nn::schedule {

namespace {

// Images a full batch puts in column j (w_j); 0 < w_j <= c for j < C.
std::size_t full_width(const ExactPlan& plan, std::size_t j) {
  return std::min(plan.c, plan.B - j * plan.c);
}

void check_column(const ExactPlan& plan, std::size_t j) {
  if (j >= plan.num_columns()) throw std::out_of_range("ExactPlan: column index out of range");
}

// Appends the chunks of batch k that lie in rank r's columns, given those columns' orders
// (orders[q - cols.begin] for column q) and shard offsets.
void append_chunks(const ExactPlan& plan, const Range& cols, const std::vector<std::vector<std::uint32_t>>& orders,
                   const std::vector<std::size_t>& offsets, std::size_t k, std::vector<Chunk>& out) {
  const std::size_t slots = plan.chunk_slots(k);
  for (std::size_t j = cols.begin; j < cols.begin + cols.count && j < slots; ++j) {
    const std::vector<std::uint32_t>& perm = orders[j - cols.begin];
    const std::size_t start = k * full_width(plan, j), count = plan.chunk_range(k, j).count;
    Chunk ch{j, std::vector<std::uint32_t>(count)};
    for (std::size_t i = 0; i < count; ++i)
      ch.positions[i] = static_cast<std::uint32_t>(offsets[j - cols.begin] + perm[start + i]);
    out.push_back(std::move(ch));
  }
}

// The orders and shard offsets of rank r's columns.
void rank_orders(const ExactPlan& plan, int r, int epoch, Range& cols,
                 std::vector<std::vector<std::uint32_t>>& orders, std::vector<std::size_t>& offsets) {
  cols = plan.rank_columns(r);
  orders.clear();
  offsets.clear();
  std::size_t off = 0;
  for (std::size_t j = cols.begin; j < cols.begin + cols.count; ++j) {
    orders.push_back(column_order(plan, j, epoch));
    offsets.push_back(off);
    off += orders.back().size();
  }
}

}  // namespace

std::size_t ExactPlan::batch_count(std::size_t k) const {
  if (k >= num_batches()) throw std::out_of_range("ExactPlan: batch index out of range");
  return std::min(B, n - k * B);
}

std::size_t ExactPlan::chunk_slots(std::size_t k) const { return (batch_count(k) + c - 1) / c; }

Range ExactPlan::chunk_range(std::size_t k, std::size_t j) const {
  const std::size_t ck = batch_count(k);  // throws for a bad k
  if (j >= (ck + c - 1) / c) throw std::out_of_range("ExactPlan: batch has no such chunk slot");
  return {j * c, std::min(c, ck - j * c)};
}

std::size_t ExactPlan::column_size(std::size_t j) const {
  check_column(*this, j);
  const std::size_t full = n / B, rem = n % B;
  const std::size_t last = rem > j * c ? std::min(c, rem - j * c) : 0;
  return full * full_width(*this, j) + last;
}

int ExactPlan::column_owner(std::size_t j) const {
  check_column(*this, j);
  // The inverse of rank_slice(C, r, p): ranks below `extra` own base + 1 columns.
  const std::size_t np = static_cast<std::size_t>(p), base = num_columns() / np, extra = num_columns() % np;
  const std::size_t big = extra * (base + 1);
  return static_cast<int>(j < big ? j / (base + 1) : extra + (j - big) / base);
}

Range ExactPlan::rank_columns(int r) const {
  const Slice s = rank_slice(num_columns(), r, p);  // throws for a bad r
  return {s.begin, s.count};
}

std::size_t exact_chunk(std::size_t B) {
  if (B == 0) throw std::invalid_argument("exact_chunk: batch size must be positive");
  // At least 32 images a chunk, at most 16 chunks a batch, never more than the batch.
  return std::min(B, std::max<std::size_t>(32, (B + 15) / 16));
}

ExactPlan make_exact_plan(std::size_t n, std::size_t B, int p, std::uint64_t seed, bool shuffle,
                          std::size_t chunk) {
  if (B == 0) throw std::invalid_argument("make_exact_plan: batch size must be positive");
  if (p < 1) throw std::invalid_argument("make_exact_plan: need at least one rank");
  if (n > 0 && B > n) throw std::invalid_argument("make_exact_plan: batch size exceeds the images");
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("make_exact_plan: n does not fit 32-bit indices");
  if (chunk > B) throw std::invalid_argument("make_exact_plan: chunk size exceeds the batch size");
  return ExactPlan{n, B, chunk ? chunk : exact_chunk(B), p, seed, shuffle};
}

std::vector<std::uint32_t> column_indices(const ExactPlan& plan, std::size_t j) {
  const std::size_t m = plan.column_size(j), w = full_width(plan, j);  // throws for a bad j
  std::vector<std::uint32_t> out(m);
  // Column position q lies in batch q / w at offset q % w of its chunk: every batch before the
  // last is full, and the last one's chunk (possibly shorter) also starts at a multiple of w.
  for (std::size_t q = 0; q < m; ++q) out[q] = static_cast<std::uint32_t>((q / w) * plan.B + j * plan.c + q % w);
  return out;
}

std::size_t shard_size(const ExactPlan& plan, int r) {
  const Range cols = plan.rank_columns(r);
  std::size_t m = 0;
  for (std::size_t j = cols.begin; j < cols.begin + cols.count; ++j) m += plan.column_size(j);
  return m;
}

std::vector<std::uint32_t> shard_indices(const ExactPlan& plan, int r) {
  const Range cols = plan.rank_columns(r);
  std::vector<std::uint32_t> out;
  out.reserve(shard_size(plan, r));
  for (std::size_t j = cols.begin; j < cols.begin + cols.count; ++j) {
    const std::vector<std::uint32_t> col = column_indices(plan, j);
    out.insert(out.end(), col.begin(), col.end());
  }
  return out;
}

std::vector<std::uint32_t> column_order(const ExactPlan& plan, std::size_t j, int epoch) {
  const std::size_t m = plan.column_size(j);  // throws for a bad j
  std::vector<std::uint32_t> order(m);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  if (!plan.shuffle || m < 2) return order;
  // The Fisher-Yates of schedule::epoch_order, keyed by the column instead of the rank.
  // j < 2^32 (j < B <= n); shuffle_key uses its low 32 bits, as it does a rank's.
  Rng rng(shuffle_key(plan.seed, epoch, static_cast<int>(static_cast<std::uint32_t>(j))));
  for (std::size_t i = m - 1; i > 0; --i) {
    const auto s = static_cast<std::size_t>(rng.below(i + 1));
    std::swap(order[i], order[s]);
  }
  return order;
}

std::vector<Chunk> rank_chunks(const ExactPlan& plan, int r, int epoch, std::size_t k) {
  plan.batch_count(k);  // throws for a bad k before any permutation is drawn
  Range cols{};
  std::vector<std::vector<std::uint32_t>> orders;
  std::vector<std::size_t> offsets;
  rank_orders(plan, r, epoch, cols, orders, offsets);
  std::vector<Chunk> out;
  append_chunks(plan, cols, orders, offsets, k, out);
  return out;
}

std::vector<std::vector<Chunk>> rank_epoch_chunks(const ExactPlan& plan, int r, int epoch) {
  Range cols{};
  std::vector<std::vector<std::uint32_t>> orders;
  std::vector<std::size_t> offsets;
  rank_orders(plan, r, epoch, cols, orders, offsets);
  std::vector<std::vector<Chunk>> out(plan.num_batches());
  for (std::size_t k = 0; k < out.size(); ++k) append_chunks(plan, cols, orders, offsets, k, out[k]);
  return out;
}

std::vector<std::uint32_t> global_epoch_order(const ExactPlan& plan, int epoch) {
  const std::size_t C = plan.num_columns();
  std::vector<std::vector<std::uint32_t>> column(C), perm(C);
  for (std::size_t j = 0; j < C; ++j) {
    column[j] = column_indices(plan, j);
    perm[j] = column_order(plan, j, epoch);
  }
  std::vector<std::uint32_t> out;
  out.reserve(plan.n);
  for (std::size_t k = 0; k < plan.num_batches(); ++k)
    for (std::size_t j = 0; j < plan.chunk_slots(k); ++j) {
      const std::size_t start = k * full_width(plan, j), count = plan.chunk_range(k, j).count;
      for (std::size_t i = 0; i < count; ++i) out.push_back(column[j][perm[j][start + i]]);
    }
  return out;
}

std::vector<std::uint32_t> global_batch(const ExactPlan& plan, int epoch, std::size_t k) {
  const std::size_t ck = plan.batch_count(k);  // throws for a bad k
  const std::vector<std::uint32_t> all = global_epoch_order(plan, epoch);
  return {all.begin() + static_cast<std::ptrdiff_t>(k * plan.B),
          all.begin() + static_cast<std::ptrdiff_t>(k * plan.B + ck)};
}

}  // namespace nn::schedule
