// The packed parameter layout and the stages of a step, shared by every model type (the
// CUDA DeviceModel, device_model.h, and the host CpuModel, cpu_model.h). No CUDA here, so
// host-only code can include it. Tested through tests/train (every model's tests).
#pragma once
#include <cstddef>

namespace nn::model {

// Offsets of the four tensors inside the packed parameter (and gradient) buffer
// [W1 | b1 | W2 | b2]: one buffer, so one D2H copy, one allreduce and one SGD launch move
// all of them.
struct ParamLayout {
  int D, H, C;
  std::size_t W1() const { return 0; }
  std::size_t b1() const { return std::size_t(H) * D; }
  std::size_t W2() const { return b1() + H; }
  std::size_t b2() const { return W2() + std::size_t(C) * H; }
  std::size_t total() const { return b2() + C; }
};

// Where a step stands, for the events the trainer waits on.
enum class Stage { Layer2Grads, AllGrads, PartialScores };

}  // namespace nn::model
