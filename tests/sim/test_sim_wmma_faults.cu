// WMMA (tensor cores) misuse the emulator reports as faults: a misaligned pointer, an ldm that is
// not a multiple of 16 bytes, lanes that pass different pointers, a divergent mma_sync (m16n16k8
// and m16n8k8), a partial warp, an out-of-bounds or uninitialised load, a store read by other
// lanes without __syncwarp. Emulator only.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm/mma_tf32.h"
#include "sim_wmma_util.h"

namespace {

using simtest::DeviceBuffer;

#ifdef SIM_EMULATOR

const std::string kThisFile = __FILE__;

// The ASan build (make test SANITIZE=1) has no per-access checks: simcc leaves the inline
// instrumentation out and ASan itself aborts on a poisoned read. Only that build links
// __asan_init (sim_checks_util.h does the same).
extern "C" void __asan_init() __attribute__((weak));
#define SKIP_WITHOUT_CHECKS()                                                                   \
  do {                                                                                         \
    if (&__asan_init != nullptr) GTEST_SKIP() << "no per-access checks under ASan (simcc leaves them out)"; \
  } while (0)

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The launch just made faulted with err (sticky) and a message holding every part. The caller
// resets the device once its buffers are gone.
void expect_fault(cudaError_t err, const std::vector<std::string>& parts) {
  const std::string fault = sim::last_fault();
  EXPECT_EQ(cudaDeviceSynchronize(), err) << fault;
  EXPECT_EQ(cudaGetLastError(), err) << "sticky: " << fault;
  for (const auto& p : parts) EXPECT_TRUE(contains(fault, p)) << "expected '" << p << "' in: " << fault;
}

// Race check on every launch and initcheck on while it lives (whatever SIM_RACECHECK and
// SIM_INITCHECK say), restored after.
struct ChecksOn {
  bool race = sim::racecheck(), init = sim::initcheck();
  ChecksOn() {
    sim::set_racecheck_all();
    sim::set_initcheck(true);
  }
  ~ChecksOn() {
    sim::set_racecheck(race);
    sim::set_initcheck(init);
  }
};

// Runs launch(p) on a zeroed 1024-float buffer, expects the fault, resets.
template <class Launch>
void fault_case(Launch launch, cudaError_t err, const std::vector<std::string>& parts) {
  {
    DeviceBuffer<float> p(1024);
    ASSERT_CUDA_OK(p.fill_bytes(0));
    launch(p.get());
    expect_fault(err, parts);
  }
  sim::reset();
  EXPECT_EQ(sim::last_fault(), "");
}

// mode 0: a pointer 16 bytes off a 32-byte boundary; 1: ldm = 6; 2: store misaligned;
// 3: store with ldm = 10; 4: the lanes' pointers differ; 5: accumulator load misaligned.
__global__ void bad_mem_kernel(float* p, int mode) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 1.0f);
  const int lane = threadIdx.x % 32;
  switch (mode) {
    case 0: wmma::load_matrix_sync(fa, p + 4, 8); break;
    case 1: wmma::load_matrix_sync(fa, p, 6); break;
    case 2: wmma::store_matrix_sync(p + 2, acc, 16, wmma::mem_row_major); break;
    case 3: wmma::store_matrix_sync(p, acc, 10, wmma::mem_col_major); break;
    case 4: wmma::load_matrix_sync(fa, p + (lane < 16 ? 0 : 8), 8); break;
    case 5: wmma::load_matrix_sync(acc, p + 1, 16, wmma::mem_row_major); break;
  }
  p[lane] = fa.x[0] + acc.x[0];
}

auto bad_mem(int mode) {
  return [mode](float* p) { bad_mem_kernel<<<1, 32>>>(p, mode); };
}

TEST_F(SimWmma, MisalignedPointerFaults) {
  fault_case(bad_mem(0), cudaErrorMisalignedAddress,
             {"wmma::load_matrix_sync", "32-byte alignment", "bad_mem_kernel", kThisFile + ":"});
  fault_case(bad_mem(2), cudaErrorMisalignedAddress, {"wmma::store_matrix_sync", "32-byte alignment"});
  fault_case(bad_mem(5), cudaErrorMisalignedAddress, {"wmma::load_matrix_sync", "32-byte alignment"});
}

TEST_F(SimWmma, LdmNotMultipleOf16BytesFaults) {
  fault_case(bad_mem(1), cudaErrorMisalignedAddress, {"wmma::load_matrix_sync", "ldm = 6", "16-byte alignment"});
  fault_case(bad_mem(3), cudaErrorMisalignedAddress, {"wmma::store_matrix_sync", "ldm = 10"});
}

TEST_F(SimWmma, LanesWithDifferentPointersFault) {
  fault_case(bad_mem(4), cudaErrorLaunchFailure, {"wmma::load_matrix_sync", "must pass the same pointer", "lane 16 a pointer 32 bytes after lane 0's"});
}

// Only the lanes below `lanes` reach mma_sync.
constexpr int kDivergentMmaLine = __LINE__ + 8;
__global__ void divergent_mma_kernel(float* out, int lanes) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(fa, 1.0f);
  wmma::fill_fragment(fb, 1.0f);
  wmma::fill_fragment(acc, 0.0f);
  if (static_cast<int>(threadIdx.x % 32) < lanes) wmma::mma_sync(acc, fa, fb, acc);
  out[threadIdx.x] = acc.x[0];
}

TEST_F(SimWmma, DivergentMmaSyncFaults) {
  {
    DeviceBuffer<float> out(64);
    divergent_mma_kernel<<<1, 64>>>(out.get(), 32);  // every lane: fine
    ASSERT_LAUNCH_OK();
    for (float v : out.download()) ASSERT_EQ(v, 8.0f);
  }
  const std::string site = kThisFile + ":" + std::to_string(kDivergentMmaLine);
  simtest::for_each_schedule([&](const std::string& sched) {
    SCOPED_TRACE(sched);
    fault_case([](float* p) { divergent_mma_kernel<<<1, 64>>>(p, 16); }, cudaErrorLaunchFailure,
               {"wmma::mma_sync", "divergent_mma_kernel", site});
  });
}

// GEMM variant 5's mma.sync m16n8k8 (kernels/gemm/mma_tf32.h) is warp-collective the same way.
constexpr int kDivergentMma1688Line = __LINE__ + 5;
__global__ void divergent_mma1688_kernel(float* out, int lanes) {
  float a[4] = {1.0f, 1.0f, 1.0f, 1.0f}, b[2] = {2.0f, 2.0f}, d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (lane < lanes) {
    nn::gemm_detail::mma_m16n8k8_tf32(d, a, b);
  }
  out[threadIdx.x] = d[0] + d[3];
}

TEST_F(SimWmma, DivergentMmaM16n8k8Faults) {
  {
    DeviceBuffer<float> out(64);
    divergent_mma1688_kernel<<<1, 64>>>(out.get(), 32);  // every lane: 8 products of 1 * 2, twice
    ASSERT_LAUNCH_OK();
    for (float v : out.download()) ASSERT_EQ(v, 32.0f);
  }
  const std::string site = kThisFile + ":" + std::to_string(kDivergentMma1688Line);
  fault_case([](float* p) { divergent_mma1688_kernel<<<1, 64>>>(p, 20); }, cudaErrorLaunchFailure,
             {"mma.sync m16n8k8 tf32", "divergent_mma1688_kernel", site});
  fault_case([](float* p) { divergent_mma1688_kernel<<<1, 48>>>(p, 32); }, cudaErrorLaunchFailure,
             {"mma.sync m16n8k8 tf32", "do not exist"});
}

// A warp of a 48-thread block has only 16 lanes: WMMA needs all 32.
TEST_F(SimWmma, PartialWarpFaults) {
  fault_case([](float* p) { divergent_mma_kernel<<<1, 48>>>(p, 32); }, cudaErrorLaunchFailure,
             {"wmma::mma_sync", "do not exist"});
}

// A 16x8 A tile with leading dimension ldm.
__global__ void a_load_kernel(const float* a, unsigned ldm, float* out) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, ldm);
  out[threadIdx.x] = fa.x[0] + fa.x[1] + fa.x[2] + fa.x[3];
}

// ldm 16 from a 128-float allocation: rows 8..15 lie past its end.
TEST_F(SimWmma, OutOfBoundsLoadIsReported) {
  SKIP_WITHOUT_CHECKS();
  {
    DeviceBuffer<float> a(std::vector<float>(128, 1.0f)), out(32);
    a_load_kernel<<<1, 32>>>(a.get(), 16, out.get());
    expect_fault(cudaErrorIllegalAddress, {"out-of-bounds global memory read", "a_load_kernel"});
  }
  sim::reset();
}

// A load of never-written device memory: initcheck sees the lanes' own reads.
TEST_F(SimWmma, UninitialisedLoadIsReported) {
  SKIP_WITHOUT_CHECKS();
  const ChecksOn checks;
  {
    DeviceBuffer<float> a(16 * 8), out(32);
    a_load_kernel<<<1, 32>>>(a.get(), 8, out.get());
    expect_fault(cudaErrorLaunchFailure, {"uninitialised global memory read", "a_load_kernel"});
  }
  sim::reset();
}

// Lanes read what other lanes' store_matrix_sync wrote to shared memory: a race without a
// __syncwarp between (the store's rendezvous comes before its writes), none with it.
constexpr int kStoreRaceReadLine = __LINE__ + 7;
__global__ void store_then_read_kernel(float* out, int sync) {
  __shared__ __align__(32) float S[256];
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 2.0f);
  wmma::store_matrix_sync(S, acc, 16, wmma::mem_row_major);
  if (sync) __syncwarp();
  out[threadIdx.x] = S[(threadIdx.x * 8 + 5) % 256];
}

TEST_F(SimWmma, StoreThenReadByOtherLanesNeedsSyncwarp) {
  SKIP_WITHOUT_CHECKS();
  const ChecksOn checks;
  {
    DeviceBuffer<float> out(32);
    store_then_read_kernel<<<1, 32>>>(out.get(), 1);
    ASSERT_LAUNCH_OK();
    for (float v : out.download()) ASSERT_EQ(v, 2.0f);
  }
  fault_case([](float* p) { store_then_read_kernel<<<1, 32>>>(p, 0); }, cudaErrorLaunchFailure,
             {"shared memory race", "the same warp", kThisFile + ":" + std::to_string(kStoreRaceReadLine)});
}

#endif  // SIM_EMULATOR

}  // namespace
