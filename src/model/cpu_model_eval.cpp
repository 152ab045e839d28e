// CpuModel (cpu_model.h): what the trainer reads off the model between steps -- the epoch's
// statistics, the weights' norm, evaluation on held-out images -- and the timing of the
// step's library GEMMs alone (the `blas bound:` line). The step itself is in cpu_model.cpp.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "common/nvtx.h"
#include "model/cpu_gemm.h"
#include "model/cpu_model.h"

namespace nn::model {

template <class T>
void CpuModel<T>::reset_stats() {
  loss_ = 0;
  correct_ = 0;
}

template <class T>
void CpuModel<T>::read_stats(double& loss_sum, std::uint64_t& correct) const {
  loss_sum = loss_;
  correct = correct_;
}

template <class T>
double CpuModel<T>::weight_sq_norm() const {
  double s = 0;
  for (std::size_t i = 0; i < std::size_t(lay_.H) * lay_.D; ++i) s += double(P_[lay_.W1() + i]) * P_[lay_.W1() + i];
  for (std::size_t i = 0; i < std::size_t(lay_.C) * lay_.H; ++i) s += double(P_[lay_.W2() + i]) * P_[lay_.W2() + i];
  return s;
}

template <class T>
std::uint64_t CpuModel<T>::evaluate(const CpuImages& data) {
  NN_RANGE("evaluate");
  if (data.n > 0 && data.D != lay_.D) throw std::invalid_argument("evaluate: image size != D");
  const int C = lay_.C;
  const T* b2 = P_ + lay_.b2();
  std::uint64_t hits = 0;
  for (std::size_t start = 0; start < data.n; start += std::size_t(max_cols_)) {
    const int m = int(std::min<std::size_t>(std::size_t(max_cols_), data.n - start));
    gather(data.images.data() + start * std::size_t(lay_.D), nullptr, m);
    if (lay_.H > 0) {
      hidden_forward(m);
      scores_forward(m);
    } else {
      std::fill(Z2_.begin(), Z2_.begin() + std::size_t(C) * m, T(0));
    }
    for (int j = 0; j < m; ++j) {
      const T* z = Z2_.data() + std::size_t(j) * C;
      int best = 0;
      for (int k = 1; k < C; ++k)
        if (z[k] + b2[k] > z[best] + b2[best]) best = k;
      hits += best == data.labels[start + std::size_t(j)];
    }
  }
  return hits;
}

template <class T>
typename CpuModel<T>::GemmTiming CpuModel<T>::time_step_gemms(int b, int reps, bool data_parallel) const {
  const int D = lay_.D, H = lay_.H, C = lay_.C;
  GemmTiming t;
  if (b < 1 || H < 1 || reps < 1) return t;
  // Scratch copies of the step's operands (values in the ranges training sees), so the model's
  // own buffers are left alone; allocated here, once, outside any training step.
  std::vector<T> X(std::size_t(D) * b, T(0.5)), A1(std::size_t(H) * b, T(0.5)), Z2(std::size_t(C) * b, T(0.01)),
      dA1(std::size_t(H) * b), G(lay_.total()), P(get_params());
  // The data-parallel step calls the library for W1 X and dW1 only: its three C-row products
  // are our own, in the fused layer-2 pass (layer2_fused). The model-parallel step calls all five.
  const auto step = [&] {
    cpu_gemm(gemm_lib_, false, false, H, b, D, T(1), P.data() + lay_.W1(), H, X.data(), D, T(0), A1.data(), H);
    if (!data_parallel) {
      cpu_gemm(gemm_lib_, false, false, C, b, H, T(1), P.data() + lay_.W2(), C, A1.data(), H, T(0), Z2.data(), C);
      if (gemm_lib_ == CpuGemm::OneDNN)  // as layer2_grads calls it
        cpu_gemm(gemm_lib_, false, true, H, C, b, T(1), A1.data(), H, Z2.data(), C, T(0), G.data() + lay_.W2(), H);
      else
        cpu_gemm(gemm_lib_, false, true, C, H, b, T(1), Z2.data(), C, A1.data(), H, T(0), G.data() + lay_.W2(), C);
      cpu_gemm(gemm_lib_, true, false, H, b, C, T(1), P.data() + lay_.W2(), C, Z2.data(), C, T(0), dA1.data(), H);
    }
    cpu_gemm(gemm_lib_, false, true, H, D, b, T(1), dA1.data(), H, X.data(), D, T(0), G.data() + lay_.W1(), H);
  };
  using Clock = std::chrono::steady_clock;
  step();  // warm-up: OpenBLAS's buffers and threads
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    step();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // The fastest run: what the BLAS can do on these shapes (a slower one met interference).
  t.seconds = *std::min_element(s.begin(), s.end());
  t.flops = 2.0 * b * (double(H) * D + (data_parallel ? 0.0 : 3.0 * double(C) * H) + double(H) * D);
  return t;
}

// --exact: the regulariser, once, on the summed gradient (the step's other terms are in grads_).
template <class T>
void CpuModel<T>::add_l2(T reg) {
  if (reg == T(0)) return;
  const auto add = [&](std::size_t at, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) grads_[at + i] += reg * P_[at + i];
  };
  add(lay_.W1(), std::size_t(lay_.H) * lay_.D);
  add(lay_.W2(), std::size_t(lay_.C) * lay_.H);
}

#define NN_CPU_MODEL_EVAL(T)                                                     \
  template void CpuModel<T>::add_l2(T);                                          \
  template void CpuModel<T>::reset_stats();                                      \
  template void CpuModel<T>::read_stats(double&, std::uint64_t&) const;          \
  template double CpuModel<T>::weight_sq_norm() const;                           \
  template std::uint64_t CpuModel<T>::evaluate(const CpuImages&);                \
  template CpuModel<T>::GemmTiming CpuModel<T>::time_step_gemms(int, int, bool) const;
NN_CPU_MODEL_EVAL(float)
NN_CPU_MODEL_EVAL(double)

}  // namespace nn::model
