// The fused step's SGD epilogue (Epilogue::Step, kernels/gemm/gemm.h; the registry's fused rows,
// variants 4 and 5): W -= lr (dZ X^T + reg W) applied by the dW1 GEMM, in place, checked bit for
// bit against the unfused computation it replaces (the gradient GEMM, then ops sgd_update),
// through the dispatcher under every emulator schedule; and bad arguments refused. Part of
// nn_tests.
#include <gtest/gtest.h>

#include <cstdint>
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

// A batch of b normalised images of D pixels (X, D x b, from random bytes as the trainer makes
// it), the weights W (H x D) and the backward pass's dZ (H x b), all on the device.
template <class T>
struct Batch {
  int D, b, H;
  nn::DeviceBuffer<T> X, W, dZ;
  Batch(int D_, int b_, int H_, unsigned seed) : D(D_), b(b_), H(H_) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> img(std::size_t(b) * D);
    for (auto& v : img) v = std::uint8_t(rng() % 256);
    img[0] = 255, img[1] = 0;
    std::vector<std::uint32_t> cols(b);
    for (int j = 0; j < b; ++j) cols[std::size_t(j)] = std::uint32_t(j);
    nn::DeviceBuffer<std::uint8_t> images(img.size());
    images.upload(img.data(), img.size());
    nn::DeviceBuffer<std::uint32_t> dcols(cols.size());
    dcols.upload(cols.data(), cols.size());
    X = nn::DeviceBuffer<T>(std::size_t(D) * b);
    nn::gather_normalize<T>(images.get(), D, dcols.get(), b, X.get());
    std::uniform_real_distribution<double> u(-0.5, 0.5);
    const auto fill = [&](nn::DeviceBuffer<T>& d, std::size_t n) {
      std::vector<T> h(n);
      for (auto& v : h) v = T(u(rng));
      d = nn::DeviceBuffer<T>(n);
      d.upload(h.data(), n);
    };
    fill(W, std::size_t(H) * D);
    fill(dZ, std::size_t(H) * b);
  }
  // The weight gradient dZ X^T + reg W.
  GemmArgs<T> grad(T* out, T reg) const {
    GemmArgs<T> g;
    g.opB = Op::T;
    g.M = H; g.N = D; g.K = b;
    g.A = dZ.get(); g.lda = H;
    g.B = X.get(); g.ldb = D;
    if (reg != T(0)) { g.beta = reg; g.C = W.get(); g.ldc = H; }
    g.D = out; g.ldd = H;
    return g;
  }
};

struct Shape {
  int D, b, H;
};
// b and H cross the tiles; D = 53 leaves a short edge tile.
const Shape kShapes[] = {{64, 17, 37}, {53, 100, 70}, {64, 1, 16}, {53, 33, 130}};

// W -= lr * (dZ X^T + reg W) in the epilogue, in place, equals the gradient GEMM followed by
// ops sgd_update, bit for bit (the same two roundings), with reg and without.
template <class T>
void step_epilogue_equals_two_passes(int variant) {
  const T lr = T(0.3);
  for (const Shape& sh : kShapes)
    for (const T reg : {T(0), T(0.02)}) {
      SCOPED_TRACE("D " + std::to_string(sh.D) + " b " + std::to_string(sh.b) + " reg " + std::to_string(reg));
      Batch<T> p(sh.D, sh.b, sh.H, 11u + unsigned(sh.H));
      const std::vector<T> w0 = host_of(p.W);
      nn::DeviceBuffer<T> g(w0.size()), w_two(w0.size());
      nn::test::for_each_schedule([&] {
        // Two passes on a copy of W.
        w_two.upload(w0.data(), w0.size());
        GemmArgs<T> ga = p.grad(g.get(), reg);
        if (reg != T(0)) ga.C = w_two.get();
        nn::gemm(variant, ga);
        nn::sgd_update<T>(w_two.get(), g.get(), w0.size(), lr, T(0));
        // One pass, in place.
        p.W.upload(w0.data(), w0.size());
        GemmArgs<T> gs = p.grad(p.W.get(), reg);
        gs.epilogue = Epilogue::Step;
        gs.step_lr = lr;
        gs.C = p.W.get(); gs.ldc = sh.H;
        nn::gemm(variant, gs);
        EXPECT_TRUE(same_bits(host_of(p.W), host_of(w_two)));
      });
    }
}

TEST(GemmStepEpilogue, EqualsGradientThenSgdFloat) { step_epilogue_equals_two_passes<float>(4); }
TEST(GemmStepEpilogue, EqualsGradientThenSgdDouble) { step_epilogue_equals_two_passes<double>(4); }
TEST(GemmStepEpilogue, EqualsGradientThenSgdTf32x3) { step_epilogue_equals_two_passes<float>(5); }

TEST(GemmStepEpilogue, OnlyTheRegistrysFusedRowsHaveIt) {
  for (int v = 0; v < nn::kGemmVariants; ++v)
    EXPECT_EQ(nn::gemm_has_fused_extras(v), v == 4 || v == 5) << "variant " << v;
  EXPECT_TRUE(nn::gemm_has_fused_extras(nn::gemm_default_variant()));
  EXPECT_EQ(nn::gemm_fused_step_variants_text(), "4 and 5");
}

TEST(GemmStepEpilogue, BadArgumentsAreRefused) {
  const Batch<float> p(64, 8, 16, 3u);
  nn::DeviceBuffer<float> out(std::size_t(16) * 64);
  out.zero();  // the step epilogue below reads it as the weights
  GemmArgs<float> step = p.grad(out.get(), 0.0f);
  step.epilogue = Epilogue::Step;
  EXPECT_THROW(nn::gemm(4, step), std::invalid_argument);  // no C to step
  step.C = out.get();
  step.ldc = 16;
  try {
    nn::gemm(2, step);
    ADD_FAILURE() << "variant 2 ran the step epilogue";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4 and 5 have it"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(nn::gemm(4, step));
}

}  // namespace
