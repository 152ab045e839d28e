// CpuModel: one rank's forward/backward on the host. The data-parallel step: the gather, W1 X
// (OpenBLAS or oneDNN, cpu_gemm.h), one fused pass over it by column blocks for everything up
// to dZ1 and every gradient but dW1 (layer2_fused, cpu::layer2_block), then dW1 (the library
// again). The model-parallel step calls the library for all five GEMMs with one pass for each
// elementwise stage between them. Buffers are sized once in the constructor: a training step
// allocates nothing. Statistics, evaluation and the GEMM timing are in cpu_model_eval.cpp, the
// node-shared step in cpu_model_shared.cpp. Tested by tests/model/test_cpu_model.cpp and
// tests/model/test_cpu_layer2.cpp.
#include "model/cpu_model.h"

#include <sched.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/nvtx.h"
#include "model/cpu_gemm.h"
#include "model/cpu_kernels.h"
#include "model/cpu_model_split.h"

namespace nn::model {


// split(): cpu_model_split.h (shared with cpu_model_shared.cpp).

CpuImages::CpuImages(const std::uint8_t* img, const std::uint8_t* lab, std::size_t n_, int D_)
    : images(img, img + n_ * std::size_t(D_)), labels(lab, lab + n_), n(n_), D(D_) {}

template <class T>
CpuModel<T>::CpuModel(int D, int H, int C, int max_cols, CpuGemm gemm_lib)
    : lay_{D, H, C},
      max_cols_(max_cols < 1 ? 1 : max_cols),
      params_(lay_.total()),
      grads_(lay_.total()),
      X_(std::size_t(D) * max_cols_),
      A1_(std::size_t(H) * max_cols_),
      Z2_(std::size_t(C) * max_cols_),
      dA1_(std::size_t(H) * max_cols_),
      dW2t_(gemm_lib == CpuGemm::OneDNN ? std::size_t(C) * H : 0),
      db1_blocks_(std::size_t(H) * ((max_cols_ + cpu::kColumnBlock - 1) / cpu::kColumnBlock)),
      w2t_(std::size_t(cpu::kClassChunk) * std::size_t(H)),
      dW2_blocks_(std::size_t(C) * H * ((max_cols_ + cpu::kColumnBlock - 1) / cpu::kColumnBlock)),
      loss_blocks_((max_cols_ + cpu::kColumnBlock - 1) / cpu::kColumnBlock),
      hits_blocks_(loss_blocks_.size()),
      ylab_(max_cols_),
      gemm_lib_(gemm_lib) {
  if (D < 1 || H < 0 || C < 1) throw std::invalid_argument("CpuModel: D, C must be positive, H >= 0");
  if (C > cpu::kClassChunk)  // the fused layer-2 pass holds every class in registers
    throw std::invalid_argument("CpuModel: at most " + std::to_string(cpu::kClassChunk) + " classes");
  P_ = params_.data();
  Xp_ = X_.data();
  dA1p_ = dA1_.data();
  if (std::is_same_v<T, double> && gemm_lib != CpuGemm::OpenBLAS)
    throw std::invalid_argument("CpuModel<double>: oneDNN has no double GEMM");
}

template <class T>
void CpuModel<T>::set_params(const std::vector<T>& packed) {
  if (packed.size() != lay_.total()) throw std::invalid_argument("set_params: wrong size");
  if (!node_shared()) {
    std::copy(packed.begin(), packed.end(), P_);
    return;
  }
  // Every rank passes the same values and writes only what it owns.
  const auto [w0, w1] = owned_w1();
  std::copy(packed.begin() + std::ptrdiff_t(w0), packed.begin() + std::ptrdiff_t(w1), P_ + w0);
  const auto [s0, s1] = owned_small();
  std::copy(packed.begin() + std::ptrdiff_t(s0), packed.begin() + std::ptrdiff_t(s1), P_ + s0);
  shared_.sync();
}

template <class T>
void CpuModel<T>::set_train_data(CpuImages&& shard) {
  if (shard.n > 0 && shard.D != lay_.D) throw std::invalid_argument("set_train_data: image size != D");
  shard_ = std::move(shard);
  order_.clear();
}

template <class T>
void CpuModel<T>::set_order(const std::vector<std::uint32_t>& order) {
  const std::size_t n = train_images().n;
  if (order.size() != n) throw std::invalid_argument("set_order: order size != shard size");
  for (const std::uint32_t i : order)
    if (i >= n) throw std::out_of_range("set_order: index outside the shard");
  order_ = order;
}

template <class T>
void CpuModel<T>::stage_batch(std::size_t offset, int b) {
  const CpuImages& shard = train_images();
  if (b < 0 || b > max_cols_ || offset + std::size_t(b) > shard.n || (b > 0 && order_.size() != shard.n))
    throw std::out_of_range("forward_backward: slice outside the shard or the activations");
  batch_idx_ = order_.data() + offset;
  for (int j = 0; j < b; ++j) {
    const std::uint8_t y = shard.labels[batch_idx_[j]];
    if (y >= lay_.C) throw std::out_of_range("forward_backward: label " + std::to_string(y) + " >= C");
    ylab_[std::size_t(j)] = y;
  }
}

// X(:, j) = images(:, idx[j]) / 255 (idx == nullptr: the first b columns).
template <class T>
void CpuModel<T>::gather(const std::uint8_t* images, const std::uint32_t* idx, int b) {
  const std::size_t D = std::size_t(lay_.D);
  split(std::size_t(b), 16, [&](std::size_t lo, std::size_t hi) {
    cpu::gather_normalize(idx ? images : images + lo * D, idx ? idx + lo : nullptr, int(hi - lo), int(D),
                          Xp_ + lo * D);
  });
}

template <class T>
void CpuModel<T>::hidden_gemm(int b, T* out) {
  NN_RANGE("forward GEMM 1");
  cpu_gemm(gemm_lib_, false, false, lay_.H, b, lay_.D, T(1), P_ + lay_.W1(), lay_.H, Xp_, lay_.D, T(0), out, lay_.H);
}

template <class T>
void CpuModel<T>::hidden_forward(int b) {
  const int H = lay_.H;
  hidden_gemm(b, A1_.data());
  split(std::size_t(b), 16, [&](std::size_t lo, std::size_t hi) {
    cpu::bias_sigmoid(A1_.data() + lo * std::size_t(H), P_ + lay_.b1(), H, int(hi - lo));
  });
}

template <class T>
void CpuModel<T>::scores_forward(int b) {
  NN_RANGE("forward GEMM 2");
  const int H = lay_.H, C = lay_.C;
  cpu_gemm(gemm_lib_, false, false, C, b, H, T(1), P_ + lay_.W2(), C, A1_.data(), H, T(0), Z2_.data(),
           C);
}

// One pass per column: (+ b2), the max-shifted softmax, cross-entropy lse - z_y and the hit
// (lowest-index argmax, as the reference) into the statistics, and dZ2 = (yhat - y) * inv_B
// in place of the scores.
template <class T>
void CpuModel<T>::softmax_loss(int b, T inv_B, bool add_b2, bool stats) {
  cpu::softmax_xent(Z2_.data(), add_b2 ? P_ + lay_.b2() : nullptr, ylab_.data(), lay_.C, b, inv_B,
                    stats ? &loss_ : nullptr, stats ? &correct_ : nullptr);
}

// [W2 | b2] of the gradient: dW2 = dZ2 A1^T (+ reg W2), db2.
template <class T>
void CpuModel<T>::layer2_grads(int b, bool with_reg, T reg) {
  const int H = lay_.H, C = lay_.C;
  T* G = grads_.data();
  const T* dZ2 = Z2_.data();
  if (H > 0 && gemm_lib_ == CpuGemm::OneDNN) {
    // oneDNN computes the C-row product 1.6-1.9x faster as its transpose, dW2^T = A1 dZ2^T
    // (H x C), than as dZ2 A1^T (C x H): 0.049 vs 0.078 ms at H = 512, B = 800 and 0.57 vs
    // 0.96 ms at H = 1024, B = 3000, one thread (Zen 5). The transpose back adds reg W2.
    NN_RANGE("backward GEMM 1");
    cpu_gemm(gemm_lib_, false, true, H, C, b, T(1), A1_.data(), H, dZ2, C, T(0), dW2t_.data(), H);
    T* dW2 = G + lay_.W2();
    const T* W2 = P_ + lay_.W2();
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < C; ++c) {
        const std::size_t at = std::size_t(h) * C + c;
        const T g = dW2t_[std::size_t(c) * H + h];
        dW2[at] = with_reg ? g + reg * W2[at] : g;
      }
  } else if (H > 0) {
    NN_RANGE("backward GEMM 1");
    if (with_reg) std::memcpy(G + lay_.W2(), P_ + lay_.W2(), sizeof(T) * std::size_t(C) * H);
    cpu_gemm(gemm_lib_, false, true, C, H, b, T(1), dZ2, C, A1_.data(), H, with_reg ? reg : T(0), G + lay_.W2(), C);
  }
  T* db2 = G + lay_.b2();
  std::fill(db2, db2 + C, T(0));
  for (int j = 0; j < b; ++j)
    for (int k = 0; k < C; ++k) db2[k] += dZ2[std::size_t(j) * C + k];
}

// [W1 | b1] from dZ2 (model parallel): dA1 = W2^T dZ2, then one pass dZ1 = dA1 o a1 o (1 - a1)
// with db1's row sums, then dW1.
template <class T>
void CpuModel<T>::layer1_grads(int b, bool with_reg, T reg) {
  const int H = lay_.H, C = lay_.C;
  if (H == 0) return;
  {
    NN_RANGE("backward GEMM 2");
    cpu_gemm(gemm_lib_, true, false, H, b, C, T(1), P_ + lay_.W2(), C, Z2_.data(), C, T(0), dA1p_, H);
  }
  // By blocks of columns, so each thread streams its own columns; db1 = the blocks' sums added
  // in block order, whatever the threads (cpu_kernels.h).
  const int blocks = (b + cpu::kColumnBlock - 1) / cpu::kColumnBlock;
  split(std::size_t(blocks), 1, [&](std::size_t lo, std::size_t hi) {
    cpu::sigmoid_backward_blocks(dA1p_, A1_.data(), H, b, int(lo), int(hi), db1_blocks_.data());
  });
  cpu::sum_blocks(db1_blocks_.data(), blocks, H, grads_.data() + lay_.b1());
  weight1_grad(b, with_reg, reg);
}

// dW1 = dZ1 X^T (+ reg W1), or with fuse_w1_step the step itself; node-shared: nothing here.
template <class T>
void CpuModel<T>::weight1_grad(int b, bool with_reg, T reg) {
  const int D = lay_.D, H = lay_.H;
  if (H == 0 || node_shared()) return;  // dW1 is node_shared_step's, from every rank's dZ1 and X
  T* G = grads_.data();
  NN_RANGE("backward GEMM 3");
  if (fused_) {  // the step itself, straight into W1 (fuse_w1_step)
    // The decay as its own pass W1 -= (lr reg) W1, not as the GEMM's beta = 1 - lr reg: that
    // factor rounds the same way at every step, a drift of up to 3e-8 per step in float
    // (1.2e-5 in W1 after 1620 steps, measured), where separate roundings average out.
    T* W1 = P_ + lay_.W1();
    if (with_reg)
      split(std::size_t(H) * D, 4096, [&](std::size_t lo, std::size_t hi) {
        cpu::sgd(W1 + lo, W1 + lo, hi - lo, fused_lr_ * reg);
      });
    cpu_gemm(gemm_lib_, false, true, H, D, b, -fused_lr_, dA1p_, H, Xp_, D, T(1), W1, H);
    return;
  }
  if (with_reg) std::memcpy(G + lay_.W1(), P_ + lay_.W1(), sizeof(T) * std::size_t(H) * D);
  cpu_gemm(gemm_lib_, false, true, H, D, b, T(1), dA1p_, H, Xp_, D, with_reg ? reg : T(0), G + lay_.W1(), H);
}

// The data-parallel step from A1 = W1 X to dZ1 (cpu::layer2_block) by blocks of columns over
// the threads, then the blocks' parts of dW2, db1, the loss and the hits added in block order,
// and db2 from dZ2: every gradient but dW1, in one pass over A1 while each block is in cache.
// A1 = W1 X is in dA1p_ on entry and dZ1 replaces it (no second H x b array to stream through
// the caches: 1.3 -> 0.6 ms for that stage alone at H = 1024, B = 3000, one thread).
template <class T>
void CpuModel<T>::layer2_fused(int b, T inv_B, bool with_reg, T reg) {
  const int H = lay_.H, C = lay_.C;
  T* G = grads_.data();
  const T* W2 = P_ + lay_.W2();
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) w2t_[std::size_t(c) * H + h] = W2[std::size_t(h) * C + c];
  const int blocks = (b + cpu::kColumnBlock - 1) / cpu::kColumnBlock;
  const std::size_t CH = std::size_t(C) * H;
  split(std::size_t(blocks), 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k) {
      const std::size_t j0 = k * cpu::kColumnBlock;
      const int n = int(std::min<std::size_t>(cpu::kColumnBlock, std::size_t(b) - j0));
      loss_blocks_[k] = 0;
      hits_blocks_[k] = 0;
      cpu::layer2_block(dA1p_ + j0 * H, P_ + lay_.b1(), w2t_.data(), P_ + lay_.b2(), ylab_.data() + j0, H, C,
                        n, inv_B, Z2_.data() + j0 * C, dA1p_ + j0 * H, dW2_blocks_.data() + k * CH,
                        db1_blocks_.data() + k * std::size_t(H), &loss_blocks_[k], &hits_blocks_[k]);
    }
  });
  cpu::sum_blocks(db1_blocks_.data(), blocks, H, G + lay_.b1());
  cpu::sum_blocks(dW2_blocks_.data(), blocks, int(CH), w2t_.data());  // w2t_ is free again
  T* dW2 = G + lay_.W2();
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) {
      const std::size_t at = std::size_t(h) * C + c;
      const T g = w2t_[std::size_t(c) * H + h];
      dW2[at] = with_reg ? g + reg * W2[at] : g;
    }
  for (int k = 0; k < blocks; ++k) {
    loss_ += loss_blocks_[std::size_t(k)];
    correct_ += hits_blocks_[std::size_t(k)];
  }
  T* db2 = G + lay_.b2();
  std::fill(db2, db2 + C, T(0));
  for (int j = 0; j < b; ++j)
    for (int k = 0; k < C; ++k) db2[k] += Z2_[std::size_t(j) * C + k];
}

// An empty slice still takes part in the reduction: zero, or reg * W on the one rank that
// carries the regulariser.
template <class T>
void CpuModel<T>::zero_grads_with_reg(bool with_reg, T reg) {
  std::fill(grads_.begin(), grads_.end(), T(0));
  if (!with_reg) return;
  // Node-shared: W1's decay is node_shared_step's.
  if (fused_)  // the step's W1 part now: W1 <- W1 - lr reg W1
    for (std::size_t i = 0; i < std::size_t(lay_.H) * lay_.D; ++i) P_[lay_.W1() + i] -= fused_lr_ * (reg * P_[lay_.W1() + i]);
  else if (!node_shared())
    for (std::size_t i = 0; i < std::size_t(lay_.H) * lay_.D; ++i) grads_[lay_.W1() + i] = reg * P_[lay_.W1() + i];
  for (std::size_t i = 0; i < std::size_t(lay_.C) * lay_.H; ++i) grads_[lay_.W2() + i] = reg * P_[lay_.W2() + i];
}

template <class T>
void CpuModel<T>::forward_backward(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  backward_layer2_phase(offset, b, inv_B, add_reg, reg);
  backward_layer1_phase(b, add_reg, reg);
}

template <class T>
void CpuModel<T>::backward_layer2_phase(std::size_t offset, int b, T inv_B, bool add_reg, T reg) {
  stage_batch(offset, b);
  const bool with_reg = add_reg && reg != T(0);
  if (b == 0) {
    if (phase_hook_) phase_hook_();
    NN_RANGE("backward");
    zero_grads_with_reg(with_reg, reg);
    return;
  }
  // The forward pass: the images and W1 X; then, fused, the activations, the scores, the loss
  // and every gradient but dW1 (layer2_fused), which backward_layer1_phase computes.
  {
    NN_RANGE("forward");
    gather(train_images().images.data(), batch_idx_, b);
    if (lay_.H > 0) {
      hidden_gemm(b, dA1p_);  // A1 where dZ1 will be: layer2_fused works in place
      NN_RANGE("layer 2, fused");
      layer2_fused(b, inv_B, with_reg, reg);
    } else {
      std::fill(Z2_.begin(), Z2_.begin() + std::size_t(lay_.C) * b, T(0));
      softmax_loss(b, inv_B, true, true);
      layer2_grads(b, with_reg, reg);
    }
  }
  if (phase_hook_) phase_hook_();
}

template <class T>
void CpuModel<T>::backward_layer1_phase(int b, bool add_reg, T reg) {
  if (b == 0) return;
  NN_RANGE("backward");
  weight1_grad(b, add_reg && reg != T(0), reg);
}

template <class T>
void CpuModel<T>::partial_scores_phase(std::size_t offset, int b, bool add_b2) {
  stage_batch(offset, b);
  if (add_b2 && lay_.H == 0) throw std::invalid_argument("partial_scores_phase: b2 needs hidden units");
  NN_RANGE("forward (model parallel)");
  gather(train_images().images.data(), batch_idx_, b);
  const int C = lay_.C;
  if (lay_.H == 0) {
    std::fill(Z2_.begin(), Z2_.begin() + std::size_t(C) * b, T(0));
    return;
  }
  hidden_forward(b);
  scores_forward(b);
  if (add_b2) {
    const T* b2 = P_ + lay_.b2();
    for (int j = 0; j < b; ++j)
      for (int k = 0; k < C; ++k) Z2_[std::size_t(j) * C + k] += b2[k];
  }
}

template <class T>
void CpuModel<T>::model_backward_phase(int b, T inv_B, T reg, bool stats) {
  NN_RANGE("backward (model parallel)");
  softmax_loss(b, inv_B, false, stats);
  layer2_grads(b, reg != T(0), reg);
  layer1_grads(b, reg != T(0), reg);
}

template <class T>
int CpuModel<T>::queue_download(T* host, std::size_t begin, std::size_t end, Stage) {
  if (begin > end || end > grads_.size()) throw std::out_of_range("queue_download: bad range");
  if (host + begin != grads_.data() + begin) std::memcpy(host + begin, grads_.data() + begin, sizeof(T) * (end - begin));
  return 0;
}

template <class T>
void CpuModel<T>::download_scores(T* host, int b) {
  if (host != Z2_.data()) std::memcpy(host, Z2_.data(), sizeof(T) * std::size_t(lay_.C) * b);
}

template <class T>
void CpuModel<T>::upload_scores(const T* host, int b) {
  if (host != Z2_.data()) std::memcpy(Z2_.data(), host, sizeof(T) * std::size_t(lay_.C) * b);
}

template <class T>
void CpuModel<T>::upload_grads(const T* host) {
  upload_grads(host, 0, grads_.size());
}

template <class T>
void CpuModel<T>::upload_grads(const T* host, std::size_t begin, std::size_t end) {
  if (begin > end || end > grads_.size()) throw std::out_of_range("upload_grads: bad range");
  if (host != grads_.data()) std::memcpy(grads_.data() + begin, host + begin, sizeof(T) * (end - begin));
}

template <class T>
void CpuModel<T>::sgd_step(T lr) {
  NN_RANGE("step");
  if (node_shared()) throw std::logic_error("sgd_step: node-shared mode steps with node_shared_step");
  const std::size_t from = fused_ ? lay_.b1() : 0;  // fused: W1 was stepped by its GEMM
  split(lay_.total() - from, 4096, [&](std::size_t lo, std::size_t hi) {
    cpu::sgd(P_ + from + lo, grads_.data() + from + lo, hi - lo, lr);
  });
}

template class CpuModel<float>;
template class CpuModel<double>;

}  // namespace nn::model
