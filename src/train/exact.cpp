// What a rank keeps of exact training (exact.h): its epoch's chunks in the model's order, and the
// gradient's segments.
#include "train/exact.h"

namespace nn::train {

ExactEpoch exact_epoch(const schedule::ExactPlan& plan, int rank, int epoch) {
  ExactEpoch out;
  const std::vector<std::vector<schedule::Chunk>> all = schedule::rank_epoch_chunks(plan, rank, epoch);
  out.batches.resize(all.size());
  for (std::size_t k = 0; k < all.size(); ++k)
    for (const schedule::Chunk& c : all[k]) {
      out.batches[k].push_back({out.order.size(), int(c.positions.size())});
      out.order.insert(out.order.end(), c.positions.begin(), c.positions.end());
    }
  return out;
}

std::vector<exchange::ExactSegment> exact_segments(const model::ParamLayout& L) {
  return {{L.W1(), L.b1() - L.W1()}, {L.b1(), L.W2() - L.b1()}, {L.W2(), L.b2() - L.W2()}, {L.b2(), L.total() - L.b2()}};
}

}  // namespace nn::train
