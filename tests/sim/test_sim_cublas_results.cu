// The emulated cuBLAS (sim/runtime/cublas.cpp), its results: column-major GEMM by hand and for
// all op combinations and padded leading dimensions against a naive double-precision loop, beta
// == 0 never reading C, device pointer mode; the handle's stream honoured like a kernel's (graph
// capture and replay), and cudaMemcpy2DAsync, which gemm.cu's cuBLAS path uses. Valid CUDA.
#include "sim_cublas_util.h"

namespace {

using simtest::DeviceBuffer;

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

}  // namespace
