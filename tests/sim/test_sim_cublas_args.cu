// The emulated cuBLAS (sim/runtime/cublas.cpp), its argument checks: cuBLAS's documented
// numeric values and status codes for every argument check of cublasSgemm (C left alone), and the
// handle calls (stream, math mode, pointer mode, workspace) checking the handle and their
// arguments, defaults and setters read back. Valid CUDA; the destroyed-handle checks are the
// emulator's only.
#include "sim_cublas_util.h"

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

// A null handle is refused by every handle call (cublasCreate's null output is an invalid value);
// a good one refuses null outputs and modes that do not exist.
void expect_bad_handles_and_arguments_refused(cublasHandle_t h) {
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
  EXPECT_EQ(cublasGetStream(h, nullptr), IV);
  EXPECT_EQ(cublasGetMathMode(h, nullptr), IV);
  EXPECT_EQ(cublasGetPointerMode(h, nullptr), IV);
  EXPECT_EQ(cublasSetPointerMode(h, cublasPointerMode_t(2)), IV);
  EXPECT_EQ(cublasSetMathMode(h, cublasMath_t(32)), IV);  // not one of cuBLAS 13's mode bits
}

// Defaults, then every setter read back.
void expect_defaults_and_setters_read_back(cublasHandle_t h) {
  cudaStream_t s = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
  ASSERT_EQ(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, nullptr);
  ASSERT_EQ(cublasGetMathMode(h, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, CUBLAS_DEFAULT_MATH);
  ASSERT_EQ(cublasGetPointerMode(h, &pm), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(pm, CUBLAS_POINTER_MODE_HOST);
  cudaStream_t mine = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&mine));
  EXPECT_EQ(cublasSetStream(h, mine), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, mine);
  const cublasMath_t tf32_strict =
      cublasMath_t(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  EXPECT_EQ(cublasSetMathMode(h, tf32_strict), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetMathMode(h, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, tf32_strict);
  // Any combination of the mode bits is kept (cuBLAS 13.0 on an H200: sim/docs/faults.md).
  EXPECT_EQ(cublasSetMathMode(h, cublasMath_t(5)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetMathMode(h, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, cublasMath_t(5));
  EXPECT_EQ(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetPointerMode(h, &pm), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(pm, CUBLAS_POINTER_MODE_DEVICE);
  DeviceBuffer<char> ws(1 << 16);
  EXPECT_EQ(cublasSetWorkspace(h, ws.get(), ws.bytes()), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ws.get()) % 256, 0u);  // cudaMalloc's alignment
  // Documented as 256-byte aligned, but not checked: cuBLAS 13.0 on an H200 accepted this.
  EXPECT_EQ(cublasSetWorkspace(h, ws.get() + 16, ws.bytes() - 16), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetStream(h, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_CUDA_OK(cudaStreamDestroy(mine));
}

#ifdef SIM_EMULATOR
// A destroyed handle is refused everywhere (undefined behaviour on a GPU).
void expect_destroyed_handle_refused() {
  const cublasStatus_t NI = CUBLAS_STATUS_NOT_INITIALIZED;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasHandle_t gone = nullptr;
  ASSERT_EQ(cublasCreate(&gone), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(gone), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(gone), NI);
  EXPECT_EQ(cublasSetStream(gone, nullptr), NI);
  EXPECT_EQ(cublasGetMathMode(gone, &math), NI);
}
#endif

TEST_F(SimCublas, HandleCallsCheckTheHandleAndTheirArguments) {
  expect_bad_handles_and_arguments_refused(h_);
  ASSERT_NO_FATAL_FAILURE(expect_defaults_and_setters_read_back(h_));
#ifdef SIM_EMULATOR
  ASSERT_NO_FATAL_FAILURE(expect_destroyed_handle_refused());
#endif

  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_STRNE(cublasGetStatusString(CUBLAS_STATUS_EXECUTION_FAILED), "");
}

}  // namespace
