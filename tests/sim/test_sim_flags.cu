// Flags between blocks (sim/runtime/checks.cpp, "volatile flags"): the hand-off the CUDA
// Programming Guide writes (data, __threadfence(), a volatile flag; the flag read, __threadfence(),
// the data) and a hand-made barrier (atomic arrivals, a volatile generation) work in a cooperative
// launch under every schedule. Emulator only: without either fence the hand-off is a global race;
// a hand-made barrier over more blocks than can be resident is a fault naming the limit, not a hang,
// whether it polls a volatile word or polls with atomics that leave the word unchanged.
#include <string>
#include <vector>

#include "common/cooperative.h"
#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

__global__ void handoff_kernel(int* data, volatile unsigned* flag, int* out, int writer_fence, int reader_fence) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    data[0] = 42;
    if (writer_fence) __threadfence();
    *flag = 1u;
  } else if (blockIdx.x == 1) {
    while (*flag == 0u) {
    }
    if (reader_fence) __threadfence();
    out[0] = data[0];
  }
}

// Every block adds to its slot, meets the others, then reads its neighbour's slot.
__global__ void barrier_kernel(unsigned* count, volatile unsigned* generation, int* slots, int* out) {
  const int b = int(blockIdx.x), nb = int(gridDim.x);
  if (threadIdx.x == 0) {
    slots[b] = 10 * b + 1;
    const unsigned g0 = *generation;
    __threadfence();
    if (atomicAdd(count, 1u) == unsigned(nb) - 1u) {
      *count = 0u;
      __threadfence();
      *generation = g0 + 1u;
    } else {
      while (*generation == g0) {
      }
    }
    __threadfence();
    out[b] = slots[(b + 1) % nb];
  }
}

// The same barrier polled with atomics (no volatile pointer): `poll` picks the read that leaves the
// generation as it is, 0 atomicAdd(p, 0), 1 atomicOr(p, 0), 2 atomicCAS(p, g, g).
__device__ unsigned poll_generation(unsigned* generation, unsigned g, int poll) {
  if (poll == 1) return atomicOr(generation, 0u);
  if (poll == 2) return atomicCAS(generation, g, g);
  return atomicAdd(generation, 0u);
}
__global__ void atomic_barrier_kernel(unsigned* count, unsigned* generation, int* slots, int* out, int poll) {
  const int b = int(blockIdx.x), nb = int(gridDim.x);
  if (threadIdx.x == 0) {
    slots[b] = 10 * b + 1;
    const unsigned g0 = atomicAdd(generation, 0u);
    __threadfence();
    if (atomicAdd(count, 1u) == unsigned(nb) - 1u) {
      atomicExch(count, 0u);
      atomicAdd(generation, 1u);
    } else {
      while (poll_generation(generation, g0, poll) == g0) {
      }
    }
    __threadfence();
    out[b] = slots[(b + 1) % nb];
  }
}

// A spin lock taken by every block in turn: block 0 holds it until the others wait for it (their
// atomicCAS fails again and again), then each adds its number under it.
__global__ void lock_kernel(unsigned* lock, unsigned* waiting, unsigned* sum) {
  if (threadIdx.x != 0) return;
  const unsigned nb = gridDim.x;
  if (blockIdx.x == 0) {
    while (atomicCAS(lock, 0u, 1u) != 0u) {
    }
    while (atomicAdd(waiting, 0u) != nb - 1u) {
    }
  } else {
    atomicAdd(waiting, 1u);
    while (atomicCAS(lock, 0u, 1u) != 0u) {
    }
  }
  *sum += blockIdx.x + 1u;
  __threadfence();
  atomicExch(lock, 0u);
}

#ifdef SIM_EMULATOR  // its test is the emulator's
// Atomics on one word that are no spin: a counter, and a maximum whose operand changes.
__global__ void counter_kernel(unsigned* count, unsigned* maximum, int n) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int i = 0; i < n; ++i) atomicAdd(count, 1u);
  for (int i = 0; i < n; ++i) atomicMax(maximum, unsigned(i % 7));  // unchanged from i = 6 on
}
#endif

template <class... P>
int resident(void (*k)(P...), int threads) {
  int per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess)
    return 0;
  return per_sm * sms;
}

class SimFlags : public simtest::SimTest {
#ifdef SIM_EMULATOR
 protected:
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_ = sim::racecheck();
    sim::set_racecheck_all();
  }
  void TearDown() override {
    sim::set_racecheck(saved_);
    simtest::SimTest::TearDown();
  }
  bool saved_ = true;
#endif
};

cudaError_t launch_handoff(int* data, unsigned* flag, int* out, int wf, int rf) {
  volatile unsigned* vf = flag;
  void* args[] = {&data, &vf, &out, &wf, &rf};
  return cudaLaunchCooperativeKernel(nn::cooperative_kernel(handoff_kernel), dim3(2), dim3(32), args, 0, nullptr);
}

TEST_F(SimFlags, FencedHandOffThroughAVolatileFlag) {
  simtest::for_each_schedule([&](const std::string& sched) {
    DeviceBuffer<int> data(1), out(1);
    DeviceBuffer<unsigned> flag(1);
    ASSERT_CUDA_OK(flag.fill_bytes(0));
    ASSERT_CUDA_OK(out.fill_bytes(0));
    ASSERT_CUDA_OK(data.fill_bytes(0));
    ASSERT_CUDA_OK(launch_handoff(data.get(), flag.get(), out.get(), 1, 1));
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 42) << sched;
  });
}

TEST_F(SimFlags, HandMadeBarrierInACooperativeLaunch) {
  const int blocks = std::min(4, resident(barrier_kernel, 32));
  ASSERT_GE(blocks, 2);
  simtest::for_each_schedule([&](const std::string& sched) {
    DeviceBuffer<unsigned> sync(2);
    DeviceBuffer<int> slots(blocks), out(blocks);
    ASSERT_CUDA_OK(sync.fill_bytes(0));
    unsigned* count = sync.get();
    volatile unsigned* gen = sync.get() + 1;
    int* s = slots.get();
    int* o = out.get();
    void* args[] = {&count, &gen, &s, &o};
    ASSERT_CUDA_OK(
        cudaLaunchCooperativeKernel(nn::cooperative_kernel(barrier_kernel), dim3(blocks), dim3(32), args, 0, nullptr));
    ASSERT_LAUNCH_OK();
    const std::vector<int> h = out.download();
    for (int b = 0; b < blocks; ++b) EXPECT_EQ(h[b], 10 * ((b + 1) % blocks) + 1) << b << " " << sched;
  });
}

cudaError_t launch_atomic_barrier(int blocks, unsigned* sync, int* slots, int* out, int poll) {
  unsigned* count = sync;
  unsigned* gen = sync + 1;
  void* args[] = {&count, &gen, &slots, &out, &poll};
  return cudaLaunchCooperativeKernel(nn::cooperative_kernel(atomic_barrier_kernel), dim3(blocks), dim3(32), args, 0,
                                     nullptr);
}

TEST_F(SimFlags, BarrierPolledWithAtomicsInACooperativeLaunch) {
  const int blocks = std::min(4, resident(atomic_barrier_kernel, 32));
  ASSERT_GE(blocks, 2);
  for (const int poll : {0, 1, 2}) {
    simtest::for_each_schedule([&](const std::string& sched) {
      DeviceBuffer<unsigned> sync(2);
      DeviceBuffer<int> slots(blocks), out(blocks);
      ASSERT_CUDA_OK(sync.fill_bytes(0));
      ASSERT_CUDA_OK(launch_atomic_barrier(blocks, sync.get(), slots.get(), out.get(), poll));
      ASSERT_LAUNCH_OK();
      const std::vector<int> h = out.download();
      for (int b = 0; b < blocks; ++b) EXPECT_EQ(h[b], 10 * ((b + 1) % blocks) + 1) << b << " " << poll << " " << sched;
    });
  }
}

TEST_F(SimFlags, LockPolledWithAtomicCASInACooperativeLaunch) {
  const int blocks = std::min(4, resident(lock_kernel, 32));
  ASSERT_GE(blocks, 2);
  simtest::for_each_schedule([&](const std::string& sched) {
    DeviceBuffer<unsigned> words(3);
    ASSERT_CUDA_OK(words.fill_bytes(0));
    unsigned* lock = words.get();
    unsigned* waiting = words.get() + 1;
    unsigned* sum = words.get() + 2;
    void* args[] = {&lock, &waiting, &sum};
    ASSERT_CUDA_OK(
        cudaLaunchCooperativeKernel(nn::cooperative_kernel(lock_kernel), dim3(blocks), dim3(32), args, 0, nullptr));
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(words.download()[2], unsigned(blocks * (blocks + 1) / 2)) << sched;
  });
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

TEST_F(SimFlags, HandOffWithoutEitherFenceIsARace) {
  SKIP_WITHOUT_CHECKS();
  for (const int missing : {0, 1}) {  // 0: the writer's fence, 1: the reader's
    cudaError_t e = cudaSuccess;
    std::string msg;
    {
      DeviceBuffer<int> data(1), out(1);
      DeviceBuffer<unsigned> flag(1);
      (void)flag.fill_bytes(0);
      (void)out.fill_bytes(0);
      (void)launch_handoff(data.get(), flag.get(), out.get(), missing != 0, missing != 1);
      msg = fault_of(&e);
    }
    EXPECT_EQ(e, cudaErrorLaunchFailure) << "missing fence " << missing;
    EXPECT_NE(msg.find("global memory race (read-after-write hazard)"), std::string::npos) << msg;
  }
}

// The spin is seen by the per-access hooks, which the ASan build does not have: there the
// launch would hang, as on a GPU.
TEST_F(SimFlags, HandMadeBarrierOverMoreBlocksThanResidentIsAFaultNotAHang) {
  SKIP_WITHOUT_CHECKS();
  const int fit = resident(barrier_kernel, 256);
  ASSERT_GT(fit, 0);
  cudaError_t e = cudaSuccess;
  std::string msg;
  {
    DeviceBuffer<unsigned> sync(2);
    DeviceBuffer<int> slots(fit + 8), out(fit + 8);
    (void)sync.fill_bytes(0);
    barrier_kernel<<<fit + 8, 256>>>(sync.get(), sync.get() + 1, slots.get(), out.get());
    msg = fault_of(&e);
  }
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(msg.find("over more blocks than can be resident"), std::string::npos) << msg;
  EXPECT_NE(msg.find("= " + std::to_string(fit) + " can be resident at once"), std::string::npos) << msg;
}

// Atomics are checked in every build (sim/device.h calls the runtime for each), ASan's too.
TEST_F(SimFlags, BarrierPolledWithAtomicsOverMoreBlocksThanResidentIsAFaultNotAHang) {
  const int fit = resident(atomic_barrier_kernel, 256);
  ASSERT_GT(fit, 0);
  for (const int poll : {0, 1, 2}) {
    cudaError_t e = cudaSuccess;
    std::string msg;
    {
      DeviceBuffer<unsigned> sync(2);
      DeviceBuffer<int> slots(fit + 8), out(fit + 8);
      (void)sync.fill_bytes(0);
      atomic_barrier_kernel<<<fit + 8, 256>>>(sync.get(), sync.get() + 1, slots.get(), out.get(), poll);
      msg = fault_of(&e);
    }
    EXPECT_EQ(e, cudaErrorLaunchFailure) << poll;
    EXPECT_NE(msg.find("with atomics that left it unchanged"), std::string::npos) << msg;
    EXPECT_NE(msg.find("over more blocks than can be resident"), std::string::npos) << msg;
    EXPECT_NE(msg.find("= " + std::to_string(fit) + " can be resident at once"), std::string::npos) << msg;
  }
}

// More atomics on one word than a spin takes (2^20 reads), in a launch of more blocks than can be
// resident: they change the word, or their operand changes, so they are no spin.
TEST_F(SimFlags, CountersAreNoSpin) {
  const int fit = resident(counter_kernel, 256);
  ASSERT_GT(fit, 0);
  const int n = (1 << 20) + 4096;
  DeviceBuffer<unsigned> words(2);
  ASSERT_CUDA_OK(words.fill_bytes(0));
  counter_kernel<<<fit + 8, 256>>>(words.get(), words.get() + 1, n);
  ASSERT_LAUNCH_OK();
  const std::vector<unsigned> h = words.download();
  EXPECT_EQ(h[0], unsigned(n));
  EXPECT_EQ(h[1], 6u);
}
#endif

}  // namespace
