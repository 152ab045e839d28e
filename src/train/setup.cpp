// Setting a run up (setup.h): the plan shared from rank 0, the device chosen, the shards
// scattered once, the models built, the header printed.
// Tested through tests/train (every strategy, 1-4 ranks, both models) and tests/cli.
#include "train/setup.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "comm/comm.h"
#include "common/nn_real.h"
#include "common/nvtx.h"
#include "gemm/gemm.h"
#include "model/cpu_model.h"
#include "model/device_model.h"
#include "model/model.h"
#include "schedule/shards.h"
#include "train/agree.h"
#include "train/gemm_auto.h"
#include "common/device_buffer.h"

namespace nn::train {

using model::CpuGemm;
using model::kOnHost;

namespace {

template <class Model>
std::unique_ptr<Model> make_model(int D, int H, int C, int max_cols, const Config& cfg) {
  if constexpr (kOnHost<Model>)
    return std::make_unique<Model>(D, H, C, max_cols, cfg.cpu_gemm);
  else
    return std::make_unique<Model>(D, H, C, max_cols, cfg.gemm);
}

// Rank 0 scatters the shards once: uint8 columns and labels, packed in shard order (model
// parallelism: the one shard goes to everybody). Collective.
// shards(q): rank q's file-order indices (schedule/shards.h, or exact_plan.h under --exact).
template <class Images, class Shards>
Images scatter_shards(int p, std::size_t n_fit, Shards&& shards, const HostData& data, bool mp) {
  const int D = kInputDim;
  const bool root = comm::rank() == 0;
  Images shard;
  std::vector<std::uint8_t> img_send, lab_send;
  std::vector<std::size_t> img_counts, lab_counts;
  if (root) {
    img_send.reserve(n_fit * D);
    lab_send.reserve(n_fit);
    for (int q = 0; q < p; ++q) {  // model parallelism: one shard
      const std::vector<std::uint32_t> idx = shards(q);
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

// --exact on: the batches' chunks and the exact sum over the run's reduction (exact.h).
template <class T>
std::unique_ptr<ExactChunks<T>> make_exact(const Config& cfg, std::size_t n_fit, int p) {
  const model::ParamLayout full{kInputDim, cfg.hidden, kNumClasses};
  return std::make_unique<ExactChunks<T>>(
      schedule::make_exact_plan(n_fit, cfg.batch, p, cfg.seed, cfg.shuffle), full,
      cfg.strategy == Strategy::ParamServer ? comm::ps_reduction<std::uint64_t>()
      : cfg.comm == Comm::Nccl              ? comm::nccl_reduction<std::uint64_t>()
                                            : comm::allreduce_reduction<std::uint64_t>());
}

// This rank's shard: its columns under --exact, else its parts of every batch (one shard for all
// under model parallelism). Collective.
template <class T, class Model>
typename Model::Images scatter(const Setup<T, Model>& s, const HostData& data, bool mp) {
  using Images = typename Model::Images;
  if (s.exact)
    return scatter_shards<Images>(comm::size(), s.plan.n,
                                  [&](int q) { return schedule::shard_indices(s.exact->plan(), q); }, data, false);
  return scatter_shards<Images>(s.plan.p, s.plan.n, [&](int q) { return shard_indices(s.plan, q); }, data, mp);
}

// --exact on --device cpu: the models that compute the rank's chunks beside its model, on its
// other threads (Setup::followers, sized by choose_device).
template <class T, class Model>
void make_followers(const Config& cfg, Setup<T, Model>& s) {
  if constexpr (kOnHost<Model>)
    for (auto& f : s.followers) {
      f = make_model<Model>(kInputDim, cfg.hidden, kNumClasses, s.max_part, cfg);
      f->follow(*s.model);
    }
}

// --persistent resolved: on where asked (an error where it cannot); auto (at one rank with the
// fused step) as measured where kernels/gemm/auto_table.h has this GPU's class and shape
// (gemm_auto.h), elsewhere on where the plan's model predicts the persistent step faster than the
// fused step on this GPU (persistent_plan.cu; docs/performance.md has what it measured), else
// off. Both describe a GPU's time: auto is off in the emulator build and on GPGPU-Sim.
template <class T, class Model>
bool resolve_persistent(const Config& cfg, Setup<T, Model>& s, int p) {
  if (cfg.persistent == Persistent::Off || cfg.exact) return false;
  if (cfg.persistent == Persistent::Auto) {
#ifdef SIM_EMULATOR
    return false;
#else
    if (s.device_name.rfind("GPGPU-Sim", 0) == 0) return false;
    if (!fused_in_use(cfg) || p != 1) return false;
    const std::optional<bool> measured = measured_persistent(cfg.hidden, cfg.batch);
    if (measured) {  // measured: the second kernel (architecture.md), so auto runs no other
      if (!*measured || !s.model->enable_persistent(true, s.max_part).empty()) return false;
      if (s.model->persistent_plan().variant == 2) return true;
      s.model->enable_persistent(false, s.max_part);
      return false;
    }
    return s.model->enable_persistent(true, s.max_part, true).empty();
#endif
  }
  std::string why;
  if (!fused_in_use(cfg)) why = "it needs the fused step (--gemm 4 or 5, --fused not off, data parallel)";
  else if (p != 1) why = "it runs at one rank only (with several, each step's gradient goes through MPI_Allreduce)";
  else why = s.model->enable_persistent(true, s.max_part);
  if (!why.empty()) throw UserError("--persistent on: " + why);
  return true;
}

// This rank's compute device and where it runs (devices.h): the node's cores shared among
// its ranks (or what the environment says) for OpenBLAS, or a GPU per rank, the node-local
// rank modulo the node's GPUs (a rank without one stops everybody with one message). Collective.
template <class T, class Model>
RankDevice choose_device(const Config& cfg, Setup<T, Model>& s) {
  RankDevice me;
  if constexpr (kOnHost<Model>) {
    model::CpuThreads th = model::cpu_threads_for(comm::local_size(), cfg.cpu_gemm == CpuGemm::OneDNN);
    if (cfg.exact) {  // a GEMM's summation order may change with its threads (exact.h)
      s.exact->set_threads(th.threads);  // the exact sum's passes over the values: per value
      s.followers.resize(std::size_t(th.threads - 1));  // made with the model (setup)
      th.threads = 1;
      th.source = "--exact on: one thread a chunk's GEMMs";
    }
    model::set_gemm_threads(th.threads);
    s.threads = th.threads;
    s.device_name = model::cpu_name();
    me = cpu_rank(s.device_name, th);
  } else {
    if (cfg.exact)  // the exact sum's passes over the values on this rank's share of the node's cores
      s.exact->set_threads(int(std::max(1u, std::thread::hardware_concurrency() / unsigned(comm::local_size()))));
    all_ranks_ok(select_device(me));
    s.device_name = me.device_name;
    all_ranks_ok(simulator_limits(s.device_name, cfg));
    if (cfg.comm == Comm::Device) {
      const std::string why = comm::device_pointer_support();
      all_ranks_ok(why.empty() ? "" : "--comm device: " + why);
    }
  }
  return me;
}

// Node-shared data parallelism (CpuModel::use_node_shared): --device cpu (the caller's),
// --strategy allreduce, more than one rank, all of them on this node, --node-shared not off.
// Each rank's dW1 columns then read every rank's dZ1 (H x batch values, not its own H x
// batch / p) and the next forward pass reads the columns of W1 the others wrote, but the
// all-reduce and SGD pass over W1 are gone: faster or the same at every shape measured
// (docs/parallelism.md, "Node-shared weights").
// Collective (comm::one_node) when the options allow it, the same on every rank.
bool use_node_shared(const Config& cfg, int p) {
  if (cfg.node_shared == NodeShared::Off || cfg.strategy != Strategy::Allreduce || p < 2 || cfg.exact) return false;
  if (comm::one_node()) return true;
  if (cfg.node_shared == NodeShared::On)
    throw UserError("--node-shared on needs every rank on one node (these ranks span several nodes; "
                    "use --node-shared auto or off)");
  return false;
}

// One shared window: rank 0 brings the parameters (page-aligned), then every rank its X and
// dZ1, each sized for the largest model's columns (rank 0's: max(max_part, 1024), evaluation's
// chunks) so every part has the same layout. Collective.
template <class T, class Model>
void share_node_memory(Setup<T, Model>& s, int D, int H) {
  constexpr std::size_t kPage = 4096;
  const int p = comm::size();
  int cols = 1024;
  for (int q = 0; q < p; ++q) cols = std::max(cols, int(part(s.plan, q, 0).count));
  const std::size_t params_bytes = (s.model->num_params() * sizeof(T) + kPage - 1) / kPage * kPage;
  const std::size_t part_values = Model::shared_part_values(D, H, cols);
  s.node_memory = std::make_unique<comm::NodeShared>((comm::rank() == 0 ? params_bytes : 0) + part_values * sizeof(T));
  typename Model::SharedParts parts;
  parts.params = static_cast<T*>(s.node_memory->of(0));
  for (int q = 0; q < p; ++q) {
    T* base = reinterpret_cast<T*>(static_cast<char*>(s.node_memory->of(q)) + (q == 0 ? params_bytes : 0));
    parts.X.push_back(base);
    parts.dZ1.push_back(base + std::size_t(D) * std::size_t(cols));
  }
  parts.rank = comm::rank();
  parts.sync = [w = s.node_memory.get()] { w->sync(); };
  s.model->use_node_shared(std::move(parts));
}

// The GPU step the run takes (--fused) and whether it is replayed as CUDA Graphs, for the header.
void print_step_line(std::FILE* out, const Config& cfg, bool graphs, bool persistent) {
  if (persistent) {
    std::fprintf(out, "step: persistent (runs of up to %d steps in one cooperative launch each, two grid "
                 "barriers a step, one with NN_PERSISTENT_VARIANT=4; --persistent off: the fused step)\n",
                 kPersistentRun);
    return;
  }
  std::fprintf(out, "step: %s%s\n", !fused_in_use(cfg)
               ? "separate kernels (--fused off, --gemm other than 4 or 5, or --strategy model)"
               : "fused (5 kernels, the batch gathered once a step into a normalised copy; loss and "
                 "accuracy read at the epoch's end; --fused off: the separate kernels)",
               graphs ? ", replayed as CUDA Graphs (--no-graph: launched one by one)" : "");
}

// What the ranks exchange, for the header (nothing at one rank).
template <class T, class Model>
void print_communication_line(std::FILE* out, const Config& cfg, const Setup<T, Model>& s) {
  if (s.exact) {
    const schedule::ExactPlan& x = s.exact->plan();
    const std::string at_once = kOnHost<Model> ? ", " + std::to_string(s.followers.size() + 1) +
                                                     " at once on rank 0's threads, one GEMM thread each" : "";
    std::fprintf(out, "exact: on: each batch in %zu chunks of %zu images (so at most %zu ranks compute), each "
                 "chunk's gradient alone%s, the chunks summed exactly as 64-bit integers (%zu bytes a value, %s), "
                 "the regulariser added after the sum: the weights do not depend on the rank count\n",
                 x.num_columns(), x.c, x.num_columns(), at_once.c_str(), s.exact->wire_bytes() / s.model->num_params(),
                 comm::size() == 1 ? "no MPI at one rank" : cfg.strategy == Strategy::ParamServer ? "parameter server"
                 : cfg.comm == Comm::Nccl ? ("ncclAllReduce (" + comm::nccl_name() + ") through device memory").c_str()
                                          : "MPI_Allreduce");
    return;
  }
  if (s.node_memory)
    std::fprintf(out, "communication: allreduce, node-shared: one copy of the weights in shared memory, "
                 "each rank steps its columns of W1 from every rank's dZ1 and X (no W1 gradient is sent); "
                 "[b1 | W2 | b2] all-reduced in place (--node-shared off: all-reduce everything)\n");
  else if (comm::size() == 1)
    std::fprintf(out, "communication: none (one rank)%s\n",
                 cfg.comm == Comm::Nccl && !kOnHost<Model> ? ("; " + comm::nccl_name() + " ready").c_str() : "");
  else {
    std::string pieces;
    const std::size_t n_layer1 = std::size_t(cfg.hidden) * (kInputDim + 1);
    const std::size_t piece = exchange_piece_values(cfg.exchange_chunk, n_layer1, sizeof(T));
    if (!kOnHost<Model> && cfg.comm == Comm::Host && cfg.strategy != Strategy::Model && piece < n_layer1)
      pieces = ", layer 1 in " + std::to_string((n_layer1 + piece - 1) / piece) + " pieces of " +
               std::to_string(piece * sizeof(T) >> 10) + " KiB, each summed while the next is copied (--exchange-chunk)";
    std::fprintf(out, "communication: %s, %s, %s%s\n", strategy_name(cfg.strategy),
                 cfg.strategy == Strategy::Model ? "scores all-reduced per step"
                 : cfg.overlap && !cfg.profile ? "layer-2 reduction overlapped with the dW1 GEMM"
                                               : "no overlap",
                 kOnHost<Model>             ? "MPI on host memory (in place)"
                 : cfg.comm == Comm::Device ? "MPI on device memory"
                 : cfg.comm == Comm::Nccl   ? (comm::nccl_name() + " on device memory (ncclAllReduce on a stream of its own, no host copy)").c_str()
                                            : "MPI on pinned host memory",
                 pieces.c_str());
  }
}

}  // namespace

template <class T, class Model>
Setup<T, Model> setup(const Config& cfg, const HostData& data) {
  NN_RANGE("train setup");
  const int p = comm::size(), r = comm::rank(), D = kInputDim;
  const bool root = r == 0;
  Setup<T, Model> s;
  // Collective: do the weights live in the node's shared memory? Decided before the plan,
  // whose resume fingerprint records it (the bits differ from the all-reduce's).
  bool node_shared = false;
  if constexpr (kOnHost<Model>) node_shared = use_node_shared(cfg, p);
  Config planned = cfg;
  planned.node_shared = node_shared ? NodeShared::On : NodeShared::Off;
  on_root([&] { s.root_plan = plan_on_root(planned, data, std::is_same_v<T, double>); });
  const Sizes sz = s.root_plan.sizes = comm::broadcast_value(s.root_plan.sizes);
  comm::broadcast(s.root_plan.init);
  s.init.assign(s.root_plan.init.begin(), s.root_plan.init.end());
  share_state(s.root_plan);
  // Model parallelism trains every rank on the whole batch: one shard, the p = 1 schedule.
  const bool mp = cfg.strategy == Strategy::Model;
  s.plan = make_plan(sz.n_fit, cfg.batch, mp ? 1 : p, cfg.seed, cfg.shuffle);
  if (cfg.exact) s.exact = make_exact<T>(cfg, sz.n_fit, p);

  s.rank_devices = gather_ranks(choose_device(cfg, s));
  if (!kOnHost<Model> && cfg.comm == Comm::Nccl) s.nccl = comm::Nccl::open();  // collective; two ranks a GPU refused
  auto shard = scatter<T, Model>(s, data, mp);
  // The first batch is a full one, so it holds this rank's largest part (--exact: every rank
  // computes chunks, of at most the chunk size); rank 0 also evaluates the validation and test
  // sets, in chunks of up to 1024 columns.
  s.max_part = s.exact ? int(s.exact->plan().c) : int(part(s.plan, mp ? 0 : r, 0).count);
  if (mp) {
    s.slice = hidden_slice(cfg.hidden, p, r);
    const std::vector<double> mine = slice_params(s.root_plan.init, D, cfg.hidden, kNumClasses, s.slice);
    s.model = make_model<Model>(D, s.slice.H, kNumClasses, s.max_part, cfg);
    s.model->set_params(std::vector<T>(mine.begin(), mine.end()));
    if (root) s.eval_model = make_model<Model>(D, cfg.hidden, kNumClasses, 1024, cfg);
  } else {
    s.model = make_model<Model>(D, cfg.hidden, kNumClasses, root ? std::max(s.max_part, 1024) : s.max_part, cfg);
    if constexpr (kOnHost<Model>)
      if (node_shared) share_node_memory(s, D, cfg.hidden);
    s.model->set_params(s.init);
  }
  s.model->set_train_data(std::move(shard));
  make_followers(cfg, s);
  // Model parallelism staged through host memory: the C x b partial scores' copy.
  if (mp && cfg.comm != Comm::Device && !kOnHost<Model>) s.h_scores = PinnedBuffer<T>(std::size_t(kNumClasses) * s.max_part);
  s.graphs = graphs_in_use(cfg, s.device_name.rfind("GPGPU-Sim", 0) == 0);
  s.model->enable_graphs(s.graphs);
  if constexpr (!kOnHost<Model>)
    if (fused_in_use(cfg)) s.model->enable_fused(true);
  if constexpr (!kOnHost<Model>) s.persistent = resolve_persistent(cfg, s, p);
  // One rank, data parallel: nothing runs between the backward pass and the step, so the
  // host model lets its dW1 GEMM apply the step (CpuModel::fuse_w1_step).
  if constexpr (kOnHost<Model>)
    if (!mp && p == 1 && !cfg.exact) s.model->fuse_w1_step(true, static_cast<T>(cfg.lr));
  if (root) {
    s.val = typename Model::Images(data.train.images.data() + sz.n_fit * D, data.train.labels.data() + sz.n_fit,
                         sz.n_val, D);
    s.test = typename Model::Images(data.test.images.data(), data.test.labels.data(), sz.n_test, D);
  }
  return s;
}

template <class T, class Model>
void print_header(std::FILE* out, const Config& cfg, const HostData& data, const Setup<T, Model>& s) {
  const Sizes& sz = s.root_plan.sizes;
#ifdef SIM_EMULATOR
  const char* build = "emulator";
#else
  const char* build = "CUDA";
#endif
  const char* kind = cfg.strategy == Strategy::Model ? "model-parallel trainer" : "data-parallel trainer";
  const char* prec = std::is_same_v<T, double> ? "double" : "float";
  if constexpr (kOnHost<Model>)
    std::fprintf(out, "nn_train: %s, %s, --device cpu: host GEMM %s, %d thread%s per rank (%s build; "
                 "--device cpu runs no CUDA kernels)\n", kind, prec, cpu_gemm_version(cfg.cpu_gemm).c_str(),
                 s.threads, s.threads == 1 ? "" : "s", build);
  else
    std::fprintf(out, "nn_train: %s, %s, %s build, GEMM variant %d (%s%s%s)\n", kind, prec,
#ifdef SIM_EMULATOR
                 "emulator (SIMT on the CPU, not a GPU)",
#else
                 "CUDA",
#endif
                 cfg.gemm, gemm_variant_name(cfg.gemm), cfg.gemm_why.empty() ? "" : "; ", cfg.gemm_why.c_str());
  std::fprintf(out, "data: %s (train %llu, validation %llu, test %llu images)\n",
               data.source.empty() ? "in memory" : data.source.c_str(), (unsigned long long)sz.n_fit,
               (unsigned long long)sz.n_val, (unsigned long long)sz.n_test);
  std::fprintf(out, "config: hidden=%d batch=%zu epochs=%d lr=%g reg=%g seed=%llu shuffle=%s init=%s%s%s\n",
               cfg.hidden, cfg.batch, cfg.epochs, cfg.lr, cfg.reg, (unsigned long long)cfg.seed,
               cfg.shuffle ? "yes" : "no",
               s.root_plan.resumed ? cfg.save.c_str() : cfg.load.empty() ? "fresh" : cfg.load.c_str(),
               cfg.config_file.empty() ? "" : " config-file=", cfg.config_file.c_str());
  const TrainState& st = s.root_plan.state;
  if (s.root_plan.resumed)
    std::fprintf(out, "resume: %s: %u epochs and %llu of %zu batches done; continuing\n", cfg.save.c_str(),
                 st.epoch, (unsigned long long)st.batch, s.plan.num_batches());
  else if (cfg.resume)
    std::fprintf(out, "resume: %s does not exist yet: starting fresh\n", cfg.save.c_str());
  if (cfg.strategy == Strategy::Model)
    std::fprintf(out, "MPI ranks: %d (hidden units split %d..%d per rank; every rank sees the whole batch)\n",
                 comm::size(), hidden_slice(cfg.hidden, comm::size(), comm::size() - 1).H, s.slice.H);
  else if (s.exact)
    std::fprintf(out, "MPI ranks: %d (each computes its chunk slots of every batch: %zu of the %zu on rank 0)\n",
                 comm::size(), s.exact->plan().rank_columns(0).count, s.exact->plan().num_columns());
  else
    std::fprintf(out, "MPI ranks: %d (batch slices of at most %d images on rank 0)\n", comm::size(), s.max_part);
  print_communication_line(out, cfg, s);
  if (!kOnHost<Model>) print_step_line(out, cfg, s.graphs, s.persistent);
  for (const std::string& line : placement_lines(s.rank_devices)) std::fprintf(out, "%s\n", line.c_str());
  std::fflush(out);
  const std::string short_of_cores = threads_warning(s.rank_devices);
  if (!short_of_cores.empty()) std::fprintf(stderr, "nn_train: warning: %s\n", short_of_cores.c_str());
}


#define NN_INSTANTIATE(T, Model)                                                                    \
  template Setup<T, Model> setup<T, Model>(const Config&, const HostData&);                           \
  template void print_header<T, Model>(std::FILE*, const Config&, const HostData&, const Setup<T, Model>&);
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
