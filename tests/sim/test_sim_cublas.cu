// The emulated cuBLAS (sim/runtime/cublas.cpp): cuBLAS's documented status codes for
// every argument check, column-major GEMM for all op combinations and padded leading
// dimensions against a naive double-precision loop, beta == 0 never reading C, device pointer
// mode, the handle's stream honoured like a kernel's (lazy streams, graph capture), a host
// matrix reported as an illegal address, TF32 math; and cudaMemcpy2DAsync, which gemm.cu's
// cuBLAS path uses. The emulator-only parts (lazy streams, fault recording) are guarded; the
// rest is valid CUDA.
#include <cublas_v2.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

// The documented numeric values (programs compare them and print them).
static_assert(CUBLAS_STATUS_SUCCESS == 0 && CUBLAS_STATUS_NOT_INITIALIZED == 1 &&
              CUBLAS_STATUS_ALLOC_FAILED == 3 && CUBLAS_STATUS_INVALID_VALUE == 7 &&
              CUBLAS_STATUS_ARCH_MISMATCH == 8 && CUBLAS_STATUS_MAPPING_ERROR == 11 &&
              CUBLAS_STATUS_EXECUTION_FAILED == 13 && CUBLAS_STATUS_INTERNAL_ERROR == 14 &&
              CUBLAS_STATUS_NOT_SUPPORTED == 15 && CUBLAS_STATUS_LICENSE_ERROR == 16);
static_assert(CUBLAS_OP_N == 0 && CUBLAS_OP_T == 1 && CUBLAS_OP_C == 2 && CUBLAS_OP_CONJG == 3);
static_assert(CUBLAS_POINTER_MODE_HOST == 0 && CUBLAS_POINTER_MODE_DEVICE == 1);
static_assert(CUBLAS_DEFAULT_MATH == 0 && CUBLAS_TENSOR_OP_MATH == 1 && CUBLAS_PEDANTIC_MATH == 2 &&
              CUBLAS_TF32_TENSOR_OP_MATH == 3 && CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION == 16);

// cublasSgemm / cublasDgemm by type.
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                    const float* beta, float* C, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const double* alpha, const double* A, int lda, const double* B, int ldb,
                    const double* beta, double* C, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

// A column-major GEMM problem on the host, with a naive double-precision reference.
template <class T>
struct Problem {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
  double alpha, beta;
  std::vector<T> A, B, C;

  Problem(cublasOperation_t ta_, cublasOperation_t tb_, int m_, int n_, int k_, int pad,
          double alpha_, double beta_, unsigned seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_), alpha(alpha_), beta(beta_) {
    const bool at = ta != CUBLAS_OP_N, bt = tb != CUBLAS_OP_N;
    lda = (at ? k : m) + pad;
    ldb = (bt ? n : k) + pad;
    ldc = m + pad;
    auto fill = [&](std::vector<T>& v, size_t count, unsigned s) {
      const std::vector<float> r = simtest::random_floats(count, s);
      v.assign(r.begin(), r.end());
    };
    fill(A, size_t(lda) * (at ? m : k), seed);
    fill(B, size_t(ldb) * (bt ? k : n), seed + 1);
    fill(C, size_t(ldc) * n, seed + 2);
  }
  double a(int i, int p) const { return ta == CUBLAS_OP_N ? A[i + size_t(p) * lda] : A[p + size_t(i) * lda]; }
  double b(int p, int j) const { return tb == CUBLAS_OP_N ? B[p + size_t(j) * ldb] : B[j + size_t(p) * ldb]; }
  // The expected C (padding rows unchanged) and a rounding bound per element.
  void reference(std::vector<double>& want, std::vector<double>& bound) const {
    want.assign(C.begin(), C.end());
    bound.assign(C.size(), 0.0);
    const double eps = std::numeric_limits<T>::epsilon();
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double s = 0, mag = 0;
        for (int p = 0; p < k; ++p) {
          s += a(i, p) * b(p, j);
          mag += std::fabs(a(i, p) * b(p, j));
        }
        const double c = C[i + size_t(j) * ldc];
        const double bc = beta == 0 ? 0.0 : beta * c;  // beta == 0: C is not read (may be NaN)
        want[i + size_t(j) * ldc] = alpha * s + bc;
        bound[i + size_t(j) * ldc] = 2.0 * (k + 2) * eps * (std::fabs(alpha) * mag + std::fabs(bc));
      }
  }
};

// Failures (at most a few reported) of got against the reference; padding rows must keep their
// bits exactly.
template <class T>
int mismatches(const Problem<T>& p, const std::vector<T>& got, const std::string& what) {
  std::vector<double> want, bound;
  p.reference(want, bound);
  int bad = 0;
  for (int j = 0; j < p.n; ++j)
    for (int i = 0; i < p.ldc; ++i) {
      const size_t x = i + size_t(j) * p.ldc;
      const bool ok = i < p.m ? std::fabs(double(got[x]) - want[x]) <= bound[x]
                              : simtest::bits_of(got[x]) == simtest::bits_of(p.C[x]);
      if (!ok && ++bad <= 3)
        ADD_FAILURE() << what << ": C(" << i << "," << j << ") = " << double(got[x]) << ", want "
                      << want[x] << " +- " << bound[x] << (i >= p.m ? " (padding row)" : "");
    }
  return bad;
}

template <class T>
std::vector<T> run_problem(cublasHandle_t h, const Problem<T>& p) {
  DeviceBuffer<T> A(p.A), B(p.B), C(p.C);
  const T alpha = T(p.alpha), beta = T(p.beta);
  EXPECT_EQ(gemm(h, p.ta, p.tb, p.m, p.n, p.k, &alpha, A.get(), p.lda, B.get(), p.ldb, &beta,
                 C.get(), p.ldc),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  return C.download();
}

class SimCublas : public simtest::SimTest {
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    ASSERT_EQ(cublasCreate(&h_), CUBLAS_STATUS_SUCCESS);
    ASSERT_NE(h_, nullptr);
  }
  void TearDown() override {
    if (h_) {
      EXPECT_EQ(cublasDestroy(h_), CUBLAS_STATUS_SUCCESS);
    }
    simtest::SimTest::TearDown();
  }
  cublasHandle_t h_ = nullptr;
};

// ---- argument checks -----------------------------------------------------------------------

TEST_F(SimCublas, EveryArgumentCheckReturnsItsDocumentedStatusAndLeavesCAlone) {
  const int m = 4, n = 3, k = 5;
  DeviceBuffer<float> A(std::vector<float>(m * k, 1.0f)), B(std::vector<float>(k * n, 1.0f));
  const std::vector<float> c0(m * n, 42.0f);
  DeviceBuffer<float> C(c0);
  const float one = 1.0f, zero = 0.0f;
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  auto call = [&](cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int mm, int nn,
                  int kk, const float* al, int lda, int ldb, const float* be, float* c, int ldc) {
    return cublasSgemm(h, ta, tb, mm, nn, kk, al, A.get(), lda, B.get(), ldb, be, c, ldc);
  };
  const cublasStatus_t IV = CUBLAS_STATUS_INVALID_VALUE;
  // The handle.
  EXPECT_EQ(call(nullptr, N, N, m, n, k, &one, m, k, &zero, C.get(), m), CUBLAS_STATUS_NOT_INITIALIZED);
#ifdef SIM_EMULATOR  // a destroyed handle is undefined behaviour on a GPU; the emulator catches it
  cublasHandle_t gone = nullptr;
  ASSERT_EQ(cublasCreate(&gone), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(gone), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(call(gone, N, N, m, n, k, &one, m, k, &zero, C.get(), m), CUBLAS_STATUS_NOT_INITIALIZED);
#endif
  // Sizes and operations.
  EXPECT_EQ(call(h_, N, N, -1, n, k, &one, m, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, -1, k, &one, m, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, n, -1, &one, m, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, CUBLAS_OP_CONJG, N, m, n, k, &one, m, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, cublasOperation_t(7), m, n, k, &one, m, k, &zero, C.get(), m), IV);
  // Leading dimensions: rows of the stored A (m for N, k for T), of B (k for N, n for T), C: m.
  EXPECT_EQ(call(h_, N, N, m, n, k, &one, m - 1, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, T, N, m, n, k, &one, k - 1, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, n, k, &one, m, k - 1, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, T, m, n, k, &one, m, n - 1, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, n, k, &one, m, k, &zero, C.get(), m - 1), IV);
  // max(1, .): a zero leading dimension is invalid even for an empty matrix.
  EXPECT_EQ(call(h_, N, N, 0, n, k, &one, 0, k, &zero, C.get(), 1), IV);
  EXPECT_EQ(call(h_, N, N, 0, n, k, &one, 1, k, &zero, C.get(), 0), IV);
  // Scalars and C.
  EXPECT_EQ(call(h_, N, N, m, n, k, nullptr, m, k, &zero, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, n, k, &one, m, k, nullptr, C.get(), m), IV);
  EXPECT_EQ(call(h_, N, N, m, n, k, &one, m, k, &zero, nullptr, m), IV);
  // A valid leading dimension larger than the rows is fine (T: lda >= k even though m < k).
  EXPECT_EQ(call(h_, T, N, m - 2, n, k, &zero, k, k, &one, C.get(), m), CUBLAS_STATUS_SUCCESS);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(C.download(), c0) << "a refused (or beta = 1, alpha = 0) call changed C";
  // Quick returns: an empty C is a no-op even with null matrices.
  EXPECT_EQ(cublasSgemm(h_, N, N, 0, n, k, &one, nullptr, 1, nullptr, k, &zero, nullptr, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm(h_, N, N, m, 0, k, &one, nullptr, m, nullptr, k, &zero, nullptr, m),
            CUBLAS_STATUS_SUCCESS);
  // The double entry point makes the same checks.
  const double d1 = 1.0;
  EXPECT_EQ(cublasDgemm(nullptr, N, N, 1, 1, 1, &d1, nullptr, 1, nullptr, 1, &d1, nullptr, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDgemm(h_, N, N, 2, 1, 1, &d1, nullptr, 1, nullptr, 1, &d1, nullptr, 2), IV);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // refusals are cuBLAS statuses, not CUDA errors
}

TEST_F(SimCublas, HandleCallsCheckTheHandleAndTheirArguments) {
  const cublasStatus_t NI = CUBLAS_STATUS_NOT_INITIALIZED, IV = CUBLAS_STATUS_INVALID_VALUE;
  cudaStream_t s = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
  EXPECT_EQ(cublasCreate(nullptr), IV);
  EXPECT_EQ(cublasDestroy(nullptr), NI);
  EXPECT_EQ(cublasSetStream(nullptr, nullptr), NI);
  EXPECT_EQ(cublasGetStream(nullptr, &s), NI);
  EXPECT_EQ(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH), NI);
  EXPECT_EQ(cublasGetMathMode(nullptr, &math), NI);
  EXPECT_EQ(cublasSetPointerMode(nullptr, CUBLAS_POINTER_MODE_HOST), NI);
  EXPECT_EQ(cublasGetPointerMode(nullptr, &pm), NI);
  EXPECT_EQ(cublasSetWorkspace(nullptr, nullptr, 0), NI);
  EXPECT_EQ(cublasGetStream(h_, nullptr), IV);
  EXPECT_EQ(cublasGetMathMode(h_, nullptr), IV);
  EXPECT_EQ(cublasGetPointerMode(h_, nullptr), IV);
  EXPECT_EQ(cublasSetPointerMode(h_, cublasPointerMode_t(2)), IV);
  EXPECT_EQ(cublasSetMathMode(h_, cublasMath_t(32)), IV);  // not one of cuBLAS 13's mode bits

  // Defaults, then every setter read back.
  ASSERT_EQ(cublasGetStream(h_, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, nullptr);
  ASSERT_EQ(cublasGetMathMode(h_, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, CUBLAS_DEFAULT_MATH);
  ASSERT_EQ(cublasGetPointerMode(h_, &pm), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(pm, CUBLAS_POINTER_MODE_HOST);
  cudaStream_t mine = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&mine));
  EXPECT_EQ(cublasSetStream(h_, mine), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetStream(h_, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, mine);
  const cublasMath_t tf32_strict =
      cublasMath_t(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  EXPECT_EQ(cublasSetMathMode(h_, tf32_strict), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetMathMode(h_, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, tf32_strict);
  // Any combination of the mode bits is kept (cuBLAS 13.0 on an H200,
  // bench/results/h200-2026-11-25/).
  EXPECT_EQ(cublasSetMathMode(h_, cublasMath_t(5)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetMathMode(h_, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, cublasMath_t(5));
  EXPECT_EQ(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetPointerMode(h_, &pm), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(pm, CUBLAS_POINTER_MODE_DEVICE);
  DeviceBuffer<char> ws(1 << 16);
  EXPECT_EQ(cublasSetWorkspace(h_, ws.get(), ws.bytes()), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ws.get()) % 256, 0u);  // cudaMalloc's alignment
  // Documented as 256-byte aligned, but not checked: cuBLAS 13.0 on an H200 accepted this.
  EXPECT_EQ(cublasSetWorkspace(h_, ws.get() + 16, ws.bytes() - 16), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetStream(h_, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_CUDA_OK(cudaStreamDestroy(mine));

#ifdef SIM_EMULATOR
  // A destroyed handle is refused everywhere (undefined behaviour on a GPU).
  cublasHandle_t gone = nullptr;
  ASSERT_EQ(cublasCreate(&gone), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(gone), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(gone), NI);
  EXPECT_EQ(cublasSetStream(gone, nullptr), NI);
  EXPECT_EQ(cublasGetMathMode(gone, &math), NI);
#endif

  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_STRNE(cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED), "");
}

// ---- results -------------------------------------------------------------------------------

// A 2x3 times 3x2 product small enough to check by hand: column-major storage, as in BLAS.
TEST_F(SimCublas, ColumnMajorByHand) {
  // A = [1 3 5; 2 4 6] stored by columns; B = [1 0; 0 1; 0 1] stored by columns.
  DeviceBuffer<float> A(std::vector<float>{1, 2, 3, 4, 5, 6}), B(std::vector<float>{1, 0, 0, 0, 1, 1});
  DeviceBuffer<float> C(4);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A.get(), 2, B.get(), 3, &zero,
                        C.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.download(), (std::vector<float>{1, 2, 8, 10}));  // columns A(:,1), A(:,2) + A(:,3)
  // A^T B^T with the same storage read transposed: A^T is 3x2, B^T is 2x3, C is 3x3.
  DeviceBuffer<float> C3(9);
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_T, CUBLAS_OP_T, 3, 3, 2, &one, A.get(), 2, B.get(), 3, &zero,
                        C3.get(), 3),
            CUBLAS_STATUS_SUCCESS);
  // (A^T B^T)(i, j) = sum_p A(p, i) B(j, p)
  EXPECT_EQ(C3.download(), (std::vector<float>{1, 3, 5, 2, 4, 6, 2, 4, 6}));
}

TEST_F(SimCublas, AllOpsAndPaddedLeadingDimensionsMatchANaiveLoop) {
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  const int shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {17, 4, 9}, {33, 20, 65}};
  unsigned seed = 1;
  for (const auto& s : shapes)
    for (cublasOperation_t ta : ops)
      for (cublasOperation_t tb : ops)
        for (int pad : {0, 3}) {
          const double alpha = seed % 2 ? 1.5 : -0.75, beta = seed % 3 ? -0.5 : 0.0;
          const std::string what = "m,n,k=" + std::to_string(s[0]) + "," + std::to_string(s[1]) +
                                   "," + std::to_string(s[2]) + " ops=" + std::to_string(ta) +
                                   std::to_string(tb) + " pad=" + std::to_string(pad);
          Problem<float> pf(ta, tb, s[0], s[1], s[2], pad, alpha, beta, seed);
          EXPECT_EQ(mismatches(pf, run_problem(h_, pf), "float " + what), 0);
          Problem<double> pd(ta, tb, s[0], s[1], s[2], pad, alpha, beta, seed);
          EXPECT_EQ(mismatches(pd, run_problem(h_, pd), "double " + what), 0);
          ++seed;
        }
}

TEST_F(SimCublas, BetaZeroNeverReadsC) {
  const int m = 6, n = 5, k = 4, ldc = 8;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer<float> A(simtest::random_floats(m * k, 3)), B(simtest::random_floats(k * n, 4));
  const std::vector<float> nans(ldc * n, nan);
  DeviceBuffer<float> C(nans);
  const float two = 2.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &two, A.get(), m, B.get(), k, &zero,
                        C.get(), ldc),
            CUBLAS_STATUS_SUCCESS);
  Problem<float> p(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, 0, 2.0, 0.0, 1);
  p.A = A.download();
  p.B = B.download();
  p.C = nans;
  p.ldc = ldc;
  EXPECT_EQ(mismatches(p, C.download(), "beta = 0, C full of NaN"), 0);  // padding keeps its NaN
  // alpha = 0 and beta = 0: exact zeros, whatever A, B and C hold; k = 0 likewise.
  DeviceBuffer<float> C2(nans);
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &zero, A.get(), m, B.get(), k, &zero,
                        C2.get(), m),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> got = C2.download();
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + m * n), std::vector<float>(m * n, 0.0f));
  DeviceBuffer<double> D(std::vector<double>(m * n, std::numeric_limits<double>::quiet_NaN()));
  const double one = 1.0, dzero = 0.0;
  ASSERT_EQ(cublasDgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, 0, &one, nullptr, m, nullptr, 1, &dzero,
                        D.get(), m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(D.download(), std::vector<double>(m * n, 0.0));
  // k = 0 with beta != 0 scales C.
  DeviceBuffer<double> E(std::vector<double>(m * n, 3.0));
  const double half = 0.5;
  ASSERT_EQ(cublasDgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, 0, &one, nullptr, m, nullptr, 1, &half,
                        E.get(), m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(E.download(), std::vector<double>(m * n, 1.5));
}

TEST_F(SimCublas, DevicePointerModeReadsTheScalarsFromDeviceMemory) {
  Problem<float> p(CUBLAS_OP_T, CUBLAS_OP_N, 9, 6, 7, 1, 1.25, -2.0, 11);
  DeviceBuffer<float> A(p.A), B(p.B), C(p.C);
  DeviceBuffer<float> scalars(std::vector<float>{1.25f, -2.0f});
  ASSERT_EQ(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(h_, p.ta, p.tb, p.m, p.n, p.k, scalars.get(), A.get(), p.lda, B.get(), p.ldb,
                        scalars.get() + 1, C.get(), p.ldc),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(mismatches(p, C.download(), "device pointer mode"), 0);
}

// ---- streams, graphs, cudaMemcpy2DAsync ----------------------------------------------------

// Captured on the handle's stream: nothing runs at capture, each replay runs the GEMM with the
// arguments (host-mode scalars included) as they were at capture.
TEST_F(SimCublas, CapturedIntoAGraphAndReplayed) {
  Problem<float> p(CUBLAS_OP_N, CUBLAS_OP_T, 8, 5, 6, 2, 1.0, 1.0, 21);
  DeviceBuffer<float> A(p.A), B(p.B), C(p.C);
  cudaStream_t s = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&s));
  ASSERT_EQ(cublasSetStream(h_, s), CUBLAS_STATUS_SUCCESS);
  float alpha = 1.0f, beta = 1.0f;  // C += A B^T
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cublasSgemm(h_, p.ta, p.tb, p.m, p.n, p.k, &alpha, A.get(), p.lda, B.get(), p.ldb,
                        &beta, C.get(), p.ldc),
            CUBLAS_STATUS_SUCCESS);
  alpha = 100.0f;  // taken at the call
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  ASSERT_CUDA_OK(cudaGraphGetNodes(g, nullptr, &nodes));
  EXPECT_EQ(nodes, 1u);
  EXPECT_EQ(C.download(), p.C) << "the GEMM ran during the capture";
  cudaGraphExec_t x = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, s));
  ASSERT_CUDA_OK(cudaStreamSynchronize(s));
  const std::vector<float> once = C.download();
  EXPECT_EQ(mismatches(p, once, "first replay"), 0);
  ASSERT_CUDA_OK(cudaGraphLaunch(x, s));
  ASSERT_CUDA_OK(cudaStreamSynchronize(s));
  Problem<float> twice = p;  // C + 2 A B^T = (C + A B^T) + A B^T
  twice.C = once;
  EXPECT_EQ(mismatches(twice, C.download(), "second replay"), 0);
  EXPECT_CUDA_OK(cudaGraphExecDestroy(x));
  EXPECT_CUDA_OK(cudaGraphDestroy(g));
  EXPECT_EQ(cublasSetStream(h_, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
}

TEST_F(SimCublas, Memcpy2DAsyncCopiesAPaddedBlockOnItsStream) {
  // 3 rows of 4 floats out of a 6-wide source into a 5-wide destination.
  std::vector<float> src(6 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i);
  DeviceBuffer<float> s(src), d(std::vector<float>(5 * 3, -1.0f));
  cudaStream_t st = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&st));
  ASSERT_CUDA_OK(cudaMemcpy2DAsync(d.get(), 5 * sizeof(float), s.get(), 6 * sizeof(float),
                                   4 * sizeof(float), 3, cudaMemcpyDeviceToDevice, st));
  ASSERT_CUDA_OK(cudaStreamSynchronize(st));
  EXPECT_EQ(d.download(), (std::vector<float>{0, 1, 2, 3, -1, 6, 7, 8, 9, -1, 12, 13, 14, 15, -1}));
  // Refused at the call: a width wider than a pitch, a bad kind.
  EXPECT_EQ(cudaMemcpy2DAsync(d.get(), 2 * sizeof(float), s.get(), 6 * sizeof(float),
                              4 * sizeof(float), 3, cudaMemcpyDeviceToDevice, st),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DAsync(d.get(), 5 * sizeof(float), s.get(), 6 * sizeof(float),
                              4 * sizeof(float), 3, cudaMemcpyKind(9), st),
            cudaErrorInvalidMemcpyDirection);
  (void)cudaGetLastError();
  // Captured: runs only when the graph does.
  DeviceBuffer<float> d2(std::vector<float>(4 * 3, 0.0f));
  ASSERT_CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  ASSERT_CUDA_OK(cudaMemcpy2DAsync(d2.get(), 4 * sizeof(float), s.get(), 6 * sizeof(float),
                                   4 * sizeof(float), 3, cudaMemcpyDeviceToDevice, st));
  cudaGraph_t g = nullptr;
  ASSERT_CUDA_OK(cudaStreamEndCapture(st, &g));
  EXPECT_EQ(d2.download(), std::vector<float>(12, 0.0f));
  cudaGraphExec_t x = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(x, st));
  ASSERT_CUDA_OK(cudaStreamSynchronize(st));
  EXPECT_EQ(d2.download(), (std::vector<float>{0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15}));
  EXPECT_CUDA_OK(cudaGraphExecDestroy(x));
  EXPECT_CUDA_OK(cudaGraphDestroy(g));
  EXPECT_CUDA_OK(cudaStreamDestroy(st));
}

#ifdef SIM_EMULATOR
// ---- emulator only: lazy streams, fault reports, TF32 --------------------------------------

// What device memory holds, read without a CUDA call (after a fault every call fails).
template <class T>
T peek(const T* p, int i) {
  return static_cast<const T*>(sim::device_view(p))[i];
}

class SimCublasLazy : public SimCublas {
 protected:
  void SetUp() override {
    SimCublas::SetUp();
    saved_ = sim::stream_mode();
    sim::set_stream_mode(sim::StreamMode::Lazy);
    ASSERT_CUDA_OK(cudaStreamCreate(&s_));
    ASSERT_CUDA_OK(cudaStreamCreate(&other_));
  }
  void TearDown() override {
    (void)cudaGetLastError();
    cudaStreamDestroy(s_);
    cudaStreamDestroy(other_);
    sim::set_stream_mode(saved_);
    SimCublas::TearDown();
  }
  // What device memory holds now, read by a copy on the other stream: forces that stream
  // only, so it shows what has run on s_ without synchronising it.
  template <class T>
  std::vector<T> seen(const DeviceBuffer<T>& b) {
    std::vector<T> host(b.size());
    EXPECT_CUDA_OK(cudaMemcpyAsync(host.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost, other_));
    EXPECT_CUDA_OK(cudaStreamSynchronize(other_));
    return host;
  }
  sim::StreamMode saved_ = sim::StreamMode::Sync;
  cudaStream_t s_ = nullptr, other_ = nullptr;
};

__global__ void fill_kernel(float* v, int n, float value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = value;
}

TEST_F(SimCublasLazy, QueuedOnTheHandlesStreamInOrderWithKernels) {
  const int m = 3, n = 2, k = 4;
  DeviceBuffer<float> A(std::vector<float>(m * k, 1.0f)), B(std::vector<float>(k * n, 1.0f));
  DeviceBuffer<float> C(std::vector<float>(m * n, -1.0f));
  ASSERT_EQ(cublasSetStream(h_, s_), CUBLAS_STATUS_SUCCESS);
  fill_kernel<<<1, 32, 0, s_>>>(B.get(), k * n, 2.0f);  // queued before the GEMM on s_
  float alpha = 1.0f;
  const float zero = 0.0f;
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.get(), m, B.get(), k,
                        &zero, C.get(), m),
            CUBLAS_STATUS_SUCCESS);
  alpha = 10.0f;  // host pointer mode: the value at the call counts
  EXPECT_EQ(seen(C), std::vector<float>(m * n, -1.0f)) << "the GEMM ran before a sync";
  ASSERT_CUDA_OK(cudaStreamSynchronize(s_));
  EXPECT_EQ(seen(C), std::vector<float>(m * n, 8.0f));  // sum over k of 1 * 2, after the fill
}

TEST_F(SimCublasLazy, DeviceScalarsAreReadWhenTheGemmRuns) {
  DeviceBuffer<float> A(std::vector<float>{2.0f}), B(std::vector<float>{3.0f}), C(1);
  DeviceBuffer<float> scalars(std::vector<float>{1.0f, 0.0f});
  ASSERT_EQ(cublasSetStream(h_, s_), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, scalars.get(), A.get(), 1, B.get(),
                        1, scalars.get() + 1, C.get(), 1),
            CUBLAS_STATUS_SUCCESS);
  // alpha changes on another stream before s_ runs: the GEMM sees the new value.
  const float five = 5.0f;
  ASSERT_CUDA_OK(cudaMemcpyAsync(scalars.get(), &five, sizeof five, cudaMemcpyHostToDevice, other_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(other_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(s_));
  EXPECT_EQ(C.download()[0], 30.0f);
}

TEST_F(SimCublasLazy, DestroyingTheHandleSynchronises) {
  DeviceBuffer<float> A(std::vector<float>{2.0f}), B(std::vector<float>{3.0f}), C(1);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSetStream(h_, s_), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.get(), 1, B.get(), 1, &zero,
                        C.get(), 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(std::isnan(seen(C)[0]));  // fresh device memory is NaN; not run yet
  ASSERT_EQ(cublasDestroy(h_), CUBLAS_STATUS_SUCCESS);
  h_ = nullptr;
  EXPECT_EQ(seen(C)[0], 6.0f);
}

// A host matrix is an illegal address on a GPU: reported like a kernel's host-pointer argument.
TEST_F(SimCublas, HostMatrixIsAnIllegalAddress) {
  std::vector<float> host_a(16, 1.0f);
  DeviceBuffer<float> B(std::vector<float>(16, 1.0f)), C(std::vector<float>(16, 7.0f));
  const float one = 1.0f, zero = 0.0f;
  // The launch itself succeeds; the fault is the GEMM's, asynchronous as on a GPU.
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, host_a.data(), 4, B.get(), 4,
                        &zero, C.get(), 4),
            CUBLAS_STATUS_SUCCESS);
  const std::string fault = sim::last_fault();
  EXPECT_TRUE(simtest::contains(fault, "cublasSgemm argument A (const float*)")) << fault;
  EXPECT_TRUE(simtest::contains(fault, "is not a device pointer (host memory?)")) << fault;
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);  // sticky
  // Later calls cannot launch.
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, B.get(), 4, B.get(), 4, &zero,
                        C.get(), 4),
            CUBLAS_STATUS_EXECUTION_FAILED);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(peek(C.get(), i), 7.0f) << "written by a faulting GEMM";
  sim::reset();
}

TEST_F(SimCublas, MatrixRunningPastItsAllocationIsAnIllegalAddress) {
  DeviceBuffer<float> B(std::vector<float>(16, 1.0f)), C(std::vector<float>(16, 7.0f));
  const float one = 1.0f, zero = 0.0f;
  // The last column only needs its own rows: 3 columns of lda 5 plus 4 rows = 19 floats, not
  // lda x 4 = 20, is enough.
  DeviceBuffer<float> A19(std::vector<float>(19, 1.0f));
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A19.get(), 5, B.get(), 4,
                        &zero, C.get(), 4),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(sim::last_fault(), "");
  EXPECT_EQ(C.download(), std::vector<float>(16, 4.0f));
  // 4x4 with lda 4 needs 16 floats; this A has 15.
  DeviceBuffer<float> A15(std::vector<float>(15, 1.0f));
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A15.get(), 4, B.get(), 4,
                        &zero, C.get(), 4),
            CUBLAS_STATUS_SUCCESS);
  const std::string fault = sim::last_fault();
  EXPECT_TRUE(simtest::contains(fault, "cublasSgemm argument A (const float*)")) << fault;
  EXPECT_TRUE(simtest::contains(fault, "runs past the end of its allocation")) << fault;
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  sim::reset();
}

// C is written: checked like A and B (here: too small for its 2 x 3 block at ldc 2), and left
// unwritten; B transposed is read as n x k.
TEST_F(SimCublas, OutputMatrixPastItsAllocationIsAnIllegalAddress) {
  DeviceBuffer<float> A(std::vector<float>(2 * 4, 1.0f)), B(std::vector<float>(3 * 4, 1.0f));
  DeviceBuffer<float> C(std::vector<float>(5, 7.0f));
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_T, 2, 3, 4, &one, A.get(), 2, B.get(), 3, &zero,
                        C.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  const std::string fault = sim::last_fault();
  EXPECT_TRUE(simtest::contains(fault, "cublasSgemm argument C (float*)")) << fault;
  EXPECT_TRUE(simtest::contains(fault, "2 x 3 matrix written there")) << fault;
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(peek(C.get(), i), 7.0f);
  sim::reset();
}

// The handle's stream was destroyed (undefined behaviour on a GPU): the GEMM cannot launch.
TEST_F(SimCublas, DestroyedStreamCannotLaunch) {
  DeviceBuffer<float> A(std::vector<float>(4, 1.0f)), C(std::vector<float>(4, 7.0f));
  const float one = 1.0f;
  cudaStream_t s = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&s));
  ASSERT_CUDA_OK(cudaStreamDestroy(s));
  ASSERT_EQ(cublasSetStream(h_, s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.get(), 2, A.get(), 2, &one,
                        C.get(), 2),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(C.download(), std::vector<float>(4, 7.0f));
}

// A handle kept across cudaDeviceReset points at freed device state (on an H200 its next
// cublasSgemm failed with status 13 and a later kernel faulted): refused with a line saying so,
// while cublasDestroy still takes it and a new handle works.
TEST_F(SimCublas, HandleFromBeforeAResetIsRefusedAfterIt) {
  const float one = 1.0f;
  ASSERT_CUDA_OK(cudaDeviceReset());
  DeviceBuffer<float> A(std::vector<float>(4, 1.0f)), C(std::vector<float>(4, 7.0f));
  sim::set_fault_mode(sim::FaultMode::Abort);  // a refused call prints, never aborts
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.get(), 2, A.get(), 2, &one,
                        C.get(), 2),
            CUBLAS_STATUS_EXECUTION_FAILED);
  const std::string err = ::testing::internal::GetCapturedStderr();
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_TRUE(simtest::contains(err, "created before a cudaDeviceReset")) << err;
  EXPECT_EQ(C.download(), std::vector<float>(4, 7.0f));
  EXPECT_EQ(cublasSetStream(h_, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(h_), CUBLAS_STATUS_SUCCESS);
  h_ = nullptr;
  ASSERT_EQ(cublasCreate(&h_), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.get(), 2, A.get(), 2, &one,
                        C.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.download(), std::vector<float>(4, 9.0f));
}

TEST_F(SimCublas, MisalignedMatrixIsAMisalignedAddress) {
  DeviceBuffer<float> A(std::vector<float>(5, 1.0f)), C(std::vector<float>(4, 7.0f));
  const float one = 1.0f, zero = 0.0f;
  const float* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(A.get()) + 2);
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, odd, 2, A.get(), 2, &zero,
                        C.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  const std::string fault = sim::last_fault();
  EXPECT_TRUE(simtest::contains(fault, "argument A (const float*)")) << fault;
  EXPECT_TRUE(simtest::contains(fault, "is not aligned to 4 bytes")) << fault;
  EXPECT_EQ(cudaGetLastError(), cudaErrorMisalignedAddress);
  sim::reset();
}

TEST_F(SimCublas, HostScalarInDevicePointerModeIsAnIllegalAddress) {
  DeviceBuffer<float> A(std::vector<float>(4, 1.0f)), C(std::vector<float>(4, 7.0f));
  const float one = 1.0f;
  DeviceBuffer<float> dzero(std::vector<float>{0.0f});
  ASSERT_EQ(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.get(), 2, A.get(), 2,
                        dzero.get(), C.get(), 2),
            CUBLAS_STATUS_SUCCESS);
  const std::string fault = sim::last_fault();
  EXPECT_TRUE(simtest::contains(fault, "cublasSgemm argument alpha (const float*)")) << fault;
  EXPECT_TRUE(simtest::contains(fault, "is not a device pointer")) << fault;
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(peek(C.get(), i), 7.0f);
  sim::reset();
}
// ---- math mode -----------------------------------------------------------------------------

// TF32 keeps 10 mantissa bits: 1 + 2^-20 becomes 1 when rounded, not in FP32 or FP64. (Emulator
// only: on a GPU, TF32 math allows tensor cores but a tiny GEMM may not use them.)
TEST_F(SimCublas, Tf32MathRoundsSingleInputsOnly) {
  const float x = 1.0f + std::ldexp(1.0f, -20);
  DeviceBuffer<float> A(std::vector<float>{x}), B(std::vector<float>{1.0f}), C(1);
  const float one = 1.0f, zero = 0.0f;
  auto run = [&] {
    EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.get(), 1, B.get(), 1,
                          &zero, C.get(), 1),
              CUBLAS_STATUS_SUCCESS);
    return C.download()[0];
  };
  EXPECT_EQ(run(), x);  // default math: FP32
  ASSERT_EQ(cublasSetMathMode(h_, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(run(), x);
  ASSERT_EQ(cublasSetMathMode(h_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(run(), 1.0f);
  // Round to nearest: 1 + 2^-11 + 2^-20 is nearer to 1 + 2^-10 than to 1.
  const float y = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20);
  ASSERT_CUDA_OK(cudaMemcpy(A.get(), &y, sizeof y, cudaMemcpyHostToDevice));
  EXPECT_EQ(run(), 1.0f + std::ldexp(1.0f, -10));
  // Double precision is never TF32.
  const double dx = 1.0 + std::ldexp(1.0, -40), done = 1.0, dzero = 0.0;
  DeviceBuffer<double> dA(std::vector<double>{dx}), dB(std::vector<double>{1.0}), dC(1);
  ASSERT_EQ(cublasDgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &done, dA.get(), 1, dB.get(), 1,
                        &dzero, dC.get(), 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(dC.download()[0], dx);
  // NVIDIA_TF32_OVERRIDE=0 turns TF32 off, as the driver documents.
  ASSERT_CUDA_OK(cudaMemcpy(A.get(), &x, sizeof x, cudaMemcpyHostToDevice));
  ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  EXPECT_EQ(run(), x);
  ::unsetenv("NVIDIA_TF32_OVERRIDE");
  EXPECT_EQ(run(), 1.0f);
}

// The emulator's answer (EXECUTION_FAILED, the capture invalidated) to a GEMM on the legacy
// stream during a global capture; on a GPU the launch inside cuBLAS is refused likewise.
TEST_F(SimCublas, LegacyStreamGemmDuringAGlobalCaptureIsRefused) {
  DeviceBuffer<float> A(std::vector<float>(4, 1.0f)), C(std::vector<float>(4, 0.0f));
  cudaStream_t s = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&s));
  const float one = 1.0f;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  // The handle is on the legacy stream, which would make the capture depend on outside work.
  EXPECT_EQ(cublasSgemm(h_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.get(), 2, A.get(), 2, &one,
                        C.get(), 2),
            CUBLAS_STATUS_EXECUTION_FAILED);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  EXPECT_EQ(C.download(), std::vector<float>(4, 0.0f));
  EXPECT_CUDA_OK(cudaStreamDestroy(s));
}

#endif  // SIM_EMULATOR

}  // namespace
