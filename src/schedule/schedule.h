// The batch schedule shared by the CPU reference and the GPU/MPI trainer: per-epoch sample
// order, batch boundaries, and the split of one batch over p ranks. No Armadillo, no MPI.
// Tested in tests/schedule/test_init_schedule.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nn::schedule {

// Sample order for one epoch: the identity when !shuffle, else a Fisher-Yates permutation
// (i from n-1 down to 1, swap with j = Rng::below(i + 1)) drawn from an Rng seeded with
// derive_seed(seed, Stream::kShuffle, epoch). Same (n, seed, epoch) -> same order everywhere.
// Throws std::invalid_argument if n exceeds 2^32 - 1 (indices are 32-bit).
std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, int epoch, bool shuffle);

// Batch k covers positions [begin, begin + count) of the epoch order. All batches have B
// samples except the last, which has n % B when that is non-zero.
struct Batch {
  std::size_t begin, count;
};
// Throws std::invalid_argument when B == 0. n == 0 gives no batches.
std::vector<Batch> batches(std::size_t n, std::size_t B);

// Rank r's share of one batch, relative to the batch's begin: sizes differ by at most one,
// the first batch_count % p ranks get the extra sample, slices are contiguous in rank order.
// An empty slice (count == 0) is legal when p > batch_count.
struct Slice {
  std::size_t begin, count;
};
// Throws std::invalid_argument unless p > 0 and 0 <= rank < p.
Slice rank_slice(std::size_t batch_count, int rank, int p);

}  // namespace nn::schedule
