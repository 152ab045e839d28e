// One training step, batch k of epoch e: the device work (forward and backward on this rank's
// part, the exchange, SGD), the step's statistics, the ranks' agreement on divergence and
// on stopping (stop.h), the --print-every line. Internal to src/train (included by trainer.cpp).
//
// Where the L2 term lives: inside the gradient, added by rank 0 only (GEMM beta*C with
// C = W), so the exchanged buffer is exactly the course's dJ/dp of the global batch and the
// step is p <- p - lr * g for every entry (ops sgd_update with reg = 0) -- the same formula as
// nn::ref::backward + nn::ref::sgd_update, which --verify replays (verify.h). Two host-model
// exceptions, the same formula in another order: at p = 1 the dW1 GEMM applies the step
// (CpuModel::fuse_w1_step, W1's decay a pass before it), and with node-shared weights
// (exchange.h, step_node_shared) each rank adds reg W1 to its columns of dW1 in the step;
// W2's term stays in rank 0's gradient.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"
#include "train/exchange.h"
#include "train/run_state.h"
#include "train/stop.h"
#include "train/watchdog.h"

namespace nn::train {

// ---- one step -------------------------------------------------------------------------------
// A non-finite loss stops the run at the first step that produced one (every rank learns
// of it through the small allreduce after each step, agree_after_step). batch == 0: found
// at the end of the epoch (the weights themselves overflowed).
template <class T, class Model>
[[noreturn]] void diverged(const Run<T, Model>& R, int epoch, std::size_t batch) {
  const Config& cfg = R.cfg;
  const std::string where = batch ? "epoch " + std::to_string(epoch) + ", batch " + std::to_string(batch) + "/" +
                                        std::to_string(R.K)
                                  : "the end of epoch " + std::to_string(epoch) + " (the weights overflowed)";
  const auto [se, sb] = R.saved_at;
  const std::string kept =
      cfg.save.empty() ? "no --save was given"
      : se < 0 || (se == 0 && sb == 0) ? "nothing was saved to " + cfg.save + " (no epoch finished)"
      : sb == 0 ? cfg.save + " keeps the weights after epoch " + std::to_string(se)
                : cfg.save + " keeps the state after batch " + std::to_string(sb) + " of epoch " + std::to_string(se + 1);
  throw Diverged("non-finite loss at " + where + " (lr " + shown_number(cfg.lr) + " too large?); training stopped; " +
                 kept);
}

template <class T, class Model>
void stop_if_diverged(const Run<T, Model>& R, int epoch, std::size_t batch, double loss) {
  if (!comm::all_ok(std::isfinite(loss))) diverged(R, epoch, batch);
}

// The fused step's loss and hits accumulate on the device over the epoch (no host round trip
// inside it): true when the model keeps them there.
template <class T, class Model>
bool stats_deferred(const Run<T, Model>& R) {
  if constexpr (HasFusedStep<Model>) return R.model.stats_deferred();
  else return false;
}

// With deferred statistics: the device's epoch sums so far into loss_acc / hits_acc, and a
// non-finite loss stops the run here, naming the first step that produced one (the smallest
// over the ranks). Collective: at the epoch's end, --print-every lines and saves.
template <class T, class Model>
void sync_stats(Run<T, Model>& R) {
  if constexpr (HasFusedStep<Model>) {
    if (!R.model.stats_deferred()) return;
    R.model.read_stats(R.loss_acc, R.hits_acc);
    if (comm::all_ok(std::isfinite(R.loss_acc))) return;
    const unsigned first = R.model.first_nonfinite_step();
    const std::vector<double> all = comm::gather_to_root({first ? double(R.stats_base + first) : 0.0});
    double batch = 0;
    for (const double v : all)
      if (v > 0 && (batch == 0 || v < batch)) batch = v;
    diverged(R, int(R.state.epoch) + 1, std::size_t(comm::broadcast_value(batch)));
  }
}

// Kernel launches so far (device models; 0 for the host model).
template <class T, class Model>
std::uint64_t kernels_issued(const Run<T, Model>& R) {
  if constexpr (HasFusedStep<Model>) return R.model.kernels_issued();
  else return 0;
}

// The device work of batch k: forward and backward on this rank's part, the exchange, SGD.
template <class T, class Model>
void compute_step(Run<T, Model>& R, std::size_t k) {
  Model& model = R.model;
  const Part pt = part(R.plan, R.mp ? 0 : R.r, k);
  // inv_B = 1 / c_k, the true global count, so the short last batch is scaled right.
  const T inv_B = T(1) / T(R.plan.batch_count(k));
  const int b = int(pt.count);
  auto t_queue = Clock::now();
  if (R.mp) {
    // Every rank: its hidden units' share of the scores (rank 0 adds b2), the sum, then
    // the backward pass into its own slice (each rank regularises its own weights).
    model.partial_scores_phase(pt.offset, b, R.root);
    R.queue_s += since(t_queue);
    boundary(R, false);
    if (R.p > 1) exchange_scores(R, b);
    R.timer.mark(Mark::Backward);
    t_queue = Clock::now();
    model.model_backward_phase(b, inv_B, R.reg, R.root);
    R.queue_s += since(t_queue);
    boundary(R, false);
  } else if (R.s.shm) {
    // --device cpu, every rank on one node: one copy of the weights (exchange.h).
    if constexpr (kOnHost<Model>) {
      model.forward_backward(pt.offset, b, inv_B, R.root, R.reg);
      R.queue_s += since(t_queue);
      boundary(R, false);
      step_node_shared(R, k);
    }
    return;
  } else if (R.p == 1 && stats_deferred(R)) {
    // A lone rank's fused step: the update happens inside it (no gradient, no sgd_step).
    if constexpr (HasFusedStep<Model>) model.fused_step(pt.offset, b, inv_B, R.reg, R.lr);
    R.queue_s += since(t_queue);
    if constexpr (HasFusedStep<Model>) model.wait_step_before_last();
    boundary(R, false);
    R.timer.mark(Mark::Step);
    return;
  } else if (kOnHost<Model> && R.overlap && R.p > 1) {
    backward_with_exchange_in_host_memory(R, pt.offset, b, inv_B, t_queue);
  } else {
    // Rank 0 alone adds the regulariser (see the top of this file).
    model.forward_backward(pt.offset, b, inv_B, R.root, R.reg);  // both phases, events between
    R.queue_s += since(t_queue);
    boundary(R, false);
    // One rank holds the whole batch's gradient already: the round trip would be a no-op.
    if (R.p > 1) exchange_gradients(R);
  }
  R.timer.mark(Mark::Step);
  t_queue = Clock::now();
  model.sgd_step(R.lr);
  R.queue_s += since(t_queue);
}

// The ranks' sums of the epoch so far: (cross-entropy, hits). Collective.
template <class T, class Model>
std::array<double, 2> reduced_sums(const Run<T, Model>& R) {
  std::array<double, 2> st{R.loss_acc, double(R.hits_acc)};
  comm::allreduce_sum(st.data(), st.size());
  return st;
}

// --print-every: the epoch's loss and accuracy so far, every print_every batches.
template <class T, class Model>
void report_progress(Run<T, Model>& R, int e, std::size_t k) {
  const int every = R.cfg.print_every;
  if (every <= 0 || (k + 1) % std::size_t(every) != 0) return;
  sync_stats(R);  // collective too
  const auto st = reduced_sums(R);  // collective: every rank is at the same k
  const double seen = double(std::min((k + 1) * R.plan.B, R.plan.n));
  if (R.out) {
    std::fprintf(R.out, "  epoch %d  batch %zu/%zu  loss %.5f  train acc %.4f\n", e + 1, k + 1, R.K,
                 st[0] / seen, st[1] / seen);
    std::fflush(R.out);
  }
}

// After each step the ranks OR two flags in one small allreduce: a non-finite loss on some
// rank (the run stops with Diverged) and a stop signal on some rank (all stop after this
// same step, whichever ranks were signalled).
template <class T, class Model>
void agree_after_step(Run<T, Model>& R, int e, std::size_t k) {
  call_step_hook(std::uint64_t(e) * R.K + k + 1);
  std::vector<int> flags{std::isfinite(R.loss_acc) ? 0 : 1, stop_requested() ? 1 : 0};
  comm::any_of_each(flags);
  if (flags[0]) diverged(R, e + 1, k + 1);
  if (flags[1]) {
    R.stop = true;
    clear_stop_request();  // acted on
  }
}

// Batch k of epoch e (0-based): the device work, the step's statistics (each step's own
// sums, added on the host, so a resumed run adds the same numbers in the same order), the
// agreement on divergence and stopping, the --print-every line.
template <class T, class Model>
void step(Run<T, Model>& R, int e, std::size_t k) {
  NN_RANGE("batch iteration");
  watch("step " + std::to_string(std::uint64_t(e) * R.K + k + 1) + " (epoch " + std::to_string(e + 1) + ", batch " +
            std::to_string(k + 1) + "/" + std::to_string(R.K) + ")",
        R.steps == 0);  // the first step of this process: the setup allowance (cuBLAS, caches)
  const bool deferred = stats_deferred(R);  // else each step's own sums are read here
  if (!deferred) R.model.reset_stats();
  const std::uint64_t launches = kernels_issued(R);
  if (R.cfg.profile) {
    R.timer.begin(Mark::Untimed);
    boundary(R, true);  // every rank starts the batch together, its device idle
    R.timer.mark(R.compute);
  } else {
    R.timer.begin(R.compute);
  }
  compute_step(R, k);
  ++R.steps;
  R.kernels_per_step = double(kernels_issued(R) - launches);
  if (!deferred) {
    double loss_sum = 0;
    std::uint64_t hits = 0;
    R.model.read_stats(loss_sum, hits);  // waits for the step; NaN/inf stays in loss_acc
    R.loss_acc += loss_sum;
    R.hits_acc += hits;
  }
  R.state.batch = k + 1;
  agree_after_step(R, e, k);
  boundary(R, false);
  R.timer.end();
  report_progress(R, e, k);
}

// --persistent: how many steps from batch k of epoch e the next launch runs: up to
// kPersistentRun, never past the epoch, the next --print-every line or the next --save-every save.
template <class T, class Model>
std::size_t steps_in_run(const Run<T, Model>& R, int e, std::size_t k) {
  if (!R.s.persistent) return 1;
  std::size_t n = std::min<std::size_t>(kPersistentRun, R.K - k);
  if (R.cfg.print_every > 0) n = std::min<std::size_t>(n, std::size_t(R.cfg.print_every) - k % std::size_t(R.cfg.print_every));
  if (R.cfg.save_every) {
    const std::uint64_t done = std::uint64_t(e) * R.K + k;
    n = std::min<std::size_t>(n, std::size_t(R.cfg.save_every - done % R.cfg.save_every));
  }
  return n;
}

// Batches k .. k + n - 1 of epoch e in one persistent launch (a lone rank, stats on the device):
// what step() does for one, once for the run. The step hook sees every step's number; a stop
// request takes effect after the run.
template <class T, class Model>
void step_run(Run<T, Model>& R, int e, std::size_t k, std::size_t n) {
  NN_RANGE("step run");
  const std::uint64_t first = std::uint64_t(e) * R.K + k + 1;
  watch("steps " + std::to_string(first) + "-" + std::to_string(first + n - 1) + " (epoch " + std::to_string(e + 1) +
            ", batches " + std::to_string(k + 1) + "-" + std::to_string(k + n) + "/" + std::to_string(R.K) + ")",
        R.steps == 0);
  const std::uint64_t launches = kernels_issued(R);
  R.timer.begin(R.compute);
  if constexpr (HasFusedStep<Model>) {
    const Part pt = part(R.plan, 0, k);
    if (part(R.plan, 0, k + n - 1).offset != pt.offset + (n - 1) * R.plan.B)
      throw std::logic_error("step_run: the run's batches are not consecutive full batches");
    const auto t_queue = Clock::now();
    R.model.persistent_steps(pt.offset, int(n), int(R.plan.B), R.reg, R.lr);
    R.queue_s += since(t_queue);
    R.model.wait_step_before_last();
  }
  boundary(R, false);
  R.timer.mark(Mark::Step);
  R.steps += n;
  R.kernels_per_step = double(kernels_issued(R) - launches) / double(n);
  R.state.batch = k + n;
  for (std::size_t i = 1; i < n; ++i) call_step_hook(std::uint64_t(e) * R.K + k + i);
  agree_after_step(R, e, k + n - 1);
  boundary(R, false);
  R.timer.end();
  report_progress(R, e, k + n - 1);
}

}  // namespace nn::train
