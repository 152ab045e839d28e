// The run: everything one training run works with, in four parts by what reads them --
//   setup     what the setup made (setup.h): the models, the shards' plan, the sizes and saved
//             state, the images rank 0 evaluates;
//   fixed     what a step reads, fixed when the run is made: ranks, rate, sizes, the step and
//             the exchange engine chosen (step.cpp, choose);
//   progress  what the loop advances: the epoch's sums, stop, the last save, the result;
//   measured  what is timed for --report.
// The constructor (run.cpp) makes all four; the loop (epoch.cpp), the step (step.cpp) and the
// end of the run (finish.cpp) use them. Also Phase, the scope of one timed phase of a step, and
// ExchangeParts, which times an exchange engine's parts. Internal to src/train.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <utility>

#include <cuda_runtime.h>

#include "comm/comm.h"
#include "common/check.h"
#include "common/nn_real.h"
#include "common/nvtx.h"
#include "exchange/exchange.h"
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
// n steps of the run from batch k of the epoch (step.cpp): n is 1 but for the persistent step,
// which takes up to Fixed::steps_per_launch in one launch.
template <class T, class Model>
using StepFn = void (*)(Run<T, Model>&, std::size_t k, std::size_t n);

// What a step reads, fixed when the run is made.
template <class T, class Model>
struct Fixed {
  int ranks = 1, rank = 0;
  bool is_root = true, model_parallel = false;
  T lr{}, reg{};
  ParamLayout full_layout;           // the whole network's (model parallelism: not this rank's slice)
  std::size_t n_params = 0;          // parameters of this rank's model
  std::size_t batches_per_epoch = 0;
  exchange::Regions regions;         // the gradient's layer 1 and layer 2 (exchange.h)
  bool split_passes = true;          // the forward and backward passes timed apart (not under --graph)
  Mark first_mark = Mark::Forward;   // the first phase of a step
  // Chosen once (step.cpp, choose): the step, how many steps one call may take, its NVTX range,
  // and the engine that sums the gradient over the ranks.
  StepFn<T, Model> step = nullptr;
  std::size_t steps_per_launch = 1;
  const char* step_range = "batch iteration";
  std::unique_ptr<exchange::Exchange<T>> exchange;
  const char* reduce_range = "MPI_Allreduce";  // the NVTX range of the engine's sums
};

// What the loop advances. With the model's weights and setup.root_plan.state, exactly what --save
// holds (TrainState, checkpoint.h); this rank's sums of the epoch live in epoch_loss / epoch_hits
// between saves.
struct Progress {
  int start_epoch = 0;               // where this process began (0, 0 unless resumed)
  std::size_t start_batch = 0;
  std::size_t restored_epochs = 0;   // finished epochs read from the saved state
  double epoch_loss = 0;             // this rank's cross-entropy sum of the epoch so far
  std::uint64_t epoch_hits = 0;      // and its correct predictions
  bool stop = false;                 // the ranks agreed to stop after this step (a signal)
  std::pair<int, std::size_t> saved_at{-1, 0};  // (epoch, batch) of the state --save holds; -1: none
  std::size_t device_stats_from = 0;  // the epoch's batch at which the device's deferred sums started
  std::size_t steps = 0;              // steps this process took
  TrainResult result;
};

// What is measured for --report / --profile: rank 0 times every batch phase by phase with CUDA
// events (report.h). --profile also lines the device and the ranks up at the phase boundaries,
// so each phase's time is its own (a rank waiting for a slower one waits in an untimed gap, not
// in the all-reduce), at the price of the overlap and pipelining it removes.
struct Measured {
  PhaseTimer timer;
  double queue_s = 0;            // host time spent queueing the steps' device work (--graph saves it)
  double kernels_per_step = 0;   // kernel launches of the last step (device models; a persistent run's share)
  double train_s = 0;
  // --device cpu: the step's GEMMs alone, timed on every rank at once after training (the
  // slowest rank's median), and their FLOP rate: the BLAS-bound limit of an epoch.
  double gemm_step_s = 0, gemm_flops_per_s = 0;
};

// Fills f's choices (step.cpp) from the options and what the setup made: the step this run takes
// every batch -- data parallel (the default), the lone rank's fused or persistent step, model
// parallelism, the host's node-shared or overlapped step -- how many steps one call takes, and
// the exchange engine (src/exchange) that sums the gradient: none at one rank, host-staged or
// device pointers on a GPU, the host model's memory or the node's shared memory on the host.
template <class T, class Model>
void choose(const Config& cfg, Setup<T, Model>& s, Fixed<T, Model>& f);

// Model: DeviceModel<T> or CpuModel<T> (model/model.h); the loop uses nothing else of it.
template <class T, class Model>
struct Run {
  Run(const Config& c, const HostData& d, std::FILE* o);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const Config& cfg;
  const HostData& data;
  std::FILE* const out;  // rank 0's report stream, null elsewhere
  Setup<T, Model> setup;
  // Model parallelism: rank 0's whole network, put together from the slices; else the model.
  Model* const evaluator;
  const Fixed<T, Model> fixed;
  Progress progress;
  Measured measured;
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
    R.measured.timer.mark(m);
  }
  void queued() {
    if (counting_) R_.measured.queue_s += since(t0_);
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

// The parts of one exchange (exchange.h) as phases of the step: the gradient's copy down (D2H,
// NVTX "cudaMemcpyDeviceToHost"), its sum (Allreduce, the reduction's NVTX range) and its copy
// up (H2D). Under --profile every rank lines up, untimed, before the sum, so a rank waiting for a
// slower one does not count as all-reduce time. Made for one exchange; its end ends the last part.
template <class T, class Model>
class ExchangeParts final : public exchange::Parts {
 public:
  explicit ExchangeParts(Run<T, Model>& R) : R_(R) {}
  ExchangeParts(const ExchangeParts&) = delete;
  ExchangeParts& operator=(const ExchangeParts&) = delete;
  ~ExchangeParts() noexcept(false) { end(); }

  void begin(exchange::Part p) override {
    end();
    if (p == exchange::Part::Reduce && R_.cfg.profile) {
      R_.measured.timer.mark(Mark::Untimed);
      boundary(R_, true);
    }
    R_.measured.timer.mark(p == exchange::Part::Download ? Mark::D2H : p == exchange::Part::Reduce ? Mark::Allreduce : Mark::H2D);
    open_ = true;
    if (p == exchange::Part::Download) range_.emplace("cudaMemcpyDeviceToHost");
    if (p == exchange::Part::Reduce) range_.emplace(R_.fixed.reduce_range);
  }

 private:
  // As a Phase ends: the range closes, and under --profile the device lines up.
  void end() {
    range_.reset();
    if (open_) boundary(R_, false);
    open_ = false;
  }
  Run<T, Model>& R_;
  bool open_ = false;
  std::optional<NvtxRange> range_;
};

// The fused step's loss and hits accumulate on the device over the epoch (no host round trip
// inside it): true when the model keeps them there.
template <class T, class Model>
bool stats_deferred(const Run<T, Model>& R) {
  if constexpr (FusedStepModel<Model>) return R.setup.model->stats_deferred();
  else return false;
}

// Kernel launches so far (device models; 0 for the host model).
template <class T, class Model>
std::uint64_t kernels_issued(const Run<T, Model>& R) {
  if constexpr (FusedStepModel<Model>) return R.setup.model->kernels_issued();
  else return 0;
}

}  // namespace nn::train
