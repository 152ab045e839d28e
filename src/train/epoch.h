// Epochs: run_epoch (its steps, step.h), end_epoch (statistics, validation, the report
// line and --metrics row, the save), the checkpoint snapshot and save_now, and train_epochs
// over all of them. Internal to src/train (included by trainer.cpp).
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"
#include "io/checkpoint.h"
#include "train/params.h"
#include "train/step.h"

namespace nn::train {

// Rank 0 opens --metrics once setup has succeeded (so a failed start keeps the old CSV).
template <class T, class Model>
void open_metrics(Run<T, Model>& R) {
  if (R.cfg.metrics.empty()) return;
  FilePtr& metrics = R.s.rp.metrics;
  on_root([&] {
    metrics.reset(std::fopen(R.cfg.metrics.c_str(), "w"));
    if (!metrics)
      throw UserError(R.cfg.metrics + ": cannot write the metrics file (" + std::strerror(errno) + ")");
    std::fprintf(metrics.get(), "epoch,loss,train_acc,val_acc,seconds,images_per_s\n");
    // A resumed run rewrites the saved epochs' rows; their timings are not kept (empty).
    for (std::size_t i = 0; i < R.restored_epochs; ++i) {
      const EpochRecord& e = R.state.epochs[i];
      std::fprintf(metrics.get(), "%zu,%.6f,%.6f,%.6f,,\n", i + 1, e.loss, e.train_acc, e.val_acc);
    }
  });
}

// The whole network's parameters, put together from the model-parallel slices. Collective;
// the result on rank 0 only.
template <class T, class Model>
std::vector<T> full_params(Run<T, Model>& R) {
  const std::vector<T> mine = R.model.get_params();
  const std::vector<double> all = comm::gather_to_root(std::vector<double>(mine.begin(), mine.end()));
  if (!R.root) return {};
  const std::vector<double> f = assemble_params(all, kInputDim, R.cfg.hidden, kNumClasses, R.p);
  return std::vector<T>(f.begin(), f.end());
}

// Rank 0's validation accuracy with the current weights (0 without a validation set).
// Collective under model parallelism (the slices are gathered first).
template <class T, class Model>
double validation_accuracy(Run<T, Model>& R) {
  if (!R.sz.n_val) return 0;
  if (R.mp) {
    const std::vector<T> f = full_params(R);
    if (R.root) R.evaluator->set_params(f);
  }
  return R.root ? double(R.evaluator->evaluate(R.s.val)) / double(R.sz.n_val) : 0;
}

// The weights and the state as --save holds them, on rank 0 (std::nullopt elsewhere).
// Collective: model parallelism gathers the slices, every rank sends its epoch sums.
template <class T, class Model>
std::optional<Checkpoint> snapshot(Run<T, Model>& R, const std::vector<T>* params = nullptr) {
  const std::vector<T> cur = params ? *params : R.mp ? full_params(R) : R.root ? R.model.get_params() : std::vector<T>{};
  const std::vector<double> sums = comm::gather_to_root({R.loss_acc, double(R.hits_acc)});
  if (!R.root) return std::nullopt;
  Checkpoint ck = unpack(cur, R.full_layout);
  TrainState st = R.state;
  for (std::size_t q = 0; q < st.loss_sum.size(); ++q) {
    st.loss_sum[q] = sums[2 * q];
    st.hits[q] = std::uint64_t(sums[2 * q + 1]);
  }
  ck.state = std::move(st);
  return ck;
}

// With --save, the state is saved after every epoch, every --save-every steps and when a
// signal stops the run (written to a temporary file, fsync'ed and renamed, checkpoint.cpp),
// so a job that dies, diverges or is preempted keeps its last good state.
template <class T, class Model>
void save_now(Run<T, Model>& R) {
  sync_stats(R);  // the fused step's sums are on the device
  const auto t0 = Clock::now();
  const std::optional<Checkpoint> ck = snapshot(R);
  on_root([&] { save_checkpoint(R.cfg.save, *ck); });
  R.saved_at = {int(R.state.epoch), std::size_t(R.state.batch)};
  R.res.save_seconds += since(t0);
  ++R.res.saves;
}

// The epoch's line, its --metrics row.
template <class T, class Model>
void report_epoch(Run<T, Model>& R, const EpochStats& es) {
  if (R.out) {
    std::fprintf(R.out, "epoch %3d  loss %.5f  train acc %.4f  val acc %.4f  %.2f s  %.0f images/s\n", es.epoch,
                 es.loss, es.train_acc, es.val_acc, es.seconds, es.images_per_s);
    std::fflush(R.out);
  }
  if (std::FILE* m = R.s.rp.metrics.get()) {
    std::fprintf(m, "%d,%.6f,%.6f,%.6f,%.4f,%.1f\n", es.epoch, es.loss, es.train_acc, es.val_acc, es.seconds,
                 es.images_per_s);
    std::fflush(m);
  }
}

// After the last batch of epoch e: its statistics (loss with the regulariser, accuracies),
// the report, and the save.
template <class T, class Model>
void end_epoch(Run<T, Model>& R, int e, Clock::time_point t_epoch, double cpu_epoch) {
  watch("the end of epoch " + std::to_string(e + 1) + " (sums, validation, save)", false);
  R.timer.flush();  // the epoch's last batch
  sync_stats(R);    // the fused step's sums, read once an epoch
  const auto st = reduced_sums(R);
  EpochStats es;
  es.epoch = e + 1;
  es.seconds = since(t_epoch);
  es.cpu_seconds = process_cpu_seconds() - cpu_epoch;
  es.images_per_s = double(R.plan.n) / std::max(es.seconds, 1e-9);
  std::vector<double> wsq{R.model.weight_sq_norm()};
  if (R.mp) comm::sum(wsq);  // each rank holds its own slice's weights
  es.loss = st[0] / double(R.plan.n) + 0.5 * R.cfg.reg * wsq[0];
  es.train_acc = st[1] / double(R.plan.n);
  es.val_acc = validation_accuracy(R);
  es = comm::broadcast_value(es);  // rank 0's clock and validation for everyone
  stop_if_diverged(R, e + 1, 0, es.loss);  // the weights themselves overflowed
  R.res.epochs.push_back(es);
  report_epoch(R, es);
  // The loss is kept rounded to float: its last bits in double depend on the order of the
  // device's atomic additions (one per block), which a GPU -- and the emulator's lazy streams
  // -- do not fix, so equal runs give equal files. The accuracies are exact (counts).
  R.state.epochs.push_back({double(static_cast<float>(es.loss)), es.train_acc, es.val_acc});
  R.state.epoch = std::uint32_t(e + 1);
  R.state.batch = 0;
  R.loss_acc = 0;
  R.hits_acc = 0;
  if (stats_deferred(R)) {  // the device's sums too: the save below reads them
    R.model.reset_stats();
    R.stats_base = 0;
  }
  if (!R.cfg.save.empty() && e + 1 < R.cfg.epochs) save_now(R);  // the last one: finish_run
}

// Epoch e from the state's batch on (0, or where a resumed run stopped); it ends early when
// the ranks agree to stop. --save-every K saves after every K-th step of the run (the epoch's
// last step is saved by end_epoch).
template <class T, class Model>
void run_epoch(Run<T, Model>& R, int e) {
  const auto t_epoch = Clock::now();
  const double cpu_epoch = process_cpu_seconds();
  R.model.set_order(shard_order(R.plan, R.mp ? 0 : R.r, e));
  if constexpr (HasFusedStep<Model>)
    if (stats_deferred(R)) {  // the device continues this epoch's sums (a resumed one's too)
      R.model.set_stats(R.loss_acc, R.hits_acc);
      R.stats_base = R.state.batch;
    }
  for (std::size_t k = R.state.batch; k < R.K;) {
    const std::size_t n = steps_in_run(R, e, k);  // 1 unless --persistent
    if (R.s.persistent) step_run(R, e, k, n);
    else step(R, e, k);
    k += n;
    const std::uint64_t run_step = std::uint64_t(e) * R.K + k;
    if (R.cfg.save_every && run_step % R.cfg.save_every == 0 && k < R.K) save_now(R);
    if (R.stop && k < R.K) return;
  }
  end_epoch(R, e, t_epoch, cpu_epoch);
}

// Under --graph the two passes are one graph: no host code runs between them, so --report
// times them as one.
template <class T, class Model>
void train_epochs(Run<T, Model>& R) {
  if constexpr (HasPhaseHook<Model>)
    if (R.split && !R.mp) R.model.set_phase_hook([&R] {
      boundary(R, false);
      R.timer.mark(Mark::Backward);
    });
  const auto t_train = Clock::now();
  {
    NN_RANGE(kOnHost<Model> ? "train (cpu)" : "train (gpu)");  // says what computes
    for (int e = R.start_epoch; e < R.cfg.epochs && !R.stop; ++e) run_epoch(R, e);
  }
  if (int(R.state.epoch) == R.cfg.epochs) R.stop = false;  // a signal after the last step: just finish
  R.train_s = since(t_train);
  R.res.overlap_polls = comm::sum(std::uint64_t(R.overlap_polls));  // every rank's
  if constexpr (HasPhaseHook<Model>) R.model.set_phase_hook({});
}

}  // namespace nn::train
