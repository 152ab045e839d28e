// The model interface, stated once: what the trainer (src/train) asks of a model of the
// 784-H-10 network. Two classes satisfy it, each checked by a static_assert at the end of its
// header: DeviceModel<T> (device_model.h: our CUDA kernels, on a GPU or the SIMT emulator)
// and CpuModel<T> (cpu_model.h: the host's cores with BLAS, --device cpu). A third model is
// one more class that satisfies TrainableModel; the trainer needs nothing else from it.
//
// Parameters and gradients are one packed buffer [W1 | b1 | W2 | b2] (param_layout.h).
// Steps are queued in stages (Stage): a device model returns before the work is done and
// the trainer waits for a stage; a host model has done it when the call returns.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/param_layout.h"

namespace nn::train {

template <class M, class T>
concept TrainableModel = requires(M& m, const M& cm, T* host, const T* chost, T t, int b, std::size_t n,
                                  bool flag, const std::vector<T>& params,
                                  const std::vector<std::uint32_t>& order, typename M::Images imgs,
                                  double& loss, std::uint64_t& hits) {
  // Where the model computes: true for the host (no CUDA device, no streams; the trainer
  // then skips device selection, staging copies and device synchronisation).
  { M::kOnHost } -> std::convertible_to<bool>;
  typename M::Images;  // a shard of uint8 images + labels, in the model's memory
  { cm.layout() } -> std::same_as<const ParamLayout&>;
  { cm.num_params() } -> std::same_as<std::size_t>;
  m.set_params(params);
  { cm.get_params() } -> std::same_as<std::vector<T>>;
  m.set_train_data(std::move(imgs));
  m.set_order(order);  // this epoch's shard positions
  m.enable_graphs(flag);
  // Data parallelism: the whole step on this rank's part (offset, b) of the batch, scaled by
  // inv_B = 1/global count; add_reg on rank 0 only. Then the gradient buffer (in the model's
  // memory: device memory for a device model) is exchanged (src/train/exchange.h) and
  // sgd_step applies it.
  m.forward_backward(n, b, t, flag, t);
  { m.grads() } -> std::same_as<T*>;
  m.sgd_step(t);
  // Staged gradient exchange through host memory (device models; host models do it at once).
  m.queue_download(host, n, n, Stage::AllGrads);
  { cm.download_done(Stage::AllGrads) } -> std::convertible_to<bool>;
  cm.wait_download(Stage::AllGrads);
  cm.wait(Stage::AllGrads);
  m.upload_grads(chost);
  // Model parallelism: partial scores of this rank's hidden units, their sum over the ranks
  // (scores(), or staged through host memory), then the backward pass into this rank's slice.
  m.partial_scores_phase(n, b, flag);
  { m.scores() } -> std::same_as<T*>;
  m.download_scores(host, b);
  m.upload_scores(chost, b);
  m.model_backward_phase(b, t, t, flag);
  // Statistics of the step, the L2 term and scoring.
  m.reset_stats();
  cm.read_stats(loss, hits);
  { cm.weight_sq_norm() } -> std::convertible_to<double>;
  { m.evaluate(imgs) } -> std::convertible_to<std::uint64_t>;
  cm.graph_stats();
};

// The host/device trait, by declaration rather than inferred from a constructor.
template <class M>
inline constexpr bool kOnHost = M::kOnHost;

}  // namespace nn::train
