// The model interface, stated once: everything the trainer (src/train) asks of a model of the
// 784-H-10 network. Two classes satisfy it, each checked by static_asserts at the end of its
// header: DeviceModel<T> (device_model.h: our CUDA kernels, on a GPU or the SIMT emulator) and
// CpuModel<T> (cpu_model.h: the host's cores with BLAS, --device cpu). Every model is a
// TrainableModel; the steps that only one kind of model can take ask for a capability of
// their own below (FusedStepModel, NodeSharedModel), and src/train/step.cpp chooses them only
// for a model that has it. A third model is one more class that satisfies TrainableModel.
//
// Parameters and gradients are one packed buffer [W1 | b1 | W2 | b2] (param_layout.h).
// Steps are queued in stages (Stage): a device model returns before the work is done and
// the trainer waits for a stage; a host model has done it when the call returns.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/param_layout.h"

namespace nn::model {

template <class M, class T>
concept TrainableModel = requires(M& m, const M& cm, T* host, const T* chost, T t, int b, std::size_t n,
                                  bool flag, const std::vector<T>& params,
                                  const std::vector<std::uint32_t>& order, typename M::Images imgs,
                                  double& loss, std::uint64_t& hits, std::function<void()> hook) {
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
  // memory: device memory for a device model) is exchanged and sgd_step applies it.
  m.forward_backward(n, b, t, flag, t);
  // The same in two phases: the forward pass and layer 2's gradient (Stage::Layer2Grads), then
  // layer 1's (Stage::AllGrads), so layer 2's exchange can start between them.
  m.backward_layer2_phase(n, b, t, flag, t);
  m.backward_layer1_phase(b, flag, t);
  { m.grads() } -> std::same_as<T*>;
  m.sgd_step(t);
  m.add_l2(t);  // g += reg * W (W1, W2): --exact's regulariser, once after the exact sum
  // Called on the host between the forward and the backward pass (--report times them apart).
  m.set_phase_hook(std::move(hook));
  // Staged gradient exchange through host memory (device models; host models do it at once):
  // a range down after a stage (a ticket), its completion, a range (or all of it) back up.
  { m.queue_download(host, n, n, Stage::AllGrads) } -> std::same_as<int>;
  { cm.download_done(b) } -> std::convertible_to<bool>;
  cm.wait_download(b);
  cm.wait(Stage::AllGrads);
  m.upload_grads(chost);
  m.upload_grads(chost, n, n);
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

// A lone rank's fused step (DeviceModel): the whole step, update included, in one call
// (fused_step), or a run of steps in one launch (persistent_steps); the loss and hits stay on
// the device for the epoch (stats_deferred; read at the trainer's synchronisation points),
// and the host runs at most one step ahead of the device (wait_step_before_last).
template <class M>
concept FusedStepModel = requires(M& m, const M& cm, std::size_t n, int b, double d, std::uint64_t u,
                                  typename M::Scalar t) {
  m.fused_step(n, b, t, t, t);
  m.wait_step_before_last();
  m.persistent_steps(n, b, b, t, t);
  { cm.stats_deferred() } -> std::convertible_to<bool>;
  m.set_stats(d, u);
  { cm.first_nonfinite_step() } -> std::convertible_to<unsigned>;
  { cm.kernels_issued() } -> std::convertible_to<std::uint64_t>;
  { m.enable_persistent(true, b) } -> std::same_as<std::string>;
};

// The host model's node-shared step (CpuModel, --device cpu with every rank on one node): the
// weights once in the node's shared memory, each rank stepping its own columns of W1
// (src/train/step.cpp, node_shared_step); and the dW1 GEMM applying a lone rank's update.
template <class M>
concept NodeSharedModel = requires(M& m, const M& cm, const std::vector<int>& cols, typename M::Scalar t,
                                   typename M::SharedParts parts, bool flag, int b) {
  m.use_node_shared(std::move(parts));
  m.node_shared_dw1(cols);
  m.node_shared_step(t, t);
  m.fuse_w1_step(flag, t);
  cm.time_step_gemms(b, b, flag);  // the BLAS-bound limit of a step (--device cpu's report)
};

// The host/device trait, by declaration rather than inferred from a constructor.
template <class M>
inline constexpr bool kOnHost = M::kOnHost;

}  // namespace nn::model
