// CpuModel (cpu_model.h) with node-shared weights (--device cpu, every rank on one node;
// src/train/setup.cpp, step.cpp): where the parameters and every rank's X and dZ1 live,
// which part of the weights this rank steps, its columns of the whole batch's dW1 and the
// step itself; and a model that shares another's weights and images to compute beside it
// (follow: --exact's chunks on a rank's other threads). Tested by tests/train/test_cpu_train.cpp,
// tests/train/test_resume.cpp and tests/train/test_exact.cpp.
#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/nvtx.h"
#include "model/cpu_gemm.h"
#include "model/cpu_kernels.h"
#include "model/cpu_model.h"
#include "model/cpu_model_split.h"

namespace nn::model {

template <class T>
void CpuModel<T>::use_node_shared(SharedParts parts) {
  const int p = int(parts.X.size());
  if (p < 1 || parts.dZ1.size() != parts.X.size() || parts.rank < 0 || parts.rank >= p || !parts.params ||
      !parts.sync || fused_)
    throw std::invalid_argument("use_node_shared: incomplete parts (or fuse_w1_step on)");
  for (int q = 0; q < p; ++q)
    if (!parts.X[std::size_t(q)] || !parts.dZ1[std::size_t(q)])
      throw std::invalid_argument("use_node_shared: a rank's part is missing");
  shared_ = std::move(parts);
  P_ = shared_.params;
  Xp_ = shared_.X[std::size_t(shared_.rank)];
  dA1p_ = shared_.dZ1[std::size_t(shared_.rank)];
  // The private buffers are not used any more.
  std::vector<T>().swap(params_);
  std::vector<T>().swap(X_);
  std::vector<T>().swap(dA1_);
}

template <class T>
std::pair<std::size_t, std::size_t> CpuModel<T>::owned_w1() const {
  const std::size_t p = shared_.X.size(), r = std::size_t(shared_.rank), D = std::size_t(lay_.D);
  return {lay_.W1() + D * r / p * std::size_t(lay_.H), lay_.W1() + D * (r + 1) / p * std::size_t(lay_.H)};
}

template <class T>
std::pair<std::size_t, std::size_t> CpuModel<T>::owned_small() const {
  const std::size_t p = shared_.X.size(), r = std::size_t(shared_.rank), b1 = lay_.b1(), n = lay_.total() - b1;
  return {b1 + n * r / p, b1 + n * (r + 1) / p};
}

template <class T>
void CpuModel<T>::node_shared_dw1(const std::vector<int>& cols) {
  if (!node_shared() || cols.size() != shared_.X.size())
    throw std::logic_error("node_shared_dw1: not in node-shared mode, or one count per rank missing");
  const int D = lay_.D, H = lay_.H;
  const auto [w0, w1] = owned_w1();  // W1's columns [c0, c1): values W1() + [c0 H, c1 H)
  const std::size_t h = std::size_t(std::max(H, 1));
  const int c0 = int((w0 - lay_.W1()) / h), n = int((w1 - w0) / h);
  if (H < 1 || n < 1) return;
  // This rank's columns of the whole batch's dW1 = sum_q dZ1_q X_q^T, in rank order, into its
  // part of the (otherwise unused) W1 gradient buffer: one GEMM per rank, beta = 1 after the first.
  NN_RANGE("backward GEMM 3");
  T* G = grads_.data() + w0;
  bool first = true;
  for (std::size_t q = 0; q < cols.size(); ++q) {
    if (cols[q] < 1) continue;
    cpu_gemm(gemm_lib_, false, true, H, n, cols[q], T(1), shared_.dZ1[q], H, shared_.X[q] + c0, D,
             first ? T(0) : T(1), G, H);
    first = false;
  }
  if (first) std::fill(G, G + (w1 - w0), T(0));
}

template <class T>
void CpuModel<T>::node_shared_step(T lr, T reg) {
  NN_RANGE("step");
  if (!node_shared()) throw std::logic_error("node_shared_step: not in node-shared mode");
  // W1 <- W1 - lr (dW1 + reg W1) on this rank's columns: the step of the all-reduce path
  // (whose gradient carries reg W1), one pass over the shared weights.
  const auto [w0, w1] = owned_w1();
  T* W = P_ + w0;
  const T* G = grads_.data() + w0;
  split(w1 - w0, 4096, [&](std::size_t lo, std::size_t hi) {
    if (reg != T(0)) cpu::sgd_decay(W + lo, G + lo, hi - lo, lr, reg);
    else cpu::sgd(W + lo, G + lo, hi - lo, lr);
  });
  const auto [s0, s1] = owned_small();
  cpu::sgd(P_ + s0, grads_.data() + s0, s1 - s0, lr);
  shared_.sync();
}

template <class T>
void CpuModel<T>::follow(const CpuModel& lead) {
  if (lead.lay_.D != lay_.D || lead.lay_.H != lay_.H || lead.lay_.C != lay_.C || node_shared() || lead.node_shared())
    throw std::invalid_argument("follow: another network, or node-shared weights");
  lead_ = &lead;
  P_ = lead.P_;  // read only: a follower takes no step
}

#define NN_CPU_MODEL_SHARED(T)                                                             \
  template void CpuModel<T>::follow(const CpuModel&);                                      \
  template void CpuModel<T>::use_node_shared(SharedParts);                                 \
  template std::pair<std::size_t, std::size_t> CpuModel<T>::owned_w1() const;              \
  template std::pair<std::size_t, std::size_t> CpuModel<T>::owned_small() const;           \
  template void CpuModel<T>::node_shared_dw1(const std::vector<int>&);                     \
  template void CpuModel<T>::node_shared_step(T, T);
NN_CPU_MODEL_SHARED(float)
NN_CPU_MODEL_SHARED(double)

}  // namespace nn::model
