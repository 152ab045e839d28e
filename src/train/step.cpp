// One training step, batch k of an epoch. The default, data_parallel_step, is the algorithm:
// this rank's part of the batch forward and backward, the gradient summed over the ranks by the
// run's exchange engine (src/exchange: one call, MPI two below it), the update. Each other
// strategy is a function of its own after it, and choose (at the end) picks the step and the
// engine once, when the run is made. The loop around a step (the watchdog, --report's batch, the
// statistics, the ranks' agreement to go on) is epoch.cpp's.
//
// Where the L2 term lives: inside the gradient, added by rank 0 only (GEMM beta*C with C = W),
// so the exchanged buffer is exactly the course's dJ/dp of the global batch and the step is
// p <- p - lr * g for every entry (ops sgd_update with reg = 0) -- the same formula as
// nn::ref::backward + nn::ref::sgd_update, which --verify replays (verify.h). Two host-model
// exceptions, the same formula in another order: at p = 1 the dW1 GEMM applies the step
// (CpuModel::fuse_w1_step, W1's decay a pass before it), and with node-shared weights each rank
// adds reg W1 to its columns of dW1 in the step (node_shared_step); W2's term stays in rank 0's
// gradient. --exact on (exact_step) is the exception: no rank adds it to a chunk; every rank adds
// it once to the exactly summed gradient (add_l2).
// Tested by tests/train (test_train, test_strategies, test_fused, test_cpu_train, test_exact) at
// 1-4 ranks.
#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"
#include "exchange/engines.h"
#include "train/run.h"

namespace nn::train {
namespace {

// 1 / the global count of batch k (not this rank's part), so the ranks' gradients add up to the
// batch's.
template <class T, class Model>
T inverse_count(const Run<T, Model>& R, std::size_t k) {
  return T(1) / T(R.setup.plan.batch_count(k));
}

// ---- the default step ------------------------------------------------------------------------
// Data parallelism (--strategy allreduce, or ps): each rank computes the gradient of its part of
// global batch k, the ranks sum their gradients, and every rank applies the same update.
template <class T, class Model>
void data_parallel_step(Run<T, Model>& R, std::size_t k) {
  const Fixed<T, Model>& F = R.fixed;
  const Part mine = part(R.setup.plan, F.rank, k);
  {
    Phase phase(R, F.first_mark);  // forward, then backward (model.set_phase_hook marks between)
    R.setup.model->forward_backward(mine.offset, int(mine.count), inverse_count(R, k), /*add_reg=*/F.is_root, F.reg);
  }
  F.exchange->sum(ExchangeParts<T, Model>(R));
  Phase phase(R, Mark::Step);
  R.setup.model->sgd_step(F.lr);
}

// ---- --exact on --------------------------------------------------------------------------
// The same step at any rank count (exact.h, docs/training.md): batch k's chunks, whichever this
// rank owns, each forward and backward alone with no regulariser; each chunk's gradient kept on the
// host; the chunks summed exactly over every rank (ExactChunks::sum: an MPI_MAX of the exponents,
// then integer words through the run's reduction, rounded once); the sum back in the model, the
// regulariser added once (add_l2) and the update. Nothing in it depends on the rank count but
// which chunks a rank computes.
// This rank's chunks of batch k, their gradients into g: one after another on the model, or on
// --device cpu with followers, dealt round-robin to the model and its followers, each on a
// thread of its own (the chunks' gradients do not depend on which model computed them).
template <class T, class Model>
void exact_chunks(Run<T, Model>& R, std::size_t k, const std::vector<ChunkAt>& mine, const std::vector<T*>& g) {
  Model& model = *R.setup.model;
  const T inv_B = inverse_count(R, k);
  const std::size_t n = R.fixed.n_params;
  if constexpr (kOnHost<Model>) {
    const std::size_t W = std::min(mine.size(), R.setup.followers.size() + 1);
    std::vector<std::exception_ptr> failed(W);
    const auto work = [&](std::size_t w) {
      try {
        Model& m = w == 0 ? model : *R.setup.followers[w - 1];
        if (w > 0) {
          model::set_gemm_threads(1);  // a new thread starts with the process's OpenMP default
          m.reset_stats();
        }
        for (std::size_t i = w; i < mine.size(); i += W) {
          m.forward_backward(mine[i].offset, mine[i].count, inv_B, /*add_reg=*/false, T(0));
          std::copy(m.grads(), m.grads() + n, g[i]);
        }
      } catch (...) {
        failed[w] = std::current_exception();
      }
    };
    std::vector<std::thread> team;
    for (std::size_t w = 1; w < W; ++w) team.emplace_back(work, w);
    work(0);
    for (std::thread& t : team) t.join();
    for (const std::exception_ptr& e : failed)
      if (e) std::rethrow_exception(e);
    for (std::size_t w = 1; w < W; ++w) {  // the followers' statistics join the model's
      double loss = 0;
      std::uint64_t hits = 0;
      R.setup.followers[w - 1]->read_stats(loss, hits);
      model.add_stats(loss, hits);
    }
  } else {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      model.forward_backward(mine[i].offset, mine[i].count, inv_B, /*add_reg=*/false, T(0));
      model.wait_download(model.queue_download(g[i], 0, n, Stage::AllGrads));
    }
  }
}

template <class T, class Model>
void exact_step(Run<T, Model>& R, std::size_t k) {
  const Fixed<T, Model>& F = R.fixed;
  Model& model = *R.setup.model;
  ExactChunks<T>& X = *R.setup.exact;
  const std::vector<ChunkAt>& mine = X.epoch().batches[k];
  X.begin(k);
  {
    Phase phase(R, F.first_mark);  // ForwardBackward: no hook between a chunk's passes
    exact_chunks(R, k, mine, X.slots(mine.size()));
  }
  // The sum is written where the last step's upload reads from: a device model that computed
  // no chunk has not waited for that upload yet (an async copy may read its source late).
  if constexpr (!kOnHost<Model>)
    if (mine.empty()) model.synchronize();
  {
    Phase phase(R, Mark::Allreduce);
    NN_RANGE("exact sum");
    const std::vector<T>* total = nullptr;
    try {
      total = &X.sum();
    } catch (const std::runtime_error&) {  // a NaN or Inf in some chunk, or a sum beyond T: on every rank
      R.progress.epoch_loss = std::numeric_limits<double>::quiet_NaN();  // the loop stops the run here
      return;
    }
    R.measured.timer.mark(Mark::H2D);
    model.upload_grads(total->data());
  }
  Phase phase(R, Mark::Step);
  model.add_l2(F.reg);
  model.sgd_step(F.lr);
}

// ---- the other strategies ------------------------------------------------------------------
// --device cpu with overlap: the host computes the phases when called, so layer 2's sum starts
// between them and is under way while dW1 is computed (the same sums as without overlap:
// exchange/host_memory.h).
template <class T, class Model>
void host_overlap_step(Run<T, Model>& R, std::size_t k) {
  const Fixed<T, Model>& F = R.fixed;
  const Part mine = part(R.setup.plan, F.rank, k);
  {
    Phase phase(R, F.first_mark);
    R.setup.model->backward_layer2_phase(mine.offset, int(mine.count), inverse_count(R, k), F.is_root, F.reg);
    F.exchange->layer2_ready();
    R.setup.model->backward_layer1_phase(int(mine.count), F.is_root, F.reg);
  }
  F.exchange->sum(ExchangeParts<T, Model>(R));
  Phase phase(R, Mark::Step);
  R.setup.model->sgd_step(F.lr);
}

// --device cpu, every rank on one node (setup.cpp's use_node_shared): every rank's X and dZ1 are
// in memory the node's ranks share and the weights exist once. The engine sums [b1 | W2 | b2]
// between two memory fences (exchange/node_shared.h); then each rank computes its columns of the
// whole batch's dW1 from every rank's dZ1 and X (CpuModel::node_shared_dw1), steps what it owns
// (node_shared_step), and all meet again before anybody reads the weights.
template <class T, class Model>
void node_shared_step(Run<T, Model>& R, std::size_t k) {
  if constexpr (NodeSharedModel<Model>) {
    const Fixed<T, Model>& F = R.fixed;
    const Part mine = part(R.setup.plan, F.rank, k);
    {
      Phase phase(R, F.first_mark);
      R.setup.model->forward_backward(mine.offset, int(mine.count), inverse_count(R, k), F.is_root, F.reg);
    }
    F.exchange->sum(ExchangeParts<T, Model>(R));
    {
      // The dW1 GEMM (this rank's columns, every rank's batch) is backward work and timed as
      // such (--report's compute rate stays F / the passes' time).
      Phase phase(R, Mark::Backward);
      std::vector<int> cols(std::size_t(F.ranks));  // each rank's columns this step
      for (int q = 0; q < F.ranks; ++q) cols[std::size_t(q)] = int(part(R.setup.plan, q, k).count);
      R.setup.model->node_shared_dw1(cols);
    }
    Phase phase(R, Mark::Step);
    R.setup.model->node_shared_step(F.lr, F.reg);
  }
}

// A lone rank's fused step (DeviceModel, --fused): the whole step, update included, in one call
// (a graph replay under --graph); the loss and hits stay on the device.
template <class T, class Model>
void lone_fused_step(Run<T, Model>& R, std::size_t k) {
  if constexpr (FusedStepModel<Model>) {
    const Part all = part(R.setup.plan, 0, k);
    {
      Phase phase(R, R.fixed.first_mark);
      R.setup.model->fused_step(all.offset, int(all.count), inverse_count(R, k), R.fixed.reg, R.fixed.lr);
      phase.queued();
      R.setup.model->wait_step_before_last();  // the host stays within one step of the device
    }
    Phase<T, Model>{R, Mark::Step};  // the update ran inside the step: an empty phase, so --report lists it
  }
}

// --persistent: n lone fused steps in one cooperative launch (kernels/ops/persistent_step.h).
template <class T, class Model>
void persistent_steps(Run<T, Model>& R, std::size_t k, std::size_t n) {
  if constexpr (FusedStepModel<Model>) {
    const Part first = part(R.setup.plan, 0, k);
    if (part(R.setup.plan, 0, k + n - 1).offset != first.offset + (n - 1) * R.setup.plan.B)
      throw std::logic_error("persistent_steps: the run's batches are not consecutive full batches");
    {
      Phase phase(R, R.fixed.first_mark);
      R.setup.model->persistent_steps(first.offset, int(n), int(R.setup.plan.B), R.fixed.reg, R.fixed.lr);
      phase.queued();
      R.setup.model->wait_step_before_last();
    }
    Phase<T, Model>{R, Mark::Step};  // the updates ran inside the launch
  } else {
    throw std::logic_error("persistent_steps: the host model has no persistent step");
  }
}

// Model parallelism (--strategy model): every rank computes its hidden units' share of the
// batch's scores (rank 0 adds b2), the ranks sum the scores, and each rank runs the backward
// pass into its own slice of the weights (each rank regularises its own weights). in_place: MPI
// sums the model's own scores buffer (--comm device, --device cpu); else they are staged through
// pinned host memory.
template <class T, class Model, bool in_place>
void model_parallel_step(Run<T, Model>& R, std::size_t k) {
  const Fixed<T, Model>& F = R.fixed;
  Model& model = *R.setup.model;
  const Part all = part(R.setup.plan, 0, k);
  const int b = int(all.count);
  {
    Phase phase(R, F.first_mark);
    model.partial_scores_phase(all.offset, b, /*add_b2=*/F.is_root);
  }
  if (F.ranks > 1) {  // the C x b partial scores, summed over the ranks
    const std::size_t n = std::size_t(kNumClasses) * b;
    if constexpr (in_place) {
      Phase phase(R, Mark::Allreduce);
      model.wait(Stage::PartialScores);
      NN_RANGE("MPI_Allreduce");
      comm::allreduce_sum(model.scores(), n);
    } else {
      T* h = R.setup.h_scores.get();
      R.measured.timer.mark(Mark::D2H);
      model.download_scores(h, b);
      if (R.cfg.profile) {
        R.measured.timer.mark(Mark::Untimed);
        boundary(R, true);
      }
      R.measured.timer.mark(Mark::Allreduce);
      {
        NN_RANGE("MPI_Allreduce");
        comm::allreduce_sum(h, n);
      }
      R.measured.timer.mark(Mark::H2D);
      model.upload_scores(h, b);
    }
  }
  {
    Phase phase(R, Mark::Backward);
    model.model_backward_phase(b, inverse_count(R, k), F.reg, /*stats=*/F.is_root);
  }
  Phase phase(R, Mark::Step);
  model.sgd_step(F.lr);
}

// A step of the signature above as a StepFn (one step a call).
template <class T, class Model, void (*step)(Run<T, Model>&, std::size_t)>
void one_step(Run<T, Model>& R, std::size_t k, std::size_t) {
  step(R, k);
}

// The exchange engine (src/exchange/engines.h) that sums this run's gradient: none at one rank
// or under model parallelism (its scores are summed in the step), else by where the gradient is.
template <class T, class Model>
std::unique_ptr<exchange::Exchange<T>> choose_exchange(const Config& cfg, Setup<T, Model>& s, const Fixed<T, Model>& f) {
  using exchange::Engine;
  exchange::Options<T> o;
  o.regions = f.regions;
  o.reduction = cfg.strategy == Strategy::ParamServer ? comm::ps_reduction<T>() : comm::allreduce_reduction<T>();
  o.overlap = cfg.overlap && !cfg.profile;
  o.piece = exchange_piece_values(cfg.exchange_chunk, f.regions.layer1, sizeof(T));
  o.node = s.node_memory.get();
  o.b1 = f.full_layout.b1();
  o.nccl = s.nccl.get();
  Engine e = Engine::None;
  if (f.ranks > 1 && !f.model_parallel && !s.exact) {  // --exact sums in its own step
    if (kOnHost<Model>) e = s.node_memory ? Engine::NodeShared : Engine::HostMemory;
    else e = cfg.comm == Comm::Device ? Engine::DevicePointers : cfg.comm == Comm::Nccl ? Engine::Nccl : Engine::HostStaged;
  }
  return exchange::make_exchange<T, Model>(e, *s.model, o);
}

}  // namespace

template <class T, class Model>
void choose(const Config& cfg, Setup<T, Model>& s, Fixed<T, Model>& f) {
  f.exchange = choose_exchange(cfg, s, f);
  f.reduce_range = cfg.strategy == Strategy::ParamServer ? comm::ps_reduction<T>().range : comm::allreduce_reduction<T>().range;
  const bool overlap = cfg.overlap && !cfg.profile;
  if (s.exact) {
    f.step = one_step<T, Model, exact_step<T, Model>>;
  } else if (f.model_parallel) {
    if (cfg.comm == Comm::Device || kOnHost<Model>) f.step = one_step<T, Model, model_parallel_step<T, Model, true>>;
    else f.step = one_step<T, Model, model_parallel_step<T, Model, false>>;
  } else if constexpr (kOnHost<Model>) {
    if (s.node_memory) f.step = one_step<T, Model, node_shared_step<T, Model>>;
    else if (overlap && f.ranks > 1) f.step = one_step<T, Model, host_overlap_step<T, Model>>;
    else f.step = one_step<T, Model, data_parallel_step<T, Model>>;
  } else {
    if (s.persistent) {
      f.step = persistent_steps<T, Model>;
      f.steps_per_launch = kPersistentRun;
      f.step_range = "step run";
    } else if (f.ranks == 1 && s.model->stats_deferred()) {
      f.step = one_step<T, Model, lone_fused_step<T, Model>>;
    } else {
      f.step = one_step<T, Model, data_parallel_step<T, Model>>;
    }
  }
}

#define NN_INSTANTIATE(T, Model) \
  template void choose<T, Model>(const Config&, Setup<T, Model>&, Fixed<T, Model>&);
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
