// Cooperative launches and grid barriers (sim/runtime/coop.cpp, sim/include/cooperative_groups.h):
// cudaLaunchCooperativeKernel with cooperative_groups::this_grid().sync() orders every block's
// writes before every block's reads, under every emulator schedule and on a GPU; a grid too
// large to be resident is refused as a GPU refuses it. Emulator only: a missing grid barrier
// is a global race, grid.sync() outside a cooperative launch and a block that exits before the
// barrier are faults, and a flag handed between blocks orders the data only after a fence.
#include <cooperative_groups.h>

#include <string>
#include <vector>

#include "common/cooperative.h"
#include "sim_test_util.h"

namespace {

namespace cg = cooperative_groups;
using simtest::DeviceBuffer;

// Each round every block writes its slot, then (after the grid barrier) reads its neighbour's.
__global__ void ring_kernel(int* slots, int rounds, int* out) {
  cg::grid_group grid = cg::this_grid();
  const int b = int(blockIdx.x), nb = int(gridDim.x);
  int acc = 0;
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) slots[b] = r * 1000 + b;
    grid.sync();
    if (threadIdx.x == 0) acc += slots[(b + 1) % nb];
    grid.sync();  // the slots are written again next round
  }
  if (threadIdx.x == 0) out[b] = acc;
}

// The same with only a block barrier: the neighbour's slot is read with nothing ordering it.
__global__ void ring_no_grid_sync_kernel(int* slots, int* out) {
  const int b = int(blockIdx.x), nb = int(gridDim.x);
  if (threadIdx.x == 0) slots[b] = b;
  __syncthreads();
  if (threadIdx.x == 0) out[b] = slots[(b + 1) % nb];
}

// Block 0 hands data to block 1 through a flag; with_fence: __threadfence() between the data
// and the flag (the standard publication pattern).
__global__ void flag_kernel(int* data, unsigned* flag, int* out, int with_fence) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    data[0] = 42;
    if (with_fence) __threadfence();
    atomicExch(flag, 1u);
  } else if (blockIdx.x == 1) {
    while (atomicAdd(flag, 0u) == 0u) {
    }
    out[0] = data[0];
  }
}

__global__ void early_exit_kernel(int* out) {
  if (blockIdx.x == 0) return;  // never reaches the barrier the others wait at
  cg::this_grid().sync();
  out[blockIdx.x] = 1;
}

int resident_blocks(void (*k)(int*, int, int*), int threads) {
  int per_sm = 0, sms = 0, dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 0;
  return per_sm * sms;
}

// Saves and restores the race-check mode the tests below change.
class SimCoop : public simtest::SimTest {
#ifdef SIM_EMULATOR
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_ = sim::racecheck();
  }
  void TearDown() override {
    sim::set_racecheck(saved_);
    simtest::SimTest::TearDown();
  }
  bool saved_ = true;
#endif
};

TEST_F(SimCoop, GridSyncOrdersEveryBlocksWrites) {
  const int blocks = std::min(6, resident_blocks(ring_kernel, 64));
  ASSERT_GE(blocks, 2);
  const int rounds = 3;
  DeviceBuffer<int> slots(blocks), out(blocks);
  ASSERT_CUDA_OK(slots.fill_bytes(0));
#ifdef SIM_EMULATOR
  sim::set_racecheck_all();
#endif
  simtest::for_each_schedule([&](const std::string& sched) {
    int* s = slots.get();
    int* o = out.get();
    int r = rounds;
    void* args[] = {&s, &r, &o};
    ASSERT_CUDA_OK(
        cudaLaunchCooperativeKernel(nn::cooperative_kernel(ring_kernel), dim3(blocks), dim3(64), args, 0, nullptr));
    ASSERT_LAUNCH_OK();
    const std::vector<int> h = out.download();
    for (int b = 0; b < blocks; ++b) {
      int want = 0;
      for (int q = 0; q < rounds; ++q) want += q * 1000 + (b + 1) % blocks;
      EXPECT_EQ(h[b], want) << "block " << b << ", " << sched;
    }
  });
}

TEST_F(SimCoop, GridLargerThanTheDeviceHoldsIsRefused) {
  const int fit = resident_blocks(ring_kernel, 64);
  ASSERT_GT(fit, 0);
  DeviceBuffer<int> slots(fit + 1), out(fit + 1);
  int* s = slots.get();
  int* o = out.get();
  int r = 1;
  void* args[] = {&s, &r, &o};
#ifdef SIM_EMULATOR
  sim::set_fault_mode(sim::FaultMode::Record);  // the refusal's line is printed in abort mode only
#endif
  EXPECT_EQ(cudaLaunchCooperativeKernel(nn::cooperative_kernel(ring_kernel), dim3(fit + 1), dim3(64), args, 0, nullptr),
            cudaErrorCooperativeLaunchTooLarge);
  EXPECT_EQ(cudaGetLastError(), cudaErrorCooperativeLaunchTooLarge);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // not sticky: the device is usable
}

#ifdef SIM_EMULATOR
extern "C" void __asan_init() __attribute__((weak));
#define SKIP_WITHOUT_CHECKS()                                                        \
  do {                                                                               \
    if (&__asan_init != nullptr) GTEST_SKIP() << "no per-access checks under ASan";  \
  } while (0)

std::string fault_of(cudaError_t* e) {
  *e = cudaDeviceSynchronize();
  const std::string msg = sim::last_fault();
  sim::reset();
  (void)cudaGetLastError();
  return msg;
}

TEST_F(SimCoop, MissingGridBarrierIsAGlobalRace) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck_all();
  cudaError_t e = cudaSuccess;
  std::string msg;
  {
    DeviceBuffer<int> slots(4), out(4);
    (void)slots.fill_bytes(0);
    int* s = slots.get();
    int* o = out.get();
    void* args[] = {&s, &o};
    (void)cudaLaunchCooperativeKernel(nn::cooperative_kernel(ring_no_grid_sync_kernel), dim3(4), dim3(32), args, 0,
                                      nullptr);
    msg = fault_of(&e);
  }
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("global memory race"), std::string::npos) << msg;
}

TEST_F(SimCoop, FlagOrdersTheDataOnlyAfterAFence) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck_all();
  for (int with_fence = 1; with_fence >= 0; --with_fence) {
    cudaError_t e = cudaSuccess;
    std::string msg;
    int got = -1;
    {
      DeviceBuffer<int> data(1), out(1);
      DeviceBuffer<unsigned> flag(1);
      (void)flag.fill_bytes(0);
      (void)out.fill_bytes(0);
      int* d = data.get();
      unsigned* f = flag.get();
      int* o = out.get();
      int w = with_fence;
      void* args[] = {&d, &f, &o, &w};
      (void)cudaLaunchCooperativeKernel(nn::cooperative_kernel(flag_kernel), dim3(2), dim3(32), args, 0, nullptr);
      if (with_fence && cudaDeviceSynchronize() == cudaSuccess) got = out.download()[0];
      msg = fault_of(&e);  // resets the emulator: the buffers are gone after it
    }
    if (with_fence) {
      EXPECT_EQ(e, cudaSuccess) << msg;
      EXPECT_EQ(got, 42);
    } else {
      EXPECT_EQ(e, cudaErrorLaunchFailure);
      EXPECT_NE(msg.find("global memory race (read-after-write hazard)"), std::string::npos) << msg;
    }
  }
}

TEST_F(SimCoop, GridSyncOutsideACooperativeLaunchFaults) {
  cudaError_t e = cudaSuccess;
  std::string msg;
  {
    DeviceBuffer<int> slots(2), out(2);
    (void)slots.fill_bytes(0);
    ring_kernel<<<2, 32>>>(slots.get(), 1, out.get());
    msg = fault_of(&e);
  }
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("not launched with cudaLaunchCooperativeKernel"), std::string::npos) << msg;
}

TEST_F(SimCoop, BlockExitingBeforeTheGridBarrierFaultsInsteadOfHanging) {
  cudaError_t e = cudaSuccess;
  std::string msg;
  {
    DeviceBuffer<int> out(3);
    int* o = out.get();
    void* args[] = {&o};
    (void)cudaLaunchCooperativeKernel(nn::cooperative_kernel(early_exit_kernel), dim3(3), dim3(32), args, 0, nullptr);
    msg = fault_of(&e);
  }
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("can never complete: 1 of the 3 blocks exited"), std::string::npos) << msg;
}
#endif

}  // namespace
