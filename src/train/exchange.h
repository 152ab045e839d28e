// Every exchange of a step between the ranks, in one place: the gradient (data parallelism:
// --strategy allreduce, comm::iallreduce_sum / allreduce_sum; --strategy ps, comm::ps_sum)
// staged through pinned host memory, in device memory (--mpi device) or in the host model's
// own buffer (--device cpu), with or without overlap; and the partial scores (--strategy
// model). The MPI calls themselves are in src/comm (comm.cpp, strategies.cpp).
// Internal to src/train (included by trainer.cpp); tested by tests/train/test_strategies.cpp.
#pragma once
#include <cstddef>
#include <vector>

#include "comm/comm.h"
#include "common/nvtx.h"
#include "train/run_state.h"

namespace nn::train {

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
  T* g = R.model.grads();
  R.timer.mark(Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  reduce_region(R, g + R.n1, R.n2).wait();
  reduce_region_now(R, g, R.n1);
}

// --device cpu, node-shared (setup.h, share_node_memory): every rank's X and dZ1 are in
// memory the node's ranks share and the weights exist once. Only [b1 | W2 | b2] is summed, in
// place, between two memory fences (so every rank's X and dZ1 stores are seen by all after
// it); then each rank computes its columns of the whole batch's dW1 from every rank's dZ1 and
// X (CpuModel::node_shared_dw1), steps what it owns (node_shared_step), and all meet again
// before anybody reads the weights.
template <class T, class Model>
void step_node_shared(Run<T, Model>& R, std::size_t k) {
  T* g = R.model.grads();
  const std::size_t b1 = R.full_layout.b1();
  R.timer.mark(Mark::Allreduce);
  {
    NN_RANGE(R.mpi_range);
    R.s.shm->fence();
    comm::allreduce_sum(g + b1, R.np - b1);
    R.s.shm->fence();
  }
  // The dW1 GEMM (this rank's columns, every rank's batch) is backward work and timed as such
  // (--report's compute rate stays F / the passes' time), then the step.
  R.timer.mark(Mark::Backward);
  std::vector<int>& cols = R.shared_cols;
  for (int q = 0; q < R.p; ++q) cols[std::size_t(q)] = int(part(R.plan, q, k).count);
  R.model.node_shared_dw1(cols);
  R.timer.mark(Mark::Step);
  R.model.node_shared_step(R.lr, R.reg);
}

// --mpi device: CUDA-aware MPI reads and writes the gradient buffer itself.
template <class T, class Model>
void exchange_on_device(Run<T, Model>& R) {
  T* g = R.model.grads();
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

// --device cpu with overlap: the host computes the phases when called, so layer 2's
// reduction is started between them and is under way while dW1 is computed (the same MPI
// operations as without overlap, exchange_in_host_memory). t_queue: when the step's work began.
template <class T, class Model>
void backward_with_exchange_in_host_memory(Run<T, Model>& R, std::size_t offset, int b, T inv_B,
                                           Clock::time_point t_queue) {
  R.model.backward_layer2_phase(offset, b, inv_B, R.root, R.reg);
  T* g = R.model.grads();
  comm::Request r2 = reduce_region(R, g + R.n1, R.n2);
  R.model.backward_layer1_phase(b, R.root, R.reg);
  R.queue_s += since(t_queue);
  R.timer.mark(Mark::Allreduce);
  NN_RANGE(R.mpi_range);
  reduce_region_now(R, g, R.n1);
  r2.wait();
}

}  // namespace nn::train
