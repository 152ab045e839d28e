// The GPU's default exchange (exchange.h): the device's gradient through pinned host memory.
// Layer 2's gradient [W2 | b2] is copied down first (its stage is done first) and its sum started
// while layer 1's [W1 | b1] is still being copied (the dW1 GEMM may still run); then layer 1's
// sum; then the whole sum back up, where the update reads it. Layer 1 goes in pieces
// (--exchange-chunk): piece i is summed while piece i + 1 is copied down and piece i - 1 copied
// back up. Without overlap the same sums run after all the copies: the same MPI operations on
// the same values, so the weights are bitwise identical either way.
// Tested by tests/exchange (the engine on a host stand-in model, 1-4 ranks) and tests/train.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "comm/comm.h"
#include "common/device_buffer.h"
#include "exchange/exchange.h"
#include "exchange/pieces.h"
#include "model/model.h"

namespace nn::exchange {

// Model: its gradient copied down and up in ranges after a stage (model.h's staging calls).
template <class T, class Model>
class HostStaged final : public Exchange<T> {
 public:
  // piece: layer 1's values a piece (piece_values); overlap: layer 2's sum progresses while
  // layer 1 is copied down (off: every copy first, then the same sums).
  HostStaged(Model& model, Regions regions, comm::Reduction<T> reduction, std::size_t piece, bool overlap)
      : model_(model),
        g_(regions),
        reduce_(reduction),
        piece_(piece),
        pieces_((regions.layer1 + piece - 1) / piece),
        overlap_(overlap),
        host_(regions.total()) {}

  void sum(Parts&& parts) override {
    T* h = host_.get();
    std::array<int, kMaxPieces> copies{};
    parts.begin(Part::Download);
    const int layer2_copy = model_.queue_download(h, g_.layer1, g_.total(), model::Stage::Layer2Grads);
    for (std::size_t i = 0; i < pieces_; ++i)
      copies[i] = model_.queue_download(h, i * piece_, std::min(g_.layer1, (i + 1) * piece_), model::Stage::AllGrads);
    model_.wait_download(overlap_ ? layer2_copy : copies[pieces_ - 1]);  // the copies run in order
    parts.begin(Part::Reduce);
    comm::Request layer2 = reduce_.start(h + g_.layer1, g_.layer2);
    if (pieces_ > 1) {
      in_pieces(h, copies, layer2);
    } else {
      if (overlap_) wait_for(copies[0], layer2);
      else layer2.wait();
      comm::Request layer1 = reduce_.start(h, g_.layer1);
      layer2.wait();
      layer1.wait();
    }
    parts.begin(Part::Upload);
    if (pieces_ > 1) model_.upload_grads(h, g_.layer1, g_.total());  // layer 1 went up piece by piece
    else model_.upload_grads(h);
  }

  std::size_t pieces() const override { return pieces_; }
  std::size_t piece_values() const override { return piece_; }
  std::uint64_t polls() const override { return polls_; }

 private:
  // MPI progresses layer 2's sum while the host waits for a copy.
  void wait_for(int copy, comm::Request& layer2) {
    while (!model_.download_done(copy)) {
      layer2.test();
      ++polls_;
    }
  }

  // While piece i is summed (one blocking call: the host has nothing else to do), the copy
  // engine still brings piece i + 1 down and takes piece i - 1 back up, so the copies hide behind
  // the sums. At 2 ranks every value is one addition whichever call sums it: one piece's bits.
  void in_pieces(T* h, const std::array<int, kMaxPieces>& copies, comm::Request& layer2) {
    for (std::size_t i = 0; i < pieces_; ++i) {
      const std::size_t begin = i * piece_, end = std::min(g_.layer1, begin + piece_);
      wait_for(copies[i], layer2);
      reduce_.now(h + begin, end - begin);
      model_.upload_grads(h, begin, end);  // queued: the host goes on with the next piece
    }
    layer2.wait();
  }

  Model& model_;
  const Regions g_;
  const comm::Reduction<T> reduce_;
  const std::size_t piece_, pieces_;
  const bool overlap_;
  PinnedBuffer<T> host_;  // the staged gradient
  std::uint64_t polls_ = 0;
};

}  // namespace nn::exchange
