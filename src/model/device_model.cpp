// DeviceModel (device_model.h) apart from the training step (device_model_step.cpp): the
// buffers, parameters and data, the model-parallel phases, the fused and persistent steps'
// set-up, the device's statistics and evaluation.
// Tested through tests/train/test_train.cpp and test_strategies.cpp (reference replay).
#include "model/device_model.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "ops/layer2.h"
#include "ops/ops.h"

namespace nn::model {

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

template <class T>
void DeviceModel<T>::enable_fused(bool on) {
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
  kind_ = &step_kind(on);
  graphs_.clear();  // captured phases are the other path's
  reset_stats();
}

template <class T>
std::string DeviceModel<T>::enable_persistent(bool on, int B, bool only_if_predicted_faster) {
  persistent_ = false;
  if (!on) return "";
  if (!fused_) return "it needs the fused step";
  if (B < 1 || B > max_cols_) return "the batch does not fit the model's columns";
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const PersistentPlan plan = nn::persistent_plan<T>(lay_.D, lay_.H, B, dev);
  if (plan.blocks < 1) return plan.why.empty() ? "the device cannot launch it cooperatively" : plan.why;
  if (plan.scratch * sizeof(T) > kPersistentMaxScratch)
    return "its partial sums would take " + std::to_string(plan.scratch * sizeof(T) >> 20) + " MiB (at most " +
           std::to_string(kPersistentMaxScratch >> 20) + ")";
  if (lay_.C > kLayer2MaxClasses) return "it handles at most " + std::to_string(kLayer2MaxClasses) + " classes";
  if (only_if_predicted_faster && !persistent_predicted_faster(plan))
    return "its plan predicts no gain over the fused step on this device";
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
  const StepArgs a{b, inv_B, reg, T(0), false};
  run_phase({Phase::ModelBackward, b, double(inv_B), stats}, [&] {
    softmax_xent<T>(Z2_.get(), ylab_.get(), lay_.C, b, inv_B, nullptr, Z2_.get(),
                    stats ? loss_.get() : nullptr, stats ? correct_.get() : nullptr, stream_.get());
    layer2_grads(a);
    layer1_grads(a);
  });
  ev_all_.record(stream_.get());
}

template <class T>
void DeviceModel<T>::download_scores(T* host, int b) {
  NN_RANGE("cudaMemcpyDeviceToHost");
  CUDA_CHECK(cudaMemcpyAsync(host, Z2_.get(), sizeof(T) * std::size_t(lay_.C) * b,
                             cudaMemcpyDeviceToHost, stream_.get()));
  stream_.sync();
}

template <class T>
void DeviceModel<T>::upload_scores(const T* host, int b) {
  NN_RANGE("cudaMemcpyHostToDevice");
  CUDA_CHECK(cudaMemcpyAsync(Z2_.get(), host, sizeof(T) * std::size_t(lay_.C) * b,
                             cudaMemcpyHostToDevice, stream_.get()));
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

}  // namespace nn::model
