// Tests of nn::gemm (kernels/gemm/*.cu): every available variant against a double-precision CPU
// reference, all op(A)/op(B) combinations, alpha/beta, in place, padded ld, epilogues, float and
// double, under every emulator thread order; plus argument validation and variant 4's tiles/split-K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "gemm/gemm.h"
#include "schedules.h"

namespace {

using nn::Epilogue;
using nn::GemmArgs;
using nn::Op;

struct Case {
  Op opA = Op::N, opB = Op::N;
  int M = 1, N = 1, K = 1;
  double alpha = 1, beta = 0;
  Epilogue ep = Epilogue::None;
  int pad = 0;            // extra rows in every leading dimension
  bool in_place = false;  // C == D
  bool nan_c = false;     // C full of NaN (only meaningful with beta == 0)
  int offset = 0;         // elements added to every device pointer (misaligns vectors when odd)
  int ld_multiple = 1;    // round every leading dimension up to a multiple of this
};

std::string describe(const Case& c) {
  const char* eps[] = {"none", "bias", "bias+sigmoid"};
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
         " op=" + (c.opA == Op::N ? "N" : "T") + (c.opB == Op::N ? "N" : "T") +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) +
         " epilogue=" + eps[int(c.ep)] + " pad=" + std::to_string(c.pad) +
         (c.in_place ? " in-place" : "") + (c.nan_c ? " NaN-C" : "") +
         " offset=" + std::to_string(c.offset);
}

// Host copies of one problem and its reference result with a per-element error bound.
template <class T>
struct Problem {
  Case c;
  int lda, ldb, ldc, ldd;
  std::vector<T> A, B, C, bias, D0;  // D0: what D holds before the call
  std::vector<double> ref, bound;

  explicit Problem(const Case& cs, unsigned seed) : c(cs) {
    const int a_rows = c.opA == Op::N ? c.M : c.K, a_cols = c.opA == Op::N ? c.K : c.M;
    const int b_rows = c.opB == Op::N ? c.K : c.N, b_cols = c.opB == Op::N ? c.N : c.K;
    auto ld = [&](int rows) { return (rows + c.pad + c.ld_multiple - 1) / c.ld_multiple * c.ld_multiple; };
    lda = ld(a_rows);
    ldb = ld(b_rows);
    ldc = ldd = ld(c.M);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    auto fill = [&](std::vector<T>& v, std::size_t n) {
      v.resize(n);
      for (auto& x : v) x = T(u(rng));
    };
    fill(A, std::size_t(lda) * a_cols);
    fill(B, std::size_t(ldb) * b_cols);
    fill(C, std::size_t(ldc) * c.N);
    fill(bias, std::size_t(c.M));
    if (c.nan_c) std::fill(C.begin(), C.end(), std::numeric_limits<T>::quiet_NaN());
    // D starts as C when in place, else as a sentinel that padding rows must keep.
    D0 = c.in_place ? C : std::vector<T>(std::size_t(ldd) * c.N, T(-12345));
    reference();
  }

  T a(int i, int k) const { return c.opA == Op::N ? A[i + std::size_t(k) * lda] : A[k + std::size_t(i) * lda]; }
  T b(int k, int j) const { return c.opB == Op::N ? B[k + std::size_t(j) * ldb] : B[j + std::size_t(k) * ldb]; }

  // The bound: a length-K dot product in precision T carries at most about K*eps*sum|a_ik b_kj|
  // of rounding error (Higham, Accuracy and Stability, 3.1); alpha, beta*C and the bias add three
  // more roundings of terms we include; the sigmoid only shrinks that (slope <= 1/4) but adds its
  // own few-ulp error (exp and the division), covered by 8*eps of the result. Factor 2: the
  // double reference has rounding of the same order when T is double.
  void reference() {
    const double eps = std::numeric_limits<T>::epsilon();
    ref.assign(std::size_t(c.M) * c.N, 0.0);
    bound.assign(ref.size(), 0.0);
    for (int j = 0; j < c.N; ++j)
      for (int i = 0; i < c.M; ++i) {
        double s = 0, mag = 0;
        for (int k = 0; k < c.K; ++k) {
          const double p = double(a(i, k)) * double(b(k, j));
          s += p;
          mag += std::fabs(p);
        }
        double v = c.alpha * s;
        mag = std::fabs(c.alpha) * mag;
        if (c.beta != 0) {
          const double cij = double(C[i + std::size_t(j) * ldc]);
          v += c.beta * cij;
          mag += std::fabs(c.beta * cij);
        }
        if (c.ep != Epilogue::None) {
          v += double(bias[i]);
          mag += std::fabs(double(bias[i]));
        }
        double bnd = 2.0 * (c.K + 3) * eps * mag;
        if (c.ep == Epilogue::BiasSigmoid) {
          v = 1.0 / (1.0 + std::exp(-v));
          bnd += 8.0 * eps * v;
        }
        ref[i + std::size_t(j) * c.M] = v;
        bound[i + std::size_t(j) * c.M] = bnd + std::numeric_limits<T>::denorm_min();
      }
  }

  // Returns the number of failures (reported with gtest, at most a few per problem).
  int check(const std::vector<T>& D) const {
    int bad = 0;
    for (int j = 0; j < c.N; ++j)
      for (int i = 0; i < ldd; ++i) {
        const T got = D[i + std::size_t(j) * ldd];
        bool ok;
        std::string want;
        if (i < c.M) {
          const double r = ref[i + std::size_t(j) * c.M], bd = bound[i + std::size_t(j) * c.M];
          ok = std::isfinite(double(got)) && std::fabs(double(got) - r) <= bd;
          want = std::to_string(r) + " +- " + std::to_string(bd);
        } else {  // padding rows of D are never written
          const T was = D0[i + std::size_t(j) * ldd];
          ok = std::memcmp(&got, &was, sizeof(T)) == 0;
          want = "untouched padding " + std::to_string(double(was));
        }
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << describe(c) << ": D(" << i << "," << j << ") = " << double(got)
                        << ", want " << want;
      }
    return bad;
  }
};

// Uploads a problem (pointers shifted by c.offset), runs `call` on it under every emulator
// schedule, and checks D each time. Returns the D of the last schedule.
template <class T, class Call>
std::vector<T> run(const Problem<T>& p, Call&& call) {
  const int off = p.c.offset;
  nn::DeviceBuffer<T> dA(p.A.size() + off), dB(p.B.size() + off), dC(p.C.size() + off),
      dD(p.D0.size() + off), dbias(p.bias.size() + off);
  dA.upload(p.A.data(), p.A.size(), off);
  dB.upload(p.B.data(), p.B.size(), off);
  dC.upload(p.C.data(), p.C.size(), off);
  dbias.upload(p.bias.data(), p.bias.size(), off);
  GemmArgs<T> g;
  g.opA = p.c.opA;
  g.opB = p.c.opB;
  g.M = p.c.M;
  g.N = p.c.N;
  g.K = p.c.K;
  g.alpha = T(p.c.alpha);
  g.A = dA.get() + off;
  g.lda = p.lda;
  g.B = dB.get() + off;
  g.ldb = p.ldb;
  g.beta = T(p.c.beta);
  g.C = p.c.in_place ? dD.get() + off : dC.get() + off;
  g.ldc = p.c.in_place ? p.ldd : p.ldc;
  g.D = dD.get() + off;
  g.ldd = p.ldd;
  g.epilogue = p.c.ep;
  g.bias = p.c.ep == Epilogue::None ? nullptr : dbias.get() + off;
  std::vector<T> D(p.D0.size());
  nn::test::for_each_schedule([&] {
    dD.upload(p.D0.data(), p.D0.size(), off);
    call(g);
    CUDA_CHECK(cudaDeviceSynchronize());
    dD.download(D.data(), D.size(), off);
    p.check(D);
  });
  return D;
}

template <class T>
void run_variant(int variant, const Case& c, unsigned seed = 1) {
  SCOPED_TRACE(std::string("variant ") + nn::gemm_variant_name(variant) + ", " +
               (sizeof(T) == 4 ? "float" : "double") + ", " + describe(c));
  Problem<T> p(c, seed);
  run(p, [&](const GemmArgs<T>& g) { nn::gemm(variant, g); });
}

template <class T>
void run_variant_both(int variant, const Case& c, unsigned seed = 1) {
  run_variant<float>(variant, c, seed);
  run_variant<double>(variant, c, seed);
}

const Op kOps[2] = {Op::N, Op::T};

class GemmVariant : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!nn::gemm_variant_available(GetParam()))
      GTEST_SKIP() << nn::gemm_variant_name(GetParam()) << " is not available in this build";
  }
};

// Every op combination at the tiny and odd shapes, cycling alpha/beta, epilogue, padding and
// in-place so that each op pair meets each of them at least once.
TEST_P(GemmVariant, AllOpsSmallShapes) {
  const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 65, 17}};
  int n = 0;
  for (const auto& s : shapes)
    for (Op oa : kOps)
      for (Op ob : kOps) {
        Case c;
        c.opA = oa;
        c.opB = ob;
        c.M = s[0];
        c.N = s[1];
        c.K = s[2];
        c.alpha = n % 2 ? -0.75 : 1.0;
        c.beta = n % 3 == 0 ? 0.0 : 0.5;
        c.ep = Epilogue(n % 3);
        c.pad = n % 2 ? 3 : 0;
        c.in_place = n % 4 == 1;
        run_variant_both<float>(GetParam(), c, 100 + n);
        ++n;
      }
}

TEST_P(GemmVariant, EpiloguesWithAlphaBeta) {
  for (int e = 0; e < 3; ++e) {
    Case c;
    c.M = 33;
    c.N = 18;
    c.K = 29;
    c.opA = e == 1 ? Op::T : Op::N;
    c.alpha = 1.25;
    c.beta = -2.0;
    c.ep = Epilogue(e);
    c.pad = 1;
    run_variant_both<float>(GetParam(), c, 7 + e);
  }
}

TEST_P(GemmVariant, BetaZeroNeverReadsC) {
  for (Op oa : kOps) {
    Case c;
    c.M = 20;
    c.N = 9;
    c.K = 11;
    c.opA = oa;
    c.opB = oa;
    c.alpha = 2.0;
    c.beta = 0.0;
    c.nan_c = true;
    c.ep = oa == Op::N ? Epilogue::BiasSigmoid : Epilogue::None;
    run_variant_both<float>(GetParam(), c);
  }
}

TEST_P(GemmVariant, InPlacePadded) {
  Case c;
  c.M = 19;
  c.N = 23;
  c.K = 40;
  c.opB = Op::T;
  c.alpha = 0.5;
  c.beta = 1.0;
  c.ep = Epilogue::Bias;
  c.pad = 5;
  c.in_place = true;
  run_variant_both<float>(GetParam(), c);
}

// On a created stream (variant 0 sets it on its handle; variant 4 keeps split-K scratch per stream).
TEST_P(GemmVariant, NonDefaultStream) {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  Case c;
  c.M = 10;
  c.N = 33;
  c.K = 300;
  c.opB = Op::T;
  c.beta = 0.25;
  Problem<float> p(c, 77);
  run(p, [&](const GemmArgs<float>& g) {
    nn::gemm(GetParam(), g, stream);
    if (GetParam() == 4) nn::gemm_tuning::gemm_warptile_with_config(3, 4, g, stream);  // split-K
    CUDA_CHECK(cudaStreamSynchronize(stream));
  });
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// Saturating inputs: the sigmoid must give 0 and 1, never NaN.
TEST_P(GemmVariant, SigmoidSaturates) {
  Case c;
  c.M = 6;
  c.N = 5;
  c.K = 3;
  c.alpha = 200.0;
  c.ep = Epilogue::BiasSigmoid;
  run_variant_both<float>(GetParam(), c);
}

// The trainer's shapes, scaled down so the emulator stays fast: output layer 10 x B x H,
// hidden layer H x B x 784 (forward, sigmoid), dW1 H x 784 x B (op(B) = T), dA1 H x B x 10
// (op(A) = T), dW2 10 x H x B.
TEST_P(GemmVariant, TrainerShapes) {
  struct S { int M, N, K; Op oa, ob; Epilogue ep; };
  const S shapes[] = {{10, 61, 512, Op::N, Op::N, Epilogue::Bias},
                      {96, 61, 784, Op::N, Op::N, Epilogue::BiasSigmoid},
                      {784, 96, 61, Op::N, Op::T, Epilogue::None},
                      {96, 61, 10, Op::T, Op::N, Epilogue::None},
                      {10, 96, 61, Op::N, Op::T, Epilogue::None}};
  int n = 0;
  for (const S& s : shapes) {
    Case c;
    c.M = s.M;
    c.N = s.N;
    c.K = s.K;
    c.opA = s.oa;
    c.opB = s.ob;
    c.ep = s.ep;
    c.beta = n == 3 ? 0.5 : 0.0;
    // One double case per variant keeps the emulator run short; float covers all shapes.
    if (n == 0) run_variant<double>(GetParam(), c, 300 + n);
    run_variant<float>(GetParam(), c, 300 + n);
    ++n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GemmVariant, ::testing::Range(0, nn::kGemmVariants),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(nn::gemm_variant_name(i.param));
                         });

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

// ---- the dispatcher's contract ----------------------------------------------------------

// Wider than one launch's gridDim.y allows in the narrowest variant: the dispatcher
// splits the columns (for every variant; the fast one is used here). op(B) = T checks that
// the chunks step along B's rows (op N steps like C and D), bias + beta the epilogue.
TEST(GemmApi, WideProblemsRunInColumnChunks) {
  {
    Case c;
    c.opB = Op::T;
    c.M = 2;
    c.N = nn::gemm_detail::kMaxColumnsPerLaunch + 37;
    c.K = 3;
    c.alpha = 1.5;
    c.beta = 0.5;
    c.ep = Epilogue::Bias;
    run_variant<float>(nn::gemm_default_variant(), c, 7);
  }
}

TEST(GemmApi, NamesAndAvailability) {
  const char* names[] = {"cublas", "naive", "tiled", "regblock", "warptile"};
  for (int v = 0; v < nn::kGemmVariants; ++v) EXPECT_STREQ(nn::gemm_variant_name(v), names[v]);
  EXPECT_STREQ(nn::gemm_variant_name(nn::kGemmVariants), "unknown");
  EXPECT_EQ(nn::gemm_default_variant(), 4);
  // Every variant in both builds (cuBLAS is emulated on OpenBLAS in the emulator build).
  for (int v = 0; v < nn::kGemmVariants; ++v) EXPECT_TRUE(nn::gemm_variant_available(v));
  EXPECT_FALSE(nn::gemm_variant_available(-1));
  EXPECT_FALSE(nn::gemm_variant_available(nn::kGemmVariants));
}

TEST(GemmApi, InvalidArgumentsThrow) {
  nn::DeviceBuffer<float> buf(64 * 64);
  float* p = buf.get();
  GemmArgs<float> ok;
  ok.M = 8;
  ok.N = 4;
  ok.K = 6;
  ok.A = p;
  ok.lda = 8;
  ok.B = p + 1000;
  ok.ldb = 6;
  ok.C = p + 2000;
  ok.ldc = 8;
  ok.D = p + 3000;
  ok.ldd = 8;
  EXPECT_NO_THROW(nn::gemm(1, ok));
  CUDA_CHECK(cudaDeviceSynchronize());

  auto expect_throw = [&](const char* what, auto mutate, int variant = 1) {
    GemmArgs<float> a = ok;
    mutate(a);
    EXPECT_THROW(nn::gemm(variant, a), std::invalid_argument) << what;
  };
  expect_throw("M = 0", [](auto& a) { a.M = 0; });
  expect_throw("N < 0", [](auto& a) { a.N = -3; });
  expect_throw("K = 0", [](auto& a) { a.K = 0; });
  expect_throw("lda < M (op N)", [](auto& a) { a.lda = 7; });
  expect_throw("lda < K (op T)", [](auto& a) { a.opA = Op::T; a.lda = 5; });
  expect_throw("ldb < K (op N)", [](auto& a) { a.ldb = 5; });
  expect_throw("ldb < N (op T)", [](auto& a) { a.opB = Op::T; a.ldb = 3; });
  expect_throw("ldd < M", [](auto& a) { a.ldd = 7; });
  expect_throw("ldc < M with beta != 0", [](auto& a) { a.beta = 1; a.ldc = 7; });
  expect_throw("null A", [](auto& a) { a.A = nullptr; });
  expect_throw("null B", [](auto& a) { a.B = nullptr; });
  expect_throw("null D", [](auto& a) { a.D = nullptr; });
  expect_throw("null C with beta != 0", [](auto& a) { a.beta = 0.5f; a.C = nullptr; });
  expect_throw("null bias", [](auto& a) { a.epilogue = Epilogue::Bias; });
  expect_throw("in place with ldc != ldd", [](auto& a) { a.beta = 1; a.C = a.D; a.ldd = 9; });
  expect_throw("D aliases A", [](auto& a) { a.D = const_cast<float*>(a.A); });
  expect_throw("variant -1", [](auto&) {}, -1);
  expect_throw("variant 5", [](auto&) {}, nn::kGemmVariants);
  // cuBLAS gets the same validation before it is called.
  expect_throw("lda < M, cuBLAS", [](auto& a) { a.lda = 7; }, 0);
  expect_throw("null C with beta != 0, cuBLAS", [](auto& a) { a.beta = 0.5f; a.C = nullptr; }, 0);
  EXPECT_NO_THROW(nn::gemm(0, ok));
  // Null C and a bad ldc are fine when beta == 0: C is not used.
  GemmArgs<float> a = ok;
  a.C = nullptr;
  a.ldc = 0;
  EXPECT_NO_THROW(nn::gemm(4, a));
  EXPECT_THROW(nn::gemm_tuning::gemm_warptile_with_config(nn::gemm_tuning::kWarptileConfigs, 1, ok),
               std::invalid_argument);
  EXPECT_THROW(nn::gemm_tuning::gemm_warptile_with_config(0, -1, ok), std::invalid_argument);
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
