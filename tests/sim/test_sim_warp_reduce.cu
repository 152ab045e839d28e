// Warp reductions under every thread order: by __shfl_down_sync (bit-identical to the CPU's order),
// through shared memory with __syncwarp (right), and negative test d: the same without __syncwarp,
// relying on lock-step warps, is caught. Valid CUDA (simcc and nvcc).
#include <cstdint>
#include <string>
#include <vector>

#include "sim_warp_util.h"

namespace {

using simtest::DeviceBuffer;

// ---- reductions ----------------------------------------------------------------------------------

constexpr int kReduceBlock = 128;

// Warp sums by __shfl_down_sync, then warp 0 sums the warp sums.
__global__ void shfl_block_sum_kernel(const float* in, float* out, int n) {
  __shared__ float warp_sums[32];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int i = blockIdx.x * blockDim.x + t;
  float v = i < n ? in[i] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFull, v, o);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFull, v, o);
    if (lane == 0) out[blockIdx.x] = v;
  }
}

// The same arithmetic on the CPU: lane l adds lane l+o's value, or its own past the warp's end.
float cpu_warp_shfl_sum(std::vector<float> v) {
  for (int o = 16; o > 0; o >>= 1) {
    std::vector<float> next(32);
    for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l + o < 32 ? l + o : l];
    v = next;
  }
  return v[0];
}

TEST_F(SimWarp, ShuffleReductionIsBitIdenticalUnderAllOrders) {
  const int blocks = 6, n = blocks * kReduceBlock - 37;
  const auto in = simtest::random_floats(n, 8);
  std::vector<float> want(blocks);
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> warp_sums(32, 0.0f);
    for (int w = 0; w < kReduceBlock / 32; ++w) {
      std::vector<float> v(32);
      for (int l = 0; l < 32; ++l) {
        const int i = b * kReduceBlock + w * 32 + l;
        v[l] = i < n ? in[i] : 0.0f;
      }
      warp_sums[w] = cpu_warp_shfl_sum(v);
    }
    want[b] = cpu_warp_shfl_sum(warp_sums);
  }
  DeviceBuffer<float> d_in(in), out(blocks);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0xFF));
    shfl_block_sum_kernel<<<blocks, kReduceBlock>>>(d_in.get(), out.get(), n);
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(simtest::count_bit_mismatches(out.download(), want), 0u) << sched;
  });
}

// The last 64 -> 1 steps of a block reduction in one warp. kSyncwarp = false is the pre-Volta
// sample code: `volatile` shared memory and no synchronisation, relying on the 32 lanes running in
// lock step, which CUDA no longer promises. kSyncwarp = true separates every read from the
// following write with __syncwarp(), as the CUDA 9 warp-primitive guidance requires.
template <bool kSyncwarp>
__global__ void smem_warp_sum_kernel(const unsigned* in, unsigned* out) {
  __shared__ unsigned s[64];  // unsigned: the racy sums may wrap around
  const int t = threadIdx.x;
  s[t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  if (t < 32) {
    if constexpr (!kSyncwarp) {
      volatile unsigned* vs = s;
      vs[t] = vs[t] + vs[t + 32];
      vs[t] = vs[t] + vs[t + 16];
      vs[t] = vs[t] + vs[t + 8];
      vs[t] = vs[t] + vs[t + 4];
      vs[t] = vs[t] + vs[t + 2];
      vs[t] = vs[t] + vs[t + 1];
    } else {
      unsigned v = s[t];
      for (int o = 32; o > 0; o >>= 1) {
        v += s[t + o];
        __syncwarp();
        s[t] = v;
        __syncwarp();
      }
    }
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

constexpr int kWarpSumBlocks = 8;

// Which blocks' sums came out wrong.
template <bool kSyncwarp>
int wrong_warp_sums(const DeviceBuffer<unsigned>& d_in, DeviceBuffer<unsigned>& out,
                    const std::vector<unsigned>& want) {
  if (out.fill_bytes(0) != cudaSuccess) return -1;
  smem_warp_sum_kernel<kSyncwarp><<<kWarpSumBlocks, 64>>>(d_in.get(), out.get());
  if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return -1;
  const auto h = out.download();
  int wrong = 0;
  for (int b = 0; b < kWarpSumBlocks; ++b) wrong += h[b] != want[b];
  return wrong;
}

TEST_F(SimWarp, WarpReductionWithSyncwarpIsRightUnderAllOrders) {
  const auto ints = simtest::random_ints(kWarpSumBlocks * 64, 31, 1, 1000);
  const std::vector<unsigned> in(ints.begin(), ints.end());
  std::vector<unsigned> want(kWarpSumBlocks, 0);
  for (int i = 0; i < kWarpSumBlocks * 64; ++i) want[i / 64] += in[i];
  DeviceBuffer<unsigned> d_in(in), out(kWarpSumBlocks);
  simtest::for_each_schedule(
      [&](const std::string& sched) { EXPECT_EQ(wrong_warp_sums<true>(d_in, out, want), 0) << sched; });
}

#ifdef SIM_EMULATOR
// Negative test (d): the lock-step version must be caught. Between two barriers the emulator
// runs one thread at a time, so a lane finishes all six steps before the next lane starts:
// forward order reads neighbours' values before they added anything (sum too small); reverse
// order reads neighbours' final values, which already contain their partners (sum too large).
TEST_F(SimWarp, LockstepWarpReductionIsCaught) {
  const auto ints = simtest::random_ints(kWarpSumBlocks * 64, 31, 1, 1000);
  const std::vector<unsigned> in(ints.begin(), ints.end());
  std::vector<unsigned> want(kWarpSumBlocks, 0);
  for (int i = 0; i < kWarpSumBlocks * 64; ++i) want[i / 64] += in[i];
  DeviceBuffer<unsigned> d_in(in), out(kWarpSumBlocks);
  int orders_catching = 0;
  std::string report;
  for (const auto& [order, seed] : simtest::all_orders()) {
    sim::set_order(order, seed);
    const int wrong = wrong_warp_sums<false>(d_in, out, want);
    ASSERT_GE(wrong, 0) << "launch failed: " << sim::last_fault() << " " << sim::describe_schedule();
    report += sim::describe_schedule() + ": " + std::to_string(wrong) + " wrong sums; ";
    if (wrong > 0) ++orders_catching;
    if (order != sim::Order::Random) {  // both deterministic orders break lock-step, as argued above
      EXPECT_EQ(wrong, kWarpSumBlocks) << sim::describe_schedule();
    }
  }
  EXPECT_GE(orders_catching, 1) << "the lock-step warp reduction was not caught by any order: " << report;
}
#endif

}  // namespace
