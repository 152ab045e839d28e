// --exact on: training whose weights do not depend on the number of ranks or nodes or where a run
// was resumed (docs/training.md, "Exact training"). The pieces:
//   schedule/exact_plan.h   every global batch cut into chunks whose size depends on the batch
//                           alone; the same images in the same chunks at any rank count;
//   exchange/exact_sum.h    the chunks' gradients summed exactly as 64-bit integers;
//   here                    what a rank keeps of them: its shard positions in the order of the
//                           epoch's chunks, each chunk's place in that order, and the chunk
//                           gradients of one batch until the sum's format is agreed;
//   train/step.cpp          exact_step, the step that uses them.
// Internal to src/train; tested by tests/train/test_exact.cpp at 1-4 ranks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "exchange/exact_sum.h"
#include "model/param_layout.h"
#include "schedule/exact_plan.h"

namespace nn::train {

// One chunk of a batch as this rank computes it: its images are the model's order[offset,
// offset + count) (set_order with ExactEpoch::order).
struct ChunkAt {
  std::size_t offset = 0;
  int count = 0;
};

// This rank's view of epoch e: every batch's chunks, in slot order, and the shard positions they
// read, chunk after chunk.
struct ExactEpoch {
  std::vector<std::uint32_t> order;
  std::vector<std::vector<ChunkAt>> batches;  // batch k: this rank's chunks (none where it owns no column)
};
ExactEpoch exact_epoch(const schedule::ExactPlan& plan, int rank, int epoch);

// The sum's segments: W1, b1, W2, b2, each with a scale of its own.
std::vector<exchange::ExactSegment> exact_segments(const model::ParamLayout& L);

// The exact sum of one batch's chunk gradients on this rank (exact_step drives it): each chunk's
// gradient is kept (slots) until every chunk of the batch is in, then their exponents
// are noted, the format agreed over the ranks and the kept gradients added and summed (sum).
template <class T>
class ExactChunks {
 public:
  ExactChunks(schedule::ExactPlan plan, const model::ParamLayout& L, comm::Reduction<std::uint64_t> reduce)
      : plan_(plan), sum_(exact_segments(L), plan.num_columns(), reduce), total_(L.total()) {}

  const schedule::ExactPlan& plan() const { return plan_; }
  const ExactEpoch& epoch() const { return epoch_; }
  void start_epoch(int rank, int e) { epoch_ = exact_epoch(plan_, rank, e); }

  // A new batch: k's chunk count (every rank's) sets the headroom.
  void begin(std::size_t k) {
    sum_.clear(plan_.chunk_slots(k));
    kept_ = 0;
  }
  // Room for this batch's m chunk gradients on this rank (total() values each), to be written
  // before sum().
  std::vector<T*> slots(std::size_t m) {
    while (store_.size() < m) store_.emplace_back(total_.size());
    kept_ = m;
    std::vector<T*> out;
    for (std::size_t i = 0; i < m; ++i) out.push_back(store_[i].data());
    return out;
  }
  // Every rank's chunks summed, rounded once into total(). Collective.
  const std::vector<T>& sum() {
    std::vector<const T*> kept;
    for (std::size_t i = 0; i < kept_; ++i) kept.push_back(store_[i].data());
    sum_.note_all(kept);
    sum_.agree();
    sum_.add_all(kept);
    sum_.finish(total_.data());
    return total_;
  }
  // The host threads the sum's passes over the values use (the same bits at any count).
  void set_threads(int t) { sum_.set_threads(t); }
  std::size_t wire_bytes() const { return sum_.wire_bytes(); }

 private:
  schedule::ExactPlan plan_;
  ExactEpoch epoch_;
  exchange::ExactSum<T> sum_;
  std::vector<std::vector<T>> store_;
  std::size_t kept_ = 0;
  std::vector<T> total_;
};

}  // namespace nn::train
