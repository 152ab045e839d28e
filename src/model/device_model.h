// The network on one device: packed parameters and gradients, activations for one batch
// slice, forward/backward through the GEMM dispatcher and the ops kernels, SGD, evaluation,
// all queued on the model's own stream; the phases of a step (for overlap and the model-
// parallel exchange) and their CUDA Graph replays. Host code (no MPI); tested through
// tests/train/test_train.cpp and test_strategies.cpp against the reference.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/stream.h"
#include "model/model.h"
#include "model/param_layout.h"
#include "ops/persistent_step.h"

namespace nn::model {

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

template <class T>
class DeviceModel {
 public:
  using Images = DeviceImages;  // what set_train_data and evaluate take (the trainer names it so)
  using Scalar = T;
  static constexpr bool kOnHost = false;  // computes on the CUDA device (model.h)
  // max_cols: the most columns one forward pass handles (the largest local slice, or the
  // evaluation chunk). gemm_variant: nn::gemm's variant number, checked by the caller.
  // H == 0 is allowed for a model-parallel rank that owns no hidden unit (p > H).
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

  // The same step in two phases, for the overlap (src/train/step.cpp): the first queues the
  // forward pass and layer 2's gradients [W2 | b2] and records Stage::Layer2Grads; the second
  // queues layer 1's [W1 | b1] and records Stage::AllGrads. forward_backward calls both.
  void backward_layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg);
  void backward_layer1_phase(int b, bool add_reg, T reg);

  // Model parallelism (this model holds hidden units [h0, h0 + H) of the network; the
  // trainer sums the ranks' partial scores between the two phases, so no gradient is ever
  // exchanged). partial_scores_phase: Z2 = W2_slice sigmoid(W1_slice X + b1_slice), plus b2
  // when add_b2 (exactly one rank), for the batch's columns order[offset .. offset + b);
  // records Stage::PartialScores. scores() is that C x b buffer: the trainer sums it over
  // the ranks in place. model_backward_phase: softmax / cross-entropy on the summed scores
  // (statistics accumulated when `stats`), then every gradient of this rank's slice, reg * W
  // included (each rank owns its weights), and b2's (every rank computes the same).
  void partial_scores_phase(std::size_t offset, int b, bool add_b2);
  T* scores() const { return Z2_.get(); }
  void model_backward_phase(int b, T inv_B, T reg, bool stats);

  // The gradient range [begin, end) of the packed buffer to pinned host memory, on the copy
  // stream after `after` (copies run in the order queued); returns the copy's ticket, whose
  // completion download_done / wait_download report. A ticket is reused kCopyTickets copies
  // later: a step waits for its copies before it queues that many more.
  static constexpr int kCopyTickets = 64;
  int queue_download(T* host, std::size_t begin, std::size_t end, Stage after);
  bool download_done(int ticket) const;
  void wait_download(int ticket) const;
  void wait(Stage s) const;          // the host waits for the stage's event
  T* grads() const { return grads_.get(); }  // for a CUDA-aware MPI or NCCL (--comm device|nccl)
  // --comm nccl (src/exchange/nccl.h): the exchange's own stream, made to wait for stage `after`
  // first (a cudaStream_t, as void*: the exchange sees no CUDA type); join_exchange() makes the
  // model's stream wait for all that is queued there, so the update reads the sum.
  void* exchange_stream_after(Stage after);
  void join_exchange();
  // Scores to / from pinned host memory (model parallelism, host staging); synchronous.
  void download_scores(T* host, int b);
  void upload_scores(const T* host, int b);

  // --graph: each phase is captured once per shape (after one eager warm-up run, so lazy
  // allocations such as the split-K workspace happen outside the capture) and replayed.
  void enable_graphs(bool on) { graphs_on_ = on; }
  struct GraphStats {
    std::size_t captured = 0, replays = 0, eager = 0, nodes = 0;  // nodes: all graphs
  };
  const GraphStats& graph_stats() const { return gstats_; }

  // --fused (the default with the registry's fused GEMM variants, data parallel): the step as five
  // kernels, the batch taken from the resident images (docs/architecture.md, "The fused step"):
  //   0. ops gather_normalize: X = the batch's images / 255, once a step;
  //   1. A1 = sigmoid(W1 X + b1): the forward GEMM with its bias + sigmoid epilogue;
  //   2. ops layer2_fused: scores, softmax, loss and hits, dZ2, dW2 / db2 / db1 parts, dZ1 over A1;
  //   3. dW1 = dZ1 X^T (+ reg W1); with lr given (fused_step) the epilogue
  //      applies the SGD step to W1 in place instead of writing the gradient;
  //   4. ops layer2_finish: [b1 | W2 | b2]'s parts summed, stepped (fused_step) or written.
  // forward_backward and the two phases then write the gradient for the exchange (sgd_step
  // as before); fused_step is a lone rank's whole step, the update included (no sgd_step).
  // The loss and hits then accumulate on the device over the epoch (stats_deferred): the
  // trainer reads them at its synchronisation points only (src/train/epoch.cpp).
  void enable_fused(bool on);
  bool fused() const { return fused_; }
  void fused_step(std::size_t offset, int b, T inv_B, T reg, T lr);
  void wait_step_before_last();  // after fused_step: at most one step of run-ahead (see the .cpp)
  bool stats_deferred() const { return fused_; }
  // --persistent (a lone rank with the fused step): runs of steps as one cooperative launch each
  // (kernels/ops/persistent_step.h), two grid barriers a step, no host work between steps.
  // enable_persistent plans it for this device and the batch size B; it returns "" when the
  // model will run it, else why not (the device cannot launch cooperatively, or the forward
  // pass's partial sums would need more than kPersistentMaxScratch bytes). persistent_steps runs
  // `steps` steps of batches of B from order[offset] (the last may be short, at the shard's end),
  // each stepping the parameters in place; the loss and hits accumulate as fused_step's.
  std::string enable_persistent(bool on, int B, bool only_if_predicted_faster = false);
  bool persistent() const { return persistent_; }
  const PersistentPlan& persistent_plan() const { return pplan_; }
  void persistent_steps(std::size_t offset, int steps, int B, T reg, T lr);
  // The device's epoch sums start from these (a resumed epoch continues the saved sums, so it
  // adds the same numbers in the same order as an uninterrupted run).
  void set_stats(double loss_sum, std::uint64_t correct);
  // The first fused step since set_stats / reset_stats whose loss was not finite (1-based; 0: none).
  unsigned first_nonfinite_step() const;
  // Kernel launches issued so far by this process's code (check.h's counter, plus what the
  // replayed graphs captured): --report's kernels_per_step is its change over a step.
  std::uint64_t kernels_issued() const;

  // Called on the host between the forward pass's launches and the backward pass's in every
  // forward_backward (at once for an empty slice), e.g. to record a CUDA event there: the
  // trainer's --report times the two passes apart with it. Empty (default): nothing is called.
  void set_phase_hook(std::function<void()> hook) { phase_hook_ = std::move(hook); }

  // The reduced gradient back from host memory (queued on the model's stream, before the SGD
  // step; the host buffer must stay put until that step): all of it, or the range [begin, end).
  void upload_grads(const T* host);
  void upload_grads(const T* host, std::size_t begin, std::size_t end);
  // p <- p - lr * g for every entry: the regulariser is already inside g (src/train/step.cpp).
  void sgd_step(T lr);
  // The host waits until every step queued so far is done.
  void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_.get())); }
  // g <- g + reg * W for W1 and W2 (not the biases): --exact adds the regulariser once, to the
  // summed gradient (src/train/step.cpp, exact_step).
  void add_l2(T reg);

  // Training statistics accumulated by forward_backward since the last reset.
  void reset_stats();
  void read_stats(double& loss_sum, std::uint64_t& correct) const;

  // ||W1||_F^2 + ||W2||_F^2 (accumulated in double), for the reported loss.
  double weight_sq_norm() const;

  // Number of correctly classified images of `data` (forward passes in chunks of max_cols).
  std::uint64_t evaluate(const DeviceImages& data);

 private:
  void forward(const std::uint8_t* images, const std::uint32_t* idx, int b, bool bias2 = true);
  void stage_batch(std::size_t offset, int b);  // the batch's indices, at a stable address
  // The phases captured as graphs (the first member of their key).
  enum class Phase : int {
    EmptySlice,          // a rank with no columns: its gradient is 0 (+ reg W)
    ForwardLayer2,       // the separate kernels: forward pass, loss, layer 2's gradient
    Layer1,              // the separate kernels: layer 1's gradient
    PartialScores,       // model parallelism: this rank's share of the scores
    ModelBackward,       // model parallelism: softmax on the summed scores, the slice's gradients
    SgdStep,             // p -= lr g over the packed parameters
    AddL2,               // g += reg W over W1 and W2 (--exact: the regulariser after the sum)
    FusedStep,           // a lone rank's fused step, the update included
    FusedForwardLayer2,  // the fused step's forward pass and layer 2 (gradient for the exchange)
    FusedDw1,            // the fused step's dW1 GEMM (gradient for the exchange)
  };
  // Runs fn on the stream, or captures and replays it under --graph (key: the phase and
  // every value its launches take that can change between steps).
  using GraphKey = std::tuple<Phase, int, double, int>;
  template <class F>
  void run_phase(const GraphKey& key, F&& fn);
  // A step's arguments: b columns, inv_B = 1 / the global batch size, reg the L2 term's
  // coefficient (0: not added on this rank); with update (a lone rank's fused step) the
  // parameters are stepped in place with lr instead of the gradient being written.
  struct StepArgs {
    int b;
    T inv_B, reg, lr;
    bool update;
  };
  // A kind of step (device_model_step.cpp, chosen by enable_fused): its passes in the network's
  // order and the graphs its two phases are captured as.
  struct StepKind {
    Phase graph_layer2, graph_layer1;  // the two phases' graphs
    void (DeviceModel::*forward)(const StepArgs&);  // the forward pass (separate kernels: and the loss)
    void (DeviceModel::*layer2)(const StepArgs&);   // layer 2's gradient (fused: b1's too)
    void (DeviceModel::*layer1)(const StepArgs&);   // layer 1's gradient (fused: W1's alone)
  };
  static const StepKind& step_kind(bool fused);
  const StepKind* kind_ = &step_kind(false);
  // The separate kernels (layer2_grads and layer1_grads also serve model_backward_phase).
  void forward_and_loss(const StepArgs& a);  // labels, forward pass, softmax + CE + dZ2
  void layer2_grads(const StepArgs& a);
  void layer1_grads(const StepArgs& a);
  // The fused step's passes.
  void fused_forward(const StepArgs& a);
  void fused_layer2(const StepArgs& a);
  void fused_dw1(const StepArgs& a);
  // Layer 2's phase (the forward pass and layer 2's gradient, or an empty slice's gradient),
  // then `then` (forward_backward: layer 1's phase) inside its "backward" NVTX range if open.
  template <class Then>
  void layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg, Then&& then);
  // A phase of two passes (device_model_step.cpp): fwd, the phase hook, bwd in the "backward"
  // range, then `then`; under --graph one graph of fwd and bwd, then `then`.
  template <class Fwd, class Bwd, class Then>
  void run_passes(const GraphKey& key, Fwd&& fwd, Bwd&& bwd, Then&& then);
  // fn inside the NVTX range "backward": a new one, or the one already open.
  template <class F>
  void in_backward(F&& fn);
  bool backward_open_ = false;

  Stream stream_, copy_stream_, exchange_stream_;
  Event ev_layer2_, ev_all_, ev_scores_, ev_exchanged_;
  std::array<Event, kCopyTickets> copy_done_;  // queue_download's tickets, used in turn
  int next_copy_ = 0;
  bool graphs_on_ = false;
  struct GraphSlot {
    bool warmed = false;
    GraphExec exec;
    std::uint64_t kernels = 0;  // launches captured into exec
  };
  std::uint64_t graph_kernels_ = 0;     // replayed graphs' kernels
  std::uint64_t captured_launches_ = 0;  // launches counted while capturing (nothing ran)
  std::map<GraphKey, GraphSlot> graphs_;
  GraphStats gstats_;

  ParamLayout lay_;
  int max_cols_, variant_;
  DeviceBuffer<T> params_, grads_;
  DeviceBuffer<T> X_, A1_, Z2_, dA1_;       // D x cols, H x cols, C x cols, H x cols
  DeviceBuffer<std::uint8_t> ylab_;         // labels of the slice
  DeviceBuffer<std::uint32_t> order_, iota_;  // epoch order of the shard; 0..max_cols-1
  DeviceBuffer<std::uint32_t> batch_idx_;     // this step's indices (a fixed address for graphs)
  DeviceBuffer<double> loss_;
  DeviceBuffer<unsigned> correct_;
  DeviceImages shard_;
  std::function<void()> phase_hook_;
  // The fused step (enable_fused): layer2_fused's per-tile parts, the device's epoch counts
  // [hits, steps, first non-finite step] (the loss sum is loss_).
  bool fused_ = false;
  Event ev_step_[2];  // the last two fused_steps' ends: the host runs at most one step ahead
  int step_parity_ = 0;
  bool step_pending_ = false;
  DeviceBuffer<T> parts_;
  DeviceBuffer<double> loss_parts_;
  DeviceBuffer<unsigned> hit_parts_, counts_;
  // --persistent: the plan, the forward partial sums and the per-column buffers.
  bool persistent_ = false;
  PersistentPlan pplan_;
  DeviceBuffer<T> pscratch_, pdz1_;
  DeviceBuffer<double> ploss_;
  DeviceBuffer<unsigned> phits_;
};

// Runs fn on the stream, or captures and replays it under --graph (a template: the phases of
// device_model.cpp and device_model_step.cpp use it).
template <class T>
template <class F>
void DeviceModel<T>::run_phase(const GraphKey& key, F&& fn) {
  if (!graphs_on_) {
    fn();
    return;
  }
  GraphSlot& g = graphs_[key];
  if (!g.warmed) {  // first sight of this shape: eager, so lazy allocations happen now
    g.warmed = true;
    ++gstats_.eager;
    fn();
    return;
  }
  if (!g.exec) {
    const std::uint64_t before = launch_counter().load();
    g.exec.capture(stream_.get(), fn);
    g.kernels = launch_counter().load() - before;
    captured_launches_ += g.kernels;
    ++gstats_.captured;
    gstats_.nodes += g.exec.nodes();
  }
  g.exec.launch(stream_.get());
  graph_kernels_ += g.kernels;
  ++gstats_.replays;
}

static_assert(TrainableModel<DeviceModel<float>, float> && TrainableModel<DeviceModel<double>, double>);
static_assert(FusedStepModel<DeviceModel<float>> && FusedStepModel<DeviceModel<double>>);

}  // namespace nn::model
