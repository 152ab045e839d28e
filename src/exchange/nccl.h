// --comm nccl (exchange.h): the gradient summed on the device by NCCL, on a stream of the
// exchange's own (the model's exchange_stream_after), never through host memory. With overlap,
// layer 2's all-reduce is queued as soon as its stage is recorded, so it runs beside the dW1 GEMM
// on the model's stream (no GEMM's plan changes: the GEMM does not know); layer 1's follows its
// stage. The model's stream then waits for the exchange's (join_exchange), so the update reads
// the sum, and the host waits for the exchange's stream (comm::Nccl::wait: the step timeout
// names ncclAllReduce while it waits). Without overlap both sums after the whole backward pass.
// Every rank queues the same two sums in the same order. Tested by tests/exchange/test_nccl_engine.cpp
// (the emulator's NCCL, 1-4 ranks) and tests/train (the trainer's weights at 2 ranks equal
// the host exchange's).
#pragma once
#include <cstddef>

#include "comm/nccl.h"
#include "exchange/exchange.h"
#include "model/model.h"

namespace nn::exchange {

// Model: a device model with the exchange stream (DeviceModel).
template <class T, class Model>
class NcclSum final : public Exchange<T> {
 public:
  NcclSum(Model& model, Regions regions, comm::Nccl& nccl, bool overlap)
      : model_(model), g_(regions), nccl_(nccl), overlap_(overlap) {}

  void sum(Parts&& parts) override {
    T* g = model_.grads();
    parts.begin(Part::Reduce);
    void* s = model_.exchange_stream_after(overlap_ ? model::Stage::Layer2Grads : model::Stage::AllGrads);
    nccl_.sum_on(g + g_.layer1, g_.layer2, s);
    if (overlap_) s = model_.exchange_stream_after(model::Stage::AllGrads);
    nccl_.sum_on(g, g_.layer1, s);
    model_.join_exchange();
    nccl_.wait(s);
  }

  std::size_t piece_values() const override { return g_.layer1; }

 private:
  Model& model_;
  const Regions g_;
  comm::Nccl& nccl_;
  const bool overlap_;
};

}  // namespace nn::exchange
