// The run: everything one training run works with, made once by setup (setup.h) and then
// read and advanced by the named pieces of epoch.h, step.h, exchange.h and finish.h.
// Internal to src/train (included by trainer.cpp).
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <utility>

#include <cuda_runtime.h>

#include "comm/comm.h"
#include "common/check.h"
#include "common/device_buffer.h"
#include "common/nn_real.h"
#include "model/model.h"
#include "train/report.h"
#include "train/setup.h"
#include "train/util.h"

namespace nn::train {

// DeviceModel::forward_backward queues the forward and the backward pass in one call. A model
// that offers set_phase_hook(std::function<void()>), called on the host between the two
// passes, lets --report time them apart (CpuModel: between its fused layer-2 pass, which also
// computes every gradient but dW1, and the dW1 GEMM); without it they are timed as one: the report's
// "forward_backward" (which p_flops uses either way), "forward" and "backward" with count 0.
template <class M>
concept HasPhaseHook = requires(M& m, std::function<void()> f) { m.set_phase_hook(std::move(f)); };

// DeviceModel's fused step (device_model.h): a lone rank's whole step in one call, and the
// loss and hits kept on the device for the epoch (read at the synchronisation points of
// step.h's sync_stats). CpuModel has neither.
template <class M>
concept HasFusedStep = requires(M& m, const M& cm, std::size_t n, int b, double d, std::uint64_t u) {
  m.fused_step(n, b, typename M::Scalar(0), typename M::Scalar(0), typename M::Scalar(0));
  { cm.stats_deferred() } -> std::convertible_to<bool>;
  m.set_stats(d, u);
  { cm.first_nonfinite_step() } -> std::convertible_to<unsigned>;
  { cm.kernels_issued() } -> std::convertible_to<std::uint64_t>;
};

// ---- the run ----------------------------------------------------------------------------
// Everything one training run works with, made once by setup and then read and advanced by
// the named pieces below: setup -> train_epochs (run_epoch -> step -> exchange_* ;
// end_epoch -> validation_accuracy, save_now) -> performance_report -> finish_run.
// Model: DeviceModel<T>, or any class with its public API (the pieces use nothing else).
template <class T, class Model>
struct Run {
  Run(const Config& c, const HostData& d, std::FILE* o)
      : cfg(c), data(d), p(comm::size()), r(comm::rank()), root(r == 0), mp(c.strategy == Strategy::Model),
        out(root ? o : nullptr), s(setup<T, Model>(c, d)), state(s.rp.state), start_epoch(int(state.epoch)),
        start_batch(state.batch), restored_epochs(state.epochs.size()), model(*s.model),
        evaluator(mp ? s.eval_model.get() : s.model.get()), plan(s.plan), sz(s.rp.sz),
        full_layout{kInputDim, c.hidden, kNumClasses}, np(model.num_params()), K(plan.num_batches()),
        n1(full_layout.W2()), n2(np - n1), lr(static_cast<T>(c.lr)), reg(static_cast<T>(c.reg)),
        in_place(c.mpi_device || kOnHost<Model>),
        h_grad(mp || in_place ? 0 : np), h_scores(mp && !in_place ? std::size_t(kNumClasses) * s.b_max : 0),
        timer(root && (!c.report.empty() || c.profile), kOnHost<Model>), overlap(c.overlap && !c.profile),
        split(HasPhaseHook<Model> && !s.graphs),
        compute(split || mp ? Mark::Forward : Mark::ForwardBackward),
        mpi_range(c.strategy == Strategy::ParamServer ? "MPI_Send/MPI_Recv parameter server" : "MPI_Allreduce") {
    res.n_fit = sz.n_fit;
    res.n_val = sz.n_val;
    res.n_test = sz.n_test;
    res.resumed = s.rp.resumed;
    res.node_shared = s.shm != nullptr;
    loss_acc = state.loss_sum[std::size_t(r)];
    hits_acc = state.hits[std::size_t(r)];
    for (std::size_t i = 0; i < restored_epochs; ++i) {
      const EpochRecord& e = state.epochs[i];
      res.epochs.push_back({int(i) + 1, e.loss, e.train_acc, e.val_acc, 0.0, 0.0});
    }
    if (res.resumed) saved_at = {start_epoch, start_batch};  // what --save holds
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const Config& cfg;
  const HostData& data;
  const int p, r;
  const bool root, mp;
  std::FILE* const out;  // rank 0's report stream, null elsewhere
  Setup<T, Model> s;
  // Where the run stands: with the model's weights, exactly what --save holds (TrainState,
  // checkpoint.h). Updated after every step and epoch; the per-rank sums live in loss_acc /
  // hits_acc between saves.
  TrainState& state;
  const int start_epoch;            // where this process began (0, 0 unless resumed)
  const std::size_t start_batch;
  const std::size_t restored_epochs;  // finished epochs read from the saved state
  Model& model;
  Model* const evaluator;  // model parallelism: rank 0's whole network, put together from the slices
  const ShardPlan& plan;
  const Sizes& sz;
  const ParamLayout full_layout;
  const std::size_t np, K;  // parameters of this rank's model; batches per epoch
  // Data parallelism's gradient exchange, in two regions: layer 1 [W1 | b1] = [0, n1) and
  // layer 2 [W2 | b2] = [n1, np) (exchange_gradients).
  const std::size_t n1, n2;
  const T lr, reg;
  // MPI works on the model's own buffers (--mpi device; --device cpu, whose buffers are host
  // memory): no staging copies.
  const bool in_place;
  PinnedBuffer<T> h_grad, h_scores;  // host staging of the gradients / partial scores
  // --report / --profile: rank 0 times every batch phase by phase with CUDA events
  // (report.h). --profile also lines the device and the ranks up at the phase boundaries,
  // so each phase's time is its own (a rank waiting for a slower one waits in an untimed
  // gap, not in the allreduce), at the price of the overlap and pipelining it removes.
  PhaseTimer timer;
  const bool overlap;
  const bool split;     // the forward and backward passes timed apart (not under --graph)
  const Mark compute;   // the first phase of a step
  const char* const mpi_range;  // NVTX range of an exchange, as the course's profiles name it

  // Progress and what it produced.
  double loss_acc = 0;              // this rank's cross-entropy sum of the epoch so far
  std::uint64_t hits_acc = 0;       // and its correct predictions
  bool stop = false;                // the ranks agreed to stop after this step (a signal)
  std::pair<int, std::size_t> saved_at{-1, 0};  // (epoch, batch) of the state --save holds; -1: none
  std::uint64_t overlap_polls = 0;  // this rank's MPI_Test rounds while layer 1 was copied
  std::vector<int> shared_cols = std::vector<int>(std::size_t(p));  // node-shared: each rank's columns this step
  double queue_s = 0;               // host time spent queueing the steps' device work (--graph saves it)
  std::size_t stats_base = 0;       // the epoch's batch at which the device's deferred sums started
  double kernels_per_step = 0;  // kernel launches of the last step (device models; a persistent run's share)
  std::size_t steps = 0;
  double train_s = 0;
  // --device cpu: the step's GEMMs alone, timed on every rank at once after training (the
  // slowest rank's median), and their FLOP rate: the BLAS-bound limit of an epoch.
  double gemm_step_s = 0, gemm_flops_per_s = 0;
  TrainResult res;
};

// With --profile, the device (and, with all_ranks, every rank) lines up at a phase boundary.
template <class T, class Model>
void boundary(Run<T, Model>& R, bool all_ranks) {
  if (!R.cfg.profile) return;
  if constexpr (!kOnHost<Model>) CUDA_CHECK(cudaDeviceSynchronize());  // the host's work is done
  if (all_ranks) comm::barrier();
}

}  // namespace nn::train
