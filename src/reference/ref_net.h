// CPU reference of the 2-layer MNIST network (sigmoid hidden layer, softmax output, L2 reg),
// in Armadillo, for T = float and double: the verifier for the GPU/MPI trainer.
// Tested in tests/reference/test_ref_net*.cpp (finite differences, naive loops, training).
//
// Definitions (X is D x B, one image per column; Y is C x B one-hot):
//   z1 = W1 X + b1, a1 = sigmoid(z1), z2 = W2 a1 + b2, yhat = softmax(z2) per column
//   J  = (1/B) sum_j CE(y_j, yhat_j) + (reg/2)(||W1||_F^2 + ||W2||_F^2)
//   dZ2 = (yhat - Y)/B, dW2 = dZ2 a1^T + reg W2, db2 = rowsum(dZ2)
//   dZ1 = (W2^T dZ2) o a1 o (1 - a1), dW1 = dZ1 X^T + reg W1, db1 = rowsum(dZ1)
// Data parallelism: a rank holding a slice of a global batch of B calls backward() with
// scale_B = B (the GLOBAL size) and reg on exactly one rank (0 on the others); the sum over
// ranks then equals the full-batch gradient. Likewise the global loss is
//   sum_ranks ce_sum(slice) / B + reg_term(p, reg).
#pragma once
#include <armadillo>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace nn::ref {

template <class T>
struct Params {
  arma::Mat<T> W1, W2;  // H x D, C x H
  arma::Col<T> b1, b2;  // H, C
};
template <class T>
using Grads = Params<T>;  // gradients have exactly the parameters' shapes

// Forward results. z2 holds the logits minus their column max (<= 0, with an exact 0 at the
// argmax) and lse = log(sum_k exp(z2(k, j))) per column, so CE_j = lse_j - z2(label_j, j)
// never takes log(0). yhat = exp(z2) / sum, i.e. the max-subtracted softmax.
template <class T>
struct Cache {
  arma::Mat<T> a1, yhat;
  arma::Mat<T> z2;
  arma::Row<T> lse;
};

// Parameters from nn::schedule::init_params(D, H, C, seed), each value static_cast to T.
template <class T>
Params<T> make_params(int D, int H, int C, std::uint64_t seed);

// C x count one-hot matrix of labels[first .. first+count). Throws std::out_of_range when
// the range leaves `labels` or a label is >= C.
template <class T>
arma::Mat<T> one_hot(const std::vector<std::uint8_t>& labels, std::size_t first, std::size_t count, int C);
// Same, for columns labels[idx[0]], labels[idx[1]], ... (e.g. a slice of an epoch order).
template <class T>
arma::Mat<T> one_hot(const std::vector<std::uint8_t>& labels, std::span<const std::uint32_t> idx, int C);

// Throws std::invalid_argument on inconsistent shapes. X may have 0 columns (an empty slice).
template <class T>
Cache<T> forward(const Params<T>& p, const arma::Mat<T>& X);

// Sum over columns of CE (no 1/B, no reg), accumulated in double.
template <class T>
double ce_sum(const Cache<T>& c, const arma::Mat<T>& Y);
// (reg/2)(||W1||_F^2 + ||W2||_F^2).
template <class T>
double reg_term(const Params<T>& p, T reg);
// Full J with B = Y.n_cols: ce_sum / B + reg_term.
template <class T>
T loss(const Params<T>& p, const Cache<T>& c, const arma::Mat<T>& Y, T reg);

// Gradients of J, with 1/scale_B in place of 1/B; scale_B <= 0 means X.n_cols.
template <class T>
Grads<T> backward(const Params<T>& p, const Cache<T>& c, const arma::Mat<T>& X, const arma::Mat<T>& Y, T reg,
                  double scale_B = 0.0);

// p <- p - lr * g for all four fields (biases included; their grads carry no reg).
template <class T>
void sgd_update(Params<T>& p, const Grads<T>& g, T lr);

// forward + loss + backward(scale_B = X.n_cols) + sgd_update; returns the loss before the update.
template <class T>
T train_step(Params<T>& p, const arma::Mat<T>& X, const arma::Mat<T>& Y, T lr, T reg);

// Argmax of the logits per column; the lowest index wins ties.
template <class T>
arma::uvec predict(const Params<T>& p, const arma::Mat<T>& X);

// Fraction of columns j with predict == labels[first + j].
template <class T>
double accuracy(const Params<T>& p, const arma::Mat<T>& X, const std::vector<std::uint8_t>& labels,
                std::size_t first);

// ---- convenience trainer (used by `make run` until the GPU trainer lands) ----
struct TrainConfig {
  int hidden = 512;
  std::size_t batch = 800;
  int epochs = 2;
  double lr = 0.1, reg = 1e-4;
  std::uint64_t seed = 1;  // init uses stream kInit, epoch e's order uses (kShuffle, e)
  bool shuffle = true;
  int classes = 10;  // C; every label must be < classes
};
struct EpochStats {
  int epoch;          // 0-based: the value passed to nn::schedule::epoch_order
  double loss;        // sample-weighted mean of the batch losses (J incl. reg) before each update
  double train_acc;   // running accuracy of those same forward passes (no extra pass)
  double seconds;     // wall time of the epoch
};

// X_u8: D x N uint8 column-major images, N = labels.size(). Batches follow
// nn::schedule::epoch_order / batches; a batch's columns are gathered and normalised as
// static_cast<T>(v) / T(255) (a correctly rounded division; v * (1/255) would differ).
// Parameters start from make_params<T>(D, hidden, classes, seed).
template <class T>
Params<T> train(const std::uint8_t* X_u8, std::size_t D, const std::vector<std::uint8_t>& labels,
                const TrainConfig& cfg, const std::function<void(const EpochStats&, const Params<T>&)>& on_epoch);

}  // namespace nn::ref
