// --device cpu with every rank on one node (exchange.h): the weights, every rank's X and dZ1 live
// once in the node's shared memory (comm::NodeShared), and each rank computes its own columns of
// the whole batch's dW1 from them after the exchange (src/train/step.cpp, node_shared_step), so
// W1's gradient is never sent. Only [b1 | W2 | b2] is summed, in place, between two memory
// fences: every rank's X and dZ1 stores are seen by all after it.
// Tested by tests/exchange and tests/train (test_cpu_train).
#pragma once
#include <cstddef>

#include "comm/comm.h"
#include "exchange/exchange.h"

namespace nn::exchange {

template <class T, class Model>
class NodeSharedSum final : public Exchange<T> {
 public:
  // b1: where b1 begins in the packed buffer; everything from there on is summed.
  NodeSharedSum(Model& model, Regions regions, comm::Reduction<T> reduction, const comm::NodeShared& node,
                std::size_t b1)
      : model_(model), g_(regions), reduce_(reduction), node_(node), b1_(b1) {}

  void sum(Parts&& parts) override {
    parts.begin(Part::Reduce);
    node_.fence();
    reduce_.now(model_.grads() + b1_, g_.total() - b1_);
    node_.fence();
  }

  std::size_t piece_values() const override { return g_.layer1; }

 private:
  Model& model_;
  const Regions g_;
  const comm::Reduction<T> reduce_;
  const comm::NodeShared& node_;
  const std::size_t b1_;
};

}  // namespace nn::exchange
