// Implementation of the CPU reference network (see ref_net.h for the maths and the API).
// BLAS-backed Armadillo expressions; explicit instantiations for float and double at the end.
// Tested in tests/reference/test_ref_net*.cpp.
#include "reference/ref_net.h"

#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "schedule/init.h"
#include "schedule/schedule.h"

namespace nn::ref {

namespace {

[[noreturn]] void shape_error(const char* what) { throw std::invalid_argument(std::string("nn::ref: ") + what); }

template <class T>
void check_params(const Params<T>& p) {
  if (p.b1.n_elem != p.W1.n_rows || p.W2.n_cols != p.W1.n_rows || p.b2.n_elem != p.W2.n_rows)
    shape_error("inconsistent parameter shapes");
}

// Logistic function without overflow: exp is only taken of -|z| <= 0, so it lies in (0, 1]
// and neither 1 + e nor the quotient can overflow or produce inf/inf for any finite z.
template <class T>
void sigmoid_inplace(arma::Mat<T>& z) {
  T* v = z.memptr();
  const arma::uword n = z.n_elem;
  for (arma::uword i = 0; i < n; ++i) {
    const T e = std::exp(-std::abs(v[i]));
    v[i] = (v[i] >= T(0) ? T(1) : e) / (T(1) + e);  // 1/(1+e) for z >= 0, e/(1+e) below
  }
}

// Lowest-index argmax of each column, written out so the tie rule is explicit.
template <class T>
arma::uvec argmax_cols(const arma::Mat<T>& z) {
  arma::uvec out(z.n_cols);
  for (arma::uword j = 0; j < z.n_cols; ++j) {
    const T* col = z.colptr(j);
    arma::uword best = 0;
    for (arma::uword k = 1; k < z.n_rows; ++k)
      if (col[k] > col[best]) best = k;
    out(j) = best;
  }
  return out;
}

}  // namespace

template <class T>
Params<T> make_params(int D, int H, int C, std::uint64_t seed) {
  const schedule::InitParams ip = schedule::init_params(D, H, C, seed);
  // arma::conv_to applies static_cast element by element.
  Params<T> p;
  p.W1 = arma::conv_to<arma::Mat<T>>::from(arma::mat(ip.W1.data(), arma::uword(H), arma::uword(D)));
  p.W2 = arma::conv_to<arma::Mat<T>>::from(arma::mat(ip.W2.data(), arma::uword(C), arma::uword(H)));
  p.b1 = arma::conv_to<arma::Col<T>>::from(ip.b1);
  p.b2 = arma::conv_to<arma::Col<T>>::from(ip.b2);
  return p;
}

template <class T>
arma::Mat<T> one_hot(const std::vector<std::uint8_t>& labels, std::size_t first, std::size_t count, int C) {
  if (first > labels.size() || count > labels.size() - first) throw std::out_of_range("one_hot: range");
  arma::Mat<T> Y(arma::uword(C), count, arma::fill::zeros);
  for (std::size_t j = 0; j < count; ++j) {
    const int y = labels[first + j];
    if (y >= C) throw std::out_of_range("one_hot: label >= C");
    Y(arma::uword(y), j) = T(1);
  }
  return Y;
}

template <class T>
arma::Mat<T> one_hot(const std::vector<std::uint8_t>& labels, std::span<const std::uint32_t> idx, int C) {
  arma::Mat<T> Y(arma::uword(C), idx.size(), arma::fill::zeros);
  for (std::size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] >= labels.size()) throw std::out_of_range("one_hot: index");
    const int y = labels[idx[j]];
    if (y >= C) throw std::out_of_range("one_hot: label >= C");
    Y(arma::uword(y), j) = T(1);
  }
  return Y;
}

template <class T>
Cache<T> forward(const Params<T>& p, const arma::Mat<T>& X) {
  check_params(p);
  if (X.n_rows != p.W1.n_cols) shape_error("X rows != W1 cols");
  Cache<T> c;
  c.a1 = p.W1 * X;
  c.a1.each_col() += p.b1;
  sigmoid_inplace(c.a1);
  c.z2 = p.W2 * c.a1;
  c.z2.each_col() += p.b2;
  c.z2.each_row() -= arma::max(c.z2, 0);  // every column's max becomes exactly 0
  c.yhat = arma::exp(c.z2);
  const arma::Row<T> s = arma::sum(c.yhat, 0);  // >= 1: the max term contributes exp(0)
  c.yhat.each_row() /= s;
  c.lse = arma::log(s);
  return c;
}

template <class T>
double ce_sum(const Cache<T>& c, const arma::Mat<T>& Y) {
  if (Y.n_rows != c.z2.n_rows || Y.n_cols != c.z2.n_cols) shape_error("Y shape != yhat shape");
  // CE_j = sum_k Y(k,j) (lse_j - z2(k,j)); for one-hot Y this is -(z2[label] - max - log sum exp).
  // Both terms are >= 0, so there is no cancellation; double accumulation keeps float honest.
  double acc = 0.0;
  for (arma::uword j = 0; j < Y.n_cols; ++j) {
    const T* y = Y.colptr(j);
    const T* z = c.z2.colptr(j);
    const double l = c.lse(j);
    for (arma::uword k = 0; k < Y.n_rows; ++k)
      if (y[k] != T(0)) acc += double(y[k]) * (l - double(z[k]));
  }
  return acc;
}

template <class T>
double reg_term(const Params<T>& p, T reg) {
  if (reg == T(0)) return 0.0;
  return 0.5 * double(reg) * (double(arma::dot(p.W1, p.W1)) + double(arma::dot(p.W2, p.W2)));
}

template <class T>
T loss(const Params<T>& p, const Cache<T>& c, const arma::Mat<T>& Y, T reg) {
  const double data = Y.n_cols ? ce_sum(c, Y) / double(Y.n_cols) : 0.0;
  return static_cast<T>(data + reg_term(p, reg));
}

template <class T>
Grads<T> backward(const Params<T>& p, const Cache<T>& c, const arma::Mat<T>& X, const arma::Mat<T>& Y, T reg,
                  double scale_B) {
  check_params(p);
  if (X.n_cols != Y.n_cols || Y.n_cols != c.yhat.n_cols || Y.n_rows != c.yhat.n_rows ||
      c.a1.n_cols != X.n_cols || X.n_rows != p.W1.n_cols)
    shape_error("backward: inconsistent X / Y / cache shapes");
  const T B = static_cast<T>(scale_B > 0.0 ? scale_B : double(X.n_cols));
  Grads<T> g;
  // Division, not multiplication by a rounded 1/B: x/(2B) == (x/B)/2 exactly, so scale_B = 2B
  // gives exactly half the data gradient (tested). A GPU using *(1/B) differs by an ulp.
  const arma::Mat<T> dZ2 = (c.yhat - Y) / B;
  g.W2 = dZ2 * c.a1.t();
  g.b2 = arma::sum(dZ2, 1);
  const arma::Mat<T> dZ1 = (p.W2.t() * dZ2) % c.a1 % (T(1) - c.a1);
  g.W1 = dZ1 * X.t();
  g.b1 = arma::sum(dZ1, 1);
  if (reg != T(0)) {
    g.W1 += reg * p.W1;
    g.W2 += reg * p.W2;
  }
  return g;
}

template <class T>
void sgd_update(Params<T>& p, const Grads<T>& g, T lr) {
  if (arma::size(p.W1) != arma::size(g.W1) || arma::size(p.W2) != arma::size(g.W2) ||
      p.b1.n_elem != g.b1.n_elem || p.b2.n_elem != g.b2.n_elem)
    shape_error("sgd_update: grads do not match params");
  p.W1 -= lr * g.W1;
  p.b1 -= lr * g.b1;
  p.W2 -= lr * g.W2;
  p.b2 -= lr * g.b2;
}

template <class T>
T train_step(Params<T>& p, const arma::Mat<T>& X, const arma::Mat<T>& Y, T lr, T reg) {
  const Cache<T> c = forward(p, X);
  const T J = loss(p, c, Y, reg);
  sgd_update(p, backward(p, c, X, Y, reg, double(X.n_cols)), lr);
  return J;
}

template <class T>
arma::uvec predict(const Params<T>& p, const arma::Mat<T>& X) {
  // After subtracting the column max, the maxima are exactly 0 and every other entry is
  // strictly negative (a nonzero difference never rounds to 0, thanks to gradual underflow),
  // so the argmax of c.z2 is the argmax of the raw logits, ties included.
  return argmax_cols(forward(p, X).z2);
}

template <class T>
double accuracy(const Params<T>& p, const arma::Mat<T>& X, const std::vector<std::uint8_t>& labels,
                std::size_t first) {
  if (first > labels.size() || X.n_cols > labels.size() - first) throw std::out_of_range("accuracy: range");
  if (X.n_cols == 0) return 0.0;
  const arma::uvec pred = predict(p, X);
  std::size_t hits = 0;
  for (arma::uword j = 0; j < X.n_cols; ++j) hits += pred(j) == labels[first + j];
  return double(hits) / double(X.n_cols);
}

template <class T>
Params<T> train(const std::uint8_t* X_u8, std::size_t D, const std::vector<std::uint8_t>& labels,
                const TrainConfig& cfg, const std::function<void(const EpochStats&, const Params<T>&)>& on_epoch) {
  const std::size_t N = labels.size();
  if (D == 0 || cfg.hidden <= 0 || cfg.classes <= 0 || cfg.batch == 0) throw std::invalid_argument("train: config");
  if (N > 0 && X_u8 == nullptr) throw std::invalid_argument("train: no images");
  for (const std::uint8_t y : labels)
    if (int(y) >= cfg.classes) throw std::out_of_range("train: label >= classes");

  Params<T> p = make_params<T>(int(D), cfg.hidden, cfg.classes, cfg.seed);
  const T lr = static_cast<T>(cfg.lr), reg = static_cast<T>(cfg.reg);
  // v / 255 for every byte value, computed once: same bits as dividing per element.
  std::array<T, 256> lut{};
  for (int v = 0; v < 256; ++v) lut[std::size_t(v)] = static_cast<T>(v) / T(255);

  const std::vector<schedule::Batch> bs = schedule::batches(N, cfg.batch);
  arma::Mat<T> Xb;  // reused; only the last (smaller) batch reallocates
  for (int e = 0; e < cfg.epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::uint32_t> order = schedule::epoch_order(N, cfg.seed, e, cfg.shuffle);
    double loss_sum = 0.0;
    std::size_t hits = 0;
    for (const schedule::Batch& b : bs) {
      const std::span<const std::uint32_t> idx(order.data() + b.begin, b.count);
      Xb.set_size(D, b.count);
      for (std::size_t j = 0; j < b.count; ++j) {
        const std::uint8_t* src = X_u8 + std::size_t(idx[j]) * D;
        T* dst = Xb.colptr(j);
        for (std::size_t i = 0; i < D; ++i) dst[i] = lut[src[i]];
      }
      const arma::Mat<T> Y = one_hot<T>(labels, idx, cfg.classes);
      const Cache<T> c = forward(p, Xb);
      loss_sum += double(loss(p, c, Y, reg)) * double(b.count);
      const arma::uvec pred = argmax_cols(c.z2);
      for (std::size_t j = 0; j < b.count; ++j) hits += pred(j) == labels[idx[j]];
      sgd_update(p, backward(p, c, Xb, Y, reg, double(b.count)), lr);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (on_epoch)
      on_epoch({e, N ? loss_sum / double(N) : 0.0, N ? double(hits) / double(N) : 0.0, secs}, p);
  }
  return p;
}

// ---- explicit instantiations ----
#define NN_REF_INSTANTIATE(T)                                                                                     \
  template Params<T> make_params<T>(int, int, int, std::uint64_t);                                                \
  template arma::Mat<T> one_hot<T>(const std::vector<std::uint8_t>&, std::size_t, std::size_t, int);              \
  template arma::Mat<T> one_hot<T>(const std::vector<std::uint8_t>&, std::span<const std::uint32_t>, int);        \
  template Cache<T> forward<T>(const Params<T>&, const arma::Mat<T>&);                                            \
  template double ce_sum<T>(const Cache<T>&, const arma::Mat<T>&);                                                \
  template double reg_term<T>(const Params<T>&, T);                                                               \
  template T loss<T>(const Params<T>&, const Cache<T>&, const arma::Mat<T>&, T);                                  \
  template Grads<T> backward<T>(const Params<T>&, const Cache<T>&, const arma::Mat<T>&, const arma::Mat<T>&, T,  \
                                double);                                                                          \
  template void sgd_update<T>(Params<T>&, const Grads<T>&, T);                                                    \
  template T train_step<T>(Params<T>&, const arma::Mat<T>&, const arma::Mat<T>&, T, T);                           \
  template arma::uvec predict<T>(const Params<T>&, const arma::Mat<T>&);                                          \
  template double accuracy<T>(const Params<T>&, const arma::Mat<T>&, const std::vector<std::uint8_t>&,            \
                              std::size_t);                                                                       \
  template Params<T> train<T>(const std::uint8_t*, std::size_t, const std::vector<std::uint8_t>&,                 \
                              const TrainConfig&, const std::function<void(const EpochStats&, const Params<T>&)>&);

NN_REF_INSTANTIATE(float)
NN_REF_INSTANTIATE(double)
#undef NN_REF_INSTANTIATE

}  // namespace nn::ref
