// The emulator's bounds checks of kernel loads and stores (sim/runtime/checks.cpp): shared-memory
// bounds (static arrays, dynamic shared memory, pointers derived from them, the red zone between
// two arrays), global bounds of cudaMalloc allocations and of __device__ variables; each fault with
// its error code and the message parts that locate it. Bounds stay checked with racecheck and
// initcheck off.
#include "sim_checks_util.h"

#ifdef SIM_EMULATOR

// A 16-entry lookup table (a __device__ variable: GCC's red zones bound it).
__device__ float sim_checks_lut[16];

namespace {

// ---- faulting kernels (the constants after each are the lines of its accesses) ----

__global__ void shared_oob_static_kernel(float* out) {
  __shared__ float cache[32];
  cache[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[0] = cache[0];
}
constexpr int kCacheStoreLine = __LINE__ - 4;

// Reads through a pointer derived from a shared array: tile + 4 + offset.
__global__ void shared_derived_kernel(const float* in, int offset, float* out) {
  __shared__ float tile[16];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  const float* p = tile + 4;
  if (threadIdx.x == 0) out[0] = p[offset];
}

// Two static arrays; thread 0 then writes first[i] or second[j] (out of bounds by the caller's
// choice, into the red zone between or around them).
__global__ void shared_two_arrays_kernel(int i, int j, float* out) {
  __shared__ float first[8];
  __shared__ float second[8];
  const int t = threadIdx.x;
  first[t] = 1.0f;
  second[t] = 2.0f;
  __syncthreads();
  if (t == 0) {
    first[i] = 3.0f;
    second[j] = 4.0f;
  }
  __syncthreads();
  out[t] = first[t] + second[t];
}

__global__ void write_at_kernel(float* p, long long i, float v) {
  if (threadIdx.x == 0) p[i] = v;
}

__global__ void lut_kernel(int i, float* out) {
  if (threadIdx.x == 0) out[0] = sim_checks_lut[i];
}

// ---- shared-memory bounds ----

TEST_F(SimChecks, StaticSharedArrayOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_static_kernel<<<1, 33>>>(out.get());  // thread 32 writes cache[32]
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_EQ(f.again, cudaErrorIllegalAddress);  // sticky
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'shared_oob_static_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of __shared__ 'cache' (128 bytes")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kCacheStoreLine))) << f.msg << "\nshould name the store's line " << kCacheStoreLine;
  DeviceBuffer<float> out(1);
  shared_oob_static_kernel<<<1, 32>>>(out.get());  // in bounds, after the reset
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 0.0f);
}

TEST_F(SimChecks, DynamicSharedOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_dynamic_kernel<<<1, 2, sizeof(float)>>>(out.get());  // room for one float, 2 threads
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'shared_oob_dynamic_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of the dynamic shared memory (4 bytes")) << f.msg;
  DeviceBuffer<float> out(1);
  shared_oob_dynamic_kernel<<<1, 2, 2 * sizeof(float)>>>(out.get());  // big enough
  ASSERT_LAUNCH_OK();
}

TEST_F(SimChecks, PointerDerivedFromSharedArrayIsBoundsChecked) {
  SKIP_WITHOUT_CHECKS();
  auto derived = [](int offset) {
    DeviceBuffer<float> in(std::vector<float>(16, 1.0f)), out(1);
    shared_derived_kernel<<<1, 16>>>(in.get(), offset, out.get());
    return cudaDeviceSynchronize();
  };
  Fault f = run_faulting([&] { return derived(-5); });  // tile[-1]
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of __shared__ 'tile'")) << f.msg;
  f = run_faulting([&] { return derived(14); });  // tile[18]: 8 bytes past the end
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "8 bytes past the end of __shared__ 'tile'")) << f.msg;
  EXPECT_CUDA_OK(derived(11));  // tile[15]: the last element
}

TEST_F(SimChecks, OverrunIntoTheRedZoneBetweenStaticArraysNamesTheOverrunArray) {
  SKIP_WITHOUT_CHECKS();
  auto two = [](int i, int j) {
    DeviceBuffer<float> out(8);
    shared_two_arrays_kernel<<<1, 8>>>(i, j, out.get());
    return cudaDeviceSynchronize();
  };
  Fault f = run_faulting([&] { return two(0, 11); });  // second[11]: 12 bytes past its end
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "12 bytes past the end of __shared__ 'second' (32 bytes")) << f.msg;
  f = run_faulting([&] { return two(-3, 0); });  // first[-3]: 12 bytes before its start
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "12 bytes before the start of __shared__ 'first' (32 bytes")) << f.msg;
  DeviceBuffer<float> out(8);
  shared_two_arrays_kernel<<<1, 8>>>(7, 7, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), (std::vector<float>{3, 3, 3, 3, 3, 3, 3, 7}));
}

// ---- global bounds ----

TEST_F(SimChecks, GlobalReadRightAfterTheEndIsReported) {
  SKIP_WITHOUT_CHECKS();
  std::string addr;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> p(std::vector<float>(100, 1.0f)), out(1);
    addr = addr_of(p.get());
    read_at_kernel<<<1, 1>>>(p.get(), 100, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_EQ(f.again, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'read_at_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of cudaMalloc allocation " + addr + " (400 bytes)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kReadAtLine))) << f.msg << "\nshould name the load's line " << kReadAtLine;
}

TEST_F(SimChecks, GlobalReadBeforeTheStartIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(100, 1.0f)), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), -1, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of cudaMalloc allocation")) << f.msg;
}

TEST_F(SimChecks, GlobalWritePastTheEndIsReportedAtTheAccess) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(10);
    write_at_kernel<<<1, 1>>>(p.get(), 12, 1.0f);  // 8 bytes past the end, inside the red zone
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "8 bytes past the end of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'write_at_kernel'")) << f.msg;
}

TEST_F(SimChecks, DeviceVariableOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  std::vector<float> table(16);
  std::iota(table.begin(), table.end(), 0.0f);
  ASSERT_CUDA_OK(cudaMemcpyToSymbol(sim_checks_lut, table.data(), sizeof(float) * 16));
  {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(15, out.get());  // the last entry
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 15.0f);
  }
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(16, out.get());  // one past the end
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of __device__ variable 'sim_checks_lut' (64 bytes")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'lut_kernel'")) << f.msg;
}

// ---- the other checks off ----

TEST_F(SimChecks, BoundsChecksStayOnWithRacecheckAndInitcheckOff) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck(false);
  sim::set_initcheck(false);
  Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), 16, out.get());  // unwritten and out of bounds
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_static_kernel<<<1, 33>>>(out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> in(std::vector<float>(16, 1.0f)), out(1);
    shared_derived_kernel<<<1, 16>>>(in.get(), -5, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of __shared__ 'tile'")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(16, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "__device__ variable 'sim_checks_lut'")) << f.msg;
}

}  // namespace

#endif  // SIM_EMULATOR
