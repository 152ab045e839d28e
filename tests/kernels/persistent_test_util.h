// Shared by the persistent step's kernel tests (tests/kernels/test_persistent_step*.cpp): random
// data and parameters, the same SGD from the definition in float64, and one device run of the
// persistent step in launches of given lengths.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "device_vectors.h"
#include "ops/persistent_step.h"

namespace nn::test::persist {

using nn::test::to_device;
using nn::test::to_host;

struct Data {
  int D, H, C, n, B;
  std::vector<std::uint8_t> images, labels;
  std::vector<std::uint32_t> order;
  std::vector<double> P;  // [W1 | b1 | W2 | b2]
  Data(int D_, int H_, int C_, int n_, int B_, unsigned seed) : D(D_), H(H_), C(C_), n(n_), B(B_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-0.3, 0.3);
    images.resize(std::size_t(D) * n);
    for (auto& v : images) v = std::uint8_t(rng() % 256);
    labels.resize(n);
    for (auto& v : labels) v = std::uint8_t(rng() % unsigned(C));
    order.resize(n);
    for (int i = 0; i < n; ++i) order[i] = std::uint32_t((i * 7 + 3) % n);  // a permutation (gcd(7, n) = 1)
    P.resize(std::size_t(H) * D + H + std::size_t(C) * H + C);
    for (auto& v : P) v = u(rng);
  }
  // One SGD step of the parameters from a batch of b columns: its inputs X, activations A and the
  // loss's gradients dz1, dz2 at the hidden and output pre-activations.
  void sgd(int b, const std::vector<double>& X, const std::vector<double>& A, const std::vector<double>& dz1,
           const std::vector<double>& dz2, double lr, double reg) {
    double* W1 = P.data();
    double* b1 = W1 + std::size_t(H) * D;
    double* W2 = b1 + H;
    double* b2 = W2 + std::size_t(C) * H;
    for (int d = 0; d < D; ++d)
      for (int h = 0; h < H; ++h) {
        double g = 0;
        for (int j = 0; j < b; ++j) g += dz1[std::size_t(j) * H + h] * X[std::size_t(j) * D + d];
        double& w = W1[std::size_t(d) * H + h];
        w -= lr * (g + reg * w);
      }
    for (int h = 0; h < H; ++h) {
      double g = 0;
      for (int j = 0; j < b; ++j) g += dz1[std::size_t(j) * H + h];
      b1[h] -= lr * g;
      for (int c = 0; c < C; ++c) {
        double gw = 0;
        for (int j = 0; j < b; ++j) gw += dz2[std::size_t(j) * C + c] * A[std::size_t(j) * H + h];
        double& w = W2[std::size_t(h) * C + c];
        w -= lr * (gw + reg * w);
      }
    }
    for (int c = 0; c < C; ++c) {
      double g = 0;
      for (int j = 0; j < b; ++j) g += dz2[std::size_t(j) * C + c];
      b2[c] -= lr * g;
    }
  }
  // steps SGD steps from offset 0 in float64; loss and hits summed over them.
  void reference(int steps, double lr, double reg, double* loss, unsigned* hits) {
    double* W1 = P.data();
    double* b1 = W1 + std::size_t(H) * D;
    double* W2 = b1 + H;
    double* b2 = W2 + std::size_t(C) * H;
    for (int s = 0; s < steps; ++s) {
      const int off = s * B, b = std::min(B, n - off);
      std::vector<double> X(std::size_t(D) * b), A(std::size_t(H) * b), dz2(std::size_t(C) * b), dz1(std::size_t(H) * b);
      for (int j = 0; j < b; ++j)
        for (int d = 0; d < D; ++d) X[std::size_t(j) * D + d] = images[std::size_t(order[off + j]) * D + d] / 255.0;
      for (int j = 0; j < b; ++j) {
        for (int h = 0; h < H; ++h) {
          double z = b1[h];
          for (int d = 0; d < D; ++d) z += W1[std::size_t(d) * H + h] * X[std::size_t(j) * D + d];
          A[std::size_t(j) * H + h] = 1 / (1 + std::exp(-z));
        }
        std::vector<double> z(C);
        int arg = 0;
        for (int c = 0; c < C; ++c) {
          z[c] = b2[c];
          for (int h = 0; h < H; ++h) z[c] += W2[std::size_t(h) * C + c] * A[std::size_t(j) * H + h];
          if (z[c] > z[arg]) arg = c;
        }
        double m = z[arg], sum = 0;
        for (int c = 0; c < C; ++c) sum += std::exp(z[c] - m);
        const int label = labels[order[off + j]];
        *loss += m + std::log(sum) - z[label];
        *hits += arg == label ? 1u : 0u;
        for (int c = 0; c < C; ++c) dz2[std::size_t(j) * C + c] = (std::exp(z[c] - m) / sum - (c == label)) / b;
        for (int h = 0; h < H; ++h) {
          double da = 0;
          for (int c = 0; c < C; ++c) da += W2[std::size_t(h) * C + c] * dz2[std::size_t(j) * C + c];
          const double a = A[std::size_t(j) * H + h];
          dz1[std::size_t(j) * H + h] = da * a * (1 - a);
        }
      }
      sgd(b, X, A, dz1, dz2, lr, reg);
    }
  }
};

// The device side of one run: buffers sized for the plan, steps run in launches of the given
// lengths; the parameters, the loss sum and the three counts come back.
template <class T>
struct Outcome {
  std::vector<T> P;
  double loss = 0;
  unsigned counts[3] = {0, 0, 0};
};
template <class T>
Outcome<T> run_device(const Data& d, const std::vector<T>& P0, nn::PersistentPlan plan, const std::vector<int>& launches,
                  T lr, T reg) {
  auto images = to_device(d.images), labels = to_device(d.labels);
  auto order = to_device(d.order);
  auto P = to_device(P0);
  nn::DeviceBuffer<T> scratch(plan.scratch), A1(std::size_t(d.H) * d.B), dZ1(std::size_t(d.H) * d.B),
      dZ2(std::size_t(d.C) * d.B);
  nn::DeviceBuffer<double> loss_cols(std::size_t(d.B)), stats(1);
  nn::DeviceBuffer<unsigned> hit_cols(std::size_t(d.B)), counts(3);
  const double zero = 0;
  const unsigned zeros[3] = {0, 0, 0};
  stats.upload(&zero, 1);
  counts.upload(zeros, 3);
  int done = 0;
  for (const int steps : launches) {
    nn::PersistentShape<T> a;
    a.D = d.D, a.H = d.H, a.C = d.C, a.B = d.B, a.steps = steps, a.n = unsigned(d.n);
    a.offset = static_cast<unsigned long long>(done) * d.B, a.lr = lr, a.reg = reg;
    a.tile_d = plan.tile_d, a.slices = plan.slices;
    nn::persistent_steps<T>(plan, a, images.get(), labels.get(), order.get(), P.get(), scratch.get(), A1.get(),
                            dZ1.get(), dZ2.get(), loss_cols.get(), hit_cols.get(), stats.get(), counts.get());
    done += steps;
  }
  Outcome<T> r;
  r.P = to_host(P);
  stats.download(&r.loss, 1);
  counts.download(r.counts, 3);
  return r;
}

// An environment variable set for a scope (the plan reads NN_PERSISTENT_* when it is made).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace nn::test::persist
