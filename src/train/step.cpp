// One training step, batch k of an epoch. The default, data_parallel_step, is the algorithm:
// this rank's part of the batch forward and backward, the gradient summed over the ranks
// (exchange_through_host, below it: device -> pinned host -> MPI_Allreduce -> device), the
// update. Each other strategy is a function of its own after it, and choose_step (at the end)
// picks one when the run is made. The loop around a step (the watchdog, --report's batch, the
// statistics, the ranks' agreement to go on) is epoch.cpp's; the MPI calls are src/comm's.
//
// Where the L2 term lives: inside the gradient, added by rank 0 only (GEMM beta*C with C = W),
// so the exchanged buffer is exactly the course's dJ/dp of the global batch and the step is
// p <- p - lr * g for every entry (ops sgd_update with reg = 0) -- the same formula as
// nn::ref::backward + nn::ref::sgd_update, which --verify replays (verify.h). Two host-model
// exceptions, the same formula in another order: at p = 1 the dW1 GEMM applies the step
// (CpuModel::fuse_w1_step, W1's decay a pass before it), and with node-shared weights each rank
// adds reg W1 to its columns of dW1 in the step (node_shared_step); W2's term stays in rank 0's
// gradient.
// Tested by tests/train (test_train, test_strategies, test_fused, test_cpu_train) at 1-4 ranks.
#include "train/step.h"

#include <stdexcept>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"

namespace nn::train {

// How a data-parallel step sums the gradient over the ranks, in place (defined below the step).
template <class T, class Model>
using Exchange = void (*)(Run<T, Model>&);
template <class T, class Model>
void exchange_through_host(Run<T, Model>& R);
template <class T, class Model>
void exchange_in_device_memory(Run<T, Model>& R);
template <class T, class Model>
void exchange_in_host_memory(Run<T, Model>& R);

// ---- the default step ------------------------------------------------------------------------
// Data parallelism (--strategy allreduce, or ps): each rank computes the gradient of its part of
// global batch k, the ranks sum their gradients, and every rank applies the same update.
// sum_over_ranks: exchange_through_host; in place with --mpi device or --device cpu.
template <class T, class Model, Exchange<T, Model> sum_over_ranks = exchange_through_host<T, Model>>
void data_parallel_step(Run<T, Model>& R, std::size_t k) {
  const Part mine = part(R.plan, R.rank, k);
  // 1 / the global count of batch k (not this rank's), so the gradients add up to the batch's.
  const T inv_B = T(1) / T(R.plan.batch_count(k));
  {
    Phase phase(R, R.first_mark);  // forward, then backward (model.set_phase_hook marks between)
    R.model.forward_backward(mine.offset, int(mine.count), inv_B, /*add_reg=*/R.is_root, R.reg);
  }
  // One rank holds the whole batch's gradient already: the round trip would be a no-op.
  if (R.ranks > 1) sum_over_ranks(R);
  Phase phase(R, Mark::Step);
  R.model.sgd_step(R.lr);
}

// The reduction of one region of the gradient: MPI_Iallreduce (comm::iallreduce_sum), or the
// parameter server's Send/Recv (comm::ps_sum, blocking: its request is already complete).
template <class T, class Model>
comm::Request start_sum(Run<T, Model>& R, T* buf, std::size_t n) {
  if (R.cfg.strategy == Strategy::ParamServer) {
    comm::ps_sum(buf, n);
    return {};
  }
  return comm::iallreduce_sum(buf, n);
}

// The default exchange: layer 2's gradient [W2 | b2] is copied to pinned host memory first (its
// stage is done first) and its sum started while layer 1's [W1 | b1] is still being copied (the
// dW1 GEMM may still run); then layer 1's sum; then the whole sum back to the device, where
// sgd_step reads it. Without overlap the same two reductions run after both copies: the same MPI
// operations on the same values, so the weights are bitwise identical either way.
template <class T, class Model>
void exchange_through_host(Run<T, Model>& R) {
  T* h = R.h_grad.get();
  {
    Phase phase(R, Mark::D2H);
    NN_RANGE("cudaMemcpyDeviceToHost");
    R.model.queue_download(h, R.n_layer1, R.n_params, Stage::Layer2Grads);
    R.model.queue_download(h, 0, R.n_layer1, Stage::AllGrads);
    R.model.wait_download(R.overlap ? Stage::Layer2Grads : Stage::AllGrads);
  }
  if (R.cfg.profile) {
    R.timer.mark(Mark::Untimed);
    boundary(R, true);  // waiting for the slowest rank: not the allreduce's time
  }
  {
    Phase phase(R, Mark::Allreduce);
    NN_RANGE(R.mpi_range);
    comm::Request layer2 = start_sum(R, h + R.n_layer1, R.n_layer2);
    if (R.overlap)
      while (!R.model.download_done(Stage::AllGrads)) {  // MPI progresses meanwhile
        layer2.test();
        ++R.overlap_polls;
      }
    else
      layer2.wait();
    comm::Request layer1 = start_sum(R, h, R.n_layer1);
    layer2.wait();
    layer1.wait();
  }
  Phase phase(R, Mark::H2D);
  R.model.upload_grads(h);
}

// --mpi device: a CUDA-aware MPI reads and writes the gradient buffer in device memory itself.
template <class T, class Model>
void exchange_in_device_memory(Run<T, Model>& R) {
  T* g = R.model.grads();
  Phase phase(R, Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  if (R.overlap) {
    R.model.wait(Stage::Layer2Grads);
    comm::Request layer2 = start_sum(R, g + R.n_layer1, R.n_layer2);
    R.model.wait(Stage::AllGrads);
    comm::Request layer1 = start_sum(R, g, R.n_layer1);
    layer2.wait();
    layer1.wait();
  } else {
    R.model.wait(Stage::AllGrads);
    start_sum(R, g + R.n_layer1, R.n_layer2).wait();
    start_sum(R, g, R.n_layer1).wait();
  }
}

// The same reduction as one blocking call. For layer 1's large region on the host backend:
// Open MPI's blocking MPI_Allreduce (a ring at this size) takes half the time of its
// nonblocking one (libnbc) on 814 KB at 2 ranks (72 vs 146 us on a 2-core VM). Both orders of
// the host backend's calls use it for layer 1, so overlap on and off stay bitwise identical.
template <class T, class Model>
void sum_now(Run<T, Model>& R, T* buf, std::size_t n) {
  if (R.cfg.strategy == Strategy::ParamServer) comm::ps_sum(buf, n);
  else comm::allreduce_sum(buf, n);
}

// --device cpu without overlap: the model's host buffer in place, layer 2 then layer 1, the same
// MPI calls per region as host_overlap_step.
template <class T, class Model>
void exchange_in_host_memory(Run<T, Model>& R) {
  T* g = R.model.grads();
  Phase phase(R, Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  start_sum(R, g + R.n_layer1, R.n_layer2).wait();
  sum_now(R, g, R.n_layer1);
}

// ---- the other strategies ------------------------------------------------------------------
// A lone rank's fused step (DeviceModel, --fused): the whole step, update included, in one call
// (a graph replay under --graph); the loss and hits stay on the device.
template <class T, class Model>
void lone_fused_step(Run<T, Model>& R, std::size_t k) {
  if constexpr (FusedStepModel<Model>) {
    const Part all = part(R.plan, 0, k);
    const T inv_B = T(1) / T(R.plan.batch_count(k));
    {
      Phase phase(R, R.first_mark);
      R.model.fused_step(all.offset, int(all.count), inv_B, R.reg, R.lr);
      phase.queued();
      R.model.wait_step_before_last();  // the host stays within one step of the device
    }
    Phase<T, Model>{R, Mark::Step};  // the update ran inside the step: an empty phase, so --report lists it
  }
}

// --persistent: n lone fused steps in one cooperative launch (kernels/ops/persistent_step.h).
template <class T, class Model>
void persistent_steps(Run<T, Model>& R, std::size_t k, std::size_t n) {
  if constexpr (FusedStepModel<Model>) {
    const Part first = part(R.plan, 0, k);
    if (part(R.plan, 0, k + n - 1).offset != first.offset + (n - 1) * R.plan.B)
      throw std::logic_error("persistent_steps: the run's batches are not consecutive full batches");
    {
      Phase phase(R, R.first_mark);
      R.model.persistent_steps(first.offset, int(n), int(R.plan.B), R.reg, R.lr);
      phase.queued();
      R.model.wait_step_before_last();
    }
    Phase<T, Model>{R, Mark::Step};  // the updates ran inside the launch
  } else {
    throw std::logic_error("persistent_steps: the host model has no persistent step");
  }
}

// Model parallelism (--strategy model): every rank computes its hidden units' share of the
// batch's scores (rank 0 adds b2), the ranks sum the scores, and each rank runs the backward
// pass into its own slice of the weights (each rank regularises its own weights).
template <class T, class Model>
void model_parallel_step(Run<T, Model>& R, std::size_t k) {
  const Part all = part(R.plan, 0, k);
  const T inv_B = T(1) / T(R.plan.batch_count(k));
  const int b = int(all.count);
  {
    Phase phase(R, R.first_mark);
    R.model.partial_scores_phase(all.offset, b, /*add_b2=*/R.is_root);
  }
  if (R.ranks > 1) {  // the C x b partial scores, summed over the ranks
    const std::size_t n = std::size_t(kNumClasses) * b;
    if (R.mpi_in_place) {
      Phase phase(R, Mark::Allreduce);
      R.model.wait(Stage::PartialScores);
      NN_RANGE("MPI_Allreduce");
      comm::allreduce_sum(R.model.scores(), n);
    } else {
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
  }
  {
    Phase phase(R, Mark::Backward);
    R.model.model_backward_phase(b, inv_B, R.reg, /*stats=*/R.is_root);
  }
  Phase phase(R, Mark::Step);
  R.model.sgd_step(R.lr);
}

// --device cpu, every rank on one node (setup.cpp's use_node_shared): every rank's X and dZ1 are
// in memory the node's ranks share and the weights exist once. Only [b1 | W2 | b2] is summed, in
// place, between two memory fences (so every rank's X and dZ1 stores are seen by all after it);
// then each rank computes its columns of the whole batch's dW1 from every rank's dZ1 and X
// (CpuModel::node_shared_dw1), steps what it owns (node_shared_step), and all meet again
// before anybody reads the weights.
template <class T, class Model>
void node_shared_step(Run<T, Model>& R, std::size_t k) {
  if constexpr (NodeSharedModel<Model>) {
    const Part mine = part(R.plan, R.rank, k);
    const T inv_B = T(1) / T(R.plan.batch_count(k));
    {
      Phase phase(R, R.first_mark);
      R.model.forward_backward(mine.offset, int(mine.count), inv_B, R.is_root, R.reg);
    }
    T* g = R.model.grads();
    const std::size_t b1 = R.full_layout.b1();
    {
      Phase phase(R, Mark::Allreduce);
      NN_RANGE(R.mpi_range);
      R.setup.node_memory->fence();
      comm::allreduce_sum(g + b1, R.n_params - b1);
      R.setup.node_memory->fence();
    }
    {
      // The dW1 GEMM (this rank's columns, every rank's batch) is backward work and timed as
      // such (--report's compute rate stays F / the passes' time).
      Phase phase(R, Mark::Backward);
      for (int q = 0; q < R.ranks; ++q) R.node_shared_cols[std::size_t(q)] = int(part(R.plan, q, k).count);
      R.model.node_shared_dw1(R.node_shared_cols);
    }
    Phase phase(R, Mark::Step);
    R.model.node_shared_step(R.lr, R.reg);
  }
}

// --device cpu with overlap: the host computes the phases when called, so layer 2's reduction
// is started between them and is under way while dW1 is computed (the same MPI operations as
// without overlap, exchange_in_host_memory).
template <class T, class Model>
void host_overlap_step(Run<T, Model>& R, std::size_t k) {
  const Part mine = part(R.plan, R.rank, k);
  const T inv_B = T(1) / T(R.plan.batch_count(k));
  T* g = R.model.grads();
  comm::Request layer2;
  {
    Phase phase(R, R.first_mark);
    R.model.backward_layer2_phase(mine.offset, int(mine.count), inv_B, R.is_root, R.reg);
    layer2 = start_sum(R, g + R.n_layer1, R.n_layer2);
    R.model.backward_layer1_phase(int(mine.count), R.is_root, R.reg);
  }
  {
    Phase phase(R, Mark::Allreduce);
    NN_RANGE(R.mpi_range);
    sum_now(R, g, R.n_layer1);
    layer2.wait();
  }
  Phase phase(R, Mark::Step);
  R.model.sgd_step(R.lr);
}

template <class T, class Model>
StepFn<T, Model> choose_step(const Run<T, Model>& R) {
  if (R.model_parallel) return model_parallel_step<T, Model>;
  if constexpr (kOnHost<Model>) {
    if (R.setup.node_memory) return node_shared_step<T, Model>;
    if (R.overlap && R.ranks > 1) return host_overlap_step<T, Model>;
    return data_parallel_step<T, Model, exchange_in_host_memory<T, Model>>;
  } else {
    if (R.ranks == 1 && stats_deferred(R)) return lone_fused_step<T, Model>;
    if (R.mpi_in_place) return data_parallel_step<T, Model, exchange_in_device_memory<T, Model>>;
    return data_parallel_step<T, Model>;
  }
}

#define NN_INSTANTIATE(T, Model)                                                  \
  template StepFn<T, Model> choose_step<T, Model>(const Run<T, Model>&);         \
  template void persistent_steps<T, Model>(Run<T, Model>&, std::size_t, std::size_t);
NN_FOR_EACH_RUN(NN_INSTANTIATE)
#undef NN_INSTANTIATE

}  // namespace nn::train
