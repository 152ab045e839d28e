// The training loop (epoch.h): train_epochs -> run_epoch -> take_steps, which runs the step the
// setup chose (step.cpp) with what every step needs around it; end_epoch; the saves.
// Tested by tests/train (test_train, test_resume, test_fused, test_watchdog) at 1-4 ranks.
#include "train/epoch.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"
#include "train/agree.h"
#include "train/params.h"
#include "train/run.h"
#include "train/stop.h"
#include "train/watchdog.h"

namespace nn::train {
namespace {

// ---- a step's statistics and the ranks' agreement ----------------------------------------
// A non-finite loss stops the run at the first step that produced one (every rank learns
// of it through the small allreduce after each step, agree_after_step). batch == 0: found
// at the end of the epoch (the weights themselves overflowed).
template <class T, class Model>
[[noreturn]] void diverged(const Run<T, Model>& R, int epoch, std::size_t batch) {
  const Config& cfg = R.cfg;
  const std::string where = batch ? "epoch " + std::to_string(epoch) + ", batch " + std::to_string(batch) + "/" +
                                        std::to_string(R.fixed.batches_per_epoch)
                                  : "the end of epoch " + std::to_string(epoch) + " (the weights overflowed)";
  const auto [se, sb] = R.progress.saved_at;
  const std::string kept =
      cfg.save.empty() ? "no --save was given"
      : se < 0 || (se == 0 && sb == 0) ? "nothing was saved to " + cfg.save + " (no epoch finished)"
      : sb == 0 ? cfg.save + " keeps the weights after epoch " + std::to_string(se)
                : cfg.save + " keeps the state after batch " + std::to_string(sb) + " of epoch " + std::to_string(se + 1);
  throw Diverged("non-finite loss at " + where + " (lr " + shown_number(cfg.lr) + " too large?); training stopped; " +
                 kept);
}

// With deferred statistics: the device's epoch sums so far into epoch_loss / epoch_hits, and a
// non-finite loss stops the run here, naming the first step that produced one (the smallest
// over the ranks). Collective: at the epoch's end, --print-every lines and saves.
template <class T, class Model>
void sync_stats(Run<T, Model>& R) {
  if constexpr (FusedStepModel<Model>) {
    if (!R.setup.model->stats_deferred()) return;
    R.setup.model->read_stats(R.progress.epoch_loss, R.progress.epoch_hits);
    if (comm::all_ok(std::isfinite(R.progress.epoch_loss))) return;
    const unsigned first = R.setup.model->first_nonfinite_step();
    const std::vector<double> all = comm::gather_to_root({first ? double(R.progress.device_stats_from + first) : 0.0});
    double batch = 0;
    for (const double v : all)
      if (v > 0 && (batch == 0 || v < batch)) batch = v;
    diverged(R, int(R.setup.root_plan.state.epoch) + 1, std::size_t(comm::broadcast_value(batch)));
  }
}

// The ranks' sums of the epoch so far: (cross-entropy, hits). Collective.
template <class T, class Model>
std::array<double, 2> reduced_sums(const Run<T, Model>& R) {
  std::array<double, 2> st{R.progress.epoch_loss, double(R.progress.epoch_hits)};
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
  const double seen = double(std::min((k + 1) * R.setup.plan.B, R.setup.plan.n));
  if (R.out) {
    std::fprintf(R.out, "  epoch %d  batch %zu/%zu  loss %.5f  train acc %.4f\n", e + 1, k + 1, R.fixed.batches_per_epoch,
                 st[0] / seen, st[1] / seen);
    std::fflush(R.out);
  }
}

// After each step the ranks OR two flags in one small allreduce: a non-finite loss on some
// rank (the run stops with Diverged) and a stop signal on some rank (all stop after this
// same step, whichever ranks were signalled).
template <class T, class Model>
void agree_after_step(Run<T, Model>& R, int e, std::size_t k) {
  call_step_hook(std::uint64_t(e) * R.fixed.batches_per_epoch + k + 1);
  std::vector<int> flags{std::isfinite(R.progress.epoch_loss) ? 0 : 1, stop_requested() ? 1 : 0};
  comm::any_of_each(flags);
  if (flags[0]) diverged(R, e + 1, k + 1);
  if (flags[1]) {
    R.progress.stop = true;
    clear_stop_request();  // acted on
  }
}

// How many steps from batch k of epoch e the next call of the step takes: 1, or for the
// persistent step up to Fixed::steps_per_launch (kPersistentRun), never past the epoch, the next
// --print-every line or the next --save-every save.
template <class T, class Model>
std::size_t steps_in_launch(const Run<T, Model>& R, int e, std::size_t k) {
  if (R.fixed.steps_per_launch == 1) return 1;
  std::size_t n = std::min<std::size_t>(R.fixed.steps_per_launch, R.fixed.batches_per_epoch - k);
  if (R.cfg.print_every > 0) n = std::min<std::size_t>(n, std::size_t(R.cfg.print_every) - k % std::size_t(R.cfg.print_every));
  if (R.cfg.save_every) {
    const std::uint64_t done = std::uint64_t(e) * R.fixed.batches_per_epoch + k;
    n = std::min<std::size_t>(n, std::size_t(R.cfg.save_every - done % R.cfg.save_every));
  }
  return n;
}

// ---- the step in the loop ------------------------------------------------------------------
// Batch k of epoch e (0-based), or a persistent launch's n batches from k: the step the setup
// chose (step.cpp) inside what every step needs: the watchdog's mark, --report's batch and
// --profile's line-up of the ranks, the step's statistics (each step's own sums, added on the
// host, so a resumed run adds the same numbers in the same order), the ranks' agreement on
// divergence and stopping, the --print-every line. Returns the steps taken.
template <class T, class Model>
std::size_t take_steps(Run<T, Model>& R, int e, std::size_t k) {
  NN_RANGE(R.fixed.step_range);
  const std::size_t n = steps_in_launch(R, e, k);
  const std::uint64_t first = std::uint64_t(e) * R.fixed.batches_per_epoch + k + 1;
  const std::string of_epoch = " (epoch " + std::to_string(e + 1) + ", batch" + (n > 1 ? "es " : " ") +
                               std::to_string(k + 1) + (n > 1 ? "-" + std::to_string(k + n) : "") + "/" +
                               std::to_string(R.fixed.batches_per_epoch) + ")";
  watch(n > 1 ? "steps " + std::to_string(first) + "-" + std::to_string(first + n - 1) + of_epoch
              : "step " + std::to_string(first) + of_epoch,
        R.progress.steps == 0);  // the first step of this process: the setup allowance (cuBLAS, caches)
  const bool deferred = stats_deferred(R);  // else each step's own sums are read here
  if (!deferred) R.setup.model->reset_stats();
  const std::uint64_t launches = kernels_issued(R);
  // The batch's first phase starts now (the step's own Phase marks it again: the same phase), so
  // the phases tile the batch; --profile first lines every rank up, its device idle, untimed.
  R.measured.timer.begin(R.cfg.profile ? Mark::Untimed : R.fixed.first_mark);
  boundary(R, true);
  R.fixed.step(R, k, n);
  R.progress.steps += n;
  R.measured.kernels_per_step = double(kernels_issued(R) - launches) / double(n);
  if (!deferred) {
    double loss_sum = 0;
    std::uint64_t hits = 0;
    R.setup.model->read_stats(loss_sum, hits);  // waits for the step; NaN/inf stays in epoch_loss
    R.progress.epoch_loss += loss_sum;
    R.progress.epoch_hits += hits;
  }
  R.setup.root_plan.state.batch = k + n;
  for (std::size_t i = 1; i < n; ++i) call_step_hook(std::uint64_t(e) * R.fixed.batches_per_epoch + k + i);
  agree_after_step(R, e, k + n - 1);
  boundary(R, false);
  R.measured.timer.end();
  report_progress(R, e, k + n - 1);
  return n;
}

// ---- the epoch ------------------------------------------------------------------------------
// Rank 0's validation accuracy with the current weights (0 without a validation set).
// Collective under model parallelism (the slices are gathered first).
template <class T, class Model>
double validation_accuracy(Run<T, Model>& R) {
  if (!R.setup.root_plan.sizes.n_val) return 0;
  if (R.fixed.model_parallel) {
    const std::vector<T> f = full_params(R);
    if (R.fixed.is_root) R.evaluator->set_params(f);
  }
  return R.fixed.is_root ? double(R.evaluator->evaluate(R.setup.val)) / double(R.setup.root_plan.sizes.n_val) : 0;
}

// The epoch's line, its --metrics row.
template <class T, class Model>
void report_epoch(Run<T, Model>& R, const EpochStats& es) {
  if (R.out) {
    std::fprintf(R.out, "epoch %3d  loss %.5f  train acc %.4f  val acc %.4f  %.2f s  %.0f images/s\n", es.epoch,
                 es.loss, es.train_acc, es.val_acc, es.seconds, es.images_per_s);
    std::fflush(R.out);
  }
  if (std::FILE* m = R.setup.root_plan.metrics.get()) {
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
  R.measured.timer.flush();  // the epoch's last batch
  sync_stats(R);    // the fused step's sums, read once an epoch
  const auto st = reduced_sums(R);
  EpochStats es;
  es.epoch = e + 1;
  es.seconds = since(t_epoch);
  es.cpu_seconds = process_cpu_seconds() - cpu_epoch;
  es.images_per_s = double(R.setup.plan.n) / std::max(es.seconds, 1e-9);
  std::vector<double> wsq{R.setup.model->weight_sq_norm()};
  if (R.fixed.model_parallel) comm::sum(wsq);  // each rank holds its own slice's weights
  es.loss = st[0] / double(R.setup.plan.n) + 0.5 * R.cfg.reg * wsq[0];
  es.train_acc = st[1] / double(R.setup.plan.n);
  es.val_acc = validation_accuracy(R);
  es = comm::broadcast_value(es);  // rank 0's clock and validation for everyone
  if (!comm::all_ok(std::isfinite(es.loss))) diverged(R, e + 1, 0);  // the weights themselves overflowed
  R.progress.result.epochs.push_back(es);
  report_epoch(R, es);
  // The loss is kept rounded to float: its last bits in double depend on the order of the
  // device's atomic additions (one per block), which a GPU -- and the emulator's lazy streams
  // -- do not fix, so equal runs give equal files. The accuracies are exact (counts).
  R.setup.root_plan.state.epochs.push_back({double(static_cast<float>(es.loss)), es.train_acc, es.val_acc});
  R.setup.root_plan.state.epoch = std::uint32_t(e + 1);
  R.setup.root_plan.state.batch = 0;
  R.progress.epoch_loss = 0;
  R.progress.epoch_hits = 0;
  if (stats_deferred(R)) {  // the device's sums too: the save below reads them
    R.setup.model->reset_stats();
    R.progress.device_stats_from = 0;
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
  if (R.setup.exact) {  // this rank's chunks of the epoch, in the order exact_step reads them
    R.setup.exact->start_epoch(R.fixed.rank, e);
    R.setup.model->set_order(R.setup.exact->epoch().order);
    for (auto& f : R.setup.followers) f->set_order(R.setup.exact->epoch().order);
  } else {
    R.setup.model->set_order(shard_order(R.setup.plan, R.fixed.model_parallel ? 0 : R.fixed.rank, e));
  }
  if constexpr (FusedStepModel<Model>)
    if (stats_deferred(R)) {  // the device continues this epoch's sums (a resumed one's too)
      R.setup.model->set_stats(R.progress.epoch_loss, R.progress.epoch_hits);
      R.progress.device_stats_from = R.setup.root_plan.state.batch;
    }
  for (std::size_t k = R.setup.root_plan.state.batch; k < R.fixed.batches_per_epoch;) {
    k += take_steps(R, e, k);
    const std::uint64_t run_step = std::uint64_t(e) * R.fixed.batches_per_epoch + k;
    if (R.cfg.save_every && run_step % R.cfg.save_every == 0 && k < R.fixed.batches_per_epoch) save_now(R);
    if (R.progress.stop && k < R.fixed.batches_per_epoch) return;
  }
  end_epoch(R, e, t_epoch, cpu_epoch);
}

}  // namespace

template <class T, class Model>
void open_metrics(Run<T, Model>& R) {
  if (R.cfg.metrics.empty()) return;
  FilePtr& metrics = R.setup.root_plan.metrics;
  on_root([&] {
    metrics.reset(std::fopen(R.cfg.metrics.c_str(), "w"));
    if (!metrics)
      throw UserError(R.cfg.metrics + ": cannot write the metrics file (" + std::strerror(errno) + ")");
    std::fprintf(metrics.get(), "epoch,loss,train_acc,val_acc,seconds,images_per_s\n");
    // A resumed run rewrites the saved epochs' rows; their timings are not kept (empty).
    for (std::size_t i = 0; i < R.progress.restored_epochs; ++i) {
      const EpochRecord& e = R.setup.root_plan.state.epochs[i];
      std::fprintf(metrics.get(), "%zu,%.6f,%.6f,%.6f,,\n", i + 1, e.loss, e.train_acc, e.val_acc);
    }
  });
}

// Under --graph the two passes are one graph: no host code runs between them, so --report
// times them as one.
template <class T, class Model>
void train_epochs(Run<T, Model>& R) {
  if (R.fixed.split_passes && !R.fixed.model_parallel) R.setup.model->set_phase_hook([&R] {
    boundary(R, false);
    R.measured.timer.mark(Mark::Backward);
  });
  const auto t_train = Clock::now();
  {
    NN_RANGE(kOnHost<Model> ? "train (cpu)" : "train (gpu)");  // says what computes
    for (int e = R.progress.start_epoch; e < R.cfg.epochs && !R.progress.stop; ++e) run_epoch(R, e);
  }
  if (int(R.setup.root_plan.state.epoch) == R.cfg.epochs) R.progress.stop = false;  // a signal after the last step: just finish
  R.measured.train_s = since(t_train);
  R.progress.result.overlap_polls = comm::sum(std::uint64_t(R.fixed.exchange->polls()));  // every rank's
  R.setup.model->set_phase_hook({});
}

template <class T, class Model>
std::vector<T> full_params(Run<T, Model>& R) {
  const std::vector<T> mine = R.setup.model->get_params();
  const std::vector<double> all = comm::gather_to_root(std::vector<double>(mine.begin(), mine.end()));
  if (!R.fixed.is_root) return {};
  const std::vector<double> f = assemble_params(all, kInputDim, R.cfg.hidden, kNumClasses, R.fixed.ranks);
  return std::vector<T>(f.begin(), f.end());
}

template <class T, class Model>
std::optional<Checkpoint> snapshot(Run<T, Model>& R, const std::vector<T>* params) {
  const std::vector<T> cur = params           ? *params
                             : R.fixed.model_parallel ? full_params(R)
                             : R.fixed.is_root        ? R.setup.model->get_params()
                                                : std::vector<T>{};
  const std::vector<double> sums = comm::gather_to_root({R.progress.epoch_loss, double(R.progress.epoch_hits)});
  if (!R.fixed.is_root) return std::nullopt;
  Checkpoint ck = unpack(cur, R.fixed.full_layout);
  TrainState st = R.setup.root_plan.state;
  for (std::size_t q = 0; q < st.loss_sum.size(); ++q) {
    st.loss_sum[q] = sums[2 * q];
    st.hits[q] = std::uint64_t(sums[2 * q + 1]);
  }
  ck.state = std::move(st);
  return ck;
}

// With --save, the state is saved after every epoch, every --save-every steps and when a
// signal stops the run, so a job that dies, diverges or is preempted keeps its last good state.
template <class T, class Model>
void save_now(Run<T, Model>& R) {
  sync_stats(R);  // the fused step's sums are on the device
  const auto t0 = Clock::now();
  const std::optional<Checkpoint> ck = snapshot(R);
  on_root([&] { save_checkpoint(R.cfg.save, *ck); });
  R.progress.saved_at = {int(R.setup.root_plan.state.epoch), std::size_t(R.setup.root_plan.state.batch)};
  R.progress.result.save_seconds += since(t0);
  ++R.progress.result.saves;
}

#define NN_INSTANTIATE(T, Model)                                                                \
  template void open_metrics<T, Model>(Run<T, Model>&);                                         \
  template void train_epochs<T, Model>(Run<T, Model>&);                                         \
  template std::vector<T> full_params<T, Model>(Run<T, Model>&);                                \
  template std::optional<Checkpoint> snapshot<T, Model>(Run<T, Model>&, const std::vector<T>*); \
  template void save_now<T, Model>(Run<T, Model>&);
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
