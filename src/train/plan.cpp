// The run's plan (plan.h): option checks, sizes, initial parameters, the shared state.
#include "train/plan.h"

#include <cmath>
#include <filesystem>
#include <string>

#include "comm/comm.h"
#include "comm/nccl.h"
#include "common/errors.h"
#include "common/nn_real.h"
#include "gemm/gemm.h"
#include "schedule/init.h"
#include "train/params.h"
#include "train/resume.h"

namespace nn::train {

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
  if (cfg.comm == Comm::Device && cfg.strategy == Strategy::ParamServer)
    bad("--comm device works with --strategy allreduce or model; the parameter server (ps) sums on the host");
  if (cfg.device == Device::Cpu && cfg.comm != Comm::Host)
    bad(std::string("--comm ") + comm_name(cfg.comm) +
        " is for --device gpu (with --device cpu, MPI already sums the gradient in host memory)");
  if (cfg.comm == Comm::Nccl && cfg.device == Device::Gpu && !comm::nccl_support().empty()) bad(comm::nccl_support());
  if (cfg.comm == Comm::Nccl && cfg.strategy != Strategy::Allreduce)
    bad(std::string("--comm nccl sums the gradient with ncclAllReduce: it works with --strategy allreduce, not ") +
        strategy_name(cfg.strategy));
  if (cfg.device == Device::Cpu && cfg.graph == Graphs::On) bad("--graph (CUDA Graphs) is for --device gpu");
  if (cfg.fused == Fused::On && cfg.device == Device::Cpu)
    bad("--fused on is for --device gpu (--device cpu always runs its own fused layer-2 pass)");
  if (cfg.fused == Fused::On && !gemm_has_fused_extras(cfg.gemm))
    bad("--fused on needs --gemm 4 or 5 (the GEMMs that read the images themselves); --fused off runs --gemm " +
        std::to_string(cfg.gemm));
  if (cfg.fused == Fused::On && cfg.strategy == Strategy::Model)
    bad("--fused on works with --strategy allreduce or ps, not model");
  if (cfg.node_shared == NodeShared::On && cfg.device != Device::Cpu)
    bad("--node-shared on is for --device cpu (GPUs exchange gradients through MPI)");
  if (cfg.node_shared == NodeShared::On && cfg.strategy != Strategy::Allreduce)
    bad(std::string("--node-shared on works with --strategy allreduce, not ") + strategy_name(cfg.strategy));
  // --exact on takes one kind of step at any rank count (train/exact.h): none that exists at one
  // rank only, and no floating-point sum over the ranks inside the forward pass.
  if (cfg.exact && cfg.strategy == Strategy::Model)
    bad("--exact on works with --strategy allreduce or ps: model parallelism sums every image's scores over "
        "the ranks' hidden units in floating point, so the forward pass itself depends on the rank count");
  if (cfg.exact && cfg.persistent == Persistent::On)
    bad("--persistent on and --exact on: the persistent step updates the weights inside its kernels at one "
        "rank only; --exact takes the same per-chunk step at any rank count");
  if (cfg.exact && cfg.node_shared == NodeShared::On)
    bad("--node-shared on and --exact on: node-shared weights sum dW1 over the ranks' images in floating "
        "point; --exact sums each chunk's gradient in fixed point (use --node-shared auto or off)");
  if (cfg.device != Device::Cpu && cfg.cpu_gemm != CpuGemm::Auto && cfg.cpu_gemm != CpuGemm::OpenBLAS)
    bad(std::string("--cpu-gemm ") + cpu_gemm_name(cfg.cpu_gemm) + " is for --device cpu");
  if (!cpu_gemm_available(cfg.cpu_gemm))
    bad(std::string("--cpu-gemm ") + cpu_gemm_name(cfg.cpu_gemm) +
        ": this build has no oneDNN (built with make DNNL=0; install libdnnl-dev and rebuild without it)");
}

RootPlan plan_on_root(const Config& cfg, const HostData& data, bool is_double) {
  const int D = kInputDim, H = cfg.hidden, C = kNumClasses;
  RootPlan rp;
  Sizes& sz = rp.sizes;
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

}  // namespace nn::train
