// The emulator's initcheck (reads of never-written device memory): never written, past the
// written part, carried by device-to-device copies, exact per byte, atomics, cuBLAS output and
// device_view as writers, initcheck off; then launches on freed memory and double cudaFree.
#ifdef SIM_EMULATOR
#include <cublas_v2.h>
#endif

#include "sim_checks_util.h"

#ifdef SIM_EMULATOR

namespace {

__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }

// ---- initcheck ----

TEST_F(SimChecks, ReadOfNeverWrittenMemoryIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(64), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), 5, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_EQ(f.again, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'read_at_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 20 of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kReadAtLine))) << f.msg << "\nshould name the load's line " << kReadAtLine;
}

TEST_F(SimChecks, ReadPastTheWrittenPartIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head(8, 1.0f);
    const cudaError_t e = cudaMemcpy(p.get(), head.data(), 8 * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return e;
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 9, out.get());  // element 8 was never written
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 32 ")) << f.msg;
}

TEST_F(SimChecks, DeviceToDeviceCopyCarriesTheUnwrittenState) {
  SKIP_WITHOUT_CHECKS();
  std::string addr;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> a(16), b(16), out(1);
    addr = addr_of(b.get());
    EXPECT_CUDA_OK(cudaMemset(a.get(), 0, 8 * sizeof(float)));  // the first half of a
    EXPECT_CUDA_OK(cudaMemcpy(b.get(), a.get(), a.bytes(), cudaMemcpyDeviceToDevice));
    sum_range_kernel<<<1, 1>>>(b.get(), 0, 8, out.get());  // b's copied written half
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    sum_range_kernel<<<1, 1>>>(b.get(), 8, 9, out.get());  // b's copied unwritten half
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 32 of cudaMalloc allocation " + addr)) << f.msg;
}

__global__ void write_floats_kernel(float* p, int lo, int hi) {
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += blockDim.x) p[i] = 1.0f;
}
__global__ void write_bytes_kernel(unsigned char* p, int n) {
  if (static_cast<int>(threadIdx.x) < n) p[threadIdx.x] = 7;
}
__global__ void read_byte_kernel(const unsigned char* p, int i, unsigned char* out) {
  if (threadIdx.x == 0) out[0] = p[i];
}

// The written state is per byte, also inside one 8-byte granule of the inline checks' shadow.
TEST_F(SimChecks, InitcheckIsExactInsideEightByteGranules) {
  SKIP_WITHOUT_CHECKS();
  {  // 3 floats copied in: the second granule is half written
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head = {1, 2, 3};
    ASSERT_CUDA_OK(cudaMemcpy(p.get(), head.data(), sizeof(float) * 3, cudaMemcpyHostToDevice));
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 3, out.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 6.0f);
  }
  Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head = {1, 2, 3};
    EXPECT_CUDA_OK(cudaMemcpy(p.get(), head.data(), sizeof(float) * 3, cudaMemcpyHostToDevice));
    read_at_kernel<<<1, 1>>>(p.get(), 3, out.get());  // the unwritten half of that granule
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "byte offset 12 ")) << f.msg;
  {  // a kernel writes only element 1: the second half of the first granule
    DeviceBuffer<float> p(4), out(1);
    write_floats_kernel<<<1, 1>>>(p.get(), 1, 2);
    ASSERT_LAUNCH_OK();
    read_at_kernel<<<1, 1>>>(p.get(), 1, out.get());
    ASSERT_LAUNCH_OK();
  }
  f = run_faulting([] {
    DeviceBuffer<float> p(4), out(1);
    write_floats_kernel<<<1, 1>>>(p.get(), 1, 2);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    read_at_kernel<<<1, 1>>>(p.get(), 0, out.get());  // its unwritten first half
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "byte offset 0 ")) << f.msg;
  {  // 7 of 8 bytes written by single-byte stores
    DeviceBuffer<unsigned char> p(8), out(1);
    write_bytes_kernel<<<1, 32>>>(p.get(), 7);
    ASSERT_LAUNCH_OK();
    read_byte_kernel<<<1, 1>>>(p.get(), 6, out.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 7);
  }
  f = run_faulting([] {
    DeviceBuffer<unsigned char> p(8), out(1);
    write_bytes_kernel<<<1, 32>>>(p.get(), 7);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    read_byte_kernel<<<1, 1>>>(p.get(), 7, out.get());  // the 8th byte
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "1 bytes at byte offset 7 ")) << f.msg;
}

TEST_F(SimChecks, AtomicOnNeverWrittenCounterIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<int> counter(1);
    count_kernel<<<1, 32>>>(counter.get());  // forgot the cudaMemset(counter, 0)
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  DeviceBuffer<int> zeroed(1);
  ASSERT_CUDA_OK(zeroed.fill_bytes(0));
  count_kernel<<<2, 32>>>(zeroed.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(zeroed.download()[0], 64);
}

// C = A * B with beta = 0 into a C with 2 padding rows per column; then sums C[lo..hi).
cudaError_t gemm_then_sum(int lo, int hi, float* sum) {
  const int m = 3, n = 2, k = 4, ldc = m + 2;
  DeviceBuffer<float> A(std::vector<float>(m * k, 1.0f)), B(std::vector<float>(k * n, 2.0f));
  DeviceBuffer<float> C(ldc * n), out(1);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.get(), m, B.get(), k,
                                       &beta, C.get(), ldc);
  cublasDestroy(h);
  if (s != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  sum_range_kernel<<<1, 1>>>(C.get(), lo, hi, out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) *sum = out.download()[0];
  return e;
}

TEST_F(SimChecks, CublasOutputCountsAsWrittenButNotItsPadding) {
  float sum = 0.0f;
  ASSERT_CUDA_OK(gemm_then_sum(0, 3, &sum));  // column 0
  EXPECT_EQ(sum, 24.0f);
  ASSERT_CUDA_OK(gemm_then_sum(5, 8, &sum));  // column 1
  EXPECT_EQ(sum, 24.0f);
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([&] { return gemm_then_sum(0, 4, &sum); });  // column 0's first padding row
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 12 ")) << f.msg;
}

TEST_F(SimChecks, DeviceViewCountsTheWholeAllocationAsWritten) {
  SKIP_WITHOUT_CHECKS();  // it proves that initcheck stays silent: nothing to prove without it
  DeviceBuffer<float> p(32), out(1);
  (void)sim::device_view(p.get() + 5);  // what the emulated CUDA-aware MPI does with a buffer
  sum_range_kernel<<<1, 1>>>(p.get(), 0, 32, out.get());
  ASSERT_LAUNCH_OK();
}

TEST_F(SimChecks, InitcheckOffLetsUnwrittenReadsRun) {
  sim::set_initcheck(false);
  EXPECT_FALSE(sim::initcheck());
  {
    DeviceBuffer<float> p(8), out(1);
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 8, out.get());
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(sim::last_fault(), "");
  }
  sim::set_initcheck(true);
  EXPECT_TRUE(sim::initcheck());
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(8), out(1);
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 8, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
}

// ---- freed memory ----

TEST_F(SimChecks, LaunchOnFreedMemoryIsRefused) {
  int free_line = 0;
  const Fault f = run_faulting([&] {
    float* p = nullptr;
    EXPECT_CUDA_OK(cudaMalloc(&p, 256 * sizeof(float)));
    fill_kernel<<<1, 256>>>(p, 256, 1.0f);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_CUDA_OK(cudaFree(p));
    free_line = __LINE__ - 1;
    fill_kernel<<<1, 256>>>(p, 256, 2.0f);  // use after free
    return cudaGetLastError();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "kernel 'fill_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "freed device memory")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "freed by cudaFree")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(free_line))) << f.msg << "\nshould name the cudaFree's line " << free_line;
}

TEST_F(SimChecks, DoubleFreeIsInvalidValueAndNotSticky) {
  float* p = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&p, 64));
  ASSERT_CUDA_OK(cudaFree(p));
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_CUDA_OK(cudaGetLastError());  // not sticky: the program goes on
  DeviceBuffer<float> q(4);
  fill_kernel<<<1, 4>>>(q.get(), 4, 1.0f);
  ASSERT_LAUNCH_OK();
}

}  // namespace

#endif  // SIM_EMULATOR
