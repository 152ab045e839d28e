// DeviceModel: forward/backward of one rank's batch slice with the GEMM dispatcher and the
// ops kernels, all on the default stream (the D2H copy of the gradient synchronises).
// Tested through tests/trainer/test_train.cpp (matches the Armadillo reference replay).
#include "trainer/device_model.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"
#include "gemm.h"
#include "ops.h"

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
      loss_(1),
      correct_(1) {
  if (D < 1 || H < 1 || C < 1) throw std::invalid_argument("DeviceModel: D, H, C must be positive");
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
}

template <class T>
void DeviceModel<T>::set_order(const std::vector<std::uint32_t>& order) {
  if (order.size() != shard_.n) throw std::invalid_argument("set_order: order size != shard size");
  if (order_.size() != order.size()) order_ = DeviceBuffer<std::uint32_t>(order.size());
  order_.upload(order.data(), order.size());
}

// X = images(:, idx) / 255, A1 = sigmoid(W1 X + b1), Z2 = W2 A1 + b2 (columns 0..b-1).
template <class T>
void DeviceModel<T>::forward(const std::uint8_t* images, const std::uint32_t* idx, int b) {
  NN_RANGE("forward");
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  const T* P = params_.get();
  gather_normalize<T>(images, D, idx, b, X_.get());
  {
    NN_RANGE("forward GEMM 1");
    GemmArgs<T> g;
    g.M = H; g.N = b; g.K = D;
    g.A = P + lay_.W1(); g.lda = H;
    g.B = X_.get(); g.ldb = D;
    g.D = A1_.get(); g.ldd = H;
    g.epilogue = Epilogue::BiasSigmoid; g.bias = P + lay_.b1();
    gemm(variant_, g);
  }
  {
    NN_RANGE("forward GEMM 2");
    GemmArgs<T> g;
    g.M = C; g.N = b; g.K = H;
    g.A = P + lay_.W2(); g.lda = C;
    g.B = A1_.get(); g.ldb = H;
    g.D = Z2_.get(); g.ldd = C;
    g.epilogue = Epilogue::Bias; g.bias = P + lay_.b2();
    gemm(variant_, g);
  }
}

template <class T>
void DeviceModel<T>::forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  if (b < 0 || b > max_cols_ || offset + std::size_t(b) > shard_.n)
    throw std::out_of_range("forward_backward: slice outside the shard or the activations");
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  T* P = params_.get();
  T* G = grads_.get();
  const bool with_reg = add_reg && reg != T(0);
  if (b == 0) {
    // An empty slice still takes part in the reduction: zero, plus reg * W on the one rank
    // that carries the regulariser (sgd_update(g, W, n, -reg, 0) computes 0 + reg * W).
    if (phase_hook_) phase_hook_();  // no forward pass: the backward starts at once
    NN_RANGE("backward");
    grads_.zero();
    if (with_reg) {
      sgd_update<T>(G + lay_.W1(), P + lay_.W1(), std::size_t(H) * D, -reg, T(0));
      sgd_update<T>(G + lay_.W2(), P + lay_.W2(), std::size_t(C) * H, -reg, T(0));
    }
    return;
  }
  const std::uint32_t* idx = order_.get() + offset;
  gather_labels(shard_.labels.get(), idx, b, ylab_.get());
  forward(shard_.images.get(), idx, b);
  // dZ2 = (softmax(Z2) - Y) * inv_B, in place over Z2; loss and hits of the slice accumulate.
  softmax_xent<T>(Z2_.get(), ylab_.get(), C, b, inv_B, nullptr, Z2_.get(), loss_.get(),
                  correct_.get());

  if (phase_hook_) phase_hook_();  // the forward pass and the loss are queued
  NN_RANGE("backward");
  const T* dZ2 = Z2_.get();
  {
    // dW2 = dZ2 A1^T (+ reg W2 through the GEMM's beta * C: one pass, no extra kernel).
    NN_RANGE("backward GEMM 1");
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = C; g.N = H; g.K = b;
    g.A = dZ2; g.lda = C;
    g.B = A1_.get(); g.ldb = H;
    if (with_reg) { g.beta = reg; g.C = P + lay_.W2(); g.ldc = C; }
    g.D = G + lay_.W2(); g.ldd = C;
    gemm(variant_, g);
  }
  row_sums<T>(dZ2, C, b, C, G + lay_.b2());
  {
    // dA1 = W2^T dZ2
    NN_RANGE("backward GEMM 2");
    GemmArgs<T> g;
    g.opA = Op::T;
    g.M = H; g.N = b; g.K = C;
    g.A = P + lay_.W2(); g.lda = C;
    g.B = dZ2; g.ldb = C;
    g.D = dA1_.get(); g.ldd = H;
    gemm(variant_, g);
  }
  // dZ1 = dA1 o a1 o (1 - a1), in place.
  sigmoid_backward<T>(dA1_.get(), A1_.get(), std::size_t(H) * b, dA1_.get());
  {
    // dW1 = dZ1 X^T (+ reg W1)
    NN_RANGE("backward GEMM 3");
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = H; g.N = D; g.K = b;
    g.A = dA1_.get(); g.lda = H;
    g.B = X_.get(); g.ldb = D;
    if (with_reg) { g.beta = reg; g.C = P + lay_.W1(); g.ldc = H; }
    g.D = G + lay_.W1(); g.ldd = H;
    gemm(variant_, g);
  }
  row_sums<T>(dA1_.get(), H, b, H, G + lay_.b1());
}

template <class T>
void DeviceModel<T>::download_grads(T* host) const {
  NN_RANGE("cudaMemcpyDeviceToHost");
  grads_.download(host, grads_.size());
}

template <class T>
void DeviceModel<T>::upload_grads(const T* host) {
  NN_RANGE("cudaMemcpyHostToDevice");
  grads_.upload(host, grads_.size());
}

template <class T>
void DeviceModel<T>::sgd_step(T lr) {
  NN_RANGE("step");
  sgd_update<T>(params_.get(), grads_.get(), params_.size(), lr, T(0));
}

template <class T>
void DeviceModel<T>::reset_stats() {
  loss_.zero();
  correct_.zero();
}

template <class T>
void DeviceModel<T>::read_stats(double& loss_sum, std::uint64_t& correct) const {
  unsigned c = 0;
  loss_.download(&loss_sum, 1);
  correct_.download(&c, 1);
  correct = c;
}

template <class T>
double DeviceModel<T>::weight_sq_norm() const {
  DeviceBuffer<double> acc(1);
  acc.zero();
  sum_squares<T>(params_.get() + lay_.W1(), std::size_t(lay_.H) * lay_.D, acc.get());
  sum_squares<T>(params_.get() + lay_.W2(), std::size_t(lay_.C) * lay_.H, acc.get());
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
    count_correct<T>(Z2_.get(), data.labels.get() + start, lay_.C, m, hits.get());
  }
  unsigned h = 0;
  hits.download(&h, 1);
  return h;
}

template class DeviceModel<float>;
template class DeviceModel<double>;

}  // namespace nn::train
