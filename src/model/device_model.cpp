// DeviceModel: forward/backward of one rank's batch slice with the GEMM dispatcher and the
// ops kernels, queued on the model's stream; --graph replays of each phase; the model-parallel
// phases. The copies for the exchanges (on a second stream, after the phase events: the
// overlap) are in device_model_copies.cpp.
// Tested through tests/train/test_train.cpp and test_strategies.cpp (reference replay).
#include "model/device_model.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "ops/ops.h"

namespace nn::train {

DeviceImages::DeviceImages(const std::uint8_t* img, const std::uint8_t* lab, std::size_t n_, int D_)
    : images(n_ * std::size_t(D_)), labels(n_), n(n_), D(D_) {
  images.upload(img, n * std::size_t(D));
  labels.upload(lab, n);
}

template <class T>
DeviceModel<T>::DeviceModel(int D, int H, int C, int max_cols, int gemm_variant)
    : lay_{D, H, C},
      max_cols_(max_cols < 1 ? 1 : max_cols),
      variant_(gemm_variant),
      params_(lay_.total()),
      grads_(lay_.total()),
      X_(std::size_t(D) * max_cols_),
      A1_(std::size_t(H) * max_cols_),
      Z2_(std::size_t(C) * max_cols_),
      dA1_(std::size_t(H) * max_cols_),
      ylab_(max_cols_),
      iota_(max_cols_),
      batch_idx_(max_cols_),
      loss_(1),
      correct_(1) {
  if (D < 1 || H < 0 || C < 1) throw std::invalid_argument("DeviceModel: D, C must be positive, H >= 0");
  if (!gemm_variant_available(gemm_variant))
    throw std::invalid_argument(std::string("DeviceModel: GEMM variant ") +
                                std::to_string(gemm_variant) + " is not available in this build");
  // Evaluation gathers chunk columns through the identity index list.
  std::vector<std::uint32_t> ids(max_cols_);
  std::iota(ids.begin(), ids.end(), 0u);
  iota_.upload(ids.data(), ids.size());
  reset_stats();
}

template <class T>
void DeviceModel<T>::set_params(const std::vector<T>& packed) {
  if (packed.size() != lay_.total()) throw std::invalid_argument("set_params: wrong size");
  params_.upload(packed.data(), packed.size());
}

template <class T>
std::vector<T> DeviceModel<T>::get_params() const {
  std::vector<T> out(lay_.total());
  params_.download(out.data(), out.size());
  return out;
}

template <class T>
std::vector<T> DeviceModel<T>::get_grads() const {
  std::vector<T> out(lay_.total());
  grads_.download(out.data(), out.size());
  return out;
}

template <class T>
void DeviceModel<T>::set_train_data(DeviceImages&& shard) {
  if (shard.n > 0 && shard.D != lay_.D) throw std::invalid_argument("set_train_data: image size != D");
  shard_ = std::move(shard);
  graphs_.clear();  // captured launches point at the old images
}

template <class T>
void DeviceModel<T>::set_order(const std::vector<std::uint32_t>& order) {
  if (order.size() != shard_.n) throw std::invalid_argument("set_order: order size != shard size");
  if (order_.size() != order.size()) order_ = DeviceBuffer<std::uint32_t>(order.size());
  order_.upload(order.data(), order.size());
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
void DeviceModel<T>::stage_batch(std::size_t offset, int b) {
  if (b < 0 || b > max_cols_ || offset + std::size_t(b) > shard_.n)
    throw std::out_of_range("forward_backward: slice outside the shard or the activations");
  // The batch's indices move to a buffer of their own, so every step's launches take the
  // same pointers: that is what lets one captured graph serve every batch.
  if (b > 0)
    CUDA_CHECK(cudaMemcpyAsync(batch_idx_.get(), order_.get() + offset, sizeof(std::uint32_t) * b,
                               cudaMemcpyDeviceToDevice, stream_.get()));
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
void DeviceModel<T>::forward_and_loss(int b, T inv_B) {
  const cudaStream_t s = stream_.get();
  gather_labels(shard_.labels.get(), batch_idx_.get(), b, ylab_.get(), s);
  forward(shard_.images.get(), batch_idx_.get(), b);
  // dZ2 = (softmax(Z2) - Y) * inv_B, in place over Z2; loss and hits of the slice accumulate.
  softmax_xent<T>(Z2_.get(), ylab_.get(), lay_.C, b, inv_B, nullptr, Z2_.get(), loss_.get(), correct_.get(), s);
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

template <class T>
void DeviceModel<T>::partial_scores_phase(std::size_t offset, int b, bool add_b2) {
  stage_batch(offset, b);
  if (add_b2 && lay_.H == 0) throw std::invalid_argument("partial_scores_phase: b2 needs hidden units");
  NN_RANGE("forward (model parallel)");
  run_phase({Phase::PartialScores, b, 0.0, add_b2}, [&] {
    gather_labels(shard_.labels.get(), batch_idx_.get(), b, ylab_.get(), stream_.get());
    forward(shard_.images.get(), batch_idx_.get(), b, add_b2);
  });
  ev_scores_.record(stream_.get());
}

template <class T>
void DeviceModel<T>::model_backward_phase(int b, T inv_B, T reg, bool stats) {
  NN_RANGE("backward (model parallel)");
  const bool with_reg = reg != T(0);
  run_phase({Phase::ModelBackward, b, double(inv_B), stats}, [&] {
    softmax_xent<T>(Z2_.get(), ylab_.get(), lay_.C, b, inv_B, nullptr, Z2_.get(),
                    stats ? loss_.get() : nullptr, stats ? correct_.get() : nullptr, stream_.get());
    layer2_grads(b, with_reg, reg);
    layer1_grads(b, with_reg, reg);
  });
  ev_all_.record(stream_.get());
}

template <class T>
void DeviceModel<T>::sgd_step(T lr) {
  NN_RANGE("step");
  run_phase({Phase::SgdStep, 0, double(lr), 0},
            [&] { sgd_update<T>(params_.get(), grads_.get(), params_.size(), lr, T(0), stream_.get()); });
}

template <class T>
void DeviceModel<T>::reset_stats() {
  loss_.zero();
  correct_.zero();
  if (counts_.size()) counts_.zero();
}

// Unfused: the step's sums (softmax_xent's atomics); fused: the epoch's so far (layer2_finish).
template <class T>
void DeviceModel<T>::read_stats(double& loss_sum, std::uint64_t& correct) const {
  unsigned c = 0;
  loss_.download(&loss_sum, 1);
  (fused_ ? counts_ : correct_).download(&c, 1);
  correct = c;
}

template <class T>
double DeviceModel<T>::weight_sq_norm() const {
  DeviceBuffer<double> acc(1);
  acc.zero();
  const cudaStream_t s = stream_.get();
  sum_squares<T>(params_.get() + lay_.W1(), std::size_t(lay_.H) * lay_.D, acc.get(), s);
  sum_squares<T>(params_.get() + lay_.W2(), std::size_t(lay_.C) * lay_.H, acc.get(), s);
  double v = 0;
  acc.download(&v, 1);
  return v;
}

template <class T>
std::uint64_t DeviceModel<T>::evaluate(const DeviceImages& data) {
  NN_RANGE("evaluate");
  if (data.n > 0 && data.D != lay_.D) throw std::invalid_argument("evaluate: image size != D");
  DeviceBuffer<unsigned> hits(1);
  hits.zero();
  for (std::size_t start = 0; start < data.n; start += std::size_t(max_cols_)) {
    const int m = static_cast<int>(std::min<std::size_t>(std::size_t(max_cols_), data.n - start));
    forward(data.images.get() + start * std::size_t(lay_.D), iota_.get(), m);
    count_correct<T>(Z2_.get(), data.labels.get() + start, lay_.C, m, hits.get(), stream_.get());
  }
  unsigned h = 0;
  hits.download(&h, 1);
  return h;
}

template class DeviceModel<float>;
template class DeviceModel<double>;

}  // namespace nn::train
