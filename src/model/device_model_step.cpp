// DeviceModel's training step (device_model.h): one rank's part of a batch forward and backward,
// in two kinds chosen by enable_fused (step_kind), each its passes in the network's order -- the
// fused step's five kernels (gather_normalize, the forward GEMM with bias + sigmoid, layer2_fused,
// layer2_finish, the dW1 GEMM) or the separate kernels -- run as the two phases (the exchange
// waits on their events: device_model_exchange.cpp), eagerly or as CUDA graphs (run_passes,
// run_phase); the SGD update, and a lone rank's whole fused step. The kernels are kernels/gemm
// and kernels/ops. Tested through tests/train (test_train, test_fused, test_strategies) against
// the reference and finite differences.
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

// fn inside the NVTX range "backward": a new one, or the one already open (forward_backward runs
// layer 1's phase inside layer 2's range).
template <class T>
template <class F>
void DeviceModel<T>::in_backward(F&& fn) {
  if (backward_open_) {
    fn();
    return;
  }
  NN_RANGE("backward");
  backward_open_ = true;
  struct Close {
    bool& open;
    ~Close() { open = false; }
  } close{backward_open_};
  fn();
}

// A phase of two passes. Eagerly: fwd, the phase hook (the forward pass is queued), then bwd and
// `then` in the "backward" range. Under --graph one graph of both passes (no host code can run
// between them), then `then`.
template <class T>
template <class Fwd, class Bwd, class Then>
void DeviceModel<T>::run_passes(const GraphKey& key, Fwd&& fwd, Bwd&& bwd, Then&& then) {
  if (graphs_on_) {
    run_phase(key, [&] {
      fwd();
      bwd();
    });
    then();
    return;
  }
  fwd();
  if (phase_hook_) phase_hook_();
  in_backward([&] {
    bwd();
    then();
  });
}

// The forward pass and layer 2's gradient, in the network's order by the step's kind (the fused
// step writes [b1 | W2 | b2]'s gradient here, b1's ahead of the other phase); records
// Stage::Layer2Grads, then runs `then`.
template <class T>
template <class Then>
void DeviceModel<T>::layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg, Then&& then) {
  stage_batch(offset, b);
  const cudaStream_t s = stream_.get();
  const bool with_reg = add_reg && reg != T(0);
  const StepArgs a{b, inv_B, with_reg ? reg : T(0), T(0), false};
  const auto recorded_then = [&] {
    ev_layer2_.record(s);
    then();
  };
  if (b > 0) {
    const StepKind& k = *kind_;
    run_passes({k.graph_layer2, b, double(inv_B), with_reg}, [&] { (this->*k.forward)(a); },
               [&] { (this->*k.layer2)(a); }, recorded_then);
    return;
  }
  // An empty slice still takes part in the reduction: zero, plus reg * W on the one rank
  // that carries the regulariser (sgd_update(g, W, n, -reg, 0) computes 0 + reg * W).
  if (phase_hook_) phase_hook_();  // no forward pass: the backward starts at once
  in_backward([&] {
    run_phase({Phase::EmptySlice, 0, 0.0, with_reg}, [&] {
      T* G = grads_.get();
      const T* P = params_.get();
      CUDA_CHECK(cudaMemsetAsync(G, 0, grads_.bytes(), s));
      if (with_reg) {
        sgd_update<T>(G + lay_.W1(), P + lay_.W1(), std::size_t(lay_.H) * lay_.D, -reg, T(0), s);
        sgd_update<T>(G + lay_.W2(), P + lay_.W2(), std::size_t(lay_.C) * lay_.H, -reg, T(0), s);
      }
    });
    recorded_then();
  });
}

// The two phases; eagerly layer 1's runs inside layer 2's "backward" range (the course's profile
// shape: forward, then backward, once each per batch), Stage::Layer2Grads recorded in between.
template <class T>
void DeviceModel<T>::forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  layer2_phase(offset, b, inv_B, add_reg, reg, [&] { backward_layer1_phase(b, add_reg, reg); });
}

template <class T>
void DeviceModel<T>::backward_layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  layer2_phase(offset, b, inv_B, add_reg, reg, [] {});
}

template <class T>
void DeviceModel<T>::backward_layer1_phase(int b, bool add_reg, T reg) {
  const bool with_reg = add_reg && reg != T(0);
  if (b > 0) {
    const StepArgs a{b, T(0), with_reg ? reg : T(0), T(0), false};
    const StepKind& k = *kind_;
    in_backward([&] { run_phase({k.graph_layer1, b, 0.0, with_reg}, [&] { (this->*k.layer1)(a); }); });
  }
  ev_all_.record(stream_.get());
}

// A lone rank's whole step: forward, layer 2 with [b1 | W2 | b2]'s update, dW1 with W1's.
template <class T>
void DeviceModel<T>::fused_step(std::size_t offset, int b, T inv_B, T reg, T lr) {
  if (!fused_ || b < 1) throw std::logic_error("fused_step: needs enable_fused(true) and b >= 1");
  stage_batch(offset, b);
  const StepArgs a{b, inv_B, reg, lr, true};
  run_passes({Phase::FusedStep, b, double(inv_B), reg != T(0)}, [&] { fused_forward(a); },
             [&] {
               fused_layer2(a);
               fused_dw1(a);
             },
             [] {});
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

template <class T>
void DeviceModel<T>::add_l2(T reg) {
  if (reg == T(0)) return;
  run_phase({Phase::AddL2, 0, double(reg), 0}, [&] {  // sgd_update(g, W, n, -reg, 0): g + reg * W
    T* G = grads_.get();
    const T* P = params_.get();
    sgd_update<T>(G + lay_.W1(), P + lay_.W1(), std::size_t(lay_.H) * lay_.D, -reg, T(0), stream_.get());
    sgd_update<T>(G + lay_.W2(), P + lay_.W2(), std::size_t(lay_.C) * lay_.H, -reg, T(0), stream_.get());
  });
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
void DeviceModel<T>::forward_and_loss(const StepArgs& a) {
  const cudaStream_t s = stream_.get();
  gather_labels(shard_.labels.get(), batch_idx_.get(), a.b, ylab_.get(), s);
  forward(shard_.images.get(), batch_idx_.get(), a.b);
  // dZ2 = (softmax(Z2) - Y) * inv_B, in place over Z2; loss and hits of the slice accumulate.
  softmax_xent<T>(Z2_.get(), ylab_.get(), lay_.C, a.b, a.inv_B, nullptr, Z2_.get(), loss_.get(), correct_.get(), s);
}

// dW2 = dZ2 A1^T (+ reg W2 through the GEMM's beta * C: one pass, no extra kernel), db2.
template <class T>
void DeviceModel<T>::layer2_grads(const StepArgs& a) {
  const int H = lay_.H, C = lay_.C, b = a.b;
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
    if (a.reg != T(0)) { g.beta = a.reg; g.C = P + lay_.W2(); g.ldc = C; }
    g.D = G + lay_.W2(); g.ldd = C;
    gemm(variant_, g, s);
  }
  row_sums<T>(dZ2, C, b, C, G + lay_.b2(), T(0), s);
}

// dA1 = W2^T dZ2; dZ1 = dA1 o a1 o (1 - a1); dW1 = dZ1 X^T (+ reg W1); db1.
template <class T>
void DeviceModel<T>::layer1_grads(const StepArgs& a) {
  const int D = lay_.D, H = lay_.H, C = lay_.C, b = a.b;
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
    if (a.reg != T(0)) { g.beta = a.reg; g.C = P + lay_.W1(); g.ldc = H; }
    g.D = G + lay_.W1(); g.ldd = H;
    gemm(variant_, g, s);
  }
  row_sums<T>(dA1_.get(), H, b, H, G + lay_.b1(), T(0), s);
}

// X = images(:, batch_idx) / 255 once a step (fused_dw1 reads it again), A1 = sigmoid(W1 X + b1).
template <class T>
void DeviceModel<T>::fused_forward(const StepArgs& a) {
  NN_RANGE("forward");
  gather_normalize<T>(shard_.images.get(), lay_.D, batch_idx_.get(), a.b, X_.get(), stream_.get());
  NN_RANGE("forward GEMM 1");
  const T* P = params_.get();
  GemmArgs<T> g;
  g.M = lay_.H; g.N = a.b; g.K = lay_.D;
  g.A = P + lay_.W1(); g.lda = lay_.H;
  g.B = X_.get(); g.ldb = lay_.D;
  g.D = A1_.get(); g.ldd = lay_.H;
  g.epilogue = Epilogue::BiasSigmoid; g.bias = P + lay_.b1();
  gemm(variant_, g, stream_.get());
}

// Layer 2 and dZ1 (over A1), then [b1 | W2 | b2]: stepped in place (update) or its gradient
// written to grads_ for the exchange. reg: 0 on the ranks that do not carry the L2 term.
template <class T>
void DeviceModel<T>::fused_layer2(const StepArgs& a) {
  NN_RANGE("layer 2, fused");
  const int H = lay_.H, C = lay_.C;
  const cudaStream_t s = stream_.get();
  T* P = params_.get();
  layer2_fused<T>(A1_.get(), H, C, a.b, P + lay_.W2(), P + lay_.b2(), shard_.labels.get(), batch_idx_.get(), a.inv_B,
                  parts_.get(), loss_parts_.get(), hit_parts_.get(), s);
  layer2_finish<T>(parts_.get(), layer2_tiles(a.b), H, C, a.reg, a.lr, P + lay_.b1(),
                   a.update ? nullptr : grads_.get() + lay_.b1(), loss_parts_.get(), hit_parts_.get(), loss_.get(),
                   counts_.get(), s);
}

// dW1 = dZ1 X^T (+ reg W1), X the copy fused_forward made; with update, W1 -= lr * dW1 in the
// GEMM's epilogue (no gradient is written).
template <class T>
void DeviceModel<T>::fused_dw1(const StepArgs& a) {
  NN_RANGE("backward GEMM 3");
  T* P = params_.get();
  T* W1 = P + lay_.W1();
  GemmArgs<T> g;
  g.opB = Op::T;
  g.M = lay_.H; g.N = lay_.D; g.K = a.b;
  g.A = A1_.get(); g.lda = lay_.H;  // dZ1
  g.B = X_.get(); g.ldb = lay_.D;
  if (a.reg != T(0)) { g.beta = a.reg; g.C = W1; g.ldc = lay_.H; }
  if (a.update) {
    g.epilogue = Epilogue::Step; g.step_lr = a.lr;
    g.C = W1; g.ldc = lay_.H;
    g.D = W1; g.ldd = lay_.H;
  } else {
    g.D = grads_.get() + lay_.W1(); g.ldd = lay_.H;
  }
  gemm(variant_, g, stream_.get());
}

// The two kinds of step, each its passes in the network's order: forward, layer 2, layer 1.
template <class T>
const typename DeviceModel<T>::StepKind& DeviceModel<T>::step_kind(bool fused) {
  using M = DeviceModel<T>;
  // gather + two GEMMs, softmax + CE; dW2, db2; dA1, dZ1, dW1, db1.
  static const StepKind separate{Phase::ForwardLayer2, Phase::Layer1, &M::forward_and_loss, &M::layer2_grads,
                                 &M::layer1_grads};
  // gather_normalize, GEMM + bias + sigmoid; layer2_fused, layer2_finish; the dW1 GEMM.
  static const StepKind fused_kind{Phase::FusedForwardLayer2, Phase::FusedDw1, &M::fused_forward, &M::fused_layer2,
                                   &M::fused_dw1};
  return fused ? fused_kind : separate;
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
  template void DeviceModel<T>::add_l2(T); \
  template void DeviceModel<T>::forward(const std::uint8_t*, const std::uint32_t*, int, bool); \
  template void DeviceModel<T>::forward_and_loss(const StepArgs&); \
  template void DeviceModel<T>::layer2_grads(const StepArgs&); \
  template void DeviceModel<T>::layer1_grads(const StepArgs&); \
  template void DeviceModel<T>::fused_forward(const StepArgs&); \
  template void DeviceModel<T>::fused_layer2(const StepArgs&); \
  template void DeviceModel<T>::fused_dw1(const StepArgs&); \
  template const DeviceModel<T>::StepKind& DeviceModel<T>::step_kind(bool); \

NN_INSTANTIATE(float)
NN_INSTANTIATE(double)
#undef NN_INSTANTIATE

}  // namespace nn::model
