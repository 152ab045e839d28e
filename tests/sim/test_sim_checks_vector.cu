// The emulator's checks of whole vector accesses (sim::load_whole / store_whole, the __ldg
// family): one 16-byte access, bounds-checked and reported as such, faulting when misaligned (a
// misaligned store does not happen), race-checked in shared memory, and a fault inside a header
// helper naming its line and its caller's.
#include "sim_checks_util.h"

#ifdef SIM_EMULATOR
#include "vector_helper.h"

namespace {

// ---- whole vector accesses (sim::load_whole / store_whole, the __ldg family) ----
// A float4 is one 16-byte access on a GPU and must be one here too: checked and reported as 16
// bytes, still faulting when misaligned, and seen by racecheck. (A plain struct copy is split
// into its four fields before the checks are inserted; see sim/include/sim/device.h.)

__global__ void ldg_float4_kernel(const float* p, int i, float* out) {
  if (threadIdx.x == 0) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p + i));
    out[0] = v.x + v.y + v.z + v.w;
  }
}
constexpr int kLdgFloat4Line = __LINE__ - 4;

// Thread t stores its float4 to slot t (whole), then thread 0 reads slot `from` whole while
// thread 32 (warp 1) overwrites slot 32, with no barrier between.
__global__ void whole_shared_kernel(int from, int to, float* out) {
  __shared__ float4 slots[64];
  const int t = threadIdx.x;
  sim::store_whole(&slots[t], make_float4(t, t, t, t));
  __syncthreads();
  if (t == 0) out[0] = sim::load_whole(&slots[from]).w;
  if (t == 32) sim::store_whole(&slots[to], make_float4(-1, -1, -1, -1));
}

TEST_F(SimChecks, WholeVectorLoadIsInBoundsUpToTheLastVector) {
  DeviceBuffer<float> p(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), out(1);
  ldg_float4_kernel<<<1, 1>>>(p.get(), 8, out.get());  // bytes 32..47 of 48
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 9.0f + 10 + 11 + 12);
}

TEST_F(SimChecks, WholeVectorLoadStraddlingTheEndIsOneSixteenByteAccess) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(10, 1.0f)), out(1);  // 40 bytes
    ldg_float4_kernel<<<1, 1>>>(p.get(), 8, out.get());          // bytes 32..47
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16 bytes at")) << f.msg;  // one access, not four fields
  EXPECT_TRUE(contains(f.msg, "bytes 32..47 (past the end) of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'ldg_float4_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kLdgFloat4Line))) << f.msg << "\nshould name the load's line " << kLdgFloat4Line;
}

TEST_F(SimChecks, MisalignedWholeVectorLoadStillFaults) {
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(12, 1.0f)), out(1);
    ldg_float4_kernel<<<1, 1>>>(p.get(), 1, out.get());  // 4 bytes off a 16-byte boundary
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorMisalignedAddress);
  EXPECT_TRUE(contains(f.msg, "misaligned address")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "misaligned address: load on")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16-byte alignment")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'ldg_float4_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kLdgFloat4Line))) << f.msg << "\nshould name the load's line " << kLdgFloat4Line;
}

__global__ void stcg_float2_kernel(float* p, int i) {
  if (threadIdx.x == 0) __stcg(reinterpret_cast<float2*>(p + i), make_float2(1, 2));
}
constexpr int kStcgLine = __LINE__ - 2;

TEST_F(SimChecks, MisalignedWholeVectorStoreFaultsAndDoesNotHappen) {
  std::vector<float> seen;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> p(std::vector<float>(8, 0.0f));
    stcg_float2_kernel<<<1, 1>>>(p.get(), 1);  // 4 bytes off an 8-byte boundary
    const cudaError_t e = cudaDeviceSynchronize();
    const auto* d = static_cast<const float*>(sim::device_view(p.get()));
    seen.assign(d, d + 8);
    return e;
  });
  EXPECT_EQ(f.error, cudaErrorMisalignedAddress);
  EXPECT_TRUE(contains(f.msg, "misaligned address: store on")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "8-byte alignment")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kStcgLine))) << f.msg << "\nshould name the store's line " << kStcgLine;
  EXPECT_EQ(seen, std::vector<float>(8, 0.0f)) << "the store must not happen";
}

__global__ void helper_load_kernel(const float* p, int i, float* out) {
  if (threadIdx.x == 0) out[0] = helper_load(reinterpret_cast<const float4*>(p + i)).x;
}
constexpr int kHelperCallLine = __LINE__ - 2;

TEST_F(SimChecks, AccessInAHeaderHelperNamesItsLineAndTheCaller) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(8, 1.0f)), out(1);
    helper_load_kernel<<<1, 1>>>(p.get(), 8, out.get());  // right after the end
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  const std::string where = "vector_helper.h:" + std::to_string(kHelperLoadLine) + " (inlined into ";
  EXPECT_TRUE(contains(f.msg, where)) << f.msg << "\nshould contain " << where;
  EXPECT_TRUE(contains(f.msg, at(kHelperCallLine) + ")")) << f.msg << "\nshould name the caller's line " << kHelperCallLine;
}

TEST_F(SimChecks, WholeVectorSharedOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    whole_shared_kernel<<<1, 64>>>(0, 64, out.get());  // thread 32 stores slots[64]
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16 bytes right after the end of __shared__ 'slots' (1024 bytes")) << f.msg;
}

TEST_F(SimChecks, WholeVectorSharedAccessesAreRaceChecked) {
  SKIP_WITHOUT_CHECKS();
  sim::set_order(sim::Order::Forward);  // thread 0 reads first
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    whole_shared_kernel<<<1, 64>>>(32, 32, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-read hazard)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0) (warp 1) wrote 'slots'")) << f.msg;
  DeviceBuffer<float> out(1);
  whole_shared_kernel<<<1, 64>>>(1, 32, out.get());  // different slots: no hazard
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 1.0f);
}

}  // namespace

#endif  // SIM_EMULATOR
