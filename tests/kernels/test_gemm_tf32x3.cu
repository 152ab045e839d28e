// GEMM variant 5 (kernels/gemm/5_tf32x3.cu): the tensor cores at FP32 accuracy.
//  - TF32 rounding: wmma::__float_to_tf32 against its definition (round to nearest, ties away
//    from zero, 13 low mantissa bits cleared), bit for bit; on a GPU this checks the hardware,
//    in the emulator build the emulator's model of it (sim/include/mma.h).
//  - Accuracy: at the trainer's shapes (H = 256, B = 100, and the operand ranges of real
//    training), variant 5's largest error against a float64 product is within 2x of variant
//    4's (FP32 CUDA cores) at the image GEMMs, 3x at the two small ones (kCases says why),
//    while plain TF32 (one product) is far worse, so the three products are really what makes
//    it accurate.
//  - Variant 5's own TF32 rounding (tf32_rn: ties to even on sm_90) against its definition, and
//    its MMA's fragments (mma_m16n8k8_tf32) against PTX's documented layout.
//  - Every tile configuration gives the same bits (each output adds its k-steps in k order);
//    split-K is deterministic and as accurate.
// The op combinations, epilogues, alpha/beta, padding and in-place cases are those of every
// variant: AllVariants/GemmVariant.*/tf32x3 in test_gemm.cpp; the gathered B and the step
// epilogue: test_gemm_gather.cpp. Part of nn_tests.
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "device_vectors.h"
#include "gemm/gemm.h"
#include "gemm/mma_tf32.h"

namespace {

using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

__global__ void tf32_round_test_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = nvcuda::wmma::__float_to_tf32(in[i]);
}

// cvt.rna.tf32.f32 by definition: add half of the dropped range to the magnitude (sign and
// magnitude are separate in IEEE bits, so this rounds ties away from zero), clear the 13 low
// bits; a carry moves into the exponent (up to infinity). Infinities and NaNs are truncated
// (no rounding): an H200 turns the NaN 0x7f800001 into +Inf (docs/performance.md, GEMMs).
std::uint32_t tf32_rna(std::uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u) return u & 0xffffe000u;
  return (u + 0x1000u) & 0xffffe000u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Tf32, RoundingMatchesItsDefinitionBitForBit) {
  std::vector<std::uint32_t> in = {
      0x3f800000u, 0x3f800fffu, 0x3f801000u, 0x3f801001u, 0x3f802fffu, 0x3f803000u,  // ties away
      0xbf801000u, 0xbf800fffu, 0xbf803000u,                                         // negative
      0x7f7fffffu, 0x7f7ff000u, 0x7f7fefffu, 0xff7fffffu,                            // to infinity
      0x00000001u, 0x00001000u, 0x00000fffu, 0x007fffffu, 0x807ff000u,               // subnormal
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x3fffffffu, 0x3e2aaaabu};
  std::mt19937 rng(2026);
  for (int i = 0; i < 20000; ++i) {
    std::uint32_t u = rng();
    if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x40000000u;  // NaNs and infinities: below
    in.push_back(u);
  }
  const std::vector<std::uint32_t> nans = {0x7fc00000u, 0x7f800001u, 0xffc00123u, 0x7fffffffu, 0xff801fffu};
  in.insert(in.end(), nans.begin(), nans.end());
  std::vector<float> h(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) h[i] = from_bits(in[i]);
  const nn::DeviceBuffer<float> d_in = nn::test::to_device(h);
  nn::DeviceBuffer<float> d_out(h.size());
  const int n = int(h.size());
  tf32_round_test_kernel<<<(n + 255) / 256, 256>>>(d_in.get(), d_out.get(), n);
  CUDA_CHECK(cudaGetLastError());
  const std::vector<float> out = nn::test::to_host(d_out);
  int bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t got = bits_of(out[i]);
    if (got != tf32_rna(in[i]) && bad++ < 10)
      ADD_FAILURE() << std::hex << "tf32(0x" << in[i] << ") = 0x" << got << ", expected 0x" << tf32_rna(in[i]);
  }
  EXPECT_EQ(bad, 0) << "of " << in.size() << " inputs";
}

// Variant 5's own rounding (gemm/mma_tf32.h's tf32_rn): cvt.rn.tf32.f32 on sm_90 and later
// (ties to even; the emulator models it), cvt.rna before (ties away). Finite inputs bit for
// bit against the definition; NaN stays NaN and infinities stay.
__global__ void tf32_rn_test_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = nn::gemm_detail::tf32_rn(in[i]);
}
std::uint32_t tf32_rne(std::uint32_t u) { return (u + 0x0fffu + ((u >> 13) & 1u)) & 0xffffe000u; }

TEST(Tf32, VariantFiveRoundingMatchesItsDefinition) {
  cudaDeviceProp prop{};
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  const bool even = prop.major >= 9;  // cvt.rn exists from sm_90 on
  std::vector<std::uint32_t> in = {
      0x3f800000u, 0x3f800fffu, 0x3f801000u, 0x3f801001u, 0x3f802fffu, 0x3f803000u,  // ties
      0xbf801000u, 0xbf800fffu, 0xbf803000u, 0x3f805000u, 0xbf805000u,
      0x7f7fffffu, 0x7f7ff000u, 0x7f7fefffu, 0xff7fffffu,                            // to infinity
      0x00000001u, 0x00001000u, 0x00000fffu, 0x007fffffu, 0x807ff000u, 0x00003000u,  // subnormal
      0x00000000u, 0x80000000u, 0x3fffffffu, 0x3e2aaaabu};
  std::mt19937 rng(2027);
  for (int i = 0; i < 20000; ++i) {
    std::uint32_t u = rng();
    if ((u & 0x7f800000u) == 0x7f800000u) u ^= 0x40000000u;
    in.push_back(u);
  }
  const std::size_t n_finite = in.size();
  const std::vector<std::uint32_t> special = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                              0xffc00123u, 0x7fffffffu, 0xff801fffu};
  in.insert(in.end(), special.begin(), special.end());
  std::vector<float> h(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) h[i] = from_bits(in[i]);
  const nn::DeviceBuffer<float> d_in = nn::test::to_device(h);
  nn::DeviceBuffer<float> d_out(h.size());
  const int n = int(h.size());
  tf32_rn_test_kernel<<<(n + 255) / 256, 256>>>(d_in.get(), d_out.get(), n);
  CUDA_CHECK(cudaGetLastError());
  const std::vector<float> out = nn::test::to_host(d_out);
  int bad = 0;
  for (std::size_t i = 0; i < n_finite; ++i) {
    const std::uint32_t want = even ? tf32_rne(in[i]) : tf32_rna(in[i]), got = bits_of(out[i]);
    if (got != want && bad++ < 10)
      ADD_FAILURE() << std::hex << "tf32_rn(0x" << in[i] << ") = 0x" << got << ", expected 0x" << want
                    << (even ? " (ties to even)" : " (ties away)");
  }
  EXPECT_EQ(bad, 0) << "of " << n_finite << " finite inputs";
  for (std::size_t i = n_finite; i < in.size(); ++i) {
    const float x = h[i], y = out[i];
    if (std::isnan(x)) EXPECT_TRUE(std::isnan(y)) << std::hex << "0x" << in[i] << " -> 0x" << bits_of(y);
    else EXPECT_EQ(bits_of(y), in[i]) << std::hex << "0x" << in[i];
  }
}

// mma_m16n8k8_tf32's fragments are PTX's documented ones (mma_tf32.h): one warp loads a
// 16x8 A, an 8x8 B and a 16x8 C lane by lane at those positions and stores D the same way; D
// must be A*B + C exactly (small integers: exact whatever the tensor core's rounding).
__global__ void mma1688_test_kernel(const float* A, const float* B, const float* C, float* D) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  float a[4], b[2], d[4];
  for (int e = 0; e < 4; ++e) a[e] = A[(g + (e & 1) * 8) * 8 + t + (e >> 1) * 4];  // A[row][k]
  for (int e = 0; e < 2; ++e) b[e] = B[(t + e * 4) * 8 + g];                        // B[k][col]
  for (int e = 0; e < 4; ++e) d[e] = C[(g + (e >> 1) * 8) * 8 + 2 * t + (e & 1)];   // C[row][col]
  nn::gemm_detail::mma_m16n8k8_tf32(d, a, b);
  for (int e = 0; e < 4; ++e) D[(g + (e >> 1) * 8) * 8 + 2 * t + (e & 1)] = d[e];
}

TEST(Tf32, MmaFragmentsAreThePtxLayout) {
  std::vector<float> A(16 * 8), B(8 * 8), C(16 * 8);
  for (int i = 0; i < 16 * 8; ++i) A[i] = float((i * 7) % 11 - 5);
  for (int i = 0; i < 8 * 8; ++i) B[i] = float((i * 5) % 13 - 6);
  for (int i = 0; i < 16 * 8; ++i) C[i] = float(i % 17 - 8);
  const nn::DeviceBuffer<float> dA = nn::test::to_device(A), dB = nn::test::to_device(B), dC = nn::test::to_device(C);
  nn::DeviceBuffer<float> dD(16 * 8);
  mma1688_test_kernel<<<1, 32>>>(dA.get(), dB.get(), dC.get(), dD.get());
  CUDA_CHECK(cudaGetLastError());
  const std::vector<float> D = nn::test::to_host(dD);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      float want = C[r * 8 + c];
      for (int k = 0; k < 8; ++k) want += A[r * 8 + k] * B[k * 8 + c];
      EXPECT_EQ(D[r * 8 + c], want) << "D(" << r << ", " << c << ")";
    }
}

// One GEMM problem with the float64 product and sum |a_ik b_kj| at every output.
struct Problem {
  Op opA, opB;
  int M, N, K;
  std::vector<float> A, B;
  std::vector<double> ref, mag;
  nn::DeviceBuffer<float> dA, dB, dD;
  Problem(Op oa, Op ob, int M_, int N_, int K_, double a_scale, double b_lo, unsigned seed)
      : opA(oa), opB(ob), M(M_), N(N_), K(K_), A(std::size_t(M) * K), B(std::size_t(K) * N) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> ua(-a_scale, a_scale), ub(b_lo, 1.0);
    for (float& x : A) x = float(ua(rng));
    for (float& x : B) x = float(ub(rng));
    ref.assign(std::size_t(M) * N, 0);
    mag.assign(ref.size(), 0);
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) {
        const double b = B[opB == Op::N ? k + std::size_t(j) * K : j + std::size_t(k) * N];
        for (int i = 0; i < M; ++i) {
          const double p = double(A[opA == Op::N ? i + std::size_t(k) * M : k + std::size_t(i) * K]) * b;
          ref[i + std::size_t(j) * M] += p;
          mag[i + std::size_t(j) * M] += std::fabs(p);
        }
      }
    dA = nn::test::to_device(A);
    dB = nn::test::to_device(B);
    dD = nn::DeviceBuffer<float>(ref.size());
  }
  GemmArgs<float> args() const {
    GemmArgs<float> g;
    g.opA = opA; g.opB = opB; g.M = M; g.N = N; g.K = K;
    g.A = dA.get(); g.lda = opA == Op::N ? M : K;
    g.B = dB.get(); g.ldb = opB == Op::N ? K : N;
    g.D = dD.get(); g.ldd = M;
    return g;
  }
  // max |D - ref| / sum |a b| over all outputs
  double error() const {
    const std::vector<float> d = nn::test::to_host(dD);
    double e = 0;
    for (std::size_t i = 0; i < d.size(); ++i)
      if (mag[i] > 0) e = std::max(e, std::fabs(double(d[i]) - ref[i]) / mag[i]);
    return e;
  }
};

struct AccuracyCase {
  const char* name;
  Op opA, opB;
  int M, N, K;
  double a_scale, b_lo;  // A in [-a, a), B in [b_lo, 1): images are >= 0, weights small
  double bound;          // variant 5's error may be at most bound x variant 4's
};
// The trainer's GEMMs at H = 256, B = 100: forward1 (W1 X), dW1 (dZ1 X^T), dA1 (W2^T dZ2), forward2
// (W2 A1). The two big ones (the image GEMMs, K or N = 784) within 2x of variant 4's error. The two
// small ones within 3x: on an H200 variant 5's error measured 2.2x variant 4's
// at dA1 (K = 10: one k-tile, so the tensor core's own sum, which does not round to nearest, is the
// whole result) and at forward2 (variant 4 splits K = 256 into 16 slices of 16 there, short sums);
// 1.8x and 0.7x at forward1 and dW1, and below variant 4's at 4096^3.
const AccuracyCase kCases[] = {
    {"forward1", Op::N, Op::N, 256, 100, 784, 0.05, 0.0, 2.0},
    {"dW1", Op::N, Op::T, 256, 784, 100, 0.01, 0.0, 2.0},
    {"dA1", Op::T, Op::N, 256, 100, 10, 0.5, -1.0, 3.0},
    {"forward2", Op::N, Op::N, 10, 100, 256, 0.5, 0.0, 3.0},
};

TEST(Tf32x3, AccuracyNearFp32AndFarBetterThanPlainTf32) {
  for (const AccuracyCase& c : kCases) {
    SCOPED_TRACE(c.name);
    Problem p(c.opA, c.opB, c.M, c.N, c.K, c.a_scale, c.b_lo, 99u + unsigned(c.K));
    nn::gemm(4, p.args());
    const double e4 = p.error();
    nn::gemm(5, p.args());
    const double e5 = p.error();
    nn::gemm_tuning::gemm_tf32_with(-1, 1, p.args());
    const double e1 = p.error();
    std::printf("  %-9s %4d x %4d x %4d  max |err|/sum|ab|: warptile %.3g, tf32x3 %.3g, plain tf32 %.3g\n",
                c.name, c.M, c.N, c.K, e4, e5, e1);
    EXPECT_LE(e5, c.bound * e4 + 1e-9) << "variant 5's error above " << c.bound << "x variant 4's";
    // Plain TF32 keeps 11 of 24 significand bits: errors near 2^-11 of the terms. The
    // compensation brings them to FP32's level; a broken split (small part lost) would not.
    EXPECT_GT(e1, 8.0 * e5) << "plain TF32 should be far less accurate than the compensation";
  }
}

TEST(Tf32x3, EveryTileConfigurationGivesTheSameBits) {
  for (Op oa : {Op::N, Op::T})
    for (Op ob : {Op::N, Op::T}) {
      Problem p(oa, ob, 70, 45, 61, 1.0, -1.0, 5u + unsigned(oa) * 2 + unsigned(ob));
      GemmArgs<float> g = p.args();
      g.epilogue = Epilogue::BiasSigmoid;
      const std::vector<float> bias(70, 0.25f);
      const nn::DeviceBuffer<float> d_bias = nn::test::to_device(bias);
      g.bias = d_bias.get();
      nn::gemm_tuning::gemm_tf32_with(0, 3, g);
      const std::vector<float> first = nn::test::to_host(p.dD);
      for (int cfg = 1; cfg < nn::gemm_tuning::kTf32Configs; ++cfg) {
        nn::gemm_tuning::gemm_tf32_with(cfg, 3, g);
        EXPECT_TRUE(nn::test::same_bits(nn::test::to_host(p.dD), first))
            << "config " << nn::gemm_tuning::tf32_config_name(cfg) << " op " << int(oa) << int(ob);
      }
    }
}

// Split-K (the plan splits the long-K weight gradients): each slice count gives the same bits
// in every configuration and on every run (the last block sums the slices in slice order and
// resets its tile's counter), and an error within 2x of the unsplit product's.
TEST(Tf32x3, SplitKIsDeterministicAndAsAccurate) {
  for (Op oa : {Op::N, Op::T})
    for (Op ob : {Op::N, Op::T}) {
      SCOPED_TRACE(testing::Message() << "op " << int(oa) << int(ob));
      Problem p(oa, ob, 40, 36, 600, 1.0, -1.0, 17u + unsigned(oa) * 2 + unsigned(ob));
      GemmArgs<float> g = p.args();
      g.epilogue = Epilogue::BiasSigmoid;
      const std::vector<float> bias(40, -0.5f);
      const nn::DeviceBuffer<float> d_bias = nn::test::to_device(bias);
      g.bias = d_bias.get();
      nn::gemm_tuning::gemm_tf32_with(1, 3, p.args(), 0, 1);
      const double e1 = p.error();
      nn::gemm_tuning::gemm_tf32_with(1, 3, p.args(), 0, 3);
      const double e3 = p.error();
      EXPECT_LE(e3, 2.0 * e1 + 1e-9) << "3 slices: error " << e3 << " against " << e1 << " unsplit";
      nn::gemm_tuning::gemm_tf32_with(0, 3, g, 0, 3);
      const std::vector<float> first = nn::test::to_host(p.dD);
      for (int cfg = 0; cfg < nn::gemm_tuning::kTf32Configs; ++cfg)
        for (int rep = 0; rep < 2; ++rep) {
          nn::gemm_tuning::gemm_tf32_with(cfg, 3, g, 0, 3);
          EXPECT_TRUE(nn::test::same_bits(nn::test::to_host(p.dD), first))
              << "config " << nn::gemm_tuning::tf32_config_name(cfg) << " run " << rep;
        }
      nn::gemm_tuning::gemm_tf32_with(1, 3, g, 0, 1);
      EXPECT_FALSE(nn::test::same_bits(nn::test::to_host(p.dD), first))
          << "3 slices gave the unsplit bits: was K split at all?";
    }
}

TEST(Tf32x3, BadArgumentsAreRefused) {
  Problem p(Op::N, Op::N, 8, 8, 8, 1.0, -1.0, 1u);
  EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(nn::gemm_tuning::kTf32Wgmma + 1, 3, p.args()), std::invalid_argument);
  if (!nn::gemm_tuning::tf32_wgmma_available()) {  // a GPU without wgmma: refused, not launched
    EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(nn::gemm_tuning::kTf32Wgmma, 3, p.args()), std::invalid_argument);
  }
  EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(-2, 3, p.args()), std::invalid_argument);
  EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(0, 2, p.args()), std::invalid_argument);
  EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(0, 3, p.args(), 0, -1), std::invalid_argument);
  GemmArgs<float> g = p.args();
  g.K = 0;
  EXPECT_THROW(nn::gemm_tuning::gemm_tf32_with(0, 3, g), std::invalid_argument);
  EXPECT_STREQ(nn::gemm_tuning::tf32_config_name(1), "64x64");
  EXPECT_STREQ(nn::gemm_tuning::tf32_config_name(nn::gemm_tuning::kTf32Wgmma), "wgmma128x128");
}

}  // namespace
