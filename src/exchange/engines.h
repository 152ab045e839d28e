// The exchange engines' registry (exchange.h): the one place that turns a run's choice into an
// engine. The trainer chooses (src/train/run.cpp, choose_exchange) once, when the run is made.
#pragma once
#include <cstddef>
#include <memory>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "exchange/device_pointers.h"
#include "exchange/exchange.h"
#include "exchange/host_memory.h"
#include "exchange/host_staged.h"
#include "exchange/nccl.h"
#include "exchange/node_shared.h"
#include "exchange/none.h"

namespace nn::exchange {

enum class Engine { None, HostStaged, DevicePointers, Nccl, HostMemory, NodeShared };

inline const char* engine_name(Engine e) {
  switch (e) {
    case Engine::None: return "none";
    case Engine::HostStaged: return "host-staged";
    case Engine::DevicePointers: return "device pointers";
    case Engine::Nccl: return "nccl";
    case Engine::HostMemory: return "host memory";
    case Engine::NodeShared: return "node-shared";
  }
  return "?";
}

// What an engine is made with; each takes the fields it needs.
template <class T>
struct Options {
  Regions regions;
  comm::Reduction<T> reduction = comm::allreduce_reduction<T>();
  std::size_t piece = 0;  // HostStaged: layer 1's values a piece (piece_values)
  bool overlap = true;    // HostStaged, DevicePointers, Nccl: layer 2's sum under way during layer 1's copy or GEMM
  comm::Nccl* nccl = nullptr;              // Nccl: the job's communicator
  const comm::NodeShared* node = nullptr;  // NodeShared: the node's window
  std::size_t b1 = 0;                      // NodeShared: where b1 begins
};

template <class T, class Model>
std::unique_ptr<Exchange<T>> make_exchange(Engine e, Model& model, const Options<T>& o) {
  switch (e) {
    case Engine::None: return std::make_unique<None<T>>(o.regions);
    case Engine::HostStaged: return std::make_unique<HostStaged<T, Model>>(model, o.regions, o.reduction, o.piece, o.overlap);
    case Engine::DevicePointers: return std::make_unique<DevicePointers<T, Model>>(model, o.regions, o.reduction, o.overlap);
    case Engine::Nccl:
      // Only a model with an exchange stream (DeviceModel): a host model's gradient is in host
      // memory, and --comm nccl is refused for it.
      if constexpr (requires(Model& m) { m.join_exchange(); })
        return std::make_unique<NcclSum<T, Model>>(model, o.regions, *o.nccl, o.overlap);
      else return nullptr;
    case Engine::HostMemory: return std::make_unique<HostMemory<T, Model>>(model, o.regions, o.reduction);
    case Engine::NodeShared: return std::make_unique<NodeSharedSum<T, Model>>(model, o.regions, o.reduction, *o.node, o.b1);
  }
  return nullptr;
}

}  // namespace nn::exchange
