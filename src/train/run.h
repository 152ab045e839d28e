// The run: everything one training run works with, made once by setup (setup.h) and then read
// and advanced by the loop (epoch.cpp), the step the setup chose (step.cpp) and the end of the
// run (finish.cpp); and Phase, the scope of one timed phase of a step. Internal to src/train.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "comm/comm.h"
#include "common/check.h"
#include "common/device_buffer.h"
#include "common/nn_real.h"
#include "model/cpu_model.h"
#include "model/device_model.h"
#include "model/model.h"
#include "train/report.h"
#include "train/setup.h"
#include "train/util.h"

namespace nn::train {

using model::CpuModel;
using model::DeviceModel;
using model::FusedStepModel;
using model::kOnHost;
using model::NodeSharedModel;
using model::ParamLayout;
using model::Stage;

template <class T, class Model>
struct Run;
// One step of the run, batch k of the epoch (step.cpp): the strategy chosen once, at setup.
template <class T, class Model>
using StepFn = void (*)(Run<T, Model>&, std::size_t k);

// Model: DeviceModel<T> or CpuModel<T> (model/model.h); the loop uses nothing else of it.
template <class T, class Model>
struct Run {
  Run(const Config& c, const HostData& d, std::FILE* o);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const Config& cfg;
  const HostData& data;
  const int ranks, rank;
  const bool is_root, model_parallel;
  std::FILE* const out;  // rank 0's report stream, null elsewhere
  Setup<T, Model> setup;
  // Where the run stands: with the model's weights, exactly what --save holds (TrainState,
  // checkpoint.h). Updated after every step and epoch; this rank's sums of the epoch live in
  // epoch_loss / epoch_hits between saves.
  TrainState& state;
  const int start_epoch;            // where this process began (0, 0 unless resumed)
  const std::size_t start_batch;
  const std::size_t restored_epochs;  // finished epochs read from the saved state
  Model& model;
  Model* const evaluator;  // model parallelism: rank 0's whole network, put together from the slices
  const ShardPlan& plan;
  const Sizes& sizes;
  const ParamLayout full_layout;
  const std::size_t n_params;           // parameters of this rank's model
  const std::size_t batches_per_epoch;
  // Data parallelism's gradient exchange, in two regions: layer 1 [W1 | b1] = [0, n_layer1)
  // and layer 2 [W2 | b2] = [n_layer1, n_params) (step.cpp, exchange_gradients).
  const std::size_t n_layer1, n_layer2;
  const T lr, reg;
  // MPI works on the model's own buffers (--mpi device; --device cpu, whose buffers are host
  // memory): no staging copies.
  const bool mpi_in_place;
  PinnedBuffer<T> h_grad, h_scores;  // host staging of the gradients / partial scores
  // --report / --profile: rank 0 times every batch phase by phase with CUDA events
  // (report.h). --profile also lines the device and the ranks up at the phase boundaries,
  // so each phase's time is its own (a rank waiting for a slower one waits in an untimed
  // gap, not in the allreduce), at the price of the overlap and pipelining it removes.
  PhaseTimer timer;
  const bool overlap;
  const bool split_passes;  // the forward and backward passes timed apart (not under --graph)
  const Mark first_mark;    // the first phase of a step
  const char* const mpi_range;  // NVTX range of an exchange, as the course's profiles name it
  StepFn<T, Model> step = nullptr;  // chosen by choose_step (step.cpp) when the run is made

  // Progress and what it produced.
  double epoch_loss = 0;             // this rank's cross-entropy sum of the epoch so far
  std::uint64_t epoch_hits = 0;      // and its correct predictions
  bool stop = false;                 // the ranks agreed to stop after this step (a signal)
  std::pair<int, std::size_t> saved_at{-1, 0};  // (epoch, batch) of the state --save holds; -1: none
  std::uint64_t overlap_polls = 0;   // this rank's MPI_Test rounds while layer 1 was copied
  std::vector<int> node_shared_cols = std::vector<int>(std::size_t(ranks));  // each rank's columns this step
  double queue_s = 0;                // host time spent queueing the steps' device work (--graph saves it)
  std::size_t device_stats_from = 0;  // the epoch's batch at which the device's deferred sums started
  double kernels_per_step = 0;  // kernel launches of the last step (device models; a persistent run's share)
  std::size_t steps = 0;
  double train_s = 0;
  // --device cpu: the step's GEMMs alone, timed on every rank at once after training (the
  // slowest rank's median), and their FLOP rate: the BLAS-bound limit of an epoch.
  double gemm_step_s = 0, gemm_flops_per_s = 0;
  TrainResult result;
};

// With --profile, the device (and, with all_ranks, every rank) lines up at a phase boundary.
template <class T, class Model>
void boundary(Run<T, Model>& R, bool all_ranks) {
  if (!R.cfg.profile) return;
  if constexpr (!kOnHost<Model>) CUDA_CHECK(cudaDeviceSynchronize());  // the host's work is done
  if (all_ranks) comm::barrier();
}

// One phase of a step, from its construction to the end of its scope: it starts the phase on
// --report's timer; the host time it takes counts as queueing time when the phase computes
// (queue_s: the host's share of a step, what CUDA Graphs shrink; queued() ends that share
// early, before a wait); and under --profile the device lines up when the phase ends.
template <class T, class Model>
class Phase {
 public:
  Phase(Run<T, Model>& R, Mark m)
      : R_(R), counting_(m == Mark::Forward || m == Mark::Backward || m == Mark::ForwardBackward || m == Mark::Step) {
    R.timer.mark(m);
  }
  void queued() {
    if (counting_) R_.queue_s += since(t0_);
    counting_ = false;
  }
  ~Phase() noexcept(false) {
    queued();
    boundary(R_, false);
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  Run<T, Model>& R_;
  bool counting_;
  Clock::time_point t0_ = Clock::now();
};

// The fused step's loss and hits accumulate on the device over the epoch (no host round trip
// inside it): true when the model keeps them there.
template <class T, class Model>
bool stats_deferred(const Run<T, Model>& R) {
  if constexpr (FusedStepModel<Model>) return R.model.stats_deferred();
  else return false;
}

// Kernel launches so far (device models; 0 for the host model).
template <class T, class Model>
std::uint64_t kernels_issued(const Run<T, Model>& R) {
  if constexpr (FusedStepModel<Model>) return R.model.kernels_issued();
  else return 0;
}

// The four runs the trainer is built for: F(T, Model) for float and double, device and host.
#define NN_FOR_EACH_RUN(F)      \
  F(float, DeviceModel<float>)   \
  F(double, DeviceModel<double>) \
  F(float, CpuModel<float>)      \
  F(double, CpuModel<double>)

}  // namespace nn::train
