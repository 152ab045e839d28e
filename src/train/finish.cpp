// The end of a run (finish.h): the --device cpu BLAS bound, the --report JSON and its summary,
// the final parameters, test precision, files (--metrics, --save, --report), the --verify replay;
// or, after a stop signal, the save that lets --resume continue. Tested by tests/train
// (test_report_training, test_train, test_resume).
#include "train/finish.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "train/agree.h"
#include "train/epoch.h"
#include "train/params.h"
#include "train/verify.h"

namespace nn::train {
namespace {

// The epochs this process timed, as indices [first, end) of R.progress.result.epochs: restored epochs
// (--resume) have no times, and this run's first, the warm-up, is left out when it ran more.
struct EpochRange {
  std::size_t first = 0, end = 0;
};
template <class T, class Model>
EpochRange timed_epochs(const Run<T, Model>& R) {
  const std::size_t n = R.progress.result.epochs.size();
  const std::size_t own = std::min(R.progress.restored_epochs, n);  // this run's epochs are [own, n)
  return {own + (n - own > 1 ? 1 : 0), n};
}

// Rank 0's CPU time / wall time over timed_epochs: the cores its threads kept busy; 0 = none.
struct CoresBusy {
  double cores = 0;
  std::size_t first = 0, last = 0;  // 1-based epochs
};
template <class T, class Model>
CoresBusy cores_busy(const Run<T, Model>& R) {
  const auto [from, n] = timed_epochs(R);
  double wall = 0, cpu = 0;
  for (std::size_t i = from; i < n; ++i) {
    wall += R.progress.result.epochs[i].seconds;
    cpu += R.progress.result.epochs[i].cpu_seconds;
  }
  if (wall <= 0) return {};
  return {cpu / wall, from + 1, n};
}

// The GPU step's shape in --report: the fused step or not, and the last step's kernel launches
// (ours, counted by check.h; cuBLAS's are not, so --gemm 0's count would be too low: null).
template <class T, class Model>
void add_step_shape(nlohmann::ordered_json& report, const Run<T, Model>& R) {
  report["fused"] = fused_in_use(R.cfg);
  report["persistent"] = R.setup.persistent;  // runs of steps in one cooperative launch (--persistent)
#ifdef SIM_EMULATOR
  const bool counted = true;
#else
  const bool counted = R.cfg.gemm != 0;
#endif
  if (counted) report["kernels_per_step"] = R.measured.kernels_per_step;
  else report["kernels_per_step"] = nullptr;
}

// The final parameters on every rank (model parallelism: put together on rank 0, for
// everybody, and given to rank 0's evaluator).
// The exchange beside the compute, from the phases' medians: how many pieces layer 1 went in,
// the host-visible exchange a step (D2H + all-reduce + H2D: what the overlap and the pipeline
// left exposed) and its ratio to the step's compute (forward and backward). Rank 0 prints a line
// when the exchange took longer than the compute: at that shape more ranks cost more than they
// save (docs/scaling.md).
template <class T, class Model>
void add_exchange(nlohmann::ordered_json& report, const Run<T, Model>& R) {
  const auto median = [&](const char* phase) {
    const auto& m = report["phases"][phase]["median_s"];
    return m.is_number() ? m.template get<double>() : 0.0;
  };
  const double exposed = median("d2h") + median("allreduce") + median("h2d");
  const double compute = median("forward_backward");
  const exchange::Exchange<T>& engine = *R.fixed.exchange;
  report["mpi_memory"] = R.cfg.comm == Comm::Host ? "host" : "device";
  report["comm"] = comm_name(R.cfg.comm);  // --comm; with nccl, which NCCL summed
  if (R.cfg.comm == Comm::Nccl && !kOnHost<Model>) report["nccl"] = comm::nccl_name();
  report["exchange"] = {{"pieces", engine.pieces()},
                        {"piece_bytes", engine.piece_values() * sizeof(T)},
                        {"exposed_s", R.fixed.ranks > 1 ? nlohmann::ordered_json(exposed) : nlohmann::ordered_json()},
                        {"compute_s", compute},
                        {"over_compute", R.fixed.ranks > 1 && compute > 0 ? nlohmann::ordered_json(exposed / compute)
                                                                    : nlohmann::ordered_json()}};
  if (R.out && R.fixed.ranks > 1 && compute > 0 && exposed > compute)
    std::fprintf(R.out, "exchange: %.3f ms a step, %.1fx the step's compute (%.3f ms): at this shape %d ranks "
                 "spend more time exchanging than computing (docs/scaling.md: how many GPUs pay)\n",
                 1e3 * exposed, exposed / compute, 1e3 * compute, R.fixed.ranks);
}

template <class T, class Model>
std::vector<T> final_params(Run<T, Model>& R) {
  if (!R.fixed.model_parallel) return R.setup.model->get_params();
  const std::vector<T> f = full_params(R);
  std::vector<double> fd(f.begin(), f.end());
  comm::broadcast(fd);
  std::vector<T> final_p(fd.begin(), fd.end());
  if (R.fixed.is_root) R.evaluator->set_params(final_p);
  return final_p;
}

}  // namespace

// --device cpu: the BLAS-bound limit. Every rank times its step's library GEMMs (two data
// parallel, where the C-row products are our fused layer-2 pass; five model parallel) at its own
// shapes at the same moment (so they share the cores and memory as in training); the slowest
// rank's fastest repetition is the step's floor, and every rank's FLOPs over it the job's GEMM rate.
// Printed next to the median of timed_epochs (none after a resume that trained no epoch).
template <class T, class Model>
void measure_blas_bound(Run<T, Model>& R) {
  if constexpr (kOnHost<Model>) {
    const int b = R.setup.max_part;
    // About 0.5 s of repetitions, the count decided on rank 0 so that all ranks run together.
    const double once = comm::broadcast_value(R.setup.model->time_step_gemms(b, 1, !R.fixed.model_parallel).seconds);
    const int reps = int(std::clamp(0.5 / std::max(once, 1e-6), 5.0, 300.0));
    comm::barrier();
    const auto t = R.setup.model->time_step_gemms(b, reps, !R.fixed.model_parallel);
    // --exact: a step is this rank's chunks (b = the chunk size) one after another.
    const double chunks = R.setup.exact ? double(R.setup.exact->plan().rank_columns(R.fixed.rank).count) : 1.0;
    const std::vector<double> all = comm::gather_to_root(std::vector<double>{t.seconds * chunks, t.flops * chunks});
    double slowest = 0, flops = 0;
    for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
      slowest = std::max(slowest, all[i]);
      flops += all[i + 1];
    }
    R.measured.gemm_step_s = comm::broadcast_value(slowest);
    R.measured.gemm_flops_per_s = comm::broadcast_value(slowest > 0 ? flops / slowest : 0.0);
    const auto [first, end] = timed_epochs(R);
    if (!R.out || first >= end) return;
    std::vector<double> secs;
    for (std::size_t i = first; i < end; ++i) secs.push_back(R.progress.result.epochs[i].seconds);
    std::sort(secs.begin(), secs.end());
    const double median = secs.size() % 2 ? secs[secs.size() / 2]
                                          : (secs[secs.size() / 2 - 1] + secs[secs.size() / 2]) / 2;
    const double bound = R.measured.gemm_step_s * double(R.setup.plan.n) / double(R.setup.plan.B);
    std::fprintf(R.out, "blas bound: the step's library GEMMs alone %.3f ms (slowest rank; %.1f GFLOP/s over %d rank%s "
                 "on these shapes) -> epoch >= %.4f s; median epoch %.4f s = %.2fx the bound\n",
                 1e3 * R.measured.gemm_step_s, 1e-9 * R.measured.gemm_flops_per_s, R.fixed.ranks, R.fixed.ranks == 1 ? "" : "s", bound, median,
                 bound > 0 ? median / bound : 0.0);
    // Whether the threads had cores: a rank whose threads share one core shows about 1 here.
    const CoresBusy busy = cores_busy(R);
    if (busy.cores > 0)
      std::fprintf(R.out, "cores: rank 0 kept %.2f cores busy over epochs %zu..%zu (CPU time / wall time; "
                   "%d BLAS thread%s per rank)\n", busy.cores, busy.first, busy.last, R.setup.threads,
                   R.setup.threads == 1 ? "" : "s");
    std::fflush(R.out);
  }
}

// --report / --profile: rank 0's JSON report (report.h), its summary on `out`; and the
// --graph statistics line.
template <class T, class Model>
nlohmann::ordered_json performance_report(Run<T, Model>& R) {
  nlohmann::ordered_json report;
  const Config& cfg = R.cfg;
  const double us_per_step = R.progress.steps ? 1e6 * R.measured.queue_s / double(R.progress.steps) : 0.0;
  const auto& g = R.setup.model->graph_stats();
  if (R.measured.timer.active()) {
    ReportInputs in;
    in.device = R.setup.device_name;
#ifdef SIM_EMULATOR
    in.emulator = true;
#endif
    in.cpu = kOnHost<Model>;
    in.gemm_flops_per_s = R.measured.gemm_flops_per_s;
    in.ranks = R.fixed.ranks;
    in.rank_devices = R.setup.rank_devices;
    in.is_double = std::is_same_v<T, double>;
    in.hidden = cfg.hidden;
    in.batch = cfg.batch;
    in.epochs = cfg.epochs;
    in.n_train = R.setup.root_plan.sizes.n_fit;
    in.gemm = cfg.gemm;
    in.gemm_why = cfg.gemm_why;
    in.profile = cfg.profile;
    in.node_shared = R.setup.node_memory != nullptr;
    in.exact_bytes = R.setup.exact ? 2 * R.setup.exact->wire_bytes() : 0;  // as gradient_bytes: there and back
    in.D = kInputDim;
    in.C = kNumClasses;
    in.batches = R.measured.timer.batches();
    for (std::size_t i = R.progress.restored_epochs; i < R.progress.result.epochs.size(); ++i)  // as printed, this process's
      in.epoch_seconds.push_back(R.progress.result.epochs[i].seconds);
    in.total_s = R.measured.train_s;
    report = make_report(in);
    if (R.out) {
      print_report_summary(R.out, report);
      std::fflush(R.out);
    }
    report["strategy"] = strategy_name(cfg.strategy);
    report["overlap"] = !R.fixed.model_parallel && cfg.overlap && !cfg.profile && !R.setup.node_memory;
    report["node_shared"] = R.setup.node_memory != nullptr;
    report["overlap_polls"] = R.progress.result.overlap_polls;
    add_exchange(report, R);
    if constexpr (kOnHost<Model>)
      report["cpu"] = {{"threads_per_rank", R.setup.threads},
                       {"gemm", cpu_gemm_name(cfg.cpu_gemm)},
                       {"gemm_version", cpu_gemm_version(cfg.cpu_gemm)},
                       {"gemm_step_s", R.measured.gemm_step_s},
                       {"cores_busy_rank0", cores_busy(R).cores},
                       {"blas_bound_epoch_s", R.measured.gemm_step_s * double(R.setup.plan.n) / double(R.setup.plan.B)}};
    report["host_queue_us_per_step"] = us_per_step;
    if constexpr (!kOnHost<Model>) add_step_shape(report, R);
    report["graph"] = {{"enabled", R.setup.graphs}, {"captured", g.captured}, {"nodes", g.nodes},
                       {"replays", g.replays}, {"eager_runs", g.eager}};
  }
  if (R.out && R.setup.graphs)
    std::fprintf(R.out, "graphs: %zu captured (%zu kernel/copy nodes), %zu replays, %zu eager warm-up runs; "
                 "host time to queue a step %.1f us (rank 0)\n", g.captured, g.nodes, g.replays, g.eager,
                 us_per_step);
  return report;
}

// A signal stopped the run: save where it stands (unless that is already saved), close the
// metrics file.
template <class T, class Model>
void stop_run(Run<T, Model>& R) {
  if (!R.cfg.save.empty() && R.progress.saved_at != std::pair<int, std::size_t>{int(R.setup.root_plan.state.epoch), R.setup.root_plan.state.batch})
    save_now(R);
  on_root([&] {
    FilePtr& metrics = R.setup.root_plan.metrics;
    if (metrics && (std::ferror(metrics.get()) || std::fclose(metrics.release()) != 0))
      throw UserError(R.cfg.metrics + ": write error");
  });
  R.progress.result.stopped = true;
  R.progress.result.steps = std::uint64_t(R.setup.root_plan.state.epoch) * R.fixed.batches_per_epoch + R.setup.root_plan.state.batch;
  R.progress.result.params = unpack(final_params(R), R.fixed.full_layout);
}

// Test precision, the files (metrics closed, --save, --report), the --verify replay.
template <class T, class Model>
void finish_run(Run<T, Model>& R, const nlohmann::ordered_json& report) {
  const Config& cfg = R.cfg;
  TrainResult& res = R.progress.result;
  const std::vector<T> final_p = final_params(R);
  double prec = 0;
  if (R.fixed.is_root && R.setup.root_plan.sizes.n_test) prec = double(R.evaluator->evaluate(R.setup.test)) / double(R.setup.root_plan.sizes.n_test);
  res.test_precision = comm::broadcast_value(prec);
  res.params = unpack(final_p, R.fixed.full_layout);
  res.steps = std::uint64_t(R.setup.root_plan.state.epoch) * R.fixed.batches_per_epoch + R.setup.root_plan.state.batch;
  const std::optional<Checkpoint> ck = cfg.save.empty() ? std::nullopt : snapshot(R, &final_p);
  // Rank 0 alone writes files; on_root keeps every rank in step and shares its verdict.
  on_root([&] {
    FilePtr& metrics = R.setup.root_plan.metrics;
    const bool write_failed = metrics && (std::ferror(metrics.get()) || std::fclose(metrics.release()) != 0);
    if (write_failed) throw UserError(cfg.metrics + ": write error");
    if (!cfg.save.empty()) {
      save_checkpoint(cfg.save, *ck);
      if (R.out) std::fprintf(R.out, "checkpoint: %s\n", cfg.save.c_str());
    }
    if (!cfg.report.empty()) {
      write_report(cfg.report, report);
      if (R.out) std::fprintf(R.out, "report: %s\n", cfg.report.c_str());
    }
  });
  if (cfg.verify) {
    VerifyResult v;
    if (R.fixed.is_root)
      v = replay_and_compare<T>(cfg, R.setup.plan, R.data.train, R.setup.init, final_p, R.fixed.full_layout, R.progress.start_epoch,
                                R.progress.start_batch, R.setup.exact ? &R.setup.exact->plan() : nullptr);
    res.verify = comm::broadcast_value(v);
    if (R.out)
      std::fprintf(R.out, "verify: relative error W1 %.3g  b1 %.3g  W2 %.3g  b2 %.3g (tolerance %g) %s\n", v.W1,
                   v.b1, v.W2, v.b2, v.tolerance, v.ok() ? "ok" : "FAILED");
  }
  if (R.out) {
    std::fprintf(R.out, "test precision: %.4f\n", res.test_precision);
    std::fflush(R.out);
  }
}


#define NN_INSTANTIATE(T, Model)                                                                      \
  template void measure_blas_bound<T, Model>(Run<T, Model>&);                                         \
  template nlohmann::ordered_json performance_report<T, Model>(Run<T, Model>&);                        \
  template void stop_run<T, Model>(Run<T, Model>&);                                                   \
  template void finish_run<T, Model>(Run<T, Model>&, const nlohmann::ordered_json&);
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
