// --device cpu (exchange.h): the host model's gradient is host memory, summed in place, layer 2
// first (MPI_Iallreduce), then layer 1 in one blocking call. Open MPI's blocking MPI_Allreduce
// (a ring at this size) takes half the time of its nonblocking one on layer 1's large region
// (72 vs 146 us on 814 KB at 2 ranks, a 2-core VM), and the two may add in other orders at 3 or
// more ranks, so both orders below make the same calls per region: with overlap the host step
// calls layer2_ready() between its backward passes and layer 2's sum runs while dW1 is computed;
// without, layer 2's sum is waited for before layer 1's. Bitwise the same either way.
// Tested by tests/exchange and tests/train (test_cpu_train).
#pragma once
#include <cstddef>

#include "comm/comm.h"
#include "exchange/exchange.h"

namespace nn::exchange {

template <class T, class Model>
class HostMemory final : public Exchange<T> {
 public:
  HostMemory(Model& model, Regions regions, comm::Reduction<T> reduction)
      : model_(model), g_(regions), reduce_(reduction) {}

  void layer2_ready() override {
    layer2_ = reduce_.start(model_.grads() + g_.layer1, g_.layer2);
    started_ = true;
  }

  void sum(Parts&& parts) override {
    T* g = model_.grads();
    parts.begin(Part::Reduce);
    if (started_) {  // layer 2's sum is under way
      reduce_.now(g, g_.layer1);
      layer2_.wait();
    } else {
      reduce_.start(g + g_.layer1, g_.layer2).wait();
      reduce_.now(g, g_.layer1);
    }
    started_ = false;
  }

  std::size_t piece_values() const override { return g_.layer1; }

 private:
  Model& model_;
  const Regions g_;
  const comm::Reduction<T> reduce_;
  comm::Request layer2_;
  bool started_ = false;
};

}  // namespace nn::exchange
