// Programmatic dependent launch of the fused step's kernels (kernels/common/pdl.h): the switch
// (on where the device and the code support it, set_programmatic_launch), and the step's five
// kernels (gather_normalize, the forward GEMM, layer2_fused, layer2_finish, the dW1 GEMM with the
// SGD step) captured into a graph and replayed give the same bits with PDL on and off. In
// the emulator every launch is race-checked here, so a read of a predecessor's output before a
// kernel's wait would fail the test (sim/docs/async.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/device_buffer.h"
#include "common/pdl.h"
#include "device_vectors.h"
#include "gemm/gemm.h"
#include "ops/layer2.h"
#include "ops/ops.h"

#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace {

using nn::test::to_device;
using nn::test::to_host;

TEST(Pdl, OnWhereTheDeviceRunsCodeForComputeCapability9AndSwitchable) {
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  const bool was = nn::set_programmatic_launch(true);
  if (major < 9) {
    EXPECT_FALSE(nn::programmatic_launch());
  }
#ifdef SIM_EMULATOR
  EXPECT_TRUE(nn::programmatic_launch());  // the emulator is a 9.0 device running code built for it
#endif
  nn::set_programmatic_launch(false);
  EXPECT_FALSE(nn::programmatic_launch());
  nn::set_programmatic_launch(was);
}

// One fused SGD step's kernels, as DeviceModel's fused step runs them (src/model/device_model_step.cpp).
struct Step {
  int D = 48, H = 40, C = 10, B = 20, n = 60;
  std::vector<std::uint8_t> images, labels;
  std::vector<std::uint32_t> idx;
  std::vector<float> P;
  Step() {
    std::mt19937 rng(3);
    images.resize(std::size_t(D) * n);
    for (auto& v : images) v = std::uint8_t(rng() % 256);
    labels.resize(std::size_t(n));
    for (auto& v : labels) v = std::uint8_t(rng() % unsigned(C));
    for (int j = 0; j < B; ++j) idx.push_back(std::uint32_t((7 * j + 1) % n));
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    P.resize(std::size_t(H) * D + H + std::size_t(C) * H + C);
    for (auto& v : P) v = u(rng);
  }
  // `steps` replays of the step's graph; the parameters after them.
  std::vector<float> run(bool pdl, int steps) const {
    const bool was = nn::set_programmatic_launch(pdl);
    auto d_images = to_device(images), d_labels = to_device(labels);
    auto d_idx = to_device(idx);
    auto d_P = to_device(P);
    const int tiles = nn::layer2_tiles(B);
    nn::DeviceBuffer<float> X(std::size_t(D) * B), A1(std::size_t(H) * B),
        parts(std::size_t(tiles) * nn::layer2_part_size(H, C));
    nn::DeviceBuffer<double> loss_parts(static_cast<std::size_t>(tiles)), stats(1);
    nn::DeviceBuffer<unsigned> hit_parts(static_cast<std::size_t>(tiles)), counts(3);
    stats.zero();
    counts.zero();
    float* p = d_P.get();
    cudaStream_t s = nullptr;
    EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    nn::gather_normalize<float>(d_images.get(), D, d_idx.get(), B, X.get(), s);
    nn::GemmArgs<float> f;  // A1 = sigmoid(W1 X + b1)
    f.M = H, f.N = B, f.K = D, f.A = p, f.lda = H, f.B = X.get(), f.ldb = D;
    f.D = A1.get(), f.ldd = H, f.epilogue = nn::Epilogue::BiasSigmoid, f.bias = p + std::size_t(H) * D;
    nn::gemm(4, f, s);
    const std::size_t tail = std::size_t(H) * D;
    nn::layer2_fused<float>(A1.get(), H, C, B, p + tail + H, p + tail + H + std::size_t(C) * H, d_labels.get(),
                            d_idx.get(), 1.0f / float(B), parts.get(), loss_parts.get(), hit_parts.get(), s);
    nn::layer2_finish<float>(parts.get(), tiles, H, C, 1e-3f, 0.5f, p + tail, nullptr, loss_parts.get(),
                             hit_parts.get(), stats.get(), counts.get(), s);
    nn::GemmArgs<float> w;  // W1 -= lr (dZ1 X^T + reg W1)
    w.opB = nn::Op::T, w.M = H, w.N = D, w.K = B, w.A = A1.get(), w.lda = H, w.B = X.get(), w.ldb = D,
    w.beta = 1e-3f, w.C = p, w.ldc = H, w.D = p, w.ldd = H,
    w.epilogue = nn::Epilogue::Step, w.step_lr = 0.5f;
    nn::gemm(4, w, s);
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    for (int i = 0; i < steps; ++i) EXPECT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
    nn::set_programmatic_launch(was);
    return to_host(d_P);
  }
};

TEST(Pdl, FusedStepKernelsGiveTheSameBitsWithAndWithout) {
#ifdef SIM_EMULATOR
  const bool saved = sim::racecheck();
  sim::set_racecheck_all();  // every launch checked for the PDL hazard (and races)
#endif
  const Step st;
  const std::vector<float> off = st.run(false, 3), on = st.run(true, 3);
#ifdef SIM_EMULATOR
  sim::set_racecheck(saved);
#endif
  ASSERT_EQ(off.size(), on.size());
  EXPECT_TRUE(nn::test::same_bits(off, on));
  EXPECT_FALSE(nn::test::same_bits(off, st.P));  // the steps did step the parameters
}

}  // namespace
