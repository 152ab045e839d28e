// Tests of GEMM variant 4 (kernels/gemm/4_warptile*.cu): every tile configuration with and
// without split-K, aligned (vector path) and misaligned (scalar fallback); split-K's bitwise
// determinism under every emulator schedule; the per-shape plan.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/device_buffer.h"
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
  }
}

}  // namespace
