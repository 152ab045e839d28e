// --comm device (exchange.h): a CUDA-aware MPI reads and writes the gradient in device memory
// itself, no staging copies. With overlap, layer 2's sum starts as soon as its stage is done and
// runs while the dW1 GEMM finishes; without, both sums after the whole backward pass.
// Tested by tests/exchange and tests/train (the emulator build models a CUDA-aware MPI).
#pragma once
#include <cstddef>

#include "comm/comm.h"
#include "exchange/exchange.h"
#include "model/model.h"

namespace nn::exchange {

template <class T, class Model>
class DevicePointers final : public Exchange<T> {
 public:
  DevicePointers(Model& model, Regions regions, comm::Reduction<T> reduction, bool overlap)
      : model_(model), g_(regions), reduce_(reduction), overlap_(overlap) {}

  void sum(Parts&& parts) override {
    T* g = model_.grads();
    parts.begin(Part::Reduce);
    if (overlap_) {
      model_.wait(model::Stage::Layer2Grads);
      comm::Request layer2 = reduce_.start(g + g_.layer1, g_.layer2);
      model_.wait(model::Stage::AllGrads);
      comm::Request layer1 = reduce_.start(g, g_.layer1);
      layer2.wait();
      layer1.wait();
    } else {
      model_.wait(model::Stage::AllGrads);
      reduce_.start(g + g_.layer1, g_.layer2).wait();
      reduce_.start(g, g_.layer1).wait();
    }
  }

  std::size_t piece_values() const override { return g_.layer1; }

 private:
  Model& model_;
  const Regions g_;
  const comm::Reduction<T> reduce_;
  const bool overlap_;
};

}  // namespace nn::exchange
