// The GEMM tests' shared machinery (tests/kernels/test_gemm*.cpp): a Case (shape, ops,
// alpha/beta, epilogue, padding, in place, misalignment), its host Problem with a
// double-precision reference and per-element error bound, and run(), which uploads a problem,
// calls nn::gemm (or any launcher) under every emulator schedule and checks D each time.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "gemm/gemm.h"
#include "schedules.h"

namespace gemm_test {

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

inline std::string describe(const Case& c) {
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

inline constexpr Op kOps[2] = {Op::N, Op::T};
}  // namespace gemm_test
