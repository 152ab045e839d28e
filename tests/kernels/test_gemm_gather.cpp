// GEMM variants 4's and 5's fused-step features (kernels/gemm/gemm.h): B gathered from uint8 columns
// and normalised on load, and the SGD step epilogue. Each is checked bit for bit against the
// unfused computation it replaces (ops gather_normalize + the same GEMM on the normalised
// copy; the GEMM's gradient + ops sgd_update), for every tile configuration and split-K, under
// every emulator schedule (variant 5: every tile configuration, float); and bad arguments are
// refused. Part of nn_tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "device_vectors.h"
#include "gemm/gemm.h"
#include "ops/ops.h"
#include "schedules.h"

namespace {

using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

using nn::test::same_bits;
template <class T>
std::vector<T> host_of(const nn::DeviceBuffer<T>& d) {
  return nn::test::to_host(d);
}

// n_img uint8 images of D pixels (one per column), b of them picked (with repeats) as the batch,
// A (rows x D or rows x b) and the parameters of both GEMMs, all on the device.
template <class T>
struct Batch {
  int D, b, H;
  nn::DeviceBuffer<std::uint8_t> images;
  nn::DeviceBuffer<std::uint32_t> cols;
  nn::DeviceBuffer<T> X, W, bias, dZ;  // X: the normalised copy (D x b); W: H x D; dZ: H x b
  Batch(int D_, int b_, int H_, int n_img, unsigned seed) : D(D_), b(b_), H(H_) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> img(std::size_t(n_img) * D);
    for (auto& v : img) v = std::uint8_t(rng() % 256);
    img[0] = 255, img[1] = 0;
    std::vector<std::uint32_t> c(b);
    for (auto& v : c) v = std::uint32_t(rng() % unsigned(n_img));
    images = nn::DeviceBuffer<std::uint8_t>(img.size());
    images.upload(img.data(), img.size());
    cols = nn::DeviceBuffer<std::uint32_t>(c.size());
    cols.upload(c.data(), c.size());
    X = nn::DeviceBuffer<T>(std::size_t(D) * b);
    nn::gather_normalize<T>(images.get(), D, cols.get(), b, X.get());
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    const auto fill = [&](nn::DeviceBuffer<T>& d, std::size_t n) {
      std::vector<T> h(n);
      for (auto& v : h) v = T(u(rng));
      d = nn::DeviceBuffer<T>(n);
      d.upload(h.data(), n);
    };
    fill(W, std::size_t(H) * D);
    fill(bias, std::size_t(H));
    fill(dZ, std::size_t(H) * b);
  }
  // The forward GEMM A1 = sigmoid(W X + bias), from the copy or gathered.
  GemmArgs<T> forward(T* out, bool gathered) const {
    GemmArgs<T> g;
    g.M = H; g.N = b; g.K = D;
    g.A = W.get(); g.lda = H;
    if (gathered) { g.B_u8 = images.get(); g.B_cols = cols.get(); }
    else g.B = X.get();
    g.ldb = D;
    g.D = out; g.ldd = H;
    g.epilogue = Epilogue::BiasSigmoid; g.bias = bias.get();
    return g;
  }
  // The weight gradient dZ X^T + reg W, from the copy or gathered.
  GemmArgs<T> grad(T* out, bool gathered, T reg) const {
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = H; g.N = D; g.K = b;
    g.A = dZ.get(); g.lda = H;
    if (gathered) { g.B_u8 = images.get(); g.B_cols = cols.get(); }
    else g.B = X.get();
    g.ldb = D;
    if (reg != T(0)) { g.beta = reg; g.C = W.get(); g.ldc = H; }
    g.D = out; g.ldd = H;
    return g;
  }
};

struct Shape {
  int D, b, H;
};
// D = 64 takes the 4-byte loads, D = 53 the byte-by-byte edge path; b and H cross the tiles.
const Shape kShapes[] = {{64, 17, 37}, {53, 100, 70}, {64, 1, 16}, {53, 33, 130}};

// Every tile configuration and split-K on the first `swept` shapes (the others through the
// dispatcher's plan only: GPGPU-Sim runs this test too, a few seconds a GEMM).
template <class T>
void gathered_equals_copy(int swept) {
  int i = 0;
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE("D " + std::to_string(sh.D) + " b " + std::to_string(sh.b) + " H " + std::to_string(sh.H));
    const Batch<T> p(sh.D, sh.b, sh.H, 40, 7u + unsigned(sh.D + sh.b));
    nn::DeviceBuffer<T> a(std::size_t(sh.H) * sh.b), c(std::size_t(sh.H) * sh.b);
    nn::DeviceBuffer<T> ga(std::size_t(sh.H) * sh.D), gc(std::size_t(sh.H) * sh.D);
    for (int cfg = 0; cfg < (i++ < swept ? nn::gemm_tuning::kWarptileConfigs : 0); ++cfg)
      for (int splits : {1, 3}) {
        SCOPED_TRACE("config " + std::to_string(cfg) + " splits " + std::to_string(splits));
        nn::test::for_each_schedule([&] {
          nn::gemm_tuning::gemm_warptile_with_config(cfg, splits, p.forward(c.get(), false));
          nn::gemm_tuning::gemm_warptile_with_config(cfg, splits, p.forward(a.get(), true));
          EXPECT_TRUE(same_bits(host_of(a), host_of(c))) << "forward GEMM, gathered != copy";
          nn::gemm_tuning::gemm_warptile_with_config(cfg, splits, p.grad(gc.get(), false, T(0.01)));
          nn::gemm_tuning::gemm_warptile_with_config(cfg, splits, p.grad(ga.get(), true, T(0.01)));
          EXPECT_TRUE(same_bits(host_of(ga), host_of(gc))) << "gradient GEMM, gathered != copy";
        });
      }
    // Through the dispatcher (its per-shape plan) as the trainer calls it.
    nn::gemm(4, p.forward(c.get(), false));
    nn::gemm(4, p.forward(a.get(), true));
    EXPECT_TRUE(same_bits(host_of(a), host_of(c)));
    nn::gemm(4, p.grad(gc.get(), false, T(0.01)));
    nn::gemm(4, p.grad(ga.get(), true, T(0.01)));
    EXPECT_TRUE(same_bits(host_of(ga), host_of(gc)));
  }
}

// W -= lr * (dZ X^T + reg W) in the epilogue, in place, equals the gradient GEMM followed by
// ops sgd_update, bit for bit (the same two roundings), with reg and without.
template <class T>
void step_epilogue_equals_two_passes(int variant = 4) {
  const T lr = T(0.3);
  for (const Shape& sh : kShapes)
    for (const T reg : {T(0), T(0.02)}) {
      SCOPED_TRACE("D " + std::to_string(sh.D) + " b " + std::to_string(sh.b) + " reg " + std::to_string(reg));
      Batch<T> p(sh.D, sh.b, sh.H, 40, 11u + unsigned(sh.H));
      const std::vector<T> w0 = host_of(p.W);
      nn::DeviceBuffer<T> g(w0.size()), w_two(w0.size());
      nn::test::for_each_schedule([&] {
        // Two passes on a copy of W.
        w_two.upload(w0.data(), w0.size());
        GemmArgs<T> ga = p.grad(g.get(), true, reg);
        if (reg != T(0)) ga.C = w_two.get();
        nn::gemm(variant, ga);
        nn::sgd_update<T>(w_two.get(), g.get(), w0.size(), lr, T(0));
        // One pass, in place.
        p.W.upload(w0.data(), w0.size());
        GemmArgs<T> gs = p.grad(p.W.get(), true, reg);
        gs.epilogue = Epilogue::Step;
        gs.step_lr = lr;
        gs.C = p.W.get(); gs.ldc = sh.H;
        nn::gemm(variant, gs);
        EXPECT_TRUE(same_bits(host_of(p.W), host_of(w_two)));
      });
    }
}

TEST(GemmGather, GatheredBEqualsTheNormalisedCopyFloat) { gathered_equals_copy<float>(2); }
TEST(GemmGather, GatheredBEqualsTheNormalisedCopyDouble) { gathered_equals_copy<double>(1); }
TEST(GemmGather, StepEpilogueEqualsGradientThenSgdFloat) { step_epilogue_equals_two_passes<float>(); }
TEST(GemmGather, StepEpilogueEqualsGradientThenSgdDouble) { step_epilogue_equals_two_passes<double>(); }

// Variant 5 (tensor cores, 3xTF32): every tile configuration on two shapes, then the plan.
TEST(GemmGather, GatheredBEqualsTheNormalisedCopyTf32x3) {
  for (int i = 0; i < 2; ++i) {
    const Shape sh = kShapes[i + 1];
    SCOPED_TRACE("D " + std::to_string(sh.D) + " b " + std::to_string(sh.b) + " H " + std::to_string(sh.H));
    const Batch<float> p(sh.D, sh.b, sh.H, 40, 5u + unsigned(sh.D + sh.b));
    nn::DeviceBuffer<float> a(std::size_t(sh.H) * sh.b), c(std::size_t(sh.H) * sh.b);
    nn::DeviceBuffer<float> ga(std::size_t(sh.H) * sh.D), gc(std::size_t(sh.H) * sh.D);
    for (int cfg = -1; cfg < nn::gemm_tuning::kTf32Configs; ++cfg) {
      SCOPED_TRACE("tf32 config " + std::to_string(cfg));
      nn::gemm_tuning::gemm_tf32_with(cfg, 3, p.forward(c.get(), false));
      nn::gemm_tuning::gemm_tf32_with(cfg, 3, p.forward(a.get(), true));
      EXPECT_TRUE(same_bits(host_of(a), host_of(c))) << "forward GEMM, gathered != copy";
      nn::gemm_tuning::gemm_tf32_with(cfg, 3, p.grad(gc.get(), false, 0.01f));
      nn::gemm_tuning::gemm_tf32_with(cfg, 3, p.grad(ga.get(), true, 0.01f));
      EXPECT_TRUE(same_bits(host_of(ga), host_of(gc))) << "gradient GEMM, gathered != copy";
    }
    nn::gemm(5, p.forward(c.get(), false));
    nn::gemm(5, p.forward(a.get(), true));
    EXPECT_TRUE(same_bits(host_of(a), host_of(c)));
  }
}
TEST(GemmGather, StepEpilogueEqualsGradientThenSgdTf32x3) { step_epilogue_equals_two_passes<float>(5); }

TEST(GemmGather, BadArgumentsAreRefused) {
  const Batch<float> p(64, 8, 16, 10, 3u);
  nn::DeviceBuffer<float> out(std::size_t(16) * 64);
  out.zero();  // the step epilogue below reads it as the weights
  GemmArgs<float> g = p.forward(out.get(), true);
  EXPECT_THROW(nn::gemm(3, g), std::invalid_argument);  // only variants 4 and 5 gather
  GemmArgs<float> no_cols = g;
  no_cols.B_cols = nullptr;
  EXPECT_THROW(nn::gemm(4, no_cols), std::invalid_argument);
  GemmArgs<float> op_t = g;
  op_t.opA = Op::T;
  op_t.lda = 64;
  EXPECT_THROW(nn::gemm(4, op_t), std::invalid_argument);
  GemmArgs<float> step = p.grad(out.get(), true, 0.0f);
  step.epilogue = Epilogue::Step;
  EXPECT_THROW(nn::gemm(4, step), std::invalid_argument);  // no C to step
  step.C = out.get();
  step.ldc = 16;
  EXPECT_THROW(nn::gemm(2, step), std::invalid_argument);  // only variants 4 and 5 step
  EXPECT_NO_THROW(nn::gemm(4, step));
}

}  // namespace
