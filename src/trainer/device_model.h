// The network on one device: packed parameters and gradients, activations for one batch
// slice, forward/backward through the GEMM dispatcher and the ops kernels, SGD, evaluation.
// Host code (no MPI); tested through tests/trainer/test_train.cpp against the reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/device_buffer.h"

namespace nn::train {

// uint8 images (D x n, column-major: one image per column) and their labels, resident on
// the device: uploaded once, never copied again (the course's profile lost half of each
// batch to re-copying images).
struct DeviceImages {
  DeviceImages() = default;
  DeviceImages(const std::uint8_t* images, const std::uint8_t* labels, std::size_t n, int D);
  DeviceBuffer<std::uint8_t> images, labels;
  std::size_t n = 0;
  int D = 0;
};

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

template <class T>
class DeviceModel {
 public:
  // max_cols: the most columns one forward pass handles (the largest local slice, or the
  // evaluation chunk). gemm_variant: nn::gemm's variant number, checked by the caller.
  DeviceModel(int D, int H, int C, int max_cols, int gemm_variant);

  const ParamLayout& layout() const { return lay_; }
  std::size_t num_params() const { return lay_.total(); }

  // Packed [W1 | b1 | W2 | b2], column-major, host <-> device.
  void set_params(const std::vector<T>& packed);
  std::vector<T> get_params() const;
  std::vector<T> get_grads() const;

  // The shard to train on, and the epoch's visiting order of its positions (uploaded once
  // per epoch: a batch's local indices are then just an offset into it, no per-batch copy).
  void set_train_data(DeviceImages&& shard);
  void set_order(const std::vector<std::uint32_t>& order);

  // Gradient of this rank's part of a global batch: the columns order[offset .. offset+b).
  // inv_B = 1 / (GLOBAL batch size), so the sum of every rank's gradient is the batch's.
  // add_reg: add reg * W to the weight gradients (exactly one rank does, so the sum over
  // ranks holds it once). b == 0 is legal: the gradient is then zero (or reg * W only).
  // Cross-entropy sum and correct count of the slice are accumulated on the device.
  void forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg);

  // Called on the host between the forward pass's launches and the backward pass's in every
  // forward_backward (at once for an empty slice), e.g. to record a CUDA event there: the
  // trainer's --report times the two passes apart with it. Empty (default): nothing is called.
  void set_phase_hook(std::function<void()> hook) { phase_hook_ = std::move(hook); }

  // The gradient buffer, for the reduction between the two copies.
  void download_grads(T* host) const;
  void upload_grads(const T* host);
  // p <- p - lr * g for every entry: the regulariser is already inside g (see trainer.cpp).
  void sgd_step(T lr);

  // Training statistics accumulated by forward_backward since the last reset.
  void reset_stats();
  void read_stats(double& loss_sum, std::uint64_t& correct) const;

  // ||W1||_F^2 + ||W2||_F^2 (accumulated in double), for the reported loss.
  double weight_sq_norm() const;

  // Number of correctly classified images of `data` (forward passes in chunks of max_cols).
  std::uint64_t evaluate(const DeviceImages& data);

 private:
  void forward(const std::uint8_t* images, const std::uint32_t* idx, int b);

  ParamLayout lay_;
  int max_cols_, variant_;
  DeviceBuffer<T> params_, grads_;
  DeviceBuffer<T> X_, A1_, Z2_, dA1_;       // D x cols, H x cols, C x cols, H x cols
  DeviceBuffer<std::uint8_t> ylab_;         // labels of the slice
  DeviceBuffer<std::uint32_t> order_, iota_;  // epoch order of the shard; 0..max_cols-1
  DeviceBuffer<double> loss_;
  DeviceBuffer<unsigned> correct_;
  DeviceImages shard_;
  std::function<void()> phase_hook_;
};

}  // namespace nn::train
