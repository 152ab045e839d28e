// The data-parallel training loop: load on rank 0, scatter the shards once, per batch
// forward/backward on every rank's slice, one packed-gradient MPI_Allreduce, SGD; report,
// checkpoint, the --report phase timing (report.h) and the --verify replay on the Armadillo
// reference. Tested by tests/train/test_train.cpp and test_report.cpp at 1-4 ranks;
// `make run` runs it on the real data.
//
// The loop is in named pieces over one Run<T, Model> (see "the run" below): setup,
// train_epochs -> run_epoch -> step -> compute_step -> exchange_gradients / exchange_scores,
// end_epoch (validation_accuracy, report_epoch, save_now), performance_report, finish_run.
// They use only DeviceModel's public API, so another model class with the same API is one
// more instantiation of train_with<T, Model>.
//
// Where the L2 term lives: inside the gradient, added by rank 0 only (GEMM beta*C with
// C = W), so the allreduced buffer is exactly the course's dJ/dp of the global batch and the
// step is p <- p - lr * g for every entry (ops sgd_update with reg = 0) -- the same formula as
// nn::ref::backward + nn::ref::sgd_update, which --verify replays.
#include "train/trainer.h"

#include <armadillo>
#include <cuda_runtime.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "comm/comm.h"
#include "common/check.h"
#include "common/device_buffer.h"
#include "common/nvtx.h"
#include "io/idx.h"
#include "gemm/gemm.h"
#include "schedule/init.h"
#include "common/nn_real.h"
#include "reference/ref_net.h"
#include "model/cpu_model.h"
#include "model/device_model.h"
#include "train/model_parallel.h"
#include "train/report.h"
#include "schedule/shards.h"

namespace nn::train {

namespace {
// Set by the stop signals (request_stop), read and cleared by agree_after_step.
volatile std::sig_atomic_t g_stop_requested = 0;
StepHook g_step_hook = nullptr;
struct sigaction g_old_term, g_old_usr1;
bool g_signals_installed = false;

extern "C" void on_stop_signal(int) { g_stop_requested = 1; }

}  // namespace

void request_stop() { g_stop_requested = 1; }

void install_stop_signals() {
  if (g_signals_installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a save's write/fsync is not cut short
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGUSR1, &sa, &g_old_usr1);
  g_signals_installed = true;
}

void restore_stop_signals() {
  if (!g_signals_installed) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_signals_installed = false;
}

StepHook set_step_hook(StepHook hook) {
  const StepHook old = g_step_hook;
  g_step_hook = hook;
  return old;
}

double verify_tolerance(bool is_double) {
  // The GPU and the reference compute the same maths in different summation orders (GEMM
  // tiles and split-K vs OpenBLAS, x * (1/B) vs x / B, two sigmoid formulas), so each step
  // differs by a few ulps, and the differences grow slowly with the number of SGD steps.
  // Measured relative errors of the final parameters (emulator build, 1-4 ranks):
  //   float:  3e-8 .. 7e-7 in tests/train (5-30 steps); 1.1e-6 (W2) .. 2.9e-6 (b2) after
  //           the default Fashion-MNIST run (54k images, B = 100, 10 epochs = 5400 steps);
  //   double: 1.5e-16 .. 1.0e-15 in the tests; 1.3e-15 .. 3.4e-15 after 3 default epochs.
  // So float gets 1e-4 (35x over the longest run measured: room for longer runs and other
  // GEMM orders, e.g. cuBLAS) and double 1e-10 (five orders of room). Real bugs are far
  // above both: the regulariser added on every rank gives 3e-3 .. 2e-2, slices scaled by
  // their own size instead of the global batch 0.4 .. 7 (measured on the test configurations).
  return is_double ? 1e-10 : 1e-4;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string shown_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Runs fn on rank 0. A user error there reaches every rank as the same nn::UserError, so no
// rank is left waiting in a collective that rank 0 never enters.
template <class F>
void on_root(F&& fn) {
  std::string err;  // "E<message>" on failure: an exception may carry an empty message
  if (comm::rank() == 0) {
    try {
      fn();
    } catch (const UserError& e) {
      err = std::string("E") + e.what();
    } catch (const data::IdxError& e) {
      err = std::string("E") + e.what();
    }
  }
  err = comm::broadcast(err);
  if (!err.empty()) throw UserError(err.substr(1));
}

// A problem one rank may find alone (no GPU on its node): the first one, by rank, becomes
// the same nn::UserError on every rank.
void all_ranks_ok(const std::string& local_problem) {
  std::string first;
  const std::vector<std::string> all = comm::gather_strings(local_problem);
  for (std::size_t r = 0; r < all.size() && first.empty(); ++r)
    if (!all[r].empty()) first = "E rank " + std::to_string(r) + ": " + all[r];
  first = comm::broadcast(first);
  if (!first.empty()) throw UserError(first.substr(2));
}

// Identical on every rank (every rank parsed the same command line), so no collective.
void validate(const Config& cfg) {
  auto bad = [](const std::string& m) { throw UserError(m); };
  if (cfg.hidden < 1) bad("--hidden must be at least 1");
  if (cfg.batch < 1 || cfg.batch > std::size_t(1) << 30) bad("--batch must be in [1, 2^30]");
  if (cfg.epochs < 0) bad("--epochs must not be negative");
  if (cfg.resume && cfg.save.empty()) bad("--resume needs --save FILE (the file it continues from and saves to)");
  if (cfg.save_every && cfg.save.empty()) bad("--save-every needs --save FILE");
  if (cfg.epochs == 0 && cfg.load.empty() && !cfg.resume)
    bad("--epochs 0 scores a saved model: give --load FILE (or --resume --save FILE)");
  if (!(cfg.lr > 0) || !std::isfinite(cfg.lr)) bad("--lr must be a positive number");
  if (!(cfg.reg >= 0) || !std::isfinite(cfg.reg)) bad("--reg must be a number >= 0");
  if (!(cfg.val_fraction >= 0 && cfg.val_fraction < 1)) bad("--val-fraction must be in [0, 1)");
  if (cfg.print_every < 0) bad("--print-every must not be negative");
  if (cfg.gemm < 0 || cfg.gemm >= kGemmVariants)
    bad("--gemm must be 0.." + std::to_string(kGemmVariants - 1));
  if (!gemm_variant_available(cfg.gemm))
    bad("--gemm " + std::to_string(cfg.gemm) + " (" + gemm_variant_name(cfg.gemm) +
        ") is not available in this build");
  // The server adds the gradients on the host, so it needs them in host memory.
  if (cfg.mpi_device && cfg.strategy == Strategy::ParamServer)
    bad("--mpi device works with --strategy allreduce or model; the parameter server (ps) sums on the host");
  if (cfg.device == Device::Cpu && cfg.mpi_device)
    bad("--mpi device is for --device gpu (with --device cpu, MPI already reduces the gradient in place)");
  if (cfg.device == Device::Cpu && cfg.graph) bad("--graph (CUDA Graphs) is for --device gpu");
}

// The model that computes on the host (--device cpu): no CUDA device, no streams.
template <class Model>
inline constexpr bool kOnHost = !std::is_constructible_v<Model, int, int, int, int, int>;

template <class Model>
std::unique_ptr<Model> make_model(int D, int H, int C, int max_cols, const Config& cfg) {
  if constexpr (kOnHost<Model>)
    return std::make_unique<Model>(D, H, C, max_cols);
  else
    return std::make_unique<Model>(D, H, C, max_cols, cfg.gemm);
}

// cudaSetDevice(local rank % devices): the rank within the node, not the global rank,
// so a multi-node job uses every node's GPUs. Returns a problem description, or "".
std::string select_device(std::string& description, std::string& name) {
  const int local = comm::local_rank();  // collective: called before any early return
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    (void)cudaGetLastError();  // clear it: the error is reported as a user error instead
    return std::string("no CUDA device visible") +
           (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : std::string());
  }
  const int dev = local % count;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  description = "device " + std::to_string(dev) + " of " + std::to_string(count) + ": " + prop.name;
  name = prop.name;
  return "";
}

// GPGPU-Sim (tests/gpgpusim/run.sh) executes our kernels' PTX but has no cuBLAS (CUDA 13's
// ships no PTX) and no stream capture: say so in one line instead of failing inside them.
std::string simulator_limits(const std::string& device_name, const Config& cfg) {
  if (device_name.rfind("GPGPU-Sim", 0) != 0) return "";
  if (cfg.gemm == 0) return "--gemm 0 (cuBLAS) does not run on GPGPU-Sim; use --gemm 1-4";
  if (cfg.graph) return "--graph (CUDA Graphs) does not run on GPGPU-Sim; leave it out";
  return "";
}

struct FileCloser {
  void operator()(std::FILE* f) const { if (f) std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// [W1 | b1 | W2 | b2] <-> the four tensors of a checkpoint / initialisation.
std::vector<double> pack(const std::vector<double>& W1, const std::vector<double>& b1,
                         const std::vector<double>& W2, const std::vector<double>& b2) {
  std::vector<double> out;
  out.reserve(W1.size() + b1.size() + W2.size() + b2.size());
  for (const auto* v : {&W1, &b1, &W2, &b2}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

template <class T>
Checkpoint unpack(const std::vector<T>& p, const ParamLayout& L) {
  Checkpoint ck;
  ck.D = L.D; ck.H = L.H; ck.C = L.C;
  ck.is_double = std::is_same_v<T, double>;
  auto take = [&](std::size_t at, std::size_t n) { return std::vector<double>(p.begin() + at, p.begin() + at + n); };
  ck.W1 = take(L.W1(), std::size_t(L.H) * L.D);
  ck.b1 = take(L.b1(), L.H);
  ck.W2 = take(L.W2(), std::size_t(L.C) * L.H);
  ck.b2 = take(L.b2(), L.C);
  return ck;
}

// ||a - ref||_F / ||ref||_F (absolute when ref is zero), in double.
template <class T>
double rel_error(const T* a, const T* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The --verify replay: the Armadillo reference trains from the same initial parameters on
// the same global batches (global_epoch_order: the composition the ranks' shards produced),
// with the same 1/c_k scaling and reg, then the final parameters are compared.
// A resumed run replays from where it started (epoch e0, batch k0) with the weights it
// started from.
template <class T>
VerifyResult replay_and_compare(const Config& cfg, const ShardPlan& plan, const HostSplit& train,
                                const std::vector<T>& init, const std::vector<T>& final_p,
                                const ParamLayout& L, int e0, std::size_t k0) {
  NN_RANGE("verify");
  const arma::uword D = L.D, H = L.H, C = L.C;
  ref::Params<T> P;
  P.W1 = arma::Mat<T>(init.data() + L.W1(), H, D);
  P.b1 = arma::Col<T>(init.data() + L.b1(), H);
  P.W2 = arma::Mat<T>(init.data() + L.W2(), C, H);
  P.b2 = arma::Col<T>(init.data() + L.b2(), C);
  const T lr = static_cast<T>(cfg.lr), reg = static_cast<T>(cfg.reg);
  std::array<T, 256> lut{};  // v / 255 per byte value: the bits data::normalize gives
  for (int v = 0; v < 256; ++v) lut[std::size_t(v)] = static_cast<T>(v) / T(255);
  arma::Mat<T> X;
  for (int e = e0; e < cfg.epochs; ++e) {
    const std::vector<std::uint32_t> order = global_epoch_order(plan, e);
    for (std::size_t k = e == e0 ? k0 : 0; k < plan.num_batches(); ++k) {
      const std::size_t c = plan.batch_count(k);
      const std::span<const std::uint32_t> idx(order.data() + k * plan.B, c);
      X.set_size(D, c);
      for (std::size_t j = 0; j < c; ++j) {
        const std::uint8_t* src = train.images.data() + std::size_t(idx[j]) * D;
        T* dst = X.colptr(j);
        for (arma::uword i = 0; i < D; ++i) dst[i] = lut[src[i]];
      }
      const arma::Mat<T> Y = ref::one_hot<T>(train.labels, idx, int(C));
      const ref::Cache<T> cache = ref::forward(P, X);
      ref::sgd_update(P, ref::backward(P, cache, X, Y, reg, double(c)), lr);
    }
  }
  VerifyResult v;
  v.ran = true;
  v.tolerance = verify_tolerance(std::is_same_v<T, double>);
  v.W1 = rel_error(final_p.data() + L.W1(), P.W1.memptr(), P.W1.n_elem);
  v.b1 = rel_error(final_p.data() + L.b1(), P.b1.memptr(), P.b1.n_elem);
  v.W2 = rel_error(final_p.data() + L.W2(), P.W2.memptr(), P.W2.n_elem);
  v.b2 = rel_error(final_p.data() + L.b2(), P.b2.memptr(), P.b2.n_elem);
  return v;
}

// What rank 0 decides from the data, the options and the files: sizes, the initial
// parameters (fresh or from --load), the open --metrics file.
struct Sizes {
  std::uint64_t n_fit = 0, n_val = 0, n_test = 0;
};
struct RootPlan {
  Sizes sz;
  std::vector<double> init;  // packed, as drawn / as stored
  FilePtr metrics;
  TrainState state;           // rank 0: fresh (epoch 0, batch 0) or as saved; its fingerprint
  bool resumed = false;       // the state and init came from --save (--resume)
};

// CRC32 of the fitted images, then their labels: the training data's identity in a state.
std::uint32_t data_crc(const HostData& data, std::size_t n_fit) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto feed = [&](const std::uint8_t* p, std::size_t n) {
    for (std::size_t at = 0; at < n; at += std::size_t{1} << 30)
      crc = crc32(crc, p + at, static_cast<uInt>(std::min(n - at, std::size_t{1} << 30)));
  };
  feed(data.train.images.data(), n_fit * kInputDim);
  feed(data.train.labels.data(), n_fit);
  return static_cast<std::uint32_t>(crc);
}

RunFingerprint fingerprint_of(const Config& cfg, const HostData& data, const Sizes& sz) {
  RunFingerprint f;
  f.seed = cfg.seed;
  f.batch = cfg.batch;
  f.n_fit = sz.n_fit;
  f.n_val = sz.n_val;
  f.lr = cfg.lr;
  f.reg = cfg.reg;
  f.ranks = static_cast<std::uint32_t>(comm::size());
  f.strategy = static_cast<std::uint32_t>(cfg.strategy);
  // --device cpu computes with BLAS whatever --gemm says: its own value, so that a run is
  // never resumed on the other device (the bits differ; RunFingerprint::kCpuBlas).
  f.gemm = cfg.device == Device::Cpu ? RunFingerprint::kCpuBlas : static_cast<std::uint32_t>(cfg.gemm);
  f.shuffle = cfg.shuffle ? 1 : 0;
  f.data_crc = data_crc(data, sz.n_fit);
  return f;
}

// One error naming the first field that differs between the saved run and this one.
void check_fingerprint(const std::string& file, const RunFingerprint& was, const RunFingerprint& now) {
  const auto num = [](auto v) { return std::to_string(v); };
  const auto strat = [](std::uint32_t v) { return std::string(v <= 2 ? strategy_name(Strategy(v)) : "?"); };
  const auto differ = [&](const std::string& what, const std::string& a, const std::string& b) {
    throw UserError(file + ": cannot resume: " + what + " is " + a + " in the saved run, " + b +
                    " in this one (restore it, or start a new run with another --save file)");
  };
  if (was.seed != now.seed) differ("--seed", num(was.seed), num(now.seed));
  if (was.batch != now.batch) differ("--batch", num(was.batch), num(now.batch));
  if (was.n_fit != now.n_fit)
    differ("the number of training images (--train-size, --val-fraction)", num(was.n_fit), num(now.n_fit));
  if (was.n_val != now.n_val)
    differ("the number of validation images (--train-size, --val-fraction)", num(was.n_val), num(now.n_val));
  if (was.lr != now.lr) differ("--lr", shown_number(was.lr), shown_number(now.lr));
  if (was.reg != now.reg) differ("--reg", shown_number(was.reg), shown_number(now.reg));
  if (was.ranks != now.ranks) differ("the number of MPI ranks", num(was.ranks), num(now.ranks));
  if (was.strategy != now.strategy) differ("--strategy", strat(was.strategy), strat(now.strategy));
  const auto gemm = [](std::uint32_t v) {
    return v == RunFingerprint::kCpuBlas ? std::string("--device cpu (BLAS)") : "--device gpu --gemm " + std::to_string(v);
  };
  if (was.gemm != now.gemm) differ("the device and GEMM (--device, --gemm)", gemm(was.gemm), gemm(now.gemm));
  if (was.shuffle != now.shuffle)
    differ("shuffling (--no-shuffle)", was.shuffle ? "on" : "off", now.shuffle ? "on" : "off");
  if (was.data_crc != now.data_crc)
    differ("the training data (CRC32 of images and labels)", num(was.data_crc), num(now.data_crc));
}

// A checkpoint's network must be this run's: D, H, C and the precision.
void check_network(const std::string& file, const Checkpoint& ck, int H, bool is_double) {
  const int D = kInputDim, C = kNumClasses;
  if (ck.D != D || ck.H != H || ck.C != C)
    throw UserError(file + ": checkpoint is " + std::to_string(ck.D) + "-" + std::to_string(ck.H) + "-" +
                    std::to_string(ck.C) + ", this run is " + std::to_string(D) + "-" + std::to_string(H) + "-" +
                    std::to_string(C) + " (set --hidden " + std::to_string(ck.H) + ")");
  if (ck.is_double != is_double)
    throw UserError(file + ": checkpoint holds " + (ck.is_double ? "double" : "float") +
                    " parameters, this build trains in " + (is_double ? "double" : "float"));
}

// --resume with an existing --save file: its weights and state, checked against this run.
void resume_from_save(const Config& cfg, bool is_double, RootPlan& rp) {
  Checkpoint ck = load_checkpoint(cfg.save);
  check_network(cfg.save, ck, cfg.hidden, is_double);
  if (!ck.state)
    throw UserError(cfg.save + ": holds weights only (checkpoint version 1), no training state to resume; "
                    "start from its weights with --load " + cfg.save + " and another --save file");
  check_fingerprint(cfg.save, ck.state->fingerprint, rp.state.fingerprint);
  const TrainState& st = *ck.state;
  if (st.epoch + (st.batch > 0 ? 1u : 0u) > std::uint64_t(cfg.epochs))
    throw UserError(cfg.save + ": cannot resume: the saved run is past --epochs " + std::to_string(cfg.epochs) +
                    " (" + std::to_string(st.epoch) + " epochs and " + std::to_string(st.batch) +
                    " batches done); give --epochs " + std::to_string(st.epoch + (st.batch > 0 ? 1 : 0)) +
                    " or more");
  rp.init = pack(ck.W1, ck.b1, ck.W2, ck.b2);
  rp.state = std::move(*ck.state);
  rp.resumed = true;
}

RootPlan plan_on_root(const Config& cfg, const HostData& data, bool is_double) {
  const int D = kInputDim, H = cfg.hidden, C = kNumClasses;
  RootPlan rp;
  Sizes& sz = rp.sz;
  const std::size_t avail = data.train.size(), avail_test = data.test.size();
  if (data.train.images.size() != avail * D || data.test.images.size() != avail_test * D)
    throw UserError("image and label counts disagree in the data given to the trainer");
  const std::size_t n_used = cfg.train_size ? cfg.train_size : avail;
  if (n_used > avail)
    throw UserError("--train-size " + std::to_string(n_used) + " exceeds the " + std::to_string(avail) +
                    " training images");
  sz.n_val = static_cast<std::uint64_t>(static_cast<double>(n_used) * cfg.val_fraction);
  sz.n_fit = n_used - sz.n_val;
  if (sz.n_fit == 0) throw UserError("no training images left after the validation hold-out");
  if (cfg.batch > sz.n_fit)
    throw UserError("--batch " + std::to_string(cfg.batch) + " exceeds the " + std::to_string(sz.n_fit) +
                    " training images (after holding out " + std::to_string(sz.n_val) + " for validation)");
  sz.n_test = cfg.test_size ? cfg.test_size : avail_test;
  if (sz.n_test > avail_test)
    throw UserError("--test-size " + std::to_string(sz.n_test) + " exceeds the " +
                    std::to_string(avail_test) + " test images");
  // A fresh state; with --save, its fingerprint (the data's CRC32 costs ~50 ms for 60k images).
  const auto p = static_cast<std::size_t>(comm::size());
  rp.state.loss_sum.assign(p, 0.0);
  rp.state.hits.assign(p, 0);
  if (!cfg.save.empty()) rp.state.fingerprint = fingerprint_of(cfg, data, sz);
  std::error_code ec;
  if (cfg.resume && std::filesystem::exists(cfg.save, ec)) {
    resume_from_save(cfg, is_double, rp);  // --load, if also given, is for the first start only
  } else if (!cfg.load.empty()) {
    const Checkpoint ck = load_checkpoint(cfg.load);
    check_network(cfg.load, ck, H, is_double);
    rp.init = pack(ck.W1, ck.b1, ck.W2, ck.b2);
  } else {
    const schedule::InitParams ip = schedule::init_params(D, H, C, cfg.seed);
    rp.init = pack(ip.W1, ip.b1, ip.W2, ip.b2);
  }
  if (!cfg.save.empty()) check_writable(cfg.save);
  // Only checked here: the file is opened (truncated) once setup has succeeded, so a run
  // that fails early (no GPU on some rank, a bad shard) keeps the previous CSV.
  if (!cfg.metrics.empty()) check_writable(cfg.metrics, "--metrics");
  if (!cfg.report.empty()) check_writable(cfg.report, "--report");
  return rp;
}

// Rank 0 scatters the shards once: uint8 columns and labels, packed in shard order (model
// parallelism: the one shard goes to everybody). Collective.
template <class Images>
Images scatter_shards(const ShardPlan& plan, const HostData& data, bool mp) {
  const int D = kInputDim;
  const bool root = comm::rank() == 0;
  const std::size_t n_fit = plan.n;
  Images shard;
  std::vector<std::uint8_t> img_send, lab_send;
  std::vector<std::size_t> img_counts, lab_counts;
  if (root) {
    img_send.reserve(n_fit * D);
    lab_send.reserve(n_fit);
    for (int q = 0; q < plan.p; ++q) {  // model parallelism: one shard
      const std::vector<std::uint32_t> idx = shard_indices(plan, q);
      for (const std::uint32_t i : idx) {
        const auto* col = data.train.images.data() + std::size_t(i) * D;
        img_send.insert(img_send.end(), col, col + D);
        lab_send.push_back(data.train.labels[i]);
      }
      img_counts.push_back(idx.size() * D);
      lab_counts.push_back(idx.size());
    }
  }
  if (mp) {  // the one shard goes to everybody
    const std::size_t n = comm::broadcast_value(lab_send.size());
    img_send.resize(n * D);
    lab_send.resize(n);
    comm::broadcast_bytes(img_send.data(), img_send.size());
    comm::broadcast_bytes(lab_send.data(), lab_send.size());
    shard = Images(img_send.data(), lab_send.data(), n, D);
  } else {
    const std::vector<std::uint8_t> my_img = comm::scatterv_bytes(img_send, img_counts);
    const std::vector<std::uint8_t> my_lab = comm::scatterv_bytes(lab_send, lab_counts);
    shard = Images(my_img.data(), my_lab.data(), my_lab.size(), D);
  }
  return shard;
}

// Rank 0's state (fresh or resumed) on every rank: where the run stands, every rank's sums
// of the epoch so far, the finished epochs. (The fingerprint stays on rank 0, which saves.)
void share_state(RootPlan& rp) {
  TrainState& st = rp.state;
  struct Head {
    std::uint32_t epoch;
    std::uint64_t batch;
    bool resumed;
  };
  const Head h = comm::broadcast_value(Head{st.epoch, st.batch, rp.resumed});
  std::vector<double> v;  // loss_sum[], hits[], then (loss, train_acc, val_acc) per epoch
  if (comm::rank() == 0) {
    v = st.loss_sum;
    for (std::uint64_t n : st.hits) v.push_back(double(n));  // exact: far below 2^53
    for (const EpochRecord& e : st.epochs) v.insert(v.end(), {e.loss, e.train_acc, e.val_acc});
  }
  comm::broadcast(v);
  const auto p = static_cast<std::size_t>(comm::size());
  st.epoch = h.epoch;
  st.batch = h.batch;
  rp.resumed = h.resumed;
  st.loss_sum.assign(v.begin(), v.begin() + p);
  st.hits.assign(p, 0);
  for (std::size_t r = 0; r < p; ++r) st.hits[r] = std::uint64_t(v[p + r]);
  st.epochs.clear();
  for (std::size_t i = 2 * p; i + 2 < v.size(); i += 3) st.epochs.push_back({v[i], v[i + 1], v[i + 2]});
}

// Everything a rank trains with, once set up.
template <class T, class Model>
struct Setup {
  RootPlan rp;  // sizes and init on every rank; metrics open on rank 0 only
  ShardPlan plan;
  std::vector<T> init;               // static_cast of rp.init, as the reference converts
  std::vector<std::string> devices;  // rank 0: one line per rank
  std::string device_name;           // this rank's cudaDeviceProp::name (or CPU name), for --report
  int threads = 0;                   // --device cpu: this rank's BLAS threads
  int b_max = 0;                     // this rank's largest batch part
  std::unique_ptr<Model> model;
  typename Model::Images val, test;  // rank 0 only
  // --strategy model: this rank's hidden units; rank 0 evaluates with the whole network,
  // put together from every rank's slice (full_params).
  HiddenSlice slice;
  std::unique_ptr<Model> eval_model;
};

template <class T, class Model>
Setup<T, Model> setup(const Config& cfg, const HostData& data) {
  NN_RANGE("train setup");
  const int p = comm::size(), r = comm::rank(), D = kInputDim;
  const bool root = r == 0;
  Setup<T, Model> s;
  on_root([&] { s.rp = plan_on_root(cfg, data, std::is_same_v<T, double>); });
  const Sizes sz = s.rp.sz = comm::broadcast_value(s.rp.sz);
  comm::broadcast(s.rp.init);
  s.init.assign(s.rp.init.begin(), s.rp.init.end());
  share_state(s.rp);
  // Model parallelism trains every rank on the whole batch: one shard, the p = 1 schedule.
  const bool mp = cfg.strategy == Strategy::Model;
  s.plan = make_plan(sz.n_fit, cfg.batch, mp ? 1 : p, cfg.seed, cfg.shuffle);

  std::string dev_desc;
  if constexpr (kOnHost<Model>) {
    // The node's cores shared among its ranks (or what the environment says), for OpenBLAS.
    const CpuThreads th = cpu_threads_for(comm::local_size());
    set_blas_threads(th.threads);
    s.threads = th.threads;
    s.device_name = cpu_name();
    dev_desc = "CPU " + s.device_name + ", " + std::to_string(th.threads) + " BLAS thread" +
               (th.threads == 1 ? "" : "s") + " (" + th.source + ")";
  } else {
    // A GPU per rank (a rank without one stops everybody with one message).
    all_ranks_ok(select_device(dev_desc, s.device_name));
    all_ranks_ok(simulator_limits(s.device_name, cfg));
    if (cfg.mpi_device) {
      const std::string why = comm::device_pointer_support();
      all_ranks_ok(why.empty() ? "" : "--mpi device: " + why);
    }
  }
  s.devices = comm::gather_strings("rank " + std::to_string(r) + " on " + comm::processor_name() + ", " + dev_desc);

  auto shard = scatter_shards<typename Model::Images>(s.plan, data, mp);

  // The first batch is a full one, so it holds this rank's largest part; rank 0 also
  // evaluates the validation and test sets, in chunks of up to 1024 columns.
  s.b_max = int(part(s.plan, mp ? 0 : r, 0).count);
  if (mp) {
    s.slice = hidden_slice(cfg.hidden, p, r);
    const std::vector<double> mine = slice_params(s.rp.init, D, cfg.hidden, kNumClasses, s.slice);
    s.model = make_model<Model>(D, s.slice.H, kNumClasses, s.b_max, cfg);
    s.model->set_params(std::vector<T>(mine.begin(), mine.end()));
    if (root) s.eval_model = make_model<Model>(D, cfg.hidden, kNumClasses, 1024, cfg);
  } else {
    s.model = make_model<Model>(D, cfg.hidden, kNumClasses, root ? std::max(s.b_max, 1024) : s.b_max, cfg);
    s.model->set_params(s.init);
  }
  s.model->set_train_data(std::move(shard));
  s.model->enable_graphs(cfg.graph);
  // One rank, data parallel: nothing runs between the backward pass and the step, so the
  // host model lets its dW1 GEMM apply the step (CpuModel::fuse_w1_step).
  if constexpr (kOnHost<Model>)
    if (!mp && p == 1) s.model->fuse_w1_step(true, static_cast<T>(cfg.lr));
  if (root) {
    s.val = typename Model::Images(data.train.images.data() + sz.n_fit * D, data.train.labels.data() + sz.n_fit,
                         sz.n_val, D);
    s.test = typename Model::Images(data.test.images.data(), data.test.labels.data(), sz.n_test, D);
  }
  return s;
}

template <class T, class Model>
void print_header(std::FILE* out, const Config& cfg, const HostData& data, const Setup<T, Model>& s) {
  const Sizes& sz = s.rp.sz;
#ifdef SIM_EMULATOR
  const char* build = "emulator";
#else
  const char* build = "CUDA";
#endif
  const char* kind = cfg.strategy == Strategy::Model ? "model-parallel trainer" : "data-parallel trainer";
  const char* prec = std::is_same_v<T, double> ? "double" : "float";
  if constexpr (kOnHost<Model>)
    std::fprintf(out, "nn_train: %s, %s, --device cpu: host BLAS (OpenBLAS), %d thread%s per rank (%s build, "
                 "no emulator)\n", kind, prec, s.threads, s.threads == 1 ? "" : "s", build);
  else
    std::fprintf(out, "nn_train: %s, %s, %s build, GEMM variant %d (%s)\n", kind, prec,
#ifdef SIM_EMULATOR
                 "emulator (SIMT on the CPU, not a GPU)",
#else
                 "CUDA",
#endif
                 cfg.gemm, gemm_variant_name(cfg.gemm));
  std::fprintf(out, "data: %s (train %llu, validation %llu, test %llu images)\n",
               data.source.empty() ? "in memory" : data.source.c_str(), (unsigned long long)sz.n_fit,
               (unsigned long long)sz.n_val, (unsigned long long)sz.n_test);
  std::fprintf(out, "config: hidden=%d batch=%zu epochs=%d lr=%g reg=%g seed=%llu shuffle=%s init=%s%s%s\n",
               cfg.hidden, cfg.batch, cfg.epochs, cfg.lr, cfg.reg, (unsigned long long)cfg.seed,
               cfg.shuffle ? "yes" : "no",
               s.rp.resumed ? cfg.save.c_str() : cfg.load.empty() ? "fresh" : cfg.load.c_str(),
               cfg.config_file.empty() ? "" : " config-file=", cfg.config_file.c_str());
  const TrainState& st = s.rp.state;
  if (s.rp.resumed)
    std::fprintf(out, "resume: %s: %u epochs and %llu of %zu batches done; continuing\n", cfg.save.c_str(),
                 st.epoch, (unsigned long long)st.batch, s.plan.num_batches());
  else if (cfg.resume)
    std::fprintf(out, "resume: %s does not exist yet: starting fresh\n", cfg.save.c_str());
  if (cfg.strategy == Strategy::Model)
    std::fprintf(out, "MPI ranks: %d (hidden units split %d..%d per rank; every rank sees the whole batch)\n",
                 comm::size(), hidden_slice(cfg.hidden, comm::size(), comm::size() - 1).H, s.slice.H);
  else
    std::fprintf(out, "MPI ranks: %d (batch slices of at most %d images on rank 0)\n", comm::size(), s.b_max);
  std::fprintf(out, "communication: %s, %s, MPI on %s memory%s\n", strategy_name(cfg.strategy),
               cfg.strategy == Strategy::Model ? "scores all-reduced per step"
               : cfg.overlap && !cfg.profile ? "layer-2 reduction overlapped with the dW1 GEMM"
                                             : "no overlap",
               kOnHost<Model> ? "host (in place)" : cfg.mpi_device ? "device" : "pinned host",
               cfg.graph ? ", CUDA Graphs" : "");
  for (const auto& d : s.devices) std::fprintf(out, "  %s\n", d.c_str());
  std::fflush(out);
}

// DeviceModel::forward_backward queues the forward and the backward pass in one call. A model
// that offers set_phase_hook(std::function<void()>), called on the host between the two
// passes, lets --report time them apart; without it they are timed as one: the report's
// "forward_backward" (which p_flops uses either way), "forward" and "backward" with count 0.
template <class M>
concept HasPhaseHook = requires(M& m, std::function<void()> f) { m.set_phase_hook(std::move(f)); };

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
        split(HasPhaseHook<Model> && !c.graph),
        compute(split || mp ? Mark::Forward : Mark::ForwardBackward),
        mpi_range(c.strategy == Strategy::ParamServer ? "MPI_Send/MPI_Recv parameter server" : "MPI_Allreduce") {
    res.n_fit = sz.n_fit;
    res.n_val = sz.n_val;
    res.n_test = sz.n_test;
    res.resumed = s.rp.resumed;
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
  double queue_s = 0;               // host time spent queueing the steps' device work (--graph saves it)
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

// ---- gradient exchange --------------------------------------------------------------------
// With overlap, layer 2 is copied and its reduction started while the device still computes
// dW1; without, the same two reductions run after the whole backward pass -- the same MPI
// operations on the same values, so the weights are bitwise identical either way
// (tests/train/test_strategies.cpp).
template <class T, class Model>
comm::Request reduce_region(Run<T, Model>& R, T* buf, std::size_t n) {
  if (R.cfg.strategy == Strategy::ParamServer) {
    comm::ps_sum(buf, n);
    return {};
  }
  return comm::iallreduce_sum(buf, n);
}

// The same reduction as one blocking call. For layer 1's large region on the host backend:
// Open MPI's blocking MPI_Allreduce (a ring at this size) takes half the time of its
// nonblocking one (libnbc) on 814 KB at 2 ranks (72 vs 146 us, measured on the 2-core VM).
// Both orders of calls below use it for layer 1, so overlap on/off stay bitwise identical.
template <class T, class Model>
void reduce_region_now(Run<T, Model>& R, T* buf, std::size_t n) {
  if (R.cfg.strategy == Strategy::ParamServer)
    comm::ps_sum(buf, n);
  else
    comm::allreduce_sum(buf, n);
}

// --device cpu without overlap: the model's host buffer in place, layer 2 then layer 1, with
// the same MPI calls per region as the overlapped order in compute_step.
template <class T, class Model>
void exchange_in_host_memory(Run<T, Model>& R) {
  T* g = R.model.grads_device();
  R.timer.mark(Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  reduce_region(R, g + R.n1, R.n2).wait();
  reduce_region_now(R, g, R.n1);
}

// --mpi device: CUDA-aware MPI reads and writes the gradient buffer itself.
template <class T, class Model>
void exchange_on_device(Run<T, Model>& R) {
  T* g = R.model.grads_device();
  R.timer.mark(Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  if (R.overlap) {
    R.model.wait(Stage::Layer2Grads);
    comm::Request r2 = reduce_region(R, g + R.n1, R.n2);
    R.model.wait(Stage::AllGrads);
    comm::Request r1 = reduce_region(R, g, R.n1);
    r2.wait();
    r1.wait();
  } else {
    R.model.wait(Stage::AllGrads);
    reduce_region(R, g + R.n1, R.n2).wait();
    reduce_region(R, g, R.n1).wait();
  }
}

// Host-staged: download (layer 2 first), reduce in pinned memory, upload.
template <class T, class Model>
void exchange_on_host(Run<T, Model>& R) {
  T* h = R.h_grad.get();
  R.timer.mark(Mark::D2H);
  {
    NN_RANGE("cudaMemcpyDeviceToHost");
    R.model.queue_download(h, R.n1, R.np, Stage::Layer2Grads);
    R.model.queue_download(h, 0, R.n1, Stage::AllGrads);
    R.model.wait_download(R.overlap ? Stage::Layer2Grads : Stage::AllGrads);
  }
  if (R.cfg.profile) {
    R.timer.mark(Mark::Untimed);
    boundary(R, true);  // waiting for the slowest rank: not the allreduce's time
  }
  R.timer.mark(Mark::Allreduce);
  if (R.overlap) {
    NN_RANGE(R.mpi_range);
    comm::Request r2 = reduce_region(R, h + R.n1, R.n2);
    while (!R.model.download_done(Stage::AllGrads)) {  // MPI progresses meanwhile
      r2.test();
      ++R.overlap_polls;
    }
    comm::Request r1 = reduce_region(R, h, R.n1);
    r2.wait();
    r1.wait();
  } else {
    NN_RANGE(R.mpi_range);
    reduce_region(R, h + R.n1, R.n2).wait();
    reduce_region(R, h, R.n1).wait();
  }
  R.timer.mark(Mark::H2D);
  R.model.upload_grads(h);
  boundary(R, false);
}

template <class T, class Model>
void exchange_gradients(Run<T, Model>& R) {
  if constexpr (kOnHost<Model>)
    exchange_in_host_memory(R);
  else if (R.in_place)
    exchange_on_device(R);
  else
    exchange_on_host(R);
}

// Model parallelism's only exchange: the C x b partial scores, summed over the ranks.
template <class T, class Model>
void exchange_scores(Run<T, Model>& R, int b) {
  const std::size_t n = std::size_t(kNumClasses) * b;
  if (R.in_place) {
    R.timer.mark(Mark::Allreduce);
    R.model.wait(Stage::PartialScores);
    NN_RANGE("MPI_Allreduce");
    comm::allreduce_sum(R.model.scores(), n);
    return;
  }
  R.timer.mark(Mark::D2H);
  R.model.download_scores(R.h_scores.get(), b);
  if (R.cfg.profile) {
    R.timer.mark(Mark::Untimed);
    boundary(R, true);
  }
  R.timer.mark(Mark::Allreduce);
  {
    NN_RANGE("MPI_Allreduce");
    comm::allreduce_sum(R.h_scores.get(), n);
  }
  R.timer.mark(Mark::H2D);
  R.model.upload_scores(R.h_scores.get(), b);
}

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
  } else if (kOnHost<Model> && R.overlap && R.p > 1) {
    // On the host the phases run when called: layer 2's reduction starts between them, so it
    // is under way while dW1 is computed (the same MPI operations as without overlap).
    model.backward_layer2_phase(pt.offset, b, inv_B, R.root, R.reg);
    T* g = model.grads_device();
    comm::Request r2 = reduce_region(R, g + R.n1, R.n2);
    model.backward_layer1_phase(b, R.root, R.reg);
    R.queue_s += since(t_queue);
    R.timer.mark(Mark::Allreduce);
    NN_RANGE(R.mpi_range);
    reduce_region_now(R, g, R.n1);
    r2.wait();
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
  if (g_step_hook) g_step_hook(std::uint64_t(e) * R.K + k + 1);
  std::vector<int> flags{std::isfinite(R.loss_acc) ? 0 : 1, g_stop_requested ? 1 : 0};
  comm::any_of_each(flags);
  if (flags[0]) diverged(R, e + 1, k + 1);
  if (flags[1]) {
    R.stop = true;
    g_stop_requested = 0;  // acted on
  }
}

// Batch k of epoch e (0-based): the device work, the step's statistics (each step's own
// sums, added on the host, so a resumed run adds the same numbers in the same order), the
// agreement on divergence and stopping, the --print-every line.
template <class T, class Model>
void step(Run<T, Model>& R, int e, std::size_t k) {
  NN_RANGE("batch iteration");
  R.model.reset_stats();
  if (R.cfg.profile) {
    R.timer.begin(Mark::Untimed);
    boundary(R, true);  // every rank starts the batch together, its device idle
    R.timer.mark(R.compute);
  } else {
    R.timer.begin(R.compute);
  }
  compute_step(R, k);
  ++R.steps;
  double loss_sum = 0;
  std::uint64_t hits = 0;
  R.model.read_stats(loss_sum, hits);  // waits for the step; NaN/inf stays in loss_acc
  R.loss_acc += loss_sum;
  R.hits_acc += hits;
  R.state.batch = k + 1;
  agree_after_step(R, e, k);
  boundary(R, false);
  R.timer.end();
  report_progress(R, e, k);
}

// ---- epochs -------------------------------------------------------------------------------
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
void end_epoch(Run<T, Model>& R, int e, Clock::time_point t_epoch) {
  R.timer.flush();  // the epoch's last batch
  const auto st = reduced_sums(R);
  EpochStats es;
  es.epoch = e + 1;
  es.seconds = since(t_epoch);
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
  if (!R.cfg.save.empty() && e + 1 < R.cfg.epochs) save_now(R);  // the last one: finish_run
}

// Epoch e from the state's batch on (0, or where a resumed run stopped); it ends early when
// the ranks agree to stop. --save-every K saves after every K-th step of the run (the epoch's
// last step is saved by end_epoch).
template <class T, class Model>
void run_epoch(Run<T, Model>& R, int e) {
  const auto t_epoch = Clock::now();
  R.model.set_order(shard_order(R.plan, R.mp ? 0 : R.r, e));
  for (std::size_t k = R.state.batch; k < R.K; ++k) {
    step(R, e, k);
    const std::uint64_t run_step = std::uint64_t(e) * R.K + k + 1;
    if (R.cfg.save_every && run_step % R.cfg.save_every == 0 && k + 1 < R.K) save_now(R);
    if (R.stop && k + 1 < R.K) return;
  }
  end_epoch(R, e, t_epoch);
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
    NN_RANGE("GPU parallel train");
    for (int e = R.start_epoch; e < R.cfg.epochs && !R.stop; ++e) run_epoch(R, e);
  }
  if (int(R.state.epoch) == R.cfg.epochs) R.stop = false;  // a signal after the last step: just finish
  R.train_s = since(t_train);
  R.res.overlap_polls = comm::sum(std::uint64_t(R.overlap_polls));  // every rank's
  if constexpr (HasPhaseHook<Model>) R.model.set_phase_hook({});
}

// --device cpu: the BLAS-bound limit. Every rank times its step's five GEMMs at its own
// shapes at the same moment (so they share the cores and memory as in training); the slowest
// rank's fastest repetition is the step's floor, and every rank's FLOPs over it the job's GEMM rate.
// Printed next to the median epoch (epoch 1, the warm-up, left out when there are more).
template <class T, class Model>
void measure_blas_bound(Run<T, Model>& R) {
  if constexpr (kOnHost<Model>) {
    const int b = R.s.b_max;
    // About 0.5 s of repetitions, the count decided on rank 0 so that all ranks run together.
    const double once = comm::broadcast_value(R.model.time_step_gemms(b, 1).seconds);
    const int reps = int(std::clamp(0.5 / std::max(once, 1e-6), 5.0, 300.0));
    comm::barrier();
    const auto t = R.model.time_step_gemms(b, reps);
    const std::vector<double> all = comm::gather_to_root(std::vector<double>{t.seconds, t.flops});
    double slowest = 0, flops = 0;
    for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
      slowest = std::max(slowest, all[i]);
      flops += all[i + 1];
    }
    R.gemm_step_s = comm::broadcast_value(slowest);
    R.gemm_flops_per_s = comm::broadcast_value(slowest > 0 ? flops / slowest : 0.0);
    if (!R.out || R.res.epochs.empty()) return;
    std::vector<double> secs;
    for (std::size_t i = R.res.epochs.size() > 1 ? 1 : 0; i < R.res.epochs.size(); ++i)
      secs.push_back(R.res.epochs[i].seconds);
    std::sort(secs.begin(), secs.end());
    const double median = secs.size() % 2 ? secs[secs.size() / 2]
                                          : (secs[secs.size() / 2 - 1] + secs[secs.size() / 2]) / 2;
    const double bound = R.gemm_step_s * double(R.plan.n) / double(R.plan.B);
    std::fprintf(R.out, "blas bound: the step's GEMMs alone %.3f ms (slowest rank; %.1f GFLOP/s over %d rank%s "
                 "on these shapes) -> epoch >= %.4f s; median epoch %.4f s = %.2fx the bound\n",
                 1e3 * R.gemm_step_s, 1e-9 * R.gemm_flops_per_s, R.p, R.p == 1 ? "" : "s", bound, median,
                 bound > 0 ? median / bound : 0.0);
    std::fflush(R.out);
  }
}

// ---- results ------------------------------------------------------------------------------
// --report / --profile: rank 0's JSON report (report.h), its summary on `out`; and the
// --graph statistics line.
template <class T, class Model>
nlohmann::ordered_json performance_report(Run<T, Model>& R) {
  nlohmann::ordered_json report;
  const Config& cfg = R.cfg;
  const double us_per_step = R.steps ? 1e6 * R.queue_s / double(R.steps) : 0.0;
  const auto& g = R.model.graph_stats();
  if (R.timer.active()) {
    ReportInputs in;
    in.device = R.s.device_name;
#ifdef SIM_EMULATOR
    in.emulator = true;
#endif
    in.cpu = kOnHost<Model>;
    in.gemm_flops_per_s = R.gemm_flops_per_s;
    in.ranks = R.p;
    in.is_double = std::is_same_v<T, double>;
    in.hidden = cfg.hidden;
    in.batch = cfg.batch;
    in.epochs = cfg.epochs;
    in.n_train = R.sz.n_fit;
    in.gemm = cfg.gemm;
    in.profile = cfg.profile;
    in.D = kInputDim;
    in.C = kNumClasses;
    in.batches = R.timer.batches();
    for (std::size_t i = R.restored_epochs; i < R.res.epochs.size(); ++i)  // as printed, this process's
      in.epoch_seconds.push_back(R.res.epochs[i].seconds);
    in.total_s = R.train_s;
    report = make_report(in);
    if (R.out) {
      print_report_summary(R.out, report);
      std::fflush(R.out);
    }
    report["strategy"] = strategy_name(cfg.strategy);
    report["overlap"] = !R.mp && R.overlap;
    report["overlap_polls"] = R.res.overlap_polls;
    report["mpi_memory"] = cfg.mpi_device ? "device" : "host";
    if constexpr (kOnHost<Model>)
      report["cpu"] = {{"threads_per_rank", R.s.threads},
                       {"gemm_step_s", R.gemm_step_s},
                       {"blas_bound_epoch_s", R.gemm_step_s * double(R.plan.n) / double(R.plan.B)}};
    report["host_queue_us_per_step"] = us_per_step;
    report["graph"] = {{"enabled", cfg.graph}, {"captured", g.captured}, {"nodes", g.nodes},
                       {"replays", g.replays}, {"eager_runs", g.eager}};
  }
  if (R.out && cfg.graph)
    std::fprintf(R.out, "graphs: %zu captured (%zu kernel/copy nodes), %zu replays, %zu eager warm-up runs; "
                 "host time to queue a step %.1f us (rank 0)\n", g.captured, g.nodes, g.replays, g.eager,
                 us_per_step);
  return report;
}

// The final parameters on every rank (model parallelism: put together on rank 0, for
// everybody, and given to rank 0's evaluator).
template <class T, class Model>
std::vector<T> final_params(Run<T, Model>& R) {
  if (!R.mp) return R.model.get_params();
  const std::vector<T> f = full_params(R);
  std::vector<double> fd(f.begin(), f.end());
  comm::broadcast(fd);
  std::vector<T> final_p(fd.begin(), fd.end());
  if (R.root) R.evaluator->set_params(final_p);
  return final_p;
}

// A signal stopped the run: save where it stands (unless that is already saved), close the
// metrics file.
template <class T, class Model>
void stop_run(Run<T, Model>& R) {
  if (!R.cfg.save.empty() && R.saved_at != std::pair<int, std::size_t>{int(R.state.epoch), R.state.batch})
    save_now(R);
  on_root([&] {
    FilePtr& metrics = R.s.rp.metrics;
    if (metrics && (std::ferror(metrics.get()) || std::fclose(metrics.release()) != 0))
      throw UserError(R.cfg.metrics + ": write error");
  });
  R.res.stopped = true;
  R.res.steps = std::uint64_t(R.state.epoch) * R.K + R.state.batch;
  R.res.params = unpack(final_params(R), R.full_layout);
}

// Test precision, the files (metrics closed, --save, --report), the --verify replay.
template <class T, class Model>
void finish_run(Run<T, Model>& R, const nlohmann::ordered_json& report) {
  const Config& cfg = R.cfg;
  TrainResult& res = R.res;
  const std::vector<T> final_p = final_params(R);
  double prec = 0;
  if (R.root && R.sz.n_test) prec = double(R.evaluator->evaluate(R.s.test)) / double(R.sz.n_test);
  res.test_precision = comm::broadcast_value(prec);
  res.params = unpack(final_p, R.full_layout);
  res.steps = std::uint64_t(R.state.epoch) * R.K + R.state.batch;
  const std::optional<Checkpoint> ck = cfg.save.empty() ? std::nullopt : snapshot(R, &final_p);
  // Rank 0 alone writes files; on_root keeps every rank in step and shares its verdict.
  on_root([&] {
    FilePtr& metrics = R.s.rp.metrics;
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
    if (R.root)
      v = replay_and_compare<T>(cfg, R.plan, R.data.train, R.s.init, final_p, R.full_layout, R.start_epoch,
                                R.start_batch);
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

// The whole run with model type Model (DeviceModel<T>, or another with its public API).
template <class T, class Model>
TrainResult train_with(const Config& cfg, const HostData& data, std::FILE* out) {
  validate(cfg);
  Run<T, Model> R(cfg, data, out);
  if (R.out) print_header(R.out, cfg, data, R.s);
  open_metrics(R);
  train_epochs(R);
  if (R.stop) {
    stop_run(R);
  } else {
    measure_blas_bound(R);
    finish_run(R, performance_report(R));
  }
  if (R.out && R.res.saves)
    std::fprintf(R.out, "saves: %zu during training, %.1f ms each on average (rank 0)\n", R.res.saves,
                 1e3 * R.res.save_seconds / double(R.res.saves));
  return std::move(R.res);
}

}  // namespace

template <class T>
TrainResult train_on(const Config& cfg, const HostData& data, std::FILE* out) {
  if (cfg.device == Device::Cpu) return train_with<T, CpuModel<T>>(cfg, data, out);
  return train_with<T, DeviceModel<T>>(cfg, data, out);
}

template TrainResult train_on<float>(const Config&, const HostData&, std::FILE*);
template TrainResult train_on<double>(const Config&, const HostData&, std::FILE*);

int run_training(const Config& cfg) { return run_training(cfg, stdout); }

int run_training(const Config& cfg, std::FILE* out) {
  const auto t0 = Clock::now();
  const bool root = comm::rank() == 0;
  try {
    validate(cfg);  // before reading 50 MB of images for nothing
    HostData data;
    on_root([&] {
      std::error_code ec;
      const auto dir = std::filesystem::canonical(cfg.data, ec);
      if (ec) throw UserError(cfg.data + ": data directory not found (run `make data`)");
      data.train = {};
      data::Dataset tr = data::load_split(dir.string(), "train", kInputDim);
      data::Dataset te = data::load_split(dir.string(), "t10k", kInputDim);
      data.train.images = std::move(tr.images.pixels);
      data.train.labels = std::move(tr.labels);
      data.test.images = std::move(te.images.pixels);
      data.test.labels = std::move(te.labels);
      data.source = dir.string() == cfg.data ? cfg.data : cfg.data + " -> " + dir.string();
    });
    const TrainResult res = train_on<nn_real>(cfg, data, out);
    if (res.stopped) {
      if (root && out) {
        if (cfg.save.empty())
          std::fprintf(out, "stopped by a signal after %llu steps; nothing saved (no --save)\n",
                       (unsigned long long)res.steps);
        else
          std::fprintf(out, "stopped by a signal after %llu steps; state saved to %s: run the same command "
                       "with --resume to continue (exit code %d)\n", (unsigned long long)res.steps,
                       cfg.save.c_str(), kExitStopped);
        std::fflush(out);
      }
      return kExitStopped;
    }
    if (root && out) {
      std::fprintf(out, "total time: %.2f s\n", since(t0));
      std::fflush(out);
    }
    return res.verify.ok() ? kExitOk : kExitVerifyFailed;
  } catch (const Diverged& e) {
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    return kExitDiverged;
  } catch (const UserError& e) {
    // Thrown on every rank alike (on_root / all_ranks_ok / validate): one line, from rank 0.
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUserError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error on rank %d: %s\n", comm::rank(), e.what());
    comm::abort_job(kExitInternal);
  }
}

}  // namespace nn::train
