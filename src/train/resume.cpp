// Resume fingerprints and checks (resume.h).
#include "train/resume.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>

#include "comm/comm.h"
#include "common/errors.h"
#include "common/nn_real.h"
#include "train/params.h"
#include "train/util.h"

namespace nn::train {

namespace {

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

// One error naming the first field that differs between the saved run and this one.
void check_fingerprint(const std::string& file, const RunFingerprint& was, const RunFingerprint& now) {
  const auto num = [](auto v) { return std::to_string(v); };
  const auto strat = [](std::uint32_t v) {
    if (v == RunFingerprint::kAllreduceNodeShared) return std::string("allreduce with --node-shared weights");
    if (v == RunFingerprint::kExact) return std::string("--exact on");
    return std::string(v <= 2 ? strategy_name(Strategy(v)) : "?");
  };
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
  const bool exact = was.strategy == RunFingerprint::kExact && now.strategy == RunFingerprint::kExact;
  if (was.ranks != now.ranks && !exact)  // --exact's weights do not depend on the ranks
    differ("the number of MPI ranks", num(was.ranks), num(now.ranks) + " (only --exact on runs resume at another count)");
  const auto gemm = [](std::uint32_t v) {
    if (v == RunFingerprint::kCpuBlas) return std::string("--device cpu --cpu-gemm openblas");
    if (v == RunFingerprint::kCpuOneDnn) return std::string("--device cpu --cpu-gemm onednn");
    return "--device gpu --gemm " + std::to_string(v);
  };
  if (was.gemm != now.gemm)
    differ("the device and GEMM (--device, --gemm, --cpu-gemm)", gemm(was.gemm), gemm(now.gemm));
  if (was.strategy != now.strategy)
    differ("the exchange (--strategy, --node-shared)", strat(was.strategy), strat(now.strategy));
  if (was.shuffle != now.shuffle)
    differ("shuffling (--no-shuffle)", was.shuffle ? "on" : "off", now.shuffle ? "on" : "off");
  if (was.data_crc != now.data_crc)
    differ("the training data (CRC32 of images and labels)", num(was.data_crc), num(now.data_crc));
}

}  // namespace

RunFingerprint fingerprint_of(const Config& cfg, const HostData& data, const Sizes& sz) {
  RunFingerprint f;
  f.seed = cfg.seed;
  f.batch = cfg.batch;
  f.n_fit = sz.n_fit;
  f.n_val = sz.n_val;
  f.lr = cfg.lr;
  f.reg = cfg.reg;
  f.ranks = static_cast<std::uint32_t>(comm::size());
  // cfg.node_shared is resolved by setup (On only where the run uses it).
  f.strategy = cfg.exact ? RunFingerprint::kExact
               : cfg.device == Device::Cpu && cfg.strategy == Strategy::Allreduce && cfg.node_shared == NodeShared::On &&
                       comm::size() > 1
                   ? RunFingerprint::kAllreduceNodeShared
                   : static_cast<std::uint32_t>(cfg.strategy);
  // --device cpu computes with its GEMM library whatever --gemm says: a value per library, so
  // that a run is never resumed on the other device or library (the bits differ). cfg has
  // --cpu-gemm auto resolved (train_with), so a file saved before oneDNN became the default
  // (255: OpenBLAS) is refused by name with the default, and resumes with --cpu-gemm openblas.
  f.gemm = cfg.device != Device::Cpu         ? static_cast<std::uint32_t>(cfg.gemm)
           : cfg.cpu_gemm == CpuGemm::OneDNN ? RunFingerprint::kCpuOneDnn
                                             : RunFingerprint::kCpuBlas;
  f.shuffle = cfg.shuffle ? 1 : 0;
  f.data_crc = data_crc(data, sz.n_fit);
  return f;
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
  // --exact at another rank count: the epoch's sums so far (statistics, not weights) go to rank 0.
  const auto p = static_cast<std::size_t>(comm::size());
  TrainState& st2 = rp.state;
  if (st2.loss_sum.size() != p) {
    double loss = 0;
    std::uint64_t hits = 0;
    for (std::size_t r = 0; r < st2.loss_sum.size(); ++r) loss += st2.loss_sum[r], hits += st2.hits[r];
    st2.loss_sum.assign(p, 0.0);
    st2.hits.assign(p, 0);
    st2.loss_sum[0] = loss;
    st2.hits[0] = hits;
    st2.fingerprint.ranks = std::uint32_t(p);
  }
}

}  // namespace nn::train
