// The network on the host CPU (--device cpu): the same public interface as DeviceModel
// (device_model.h), computed with OpenBLAS or oneDNN (cpu_gemm.h) into buffers allocated
// once, with the elementwise work fused into one pass per layer. Plain host code: no CUDA,
// no emulator, in both builds. Tested by tests/model/test_cpu_model.cpp (gradients against
// the reference and finite differences) and through the trainer tests (--device cpu).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/cpu_gemm.h"
#include "model/huge_pages.h"
#include "model/cpu_threads.h"
#include "model/model.h"
#include "model/param_layout.h"

namespace nn::model {

// uint8 images (D x n, column-major: one image per column) and their labels in host memory:
// the CPU model's counterpart of DeviceImages (same constructor).
struct CpuImages {
  CpuImages() = default;
  CpuImages(const std::uint8_t* images, const std::uint8_t* labels, std::size_t n, int D);
  std::vector<std::uint8_t, HugePageAllocator<std::uint8_t>> images;  // read at random: huge_pages.h
  std::vector<std::uint8_t> labels;
  std::size_t n = 0;
  int D = 0;
};


template <class T>
class CpuModel {
 public:
  using Images = CpuImages;
  using Scalar = T;
  static constexpr bool kOnHost = true;  // computes on the host: no device, no streams (model.h)

  // max_cols: the most columns one forward pass handles. H == 0 is allowed (a model-parallel
  // rank that owns no hidden unit). gemm_lib: the GEMM library (cpu_gemm.h; OpenBLAS for double).
  CpuModel(int D, int H, int C, int max_cols, CpuGemm gemm_lib = CpuGemm::OpenBLAS);
  CpuGemm gemm_lib() const { return gemm_lib_; }

  const ParamLayout& layout() const { return lay_; }
  std::size_t num_params() const { return lay_.total(); }

  void set_params(const std::vector<T>& packed);
  std::vector<T> get_params() const { return std::vector<T>(P_, P_ + lay_.total()); }
  std::vector<T> get_grads() const { return grads_; }

  void set_train_data(CpuImages&& shard);
  void set_order(const std::vector<std::uint32_t>& order);

  // As DeviceModel: the gradient of this rank's columns order[offset .. offset + b) of a
  // global batch with 1/B = inv_B; reg * W added when add_reg. Computed at once (the host
  // is the device), so every Stage is reached when the call returns.
  void forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg);
  void backward_layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg);
  void backward_layer1_phase(int b, bool add_reg, T reg);

  // Model parallelism, as DeviceModel.
  void partial_scores_phase(std::size_t offset, int b, bool add_b2);
  T* scores() { return Z2_.data(); }
  void model_backward_phase(int b, T inv_B, T reg, bool stats);

  // The gradient already lives in host memory: MPI reduces grads() in place (the
  // trainer's "device memory" path), and these copies exist for the generic staging path.
  int queue_download(T* host, std::size_t begin, std::size_t end, Stage after);  // ticket 0
  bool download_done(int) const { return true; }
  void wait_download(int) const {}
  void wait(Stage) const {}
  T* grads() { return grads_.data(); }
  void download_scores(T* host, int b);
  void upload_scores(const T* host, int b);
  void upload_grads(const T* host);
  void upload_grads(const T* host, std::size_t begin, std::size_t end);

  void enable_graphs(bool) {}  // nothing to capture on the host
  struct GraphStats {
    std::size_t captured = 0, replays = 0, eager = 0, nodes = 0;
  };
  const GraphStats& graph_stats() const { return gstats_; }

  // Called between the two phases of forward_backward (--report): data parallel, after the
  // fused layer-2 pass (the forward pass, the loss and every gradient but dW1) and before dW1;
  // model parallel (model_backward_phase), not called.
  void set_phase_hook(std::function<void()> hook) { phase_hook_ = std::move(hook); }

  void sgd_step(T lr);  // p <- p - lr * g
  void add_l2(T reg);   // g <- g + reg * W for W1 and W2 (--exact: the regulariser after the sum)

  // When one rank holds the whole batch's gradient (data parallel, p = 1) nothing happens
  // between the backward pass and the step, so the dW1 GEMM can apply the step itself:
  // W1 <- W1 - (lr reg) W1 (where add_reg), then W1 <- W1 - lr dZ1 X^T through the GEMM's
  // beta = 1, saving the copy of W1 for the regulariser and the gradient's trip through memory
  // for W1 (the largest tensor). sgd_step then updates
  // [b1 | W2 | b2] only, and the W1 part of the gradient buffer is not written. Off by default;
  // the same lr must reach sgd_step.
  void fuse_w1_step(bool on, T lr) {
    if (on && node_shared()) throw std::logic_error("fuse_w1_step: the model is node-shared");
    fused_ = on;
    fused_lr_ = lr;
  }

  // Node-shared data parallelism (every rank on one node; src/train/step.cpp's node_shared_step): the
  // parameters live once, in memory all the node's ranks map, and each rank's X and dZ1 in
  // its own part of shared memory that the others read. Rank r owns columns [D r / p,
  // D (r+1) / p) of W1 (one contiguous block) and the r-th p-th of [b1 | W2 | b2]: after the
  // backward pass (which then leaves dW1 out) and the sum of the [b1 | W2 | b2] gradient over
  // the ranks, node_shared_step() computes its columns of the whole batch's dW1 from every
  // rank's (dZ1, X), steps what it owns and calls sync: no W1 gradient is exchanged at all.
  struct SharedParts {
    T* params = nullptr;          // the one copy of [W1 | b1 | W2 | b2] (num_params values)
    std::vector<T*> X, dZ1;       // every rank's X and dZ1 (shared_part_values(...) each)
    int rank = 0;                 // this rank's index in X, dZ1
    std::function<void()> sync;   // every rank's stores before it seen by all after it
  };
  // Values of one rank's part: X (D x max_cols) then dZ1 (H x max_cols).
  static std::size_t shared_part_values(int D, int H, int max_cols) {
    return (std::size_t(D) + std::size_t(H)) * std::size_t(max_cols < 1 ? 1 : max_cols);
  }
  // Before set_params; the parts must hold this model's max_cols (each rank its own).
  // set_params then writes this rank's share and syncs (collective over the node).
  void use_node_shared(SharedParts parts);
  bool node_shared() const { return !shared_.X.empty(); }
  // The step in node-shared mode, after the backward pass and the [b1 | W2 | b2] sum in
  // grads() (which also made every rank's X and dZ1 visible): node_shared_dw1 computes this
  // rank's columns of the whole batch's dW1 = sum_q dZ1_q X_q^T over every rank q's cols[q]
  // batch columns; node_shared_step then sets those columns of W1 <- W1 - lr (dW1 + reg W1)
  // and its part of [b1 | W2 | b2] <- p - lr g, and syncs (collective).
  void node_shared_dw1(const std::vector<int>& cols);
  void node_shared_step(T lr, T reg);

  // --exact with several threads a rank: a model that computes chunks beside `lead` on a thread
  // of its own, reading lead's parameters and training images (no copy) into its own gradient and
  // statistics; it takes set_order and forward_backward, never a step. add_stats adds a
  // follower's statistics to the lead's.
  void follow(const CpuModel& lead);
  void add_stats(double loss_sum, std::uint64_t correct) {
    loss_ += loss_sum;
    correct_ += correct;
  }

  void reset_stats();
  void read_stats(double& loss_sum, std::uint64_t& correct) const;
  double weight_sq_norm() const;
  std::uint64_t evaluate(const CpuImages& data);

  // Seconds the GEMM library calls of one training step at b columns take, measured here (the
  // fastest of `reps` runs after a warm-up), and the FLOPs they do: the step's BLAS-bound limit
  // and the CPU's GEMM rate on exactly these shapes (the --report roofline's compute ceiling).
  // data_parallel: W1 X and dW1 (the step's C-row products are in the fused layer-2 pass);
  // else the model-parallel step's five.
  struct GemmTiming {
    double seconds = 0, flops = 0;
  };
  GemmTiming time_step_gemms(int b, int reps, bool data_parallel) const;

 private:
  void stage_batch(std::size_t offset, int b);
  void gather(const std::uint8_t* images, const std::uint32_t* idx, int b);
  // fn(lo, hi) over parts of [0, n) on the GEMM library's OpenMP threads (oneDNN), else at once.
  template <class F>
  void split(std::size_t n, std::size_t grain, F&& fn) const;
  void hidden_gemm(int b, T* out);              // out = W1 X (H x b)
  void hidden_forward(int b);                   // A1 = sigmoid(W1 X + b1)
  void scores_forward(int b);                   // Z2 = W2 A1 (no bias)
  void softmax_loss(int b, T inv_B, bool add_b2, bool stats);  // Z2 -> dZ2, loss, hits
  void layer2_grads(int b, bool with_reg, T reg);
  void layer1_grads(int b, bool with_reg, T reg);   // from dZ2 (model parallel)
  void weight1_grad(int b, bool with_reg, T reg);   // dW1 (or the fused W1 step) from dZ1
  void layer2_fused(int b, T inv_B, bool with_reg, T reg);  // data parallel: W1 X -> dZ1, all but dW1
  void zero_grads_with_reg(bool with_reg, T reg);
  std::pair<std::size_t, std::size_t> owned_w1() const;     // node-shared: its columns of W1 (values)
  std::pair<std::size_t, std::size_t> owned_small() const;  // node-shared: its part of [b1 | W2 | b2]

  ParamLayout lay_;
  int max_cols_;
  std::vector<T> params_, grads_;
  std::vector<T> X_, A1_, Z2_, dA1_;  // D x cols, H x cols, C x cols, H x cols
  std::vector<T> dW2t_;               // H x C: dW2 transposed, as oneDNN computes it (layer2_grads)
  std::vector<T> db1_blocks_;         // H x column blocks: db1 by blocks (layer1_grads, layer2_fused)
  std::vector<T> w2t_;                // W2^T, kClassChunk x H (layer2_fused; rows C.. zero)
  std::vector<T> dW2_blocks_;         // C x H per column block: dW2^T by blocks (layer2_fused)
  std::vector<double> loss_blocks_;   // per column block (layer2_fused)
  std::vector<std::uint64_t> hits_blocks_;
  std::vector<std::uint32_t> order_;
  const std::uint32_t* batch_idx_ = nullptr;  // this step's indices (into order_)
  std::vector<std::uint8_t> ylab_;            // labels of the slice
  CpuImages shard_;
  const CpuModel* lead_ = nullptr;  // follow(): whose parameters and images this model reads
  const CpuImages& train_images() const { return lead_ ? lead_->shard_ : shard_; }
  double loss_ = 0;
  std::uint64_t correct_ = 0;
  GraphStats gstats_;
  std::function<void()> phase_hook_;
  T* P_ = nullptr;     // the parameters: params_, or the node's shared copy
  T* Xp_ = nullptr;    // X: X_, or this rank's shared part
  T* dA1p_ = nullptr;  // dA1, then dZ1 in place: dA1_, or this rank's shared part
  SharedParts shared_;
  bool fused_ = false;  // fuse_w1_step
  T fused_lr_ = 0;
  CpuGemm gemm_lib_;
};

static_assert(TrainableModel<CpuModel<float>, float> && TrainableModel<CpuModel<double>, double>);
static_assert(NodeSharedModel<CpuModel<float>> && NodeSharedModel<CpuModel<double>>);

}  // namespace nn::model
