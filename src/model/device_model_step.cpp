// DeviceModel's training step (device_model.h): one rank's part of a batch forward and backward
// -- the fused step's five kernels (gather_normalize, the forward GEMM with bias + sigmoid,
// layer2_fused, layer2_finish, the dW1 GEMM) or the separate kernels -- in the phases whose
// events the exchange waits on (device_model_exchange.cpp), the SGD update, and a lone rank's
// whole fused step. The kernels are kernels/gemm and kernels/ops. Tested through tests/train
// (test_train, test_fused, test_strategies) against the reference and finite differences.
#include <cstddef>
#include <stdexcept>

#include "common/check.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "model/device_model.h"
#include "ops/layer2.h"
#include "ops/ops.h"

namespace nn::model {

template <class T>
void DeviceModel<T>::stage_batch(std::size_t offset, int b) {
  if (b < 0 || b > max_cols_ || offset + std::size_t(b) > shard_.n)
    throw std::out_of_range("forward_backward: slice outside the shard or the activations");
  // The batch's indices move to a buffer of their own, so every step's launches take the
  // same pointers: that is what lets one captured graph serve every batch.
  if (b > 0)
    CUDA_CHECK(cudaMemcpyAsync(batch_idx_.get(), order_.get() + offset, sizeof(std::uint32_t) * b,
                               cudaMemcpyDeviceToDevice, stream_.get()));
}

template <class T>
void DeviceModel<T>::forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  if (graphs_on_ || b == 0) {
    backward_layer2_phase(offset, b, inv_B, add_reg, reg);
    backward_layer1_phase(b, add_reg, reg);
    return;
  }
  // The same launches as the two phases, under one "backward" NVTX range (the course's
  // profile shape: forward, then backward, once each per batch), the event in between.
  stage_batch(offset, b);
  const bool with_reg = add_reg && reg != T(0);
  if (fused_) fused_forward(b);
  else forward_and_loss(b, inv_B);
  if (phase_hook_) phase_hook_();  // the forward pass and the loss are queued
  {
    NN_RANGE("backward");
    if (fused_) fused_layer2(b, inv_B, with_reg ? reg : T(0), T(0), false);
    else layer2_grads(b, with_reg, reg);
    ev_layer2_.record(stream_.get());
    if (fused_) fused_dw1(b, with_reg ? reg : T(0), T(0), false);
    else layer1_grads(b, with_reg, reg);
  }
  ev_all_.record(stream_.get());
}

template <class T>
void DeviceModel<T>::backward_layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  stage_batch(offset, b);
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  const cudaStream_t s = stream_.get();
  T* P = params_.get();
  T* G = grads_.get();
  const bool with_reg = add_reg && reg != T(0);
  if (b == 0) {
    // An empty slice still takes part in the reduction: zero, plus reg * W on the one rank
    // that carries the regulariser (sgd_update(g, W, n, -reg, 0) computes 0 + reg * W).
    if (phase_hook_) phase_hook_();  // no forward pass: the backward starts at once
    NN_RANGE("backward");
    run_phase({Phase::EmptySlice, 0, 0.0, with_reg}, [&] {
      CUDA_CHECK(cudaMemsetAsync(G, 0, grads_.bytes(), s));
      if (with_reg) {
        sgd_update<T>(G + lay_.W1(), P + lay_.W1(), std::size_t(H) * D, -reg, T(0), s);
        sgd_update<T>(G + lay_.W2(), P + lay_.W2(), std::size_t(C) * H, -reg, T(0), s);
      }
    });
    ev_layer2_.record(s);
    return;
  }
  // The fused step writes [b1 | W2 | b2]'s gradient here (b1's too, ahead of the other phase).
  const T freg = with_reg ? reg : T(0);
  const auto fwd = [&] {
    if (fused_) fused_forward(b);
    else forward_and_loss(b, inv_B);
  };
  const auto bwd = [&] {
    if (fused_) fused_layer2(b, inv_B, freg, T(0), false);
    else layer2_grads(b, with_reg, reg);
  };
  if (graphs_on_) {  // one graph: no host code can run between the two passes
    run_phase({fused_ ? Phase::FusedForwardLayer2 : Phase::ForwardLayer2, b, double(inv_B), with_reg}, [&] {
      fwd();
      bwd();
    });
  } else {
    fwd();
    if (phase_hook_) phase_hook_();  // the forward pass and the loss are queued
    NN_RANGE("backward");
    bwd();
  }
  ev_layer2_.record(s);
}

template <class T>
void DeviceModel<T>::backward_layer1_phase(int b, bool add_reg, T reg) {
  const bool with_reg = add_reg && reg != T(0);
  if (b > 0) {
    NN_RANGE("backward");
    if (fused_) run_phase({Phase::FusedDw1, b, 0.0, with_reg}, [&] { fused_dw1(b, with_reg ? reg : T(0), T(0), false); });
    else run_phase({Phase::Layer1, b, 0.0, with_reg}, [&] { layer1_grads(b, with_reg, reg); });
  }
  ev_all_.record(stream_.get());
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
void DeviceModel<T>::sgd_step(T lr) {
  NN_RANGE("step");
  run_phase({Phase::SgdStep, 0, double(lr), 0},
            [&] { sgd_update<T>(params_.get(), grads_.get(), params_.size(), lr, T(0), stream_.get()); });
}

// X = images(:, idx) / 255, A1 = sigmoid(W1 X + b1), Z2 = W2 A1 (+ b2) (columns 0..b-1).
template <class T>
void DeviceModel<T>::forward(const std::uint8_t* images, const std::uint32_t* idx, int b, bool bias2) {
  NN_RANGE("forward");
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  const cudaStream_t s = stream_.get();
  const T* P = params_.get();
  gather_normalize<T>(images, D, idx, b, X_.get(), s);
  if (H == 0) {  // a model-parallel rank without hidden units adds nothing to the scores
    CUDA_CHECK(cudaMemsetAsync(Z2_.get(), 0, sizeof(T) * std::size_t(C) * b, s));
    return;
  }
  {
    NN_RANGE("forward GEMM 1");
    GemmArgs<T> g;
    g.M = H; g.N = b; g.K = D;
    g.A = P + lay_.W1(); g.lda = H;
    g.B = X_.get(); g.ldb = D;
    g.D = A1_.get(); g.ldd = H;
    g.epilogue = Epilogue::BiasSigmoid; g.bias = P + lay_.b1();
    gemm(variant_, g, s);
  }
  {
    NN_RANGE("forward GEMM 2");
    GemmArgs<T> g;
    g.M = C; g.N = b; g.K = H;
    g.A = P + lay_.W2(); g.lda = C;
    g.B = A1_.get(); g.ldb = H;
    g.D = Z2_.get(); g.ldd = C;
    if (bias2) { g.epilogue = Epilogue::Bias; g.bias = P + lay_.b2(); }
    gemm(variant_, g, s);
  }
}

template <class T>
void DeviceModel<T>::forward_and_loss(int b, T inv_B) {
  const cudaStream_t s = stream_.get();
  gather_labels(shard_.labels.get(), batch_idx_.get(), b, ylab_.get(), s);
  forward(shard_.images.get(), batch_idx_.get(), b);
  // dZ2 = (softmax(Z2) - Y) * inv_B, in place over Z2; loss and hits of the slice accumulate.
  softmax_xent<T>(Z2_.get(), ylab_.get(), lay_.C, b, inv_B, nullptr, Z2_.get(), loss_.get(), correct_.get(), s);
}

// dW2 = dZ2 A1^T (+ reg W2 through the GEMM's beta * C: one pass, no extra kernel), db2.
template <class T>
void DeviceModel<T>::layer2_grads(int b, bool with_reg, T reg) {
  const int H = lay_.H, C = lay_.C;
  const cudaStream_t s = stream_.get();
  T* P = params_.get();
  T* G = grads_.get();
  const T* dZ2 = Z2_.get();
  if (H > 0) {
    NN_RANGE("backward GEMM 1");
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = C; g.N = H; g.K = b;
    g.A = dZ2; g.lda = C;
    g.B = A1_.get(); g.ldb = H;
    if (with_reg) { g.beta = reg; g.C = P + lay_.W2(); g.ldc = C; }
    g.D = G + lay_.W2(); g.ldd = C;
    gemm(variant_, g, s);
  }
  row_sums<T>(dZ2, C, b, C, G + lay_.b2(), T(0), s);
}

// dA1 = W2^T dZ2; dZ1 = dA1 o a1 o (1 - a1); dW1 = dZ1 X^T (+ reg W1); db1.
template <class T>
void DeviceModel<T>::layer1_grads(int b, bool with_reg, T reg) {
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  if (H == 0) return;
  const cudaStream_t s = stream_.get();
  T* P = params_.get();
  T* G = grads_.get();
  {
    NN_RANGE("backward GEMM 2");
    GemmArgs<T> g;
    g.opA = Op::T;
    g.M = H; g.N = b; g.K = C;
    g.A = P + lay_.W2(); g.lda = C;
    g.B = Z2_.get(); g.ldb = C;
    g.D = dA1_.get(); g.ldd = H;
    gemm(variant_, g, s);
  }
  sigmoid_backward<T>(dA1_.get(), A1_.get(), std::size_t(H) * b, dA1_.get(), s);
  {
    NN_RANGE("backward GEMM 3");
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = H; g.N = D; g.K = b;
    g.A = dA1_.get(); g.lda = H;
    g.B = X_.get(); g.ldb = D;
    if (with_reg) { g.beta = reg; g.C = P + lay_.W1(); g.ldc = H; }
    g.D = G + lay_.W1(); g.ldd = H;
    gemm(variant_, g, s);
  }
  row_sums<T>(dA1_.get(), H, b, H, G + lay_.b1(), T(0), s);
}

// X = images(:, batch_idx) / 255 once a step (fused_dw1 reads it again), A1 = sigmoid(W1 X + b1).
template <class T>
void DeviceModel<T>::fused_forward(int b) {
  NN_RANGE("forward");
  gather_normalize<T>(shard_.images.get(), lay_.D, batch_idx_.get(), b, X_.get(), stream_.get());
  NN_RANGE("forward GEMM 1");
  const T* P = params_.get();
  GemmArgs<T> g;
  g.M = lay_.H; g.N = b; g.K = lay_.D;
  g.A = P + lay_.W1(); g.lda = lay_.H;
  g.B = X_.get(); g.ldb = lay_.D;
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

// dW1 = dZ1 X^T (+ reg W1), X the copy fused_forward made; with step, W1 -= lr * dW1 in the
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
  g.B = X_.get(); g.ldb = lay_.D;
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

// device_model.cpp instantiates the class (template class); these are this file's members.
#define NN_INSTANTIATE(T) \
  template void DeviceModel<T>::stage_batch(std::size_t, int); \
  template void DeviceModel<T>::forward_backward(std::size_t, int, T, bool, T); \
  template void DeviceModel<T>::backward_layer2_phase(std::size_t, int, T, bool, T); \
  template void DeviceModel<T>::backward_layer1_phase(int, bool, T); \
  template void DeviceModel<T>::fused_step(std::size_t, int, T, T, T); \
  template void DeviceModel<T>::wait_step_before_last(); \
  template void DeviceModel<T>::sgd_step(T); \
  template void DeviceModel<T>::forward(const std::uint8_t*, const std::uint32_t*, int, bool); \
  template void DeviceModel<T>::forward_and_loss(int, T); \
  template void DeviceModel<T>::layer2_grads(int, bool, T); \
  template void DeviceModel<T>::layer1_grads(int, bool, T); \
  template void DeviceModel<T>::fused_forward(int); \
  template void DeviceModel<T>::fused_layer2(int, T, T, T, bool); \
  template void DeviceModel<T>::fused_dw1(int, T, T, bool); \

NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
#undef NN_INSTANTIATE

}  // namespace nn::model
