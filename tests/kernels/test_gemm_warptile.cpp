// Tests of GEMM variant 4 (kernels/gemm/4_warptile*.cu): every tile configuration with and
// without split-K, aligned (vector path) and misaligned (scalar fallback); split-K's bitwise
// determinism under every emulator schedule; the per-shape plan.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "common/stream.h"
#include "gemm/gemm.h"
#include "gemm_problem.h"
#include "schedules.h"

namespace {

using gemm_test::Case;
using gemm_test::describe;
using gemm_test::kOps;
using gemm_test::Problem;
using gemm_test::run;
using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

// Variant 4's tile configurations and split-K, forced one by one, with 16-byte-aligned
// operands (vector path) and with odd pointer offsets and ld (scalar fallback).
template <class T>
void warptile_configs() {
  int n = 0;
  for (int cfg = 0; cfg < nn::gemm_tuning::kWarptileConfigs; ++cfg)
    for (int splits : {1, 3})
      for (int misalign = 0; misalign < 2; ++misalign) {
        Case c;
        c.M = 37 + 64 * (cfg == 0);
        c.N = 70;
        c.K = 100;
        c.opA = kOps[n % 2];
        c.opB = kOps[(n / 2) % 2];
        c.alpha = 1.5;
        c.beta = n % 3 == 0 ? 0.0 : -1.0;
        c.ep = Epilogue(n % 3);
        // Aligned: every ld a multiple of 4 elements (16 bytes for float and double); else
        // odd ld and pointers one element past a 16-byte boundary.
        c.pad = 1;
        c.ld_multiple = misalign ? 1 : 4;
        c.offset = misalign;
        c.in_place = n % 5 == 2;
        SCOPED_TRACE(std::string("warptile config ") + nn::gemm_tuning::warptile_config_name(cfg) +
                     " splits " + std::to_string(splits) + ", " + (sizeof(T) == 4 ? "float" : "double") +
                     ", " + describe(c));
        Problem<T> p(c, 500 + n);
        run(p, [&](const GemmArgs<T>& g) { nn::gemm_tuning::gemm_warptile_with_config(cfg, splits, g); });
        ++n;
      }
}

TEST(GemmWarptile, EveryConfigAndSplitK) {
  warptile_configs<float>();
  warptile_configs<double>();
}

// Split-K sums the slices in a fixed order, so the result is bitwise the same whichever block
// finishes last: compare every schedule's output bit for bit.
TEST(GemmWarptile, SplitKIsDeterministic) {
  Case c;
  c.M = 10;
  c.N = 40;
  c.K = 700;
  c.opB = Op::T;
  Problem<float> p(c, 9);
  std::vector<std::vector<float>> outs;
  nn::DeviceBuffer<float> dA(p.A.size()), dB(p.B.size()), dD(p.D0.size());
  dA.upload(p.A.data(), p.A.size());
  dB.upload(p.B.data(), p.B.size());
  GemmArgs<float> g;
  g.opB = Op::T;
  g.M = c.M;
  g.N = c.N;
  g.K = c.K;
  g.A = dA.get();
  g.lda = p.lda;
  g.B = dB.get();
  g.ldb = p.ldb;
  g.D = dD.get();
  g.ldd = p.ldd;
  nn::test::for_each_schedule([&] {
    for (int rep = 0; rep < 2; ++rep) {
      nn::gemm_tuning::gemm_warptile_with_config(3, 6, g);
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> D(p.D0.size());
      dD.download(D.data(), D.size());
      p.check(D);
      outs.push_back(std::move(D));
    }
  });
  for (const auto& o : outs)
    EXPECT_EQ(std::memcmp(o.data(), outs[0].data(), o.size() * sizeof(float)), 0);
}

// A CUDA Graph captured around a split-K GEMM keeps the address of the stream's split-K scratch.
// A later, larger split-K GEMM on the same stream grows the scratch: the old buffer must stay
// valid for the graph's replays (on an H200, freeing it makes nn_train --graph fault with an
// illegal address once the evaluation's GEMM grows the scratch: docs/testing.md, "On a GPU";
// the emulator refuses the replay's launch on freed memory). The replay must give the eager result.
TEST(GemmWarptile, GraphKeepsItsScratchWhenALaterGemmGrowsIt) {
  nn::gemm_release_workspaces();  // start with no scratch on any stream
  const int M = 10, N = 64, K = 512, big_N = 640;
  std::vector<float> hA(static_cast<std::size_t>(M) * K), hB(static_cast<std::size_t>(K) * big_N);
  for (std::size_t i = 0; i < hA.size(); ++i) hA[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
  for (std::size_t i = 0; i < hB.size(); ++i) hB[i] = static_cast<float>((i * 5) % 11) / 11.0f - 0.5f;
  nn::DeviceBuffer<float> A(hA.size()), B(hB.size()), D(static_cast<std::size_t>(M) * N),
      big_D(static_cast<std::size_t>(M) * big_N);
  A.upload(hA.data(), hA.size());
  B.upload(hB.data(), hB.size());
  nn::Stream stream;
  const cudaStream_t s = stream.get();
  GemmArgs<float> small;
  small.M = M, small.N = N, small.K = K, small.A = A.get(), small.lda = M, small.B = B.get(),
  small.ldb = K, small.D = D.get(), small.ldd = M;
  GemmArgs<float> big = small;
  big.N = big_N, big.D = big_D.get();
  // Eager first (the scratch is allocated outside the capture, as the trainer does).
  nn::gemm_tuning::gemm_warptile_with_config(3, 2, small, s);
  std::vector<float> eager(static_cast<std::size_t>(M) * N), replayed(eager.size());
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  D.download(eager.data(), eager.size());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  nn::gemm_tuning::gemm_warptile_with_config(3, 2, small, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // 10 tiles x 8 slices: more scratch and more counters than the captured GEMM's 1 x 2.
  nn::gemm_tuning::gemm_warptile_with_config(3, 8, big, s);
  ASSERT_EQ(cudaMemsetAsync(D.get(), 0, D.size() * sizeof(float), s), cudaSuccess);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  D.download(replayed.data(), replayed.size());
  EXPECT_EQ(std::memcmp(replayed.data(), eager.data(), eager.size() * sizeof(float)), 0);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  nn::gemm_release_workspaces();
}

TEST(GemmWarptile, PlanIsValid) {
  const int shapes[][3] = {{512, 3000, 784}, {512, 784, 750}, {10, 3000, 512}, {10, 512, 3000},
                           {4096, 4096, 4096}, {1, 1, 1}};
  for (const auto& s : shapes) {
    const auto p = nn::gemm_tuning::warptile_plan(s[0], s[1], s[2]);
    EXPECT_GE(p.cfg, 0);
    EXPECT_LT(p.cfg, nn::gemm_tuning::kWarptileConfigs);
    EXPECT_GE(p.splits, 1);
    EXPECT_LE(p.splits, 16);
    if (s[0] <= 16) {
      EXPECT_EQ(p.cfg, 3) << "M <= 16 uses the 16x64 tile";
    }
    if (p.splits > 1) {
      EXPECT_GE(s[2] / p.splits, 16) << "split-K never makes slices shorter than 16";
    }
  }
}

}  // namespace
