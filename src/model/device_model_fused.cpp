// DeviceModel's fused step (--fused, device_model.h): the forward GEMM reading the batch from
// the resident uint8 images, one layer-2 kernel, the dW1 GEMM (with the SGD step in its
// epilogue for a lone rank) and one small kernel for [b1 | W2 | b2]; the loss and hits stay on
// the device for the epoch. Tested by tests/train/test_fused.cpp (against the reference and the
// unfused path) and, through the default configuration, by every trainer test.
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "model/device_model.h"
#include "ops/layer2.h"
#include "ops/ops.h"

namespace nn::train {

template <class T>
void DeviceModel<T>::enable_fused(bool on, bool gather_in_gemm) {
  if (on && (lay_.H < 1 || lay_.C > kLayer2MaxClasses || !gemm_has_fused_extras(variant_)))
    throw std::invalid_argument("DeviceModel: the fused step needs H >= 1, at most " +
                                std::to_string(kLayer2MaxClasses) + " classes and GEMM variant 4 or 5 (got H " +
                                std::to_string(lay_.H) + ", C " + std::to_string(lay_.C) + ", variant " +
                                std::to_string(variant_) + ")");
  if (on && parts_.size() == 0) {
    const int tiles = layer2_tiles(max_cols_);
    parts_ = DeviceBuffer<T>(std::size_t(tiles) * layer2_part_size(lay_.H, lay_.C));
    loss_parts_ = DeviceBuffer<double>(std::size_t(tiles));
    hit_parts_ = DeviceBuffer<unsigned>(std::size_t(tiles));
    counts_ = DeviceBuffer<unsigned>(3);
  }
  fused_ = on;
  gather_in_gemm_ = gather_in_gemm;
  graphs_.clear();  // captured phases are the other path's
  reset_stats();
}

// A1 = sigmoid(W1 X + b1), X(:, j) = images(:, batch_idx[j]) / 255 read inside the GEMM's loads.
template <class T>
void DeviceModel<T>::fused_forward(int b) {
  NN_RANGE("forward");
  // --fused-gather copy: the normalised batch, which fused_dw1 reads again.
  if (!gather_in_gemm_) gather_normalize<T>(shard_.images.get(), lay_.D, batch_idx_.get(), b, X_.get(), stream_.get());
  NN_RANGE("forward GEMM 1");
  const T* P = params_.get();
  GemmArgs<T> g;
  g.M = lay_.H; g.N = b; g.K = lay_.D;
  g.A = P + lay_.W1(); g.lda = lay_.H;
  if (gather_in_gemm_) { g.B_u8 = shard_.images.get(); g.B_cols = batch_idx_.get(); }
  else g.B = X_.get();
  g.ldb = lay_.D;
  g.D = A1_.get(); g.ldd = lay_.H;
  g.epilogue = Epilogue::BiasSigmoid; g.bias = P + lay_.b1();
  gemm(variant_, g, stream_.get());
}

// Layer 2 and dZ1 (over A1), then [b1 | W2 | b2]: stepped in place (step) or its gradient
// written to grads_ for the exchange. reg: 0 on the ranks that do not carry the L2 term.
template <class T>
void DeviceModel<T>::fused_layer2(int b, T inv_B, T reg, T lr, bool step) {
  NN_RANGE("layer 2, fused");
  const int H = lay_.H, C = lay_.C;
  const cudaStream_t s = stream_.get();
  T* P = params_.get();
  layer2_fused<T>(A1_.get(), H, C, b, P + lay_.W2(), P + lay_.b2(), shard_.labels.get(), batch_idx_.get(), inv_B,
                  parts_.get(), loss_parts_.get(), hit_parts_.get(), s);
  layer2_finish<T>(parts_.get(), layer2_tiles(b), H, C, reg, lr, P + lay_.b1(),
                   step ? nullptr : grads_.get() + lay_.b1(), loss_parts_.get(), hit_parts_.get(), loss_.get(),
                   counts_.get(), s);
}

// dW1 = dZ1 X^T (+ reg W1), X gathered again from the images; with step, W1 -= lr * dW1 in the
// GEMM's epilogue (no gradient is written).
template <class T>
void DeviceModel<T>::fused_dw1(int b, T reg, T lr, bool step) {
  NN_RANGE("backward GEMM 3");
  T* P = params_.get();
  T* W1 = P + lay_.W1();
  GemmArgs<T> g;
  g.opB = Op::T;
  g.M = lay_.H; g.N = lay_.D; g.K = b;
  g.A = A1_.get(); g.lda = lay_.H;  // dZ1
  if (gather_in_gemm_) { g.B_u8 = shard_.images.get(); g.B_cols = batch_idx_.get(); }
  else g.B = X_.get();  // fused_forward's copy
  g.ldb = lay_.D;
  if (reg != T(0)) { g.beta = reg; g.C = W1; g.ldc = lay_.H; }
  if (step) {
    g.epilogue = Epilogue::Step; g.step_lr = lr;
    g.C = W1; g.ldc = lay_.H;
    g.D = W1; g.ldd = lay_.H;
  } else {
    g.D = grads_.get() + lay_.W1(); g.ldd = lay_.H;
  }
  gemm(variant_, g, stream_.get());
}

// A lone rank's whole step: forward, layer 2 with [b1 | W2 | b2]'s update, dW1 with W1's.
template <class T>
void DeviceModel<T>::fused_step(std::size_t offset, int b, T inv_B, T reg, T lr) {
  if (!fused_ || b < 1) throw std::logic_error("fused_step: needs enable_fused(true) and b >= 1");
  stage_batch(offset, b);
  const bool with_reg = reg != T(0);
  const auto backward = [&] {
    fused_layer2(b, inv_B, reg, lr, true);
    fused_dw1(b, reg, lr, true);
  };
  if (graphs_on_) {
    run_phase({Phase::FusedStep, b, double(inv_B), with_reg}, [&] {
      fused_forward(b);
      backward();
    });
  } else {
    fused_forward(b);
    if (phase_hook_) phase_hook_();  // the forward pass is queued
    NN_RANGE("backward");
    backward();
  }
  ev_layer2_.record(stream_.get());
  ev_all_.record(stream_.get());
  ev_step_[step_parity_].record(stream_.get());
  step_parity_ ^= 1;
}

template <class T>
std::string DeviceModel<T>::enable_persistent(bool on, int B) {
  persistent_ = false;
  if (!on) return "";
  if (!fused_) return "it needs the fused step";
  if (B < 1 || B > max_cols_) return "the batch does not fit the model's columns";
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const PersistentPlan plan = nn::persistent_plan<T>(lay_.D, lay_.H, B, dev);
  if (plan.blocks < 1) return "the device cannot launch it cooperatively";
  if (plan.scratch * sizeof(T) > kPersistentMaxScratch)
    return "its partial sums would take " + std::to_string(plan.scratch * sizeof(T) >> 20) + " MiB (at most " +
           std::to_string(kPersistentMaxScratch >> 20) + ")";
  if (lay_.C > kLayer2MaxClasses) return "it handles at most " + std::to_string(kLayer2MaxClasses) + " classes";
  pplan_ = plan;
  pscratch_ = DeviceBuffer<T>(plan.scratch);
  pdz1_ = DeviceBuffer<T>(std::size_t(lay_.H) * B);
  ploss_ = DeviceBuffer<double>(std::size_t(B));
  phits_ = DeviceBuffer<unsigned>(std::size_t(B));
  persistent_ = true;
  return "";
}

template <class T>
void DeviceModel<T>::persistent_steps(std::size_t offset, int steps, int B, T reg, T lr) {
  if (!persistent_ || steps < 1) throw std::logic_error("persistent_steps: needs enable_persistent and steps >= 1");
  NN_RANGE("persistent steps");
  PersistentShape<T> a;
  a.D = lay_.D, a.H = lay_.H, a.C = lay_.C, a.B = B, a.steps = steps;
  a.n = shard_.n, a.offset = offset, a.lr = lr, a.reg = reg;
  a.tile_d = pplan_.tile_d, a.slices = pplan_.slices;
  T* P = params_.get();
  nn::persistent_steps<T>(pplan_, a, shard_.images.get(), shard_.labels.get(), order_.get(), P, pscratch_.get(),
                          A1_.get(), pdz1_.get(), Z2_.get(), ploss_.get(), phits_.get(), loss_.get(),
                          counts_.get(), stream_.get());
  ev_layer2_.record(stream_.get());
  ev_all_.record(stream_.get());
  ev_step_[step_parity_].record(stream_.get());
  step_parity_ ^= 1;
}

// The host waits for the step before the last one queued: the device always has the next step
// queued (it never waits for the host), and the host, whose progress the step timeout watches
// (src/train/watchdog.h), stays within one step of the device, also where an epoch takes longer
// than --timeout (the emulator with large shapes, GPGPU-Sim's cycle models).
template <class T>
void DeviceModel<T>::wait_step_before_last() {
  if (step_pending_) ev_step_[step_parity_].sync();
  step_pending_ = true;
}

template <class T>
void DeviceModel<T>::set_stats(double loss_sum, std::uint64_t correct) {
  loss_.upload(&loss_sum, 1);
  if (!fused_) {
    const unsigned c = unsigned(correct);
    correct_.upload(&c, 1);
    return;
  }
  const unsigned c[3] = {unsigned(correct), 0u, 0u};
  counts_.upload(c, 3);
}

template <class T>
unsigned DeviceModel<T>::first_nonfinite_step() const {
  if (!fused_) return 0;
  unsigned c[3] = {0, 0, 0};
  counts_.download(c, 3);
  return c[2];
}

template <class T>
std::uint64_t DeviceModel<T>::kernels_issued() const {
  return launch_counter().load() + graph_kernels_ - captured_launches_;
}

// This file's members only (device_model.cpp instantiates the class).
#define NN_FUSED_MEMBERS(T)                                                                  \
  template void DeviceModel<T>::enable_fused(bool, bool);                                          \
  template std::string DeviceModel<T>::enable_persistent(bool, int);                         \
  template void DeviceModel<T>::persistent_steps(std::size_t, int, int, T, T);                \
  template void DeviceModel<T>::fused_forward(int);                                          \
  template void DeviceModel<T>::fused_layer2(int, T, T, T, bool);                            \
  template void DeviceModel<T>::fused_dw1(int, T, T, bool);                                  \
  template void DeviceModel<T>::fused_step(std::size_t, int, T, T, T);                       \
  template void DeviceModel<T>::set_stats(double, std::uint64_t);                            \
  template void DeviceModel<T>::wait_step_before_last();                                     \
  template unsigned DeviceModel<T>::first_nonfinite_step() const;                            \
  template std::uint64_t DeviceModel<T>::kernels_issued() const;
NN_FUSED_MEMBERS(float)
NN_FUSED_MEMBERS(double)
#undef NN_FUSED_MEMBERS

}  // namespace nn::train
