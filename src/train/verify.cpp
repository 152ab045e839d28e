// The --verify replay (verify.h). Armadillo is used here and in src/reference only.
#include "train/verify.h"

#include <armadillo>

#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "common/nvtx.h"
#include "reference/ref_net.h"

namespace nn::train {

double verify_tolerance(bool is_double) {
  // The GPU and the reference compute the same maths in different summation orders (GEMM
  // tiles and split-K vs OpenBLAS, x * (1/B) vs x / B, two sigmoid formulas), so each step
  // differs by a few ulps, and the differences grow slowly with the number of SGD steps.
  // Measured relative errors of the final parameters (emulator build, 1-4 ranks):
  //   float:  3e-8 .. 7e-7 in tests/train (5-30 steps); 1.1e-6 (W2) .. 2.9e-6 (b2) after
  //           the default Fashion-MNIST run (54k images, B = 100, 10 epochs = 5400 steps);
  //   double: 1.5e-16 .. 1.0e-15 in the tests; 1.3e-15 .. 3.4e-15 after 3 default epochs.
  // So float gets 1e-4 (35x over the longest run measured: room for longer runs and other
  // GEMM orders, e.g. cuBLAS) and double 1e-10 (five orders of room). Real bugs are far
  // above both: the regulariser added on every rank gives 3e-3 .. 2e-2, slices scaled by
  // their own size instead of the global batch 0.4 .. 7 (measured on the test configurations).
  return is_double ? 1e-10 : 1e-4;
}

namespace {

// ||a - ref||_F / ||ref||_F (absolute when ref is zero), in double.
template <class T>
double rel_error(const T* a, const T* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

template <class T>
VerifyResult replay_and_compare(const Config& cfg, const ShardPlan& plan, const HostSplit& train,
                                const std::vector<T>& init, const std::vector<T>& final_p,
                                const model::ParamLayout& L, int e0, std::size_t k0,
                                const schedule::ExactPlan* exact) {
  NN_RANGE("verify");
  const arma::uword D = L.D, H = L.H, C = L.C;
  ref::Params<T> P;
  P.W1 = arma::Mat<T>(init.data() + L.W1(), H, D);
  P.b1 = arma::Col<T>(init.data() + L.b1(), H);
  P.W2 = arma::Mat<T>(init.data() + L.W2(), C, H);
  P.b2 = arma::Col<T>(init.data() + L.b2(), C);
  const T lr = static_cast<T>(cfg.lr), reg = static_cast<T>(cfg.reg);
  std::array<T, 256> lut{};  // v / 255 per byte value: the bits io::normalize gives
  for (int v = 0; v < 256; ++v) lut[std::size_t(v)] = static_cast<T>(v) / T(255);
  arma::Mat<T> X;
  for (int e = e0; e < cfg.epochs; ++e) {
    const std::vector<std::uint32_t> order =
        exact ? schedule::global_epoch_order(*exact, e) : schedule::global_epoch_order(plan, e);
    for (std::size_t k = e == e0 ? k0 : 0; k < plan.num_batches(); ++k) {
      const std::size_t c = plan.batch_count(k);
      const std::span<const std::uint32_t> idx(order.data() + k * plan.B, c);
      X.set_size(D, c);
      for (std::size_t j = 0; j < c; ++j) {
        const std::uint8_t* src = train.images.data() + std::size_t(idx[j]) * D;
        T* dst = X.colptr(j);
        for (arma::uword i = 0; i < D; ++i) dst[i] = lut[src[i]];
      }
      const arma::Mat<T> Y = ref::one_hot<T>(train.labels, idx, int(C));
      const ref::Cache<T> cache = ref::forward(P, X);
      ref::sgd_update(P, ref::backward(P, cache, X, Y, reg, double(c)), lr);
    }
  }
  VerifyResult v;
  v.ran = true;
  v.tolerance = verify_tolerance(std::is_same_v<T, double>);
  v.W1 = rel_error(final_p.data() + L.W1(), P.W1.memptr(), P.W1.n_elem);
  v.b1 = rel_error(final_p.data() + L.b1(), P.b1.memptr(), P.b1.n_elem);
  v.W2 = rel_error(final_p.data() + L.W2(), P.W2.memptr(), P.W2.n_elem);
  v.b2 = rel_error(final_p.data() + L.b2(), P.b2.memptr(), P.b2.n_elem);
  return v;
}

template VerifyResult replay_and_compare<float>(const Config&, const ShardPlan&, const HostSplit&,
                                                const std::vector<float>&, const std::vector<float>&,
                                                const model::ParamLayout&, int, std::size_t,
                                                const schedule::ExactPlan*);
template VerifyResult replay_and_compare<double>(const Config&, const ShardPlan&, const HostSplit&,
                                                 const std::vector<double>&, const std::vector<double>&,
                                                 const model::ParamLayout&, int, std::size_t,
                                                const schedule::ExactPlan*);

}  // namespace nn::train
