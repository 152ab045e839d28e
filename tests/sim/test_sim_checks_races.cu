// The emulator's shared-memory race check (racecheck): write after read, read after write and
// write after write between warps and within one warp, a tiled loop missing its barrier,
// __syncwarp across warps, byte granularity, racecheck off, and the default that checks the first
// three launches of each kernel configuration.
#include "sim_checks_util.h"

#ifdef SIM_EMULATOR

namespace {

// ---- faulting kernels (the constants after each are the lines of its accesses) ----

// Warp 0's thread 0 reads slots[32], warp 1's thread 32 writes it, no barrier between.
// Forward order runs thread 0 first (write after read), reverse order thread 32 (read after write).
__global__ void race_rw_kernel(int* out) {
  __shared__ int slots[64];
  const int t = threadIdx.x;
  slots[t] = t;
  __syncthreads();
  if (t == 0) out[0] = slots[32];
  if (t == 32) slots[32] = -1;
  __syncthreads();
  if (t == 1) out[1] = slots[32];
}
constexpr int kRaceReadLine = __LINE__ - 5;
constexpr int kRaceWriteLine = __LINE__ - 5;

// Threads a and b both write word[0] (b != a: both in one interval).
__global__ void race_ww_kernel(int a, int b, int* out) {
  __shared__ int word[4];
  const int t = threadIdx.x;
  if (t == a || t == b) word[0] = t;
  __syncthreads();
  if (t == 0) out[0] = word[0];
}

// The tiled loop without its second __syncthreads: the next tile overwrites what other warps
// still read.
__global__ void missing_barrier_kernel(const float* in, int tiles, float* out) {
  __shared__ float tile[64];
  const int t = threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    tile[t] = in[k * 64 + t];
    __syncthreads();
    acc += tile[63 - t];
    // missing: __syncthreads();
  }
  out[t] = acc;
}

// __syncwarp orders one warp only: warp 0 reads what warp 1 wrote.
__global__ void syncwarp_across_warps_kernel(int* out) {
  __shared__ int box[64];
  const int t = threadIdx.x;
  box[t] = t;
  __syncwarp();
  out[t] = box[63 - t];
}

// p itself, as a value the compiler cannot see through: GCC's instrumentation checks an address
// once and skips later accesses to the same address expression (a store after a load of it, and
// even across __syncthreads), so the byte kernel below reaches each access through its own.
template <class T>
T* opaque(T* p) {
  asm volatile("" : "+r"(p));
  return p;
}

// 64 threads own one byte each of a 64-byte shared array, interleaved so that each 4-byte word
// holds bytes of two warps (threads t, t + 32, t + 1, t + 33). Every thread writes its byte,
// then reads it and writes it again with no __syncthreads between: no two threads ever touch
// the same byte.
__global__ void subword_bytes_kernel(unsigned char* out) {
  __shared__ unsigned char bytes[64];
  const int t = threadIdx.x;
  const int i = (t % 32) * 2 + t / 32;
  *opaque(bytes + i) = static_cast<unsigned char>(t);
  __syncthreads();
  const unsigned char mine = *opaque(bytes + i);
  __syncwarp();
  *opaque(bytes + i) = static_cast<unsigned char>(mine + 1);
  __syncthreads();
  out[i] = *opaque(bytes + i);
}

// A real race on one byte: threads 0 and 32 (two warps) both write flags[0], while threads 1..3
// write the other bytes of its word.
__global__ void byte_race_kernel(unsigned char* out) {
  __shared__ unsigned char flags[4];
  const int t = threadIdx.x;
  if (t < 4) flags[t] = static_cast<unsigned char>(t);
  if (t == 32) flags[0] = 32;
  __syncthreads();
  if (t == 0) out[0] = flags[0];
}

// ---- shared-memory races ----

Fault run_race_rw() {
  return run_faulting([] {
    DeviceBuffer<int> out(2);
    race_rw_kernel<<<1, 64>>>(out.get());
    return cudaDeviceSynchronize();
  });
}

TEST_F(SimChecks, WriteAfterReadRaceIsReported) {
  SKIP_WITHOUT_CHECKS();
  sim::set_order(sim::Order::Forward);  // thread 0 reads first
  const Fault f = run_race_rw();
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_EQ(f.again, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-read hazard)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "kernel 'race_rw_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0) (warp 1) wrote 'slots'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (0,0,0) (warp 0) had read it")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kRaceWriteLine))) << f.msg << "\nshould name the store's line " << kRaceWriteLine;
  EXPECT_TRUE(contains(f.msg, at(kRaceReadLine))) << f.msg << "\nshould name the load's line " << kRaceReadLine;
}

TEST_F(SimChecks, ReadAfterWriteRaceIsReported) {
  SKIP_WITHOUT_CHECKS();
  sim::set_order(sim::Order::Reverse);  // thread 32 writes first
  const Fault f = run_race_rw();
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "shared memory race (read-after-write hazard)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (0,0,0) (warp 0) read 'slots'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0) (warp 1) had written it")) << f.msg;
}

TEST_F(SimChecks, WriteAfterWriteRaceIsReportedUnderEverySchedule) {
  SKIP_WITHOUT_CHECKS();
  simtest::for_each_schedule([&](const std::string& sched) {
    const Fault f = run_faulting([] {
      DeviceBuffer<int> out(1);
      race_ww_kernel<<<1, 64>>>(0, 32, out.get());  // warps 0 and 1
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << sched;
    EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-write hazard)")) << f.msg;
    EXPECT_TRUE(contains(f.msg, "'race_ww_kernel'")) << f.msg;
  });
}

// Lanes of one warp are not in lockstep (independent thread scheduling since Volta): two lanes
// writing one word with no __syncwarp between are a hazard too.
TEST_F(SimChecks, SameWarpWritesWithoutSyncwarpAreAHazard) {
  SKIP_WITHOUT_CHECKS();
  simtest::for_each_schedule([&](const std::string& sched) {
    const Fault f = run_faulting([] {
      DeviceBuffer<int> out(1);
      race_ww_kernel<<<1, 64>>>(3, 17, out.get());  // both in warp 0
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << sched;
    EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-write hazard)")) << f.msg;
    EXPECT_TRUE(contains(f.msg, "(warp 0, the same warp)")) << f.msg;
  });
}

TEST_F(SimChecks, MissingBarrierInTiledLoopIsAlwaysARace) {
  SKIP_WITHOUT_CHECKS();
  simtest::for_each_schedule([&](const std::string& sched) {
    const Fault f = run_faulting([] {
      DeviceBuffer<float> in(std::vector<float>(64 * 3, 1.0f)), out(64);
      missing_barrier_kernel<<<1, 64>>>(in.get(), 3, out.get());
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << sched;
    EXPECT_TRUE(contains(f.msg, "shared memory race (")) << f.msg;
    EXPECT_TRUE(contains(f.msg, "'tile'")) << f.msg;
  });
}

TEST_F(SimChecks, SyncwarpDoesNotOrderAccessesOfDifferentWarps) {
  SKIP_WITHOUT_CHECKS();
  simtest::for_each_schedule([&](const std::string& sched) {
    const Fault f = run_faulting([] {
      DeviceBuffer<int> out(64);
      syncwarp_across_warps_kernel<<<1, 64>>>(out.get());
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << sched;
    EXPECT_TRUE(contains(f.msg, "shared memory race (")) << f.msg;
  });
}

// Byte-granular: threads of different warps own different bytes of one word.
TEST_F(SimChecks, DifferentBytesOfOneWordAreNoRace) {
  DeviceBuffer<unsigned char> out(64);
  simtest::for_each_schedule([&](const std::string& sched) {
    subword_bytes_kernel<<<1, 64>>>(out.get());
    ASSERT_LAUNCH_OK();
    const std::vector<unsigned char> got = out.download();
    for (int t = 0; t < 64; ++t) ASSERT_EQ(got[(t % 32) * 2 + t / 32], t + 1) << "t=" << t << " " << sched;
  });
}

TEST_F(SimChecks, RaceOnOneByteIsReportedWhateverItsNeighboursDo) {
  SKIP_WITHOUT_CHECKS();
  simtest::for_each_schedule([&](const std::string& sched) {
    const Fault f = run_faulting([] {
      DeviceBuffer<unsigned char> out(1);
      byte_race_kernel<<<1, 64>>>(out.get());
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << sched;
    EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-write hazard)")) << f.msg;
    // The two writers of byte 0, whichever came second.
    EXPECT_TRUE(contains(f.msg, "thread (0,0,0)") && contains(f.msg, "thread (32,0,0)")) << f.msg;
  });
}

TEST_F(SimChecks, RacecheckOffLetsARacyKernelRun) {
  sim::set_racecheck(false);
  EXPECT_FALSE(sim::racecheck());
  {
    DeviceBuffer<int> out(1);
    race_ww_kernel<<<1, 64>>>(0, 32, out.get());
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(sim::last_fault(), "");
    const int v = out.download()[0];
    EXPECT_TRUE(v == 0 || v == 32) << v;
  }
  sim::set_racecheck(true);  // and on again: caught
  EXPECT_TRUE(sim::racecheck());
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<int> out(1);
    race_ww_kernel<<<1, 64>>>(0, 32, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
}

// The default race check (set_racecheck(true)) covers the first 3 launches of each kernel
// configuration (kernel, launch site, grid, block, dynamic shared size); bounds are always checked.
TEST_F(SimChecks, DefaultRacecheckCoversTheFirstThreeLaunchesOfEachConfiguration) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck(true);
  EXPECT_TRUE(sim::racecheck());
  // A dynamic shared size of its own on every run of this test (the counts are per process).
  static size_t run = 0;
  const size_t shmem = 16 * ++run;
  auto racy = [&](unsigned grid) {
    return run_faulting([&] {
      DeviceBuffer<int> out(1);
      race_ww_kernel<<<grid, 64, shmem>>>(0, 32, out.get());
      return cudaDeviceSynchronize();
    });
  };
  for (int i = 0; i < 3; ++i) {
    const Fault f = racy(1);
    EXPECT_EQ(f.error, cudaErrorLaunchFailure) << "launch " << i;
    EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-write hazard)")) << f.msg;
  }
  Fault f = racy(1);  // the 4th launch of that configuration is not race-checked
  EXPECT_EQ(f.error, cudaSuccess) << f.msg;
  f = racy(2);  // another grid: checked again
  EXPECT_EQ(f.error, cudaErrorLaunchFailure) << f.msg;
  // Bounds stay checked in launches the race check skips (shared memory is then checked inline).
  for (int i = 0; i < 5; ++i) {
    f = run_faulting([&] {
      DeviceBuffer<float> out(1);
      shared_oob_dynamic_kernel<<<1, 2, sizeof(float)>>>(out.get());
      return cudaDeviceSynchronize();
    });
    EXPECT_EQ(f.error, cudaErrorIllegalAddress) << "launch " << i;
    EXPECT_TRUE(contains(f.msg, "right after the end of the dynamic shared memory")) << f.msg;
  }
}

}  // namespace

#endif  // SIM_EMULATOR
