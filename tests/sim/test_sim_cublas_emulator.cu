// The emulated cuBLAS (sim/runtime/cublas.cpp), what only the emulator shows: GEMMs queued on
// lazy streams in order with kernels, device scalars read when the GEMM runs; faults reported
// like a kernel's (host, overrunning, misaligned matrices, host scalars in device pointer mode, a
// destroyed stream, a handle from before a reset), TF32 math and a legacy-stream GEMM during a
// global capture.
#include "sim_cublas_util.h"

namespace {

using simtest::DeviceBuffer;

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
