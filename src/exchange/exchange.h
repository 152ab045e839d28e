// The gradient exchange: how a data-parallel step sums its gradient over the ranks. One
// interface (Exchange), its engines beside each other, one file each, and one of them chosen
// when the run is made (make_exchange, engines.h):
//   none.h             one rank: nothing to sum
//   host_staged.h      the device's gradient through pinned host memory, layer 2 first, layer 1
//                      in pieces (--exchange-chunk), overlapped with the copies (the GPU default)
//   device_pointers.h  the device's buffer handed to a CUDA-aware MPI (--comm device)
//   nccl.h             the device's buffer summed by NCCL on a stream of its own (--comm nccl)
//   host_memory.h      the host model's own buffer, in place (--device cpu)
//   node_shared.h      --device cpu with the weights in the node's shared memory: only
//                      [b1 | W2 | b2] is summed, between two memory fences
// An engine calls src/comm (comm::Reduction: MPI's all-reduce or the parameter server, chosen
// once too, or comm::Nccl), which calls MPI or NCCL. The step calls sum() in one line; the trainer times the parts
// an engine announces (Parts), lines the ranks up under --profile and names them for NVTX, so
// no engine branches on timing or profiling. Adding an engine: its file here, one line in
// engines.h's registry, its tests in tests/exchange.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nn::exchange {

// The parts of an exchange, as --report times them (its d2h, allreduce and h2d phases, which
// bench/scaling_fit.py reads): the gradient copied off the device, summed, copied back.
enum class Part { Download, Reduce, Upload };

// Hears where an exchange is: begin(p) as part p begins, which ends the part before it; the
// last part ends with the observer (one observer an exchange). Implemented by the trainer
// (src/train/run.h, ExchangeParts).
class Parts {
 public:
  virtual void begin(Part p) = 0;

 protected:
  ~Parts() = default;
};

// The gradient's two regions in the packed buffer [W1 | b1 | W2 | b2] (model/param_layout.h):
// layer 1 [W1 | b1] = [0, layer1), layer 2 [W2 | b2] = [layer1, layer1 + layer2). Layer 2's
// gradient is complete first (the backward pass runs from the output), so its sum starts first.
struct Regions {
  std::size_t layer1 = 0, layer2 = 0;
  std::size_t total() const { return layer1 + layer2; }
};

// T: the gradient's value type (float or double; comm's sums also take 64-bit integers).
template <class T>
class Exchange {
 public:
  virtual ~Exchange() = default;
  // Layer 2's gradient is complete in the model's buffer (the host model's overlapped step calls
  // this between its two backward passes): an engine may start that region's sum now.
  virtual void layer2_ready() {}
  // Sums the model's gradient over the ranks in place: when it returns, the model's gradient
  // buffer holds the sum (a device model's queued copies finish before the step's update).
  // parts: a fresh observer for this exchange (the caller's temporary: its end ends the last part).
  virtual void sum(Parts&& parts) = 0;
  // What the report says of it: layer 1's pieces and each piece's values (1 and layer1 for an
  // engine that sums layer 1 at once), and the MPI_Test rounds made while waiting for a copy.
  virtual std::size_t pieces() const { return 1; }
  virtual std::size_t piece_values() const = 0;
  virtual std::uint64_t polls() const { return 0; }
};

}  // namespace nn::exchange
