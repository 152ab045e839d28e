// Correct patterns that the emulator's per-access checks (sim/runtime/checks.cpp) must leave
// silent: tree reduction, warp-level exchange, shared atomics, double buffering; memset, kernel
// stores and device-to-device copies as writers for initcheck. The kernels are valid CUDA and run
// in both builds.
#include "sim_checks_util.h"

namespace {

// Tree reduction of 256 floats per block, a __syncthreads between every step (also the steps
// below 32 threads, so it is correct without relying on warp-synchronous execution).
__global__ void tree_reduce_kernel(const float* in, float* out) {
  __shared__ float partial[256];
  const int t = threadIdx.x;
  partial[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// Each warp reverses its own 32 ints in shared memory, ordered by __syncwarp only: the lanes
// that exchange data are all in one warp, so there is no hazard between warps.
__global__ void warp_exchange_kernel(const int* in, int* out) {
  __shared__ int lanes[64];
  const int t = threadIdx.x;
  const int base = t / 32 * 32, lane = t % 32;
  lanes[t] = in[t];
  __syncwarp();
  const int v = lanes[base + 31 - lane];
  __syncwarp();
  lanes[t] = v * 2;  // overwrites what another lane of this warp read
  __syncwarp();
  out[t] = lanes[base + (lane + 1) % 32];
}

// Shared histogram: bins cleared, atomicAdd from every warp, then copied out.
__global__ void shared_histogram_kernel(const int* in, int n, int* hist) {
  __shared__ int bins[16];
  const int t = threadIdx.x;
  if (t < 16) bins[t] = 0;
  __syncthreads();
  for (int i = t; i < n; i += blockDim.x) atomicAdd(&bins[in[i] % 16], 1);
  __syncthreads();
  if (t < 16) hist[t] = bins[t];
}

// Double-buffered tiles of 64 floats: while the block reads tile k (each thread its neighbour's
// element, so across warps), it loads tile k + 1 into the other buffer; one barrier per tile.
__global__ void double_buffer_kernel(const float* in, int tiles, float* out) {
  __shared__ float buf[2][64];
  const int t = threadIdx.x;
  buf[0][t] = in[t];
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    const int cur = k & 1;
    if (k + 1 < tiles) buf[cur ^ 1][t] = in[(k + 1) * 64 + t];
    acc += buf[cur][(t + 1) % 64];
    __syncthreads();
  }
  out[t] = acc;
}

TEST_F(SimChecks, TreeReductionWithSyncthreadsIsNoRace) {
  std::vector<float> in(512);  // small integers: every summation order gives the exact sum
  for (int i = 0; i < 512; ++i) in[i] = static_cast<float>((i * 37) % 101 - 50);
  DeviceBuffer<float> d_in(in), d_out(2);
  simtest::for_each_schedule([&](const std::string& sched) {
    tree_reduce_kernel<<<2, 256>>>(d_in.get(), d_out.get());
    ASSERT_LAUNCH_OK();
    const std::vector<float> out = d_out.download();
    EXPECT_EQ(out[0], std::accumulate(in.begin(), in.begin() + 256, 0.0f)) << sched;
    EXPECT_EQ(out[1], std::accumulate(in.begin() + 256, in.end(), 0.0f)) << sched;
  });
}

TEST_F(SimChecks, WarpExchangeWithSyncwarpIsNoRace) {
  std::vector<int> in(64);
  std::iota(in.begin(), in.end(), 100);
  DeviceBuffer<int> d_in(in), d_out(64);
  simtest::for_each_schedule([&](const std::string& sched) {
    warp_exchange_kernel<<<1, 64>>>(d_in.get(), d_out.get());
    ASSERT_LAUNCH_OK();
    const std::vector<int> out = d_out.download();
    for (int t = 0; t < 64; ++t) {  // lanes[j] = 2 * in[base + 31 - j % 32], read at j = t's next lane
      const int base = t / 32 * 32, next = (t % 32 + 1) % 32;
      ASSERT_EQ(out[t], 2 * in[base + 31 - next]) << "t=" << t << " " << sched;
    }
  });
}

TEST_F(SimChecks, SharedHistogramWithAtomicsFromAllWarpsIsNoRace) {
  const std::vector<int> in = simtest::random_ints(1000, 5, 0, 1000);
  std::vector<int> want(16, 0);
  for (int v : in) ++want[v % 16];
  DeviceBuffer<int> d_in(in), d_hist(16);
  simtest::for_each_schedule([&](const std::string& sched) {
    shared_histogram_kernel<<<1, 256>>>(d_in.get(), 1000, d_hist.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(d_hist.download(), want) << sched;
  });
}

TEST_F(SimChecks, DoubleBufferedTilesAreNoRace) {
  const int tiles = 5;
  const std::vector<float> in = simtest::random_floats(64 * tiles, 9);
  std::vector<float> want(64, 0.0f);
  for (int t = 0; t < 64; ++t)
    for (int k = 0; k < tiles; ++k) want[t] += in[k * 64 + (t + 1) % 64];
  DeviceBuffer<float> d_in(in), d_out(64);
  simtest::for_each_schedule([&](const std::string& sched) {
    double_buffer_kernel<<<1, 64>>>(d_in.get(), tiles, d_out.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(d_out.download(), want) << sched;
  });
}

TEST_F(SimChecks, MemsetThenReadIsInitialised) {
  DeviceBuffer<float> p(100), out(1);
  ASSERT_CUDA_OK(cudaMemset(p.get(), 0, p.bytes()));
  sum_range_kernel<<<1, 32>>>(p.get(), 0, 100, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 0.0f);
}

TEST_F(SimChecks, KernelStoresCountAsWritten) {
  DeviceBuffer<float> p(300), out(1);
  fill_kernel<<<2, 256>>>(p.get(), 300, 0.5f);
  ASSERT_LAUNCH_OK();
  sum_range_kernel<<<1, 32>>>(p.get(), 0, 300, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 150.0f);
}

TEST_F(SimChecks, DeviceToDeviceCopyOfWrittenDataIsInitialised) {
  DeviceBuffer<float> a(64), b(64), out(1);
  fill_kernel<<<1, 64>>>(a.get(), 64, 2.0f);
  ASSERT_LAUNCH_OK();
  ASSERT_CUDA_OK(cudaMemcpy(b.get(), a.get(), a.bytes(), cudaMemcpyDeviceToDevice));
  sum_range_kernel<<<1, 1>>>(b.get(), 0, 64, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 128.0f);
}

TEST_F(SimChecks, PartiallyWrittenBufferReadOnlyInItsWrittenPart) {
  DeviceBuffer<float> p(16), out(1);
  const std::vector<float> head = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_CUDA_OK(cudaMemcpy(p.get(), head.data(), 8 * sizeof(float), cudaMemcpyHostToDevice));
  sum_range_kernel<<<1, 1>>>(p.get(), 0, 8, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 36.0f);
}

}  // namespace
