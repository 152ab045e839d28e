// Warp operations against CUDA's documented results (__shfl_*_sync with width < 32 and partial
// masks, __ballot_sync, __syncwarp) under every thread order (reductions, and negative test d, a
// lock-step warp reduction caught: test_sim_warp_reduce.cu). Valid CUDA (simcc and nvcc); runs in
// nn_tests or alone (-lgtest_main, with test_sim_warp_reduce.cu).
#include <cstdint>
#include <string>
#include <vector>

#include "sim_warp_util.h"

namespace {

using simtest::DeviceBuffer;


// The value thread t (linear index in its block) offers to a shuffle.
__host__ __device__ inline int lane_value(int t) { return 7 * t + 3; }

// ---- CUDA's documented source lanes (Programming Guide, "Warp Shuffle Functions") ----------------

int src_idx(int lane, int src, int width) { return (lane / width) * width + src % width; }
int src_up(int lane, int delta, int width) { return lane % width >= delta ? lane - delta : lane; }
int src_down(int lane, int delta, int width) { return lane % width + delta < width ? lane + delta : lane; }
// A group may read from earlier groups but reading from a later group returns the caller's own value.
int src_xor(int lane, int mask, int width) {
  const int j = lane ^ mask;
  return j / width > lane / width ? lane : j;
}

constexpr int kShflOut = 12;
constexpr int kShflBlock = 64;  // two warps: results must never mix them

__global__ void shfl_kernel(int* out) {
  const int t = threadIdx.x, lane = t % 32;
  const int v = lane_value(t);
  int r[kShflOut];
  r[0] = __shfl_sync(kFull, v, 5);
  r[1] = __shfl_sync(kFull, v, 31 - lane);
  r[2] = __shfl_sync(kFull, v, 3, 8);
  r[3] = __shfl_sync(kFull, v, 11, 8);  // srcLane >= width: taken modulo width
  r[4] = __shfl_up_sync(kFull, v, 3);
  r[5] = __shfl_up_sync(kFull, v, 2, 8);
  r[6] = __shfl_down_sync(kFull, v, 5);
  r[7] = __shfl_down_sync(kFull, v, 1, 16);
  r[8] = __shfl_xor_sync(kFull, v, 1);
  r[9] = __shfl_xor_sync(kFull, v, 18);
  r[10] = __shfl_xor_sync(kFull, v, 2, 4);
  r[11] = static_cast<int>(__ballot_sync(kFull, lane % 3 == 0 || t == 40));
  for (int k = 0; k < kShflOut; ++k) out[k * blockDim.x + t] = r[k];
}

TEST_F(SimWarp, ShuffleVariantsOnFullWarps) {
  DeviceBuffer<int> out(kShflOut * kShflBlock);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0xFF));
    shfl_kernel<<<1, kShflBlock>>>(out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int t = 0; t < kShflBlock; ++t) {
      const int lane = t % 32, base = t - lane;
      const int src[kShflOut - 1] = {
          src_idx(lane, 5, 32), src_idx(lane, 31 - lane, 32), src_idx(lane, 3, 8),   src_idx(lane, 11, 8),
          src_up(lane, 3, 32),  src_up(lane, 2, 8),           src_down(lane, 5, 32), src_down(lane, 1, 16),
          src_xor(lane, 1, 32), src_xor(lane, 18, 32),        src_xor(lane, 2, 4)};
      for (int k = 0; k < kShflOut - 1; ++k)
        ASSERT_EQ(h[k * kShflBlock + t], lane_value(base + src[k]))
            << "result " << k << ", thread " << t << " " << sched;
      std::uint32_t ballot = 0;
      for (int l = 0; l < 32; ++l)
        if (l % 3 == 0 || base + l == 40) ballot |= 1u << l;
      ASSERT_EQ(static_cast<std::uint32_t>(h[(kShflOut - 1) * kShflBlock + t]), ballot)
          << "ballot, thread " << t << " " << sched;
    }
  });
}

// laneMask >= width: the documented asymmetric rule (earlier groups readable, later ones not).
__global__ void xor_across_groups_kernel(int* out) {
  const int t = threadIdx.x;
  out[t] = __shfl_xor_sync(kFull, lane_value(t), 8, 8);
  out[32 + t] = __shfl_xor_sync(kFull, lane_value(t), 20, 16);
}

TEST_F(SimWarp, XorBeyondWidthFollowsDocumentedGroupRule) {
  DeviceBuffer<int> out(64);
  xor_across_groups_kernel<<<1, 32>>>(out.get());
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(h[lane], lane_value(src_xor(lane, 8, 8))) << "xor 8 width 8, lane " << lane;
    EXPECT_EQ(h[32 + lane], lane_value(src_xor(lane, 20, 16))) << "xor 20 width 16, lane " << lane;
  }
}

__global__ void shfl_types_kernel(float* f, double* d, unsigned* u) {
  const int t = threadIdx.x, lane = t % 32;
  f[t] = __shfl_sync(kFull, 0.5f * static_cast<float>(t), 31 - lane);
  d[t] = __shfl_down_sync(kFull, 0.25 * t + 1e10, 4);
  u[t] = __shfl_xor_sync(kFull, 0x80000000u + static_cast<unsigned>(t), 7);
}

TEST_F(SimWarp, ShuffleFloatDoubleUnsigned) {
  DeviceBuffer<float> f(64);
  DeviceBuffer<double> d(64);
  DeviceBuffer<unsigned> u(64);
  shfl_types_kernel<<<1, 64>>>(f.get(), d.get(), u.get());
  ASSERT_LAUNCH_OK();
  const auto hf = f.download();
  const auto hd = d.download();
  const auto hu = u.download();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, base = t - lane;
    ASSERT_EQ(hf[t], 0.5f * static_cast<float>(base + 31 - lane)) << t;
    ASSERT_EQ(hd[t], 0.25 * (base + src_down(lane, 4, 32)) + 1e10) << t;
    ASSERT_EQ(hu[t], 0x80000000u + static_cast<unsigned>(base + (lane ^ 7))) << t;
  }
}

// ---- partial masks -------------------------------------------------------------------------------

constexpr int kPartialOut = 5;

__global__ void partial_mask_kernel(unsigned* out) {
  const int t = threadIdx.x, lane = t % 32;
  const int v = lane_value(t);
  unsigned* o = out + t * kPartialOut;
  if (lane < 16) {  // lower half warp only
    o[0] = __ballot_sync(0x0000FFFFu, lane % 3 == 0);
    o[1] = static_cast<unsigned>(__shfl_sync(0x0000FFFFu, v, 15 - lane));
    o[2] = static_cast<unsigned>(__shfl_down_sync(0x0000FFFFu, v, 2, 16));
  }
  if (lane & 1) {  // odd lanes only
    o[3] = static_cast<unsigned>(__shfl_xor_sync(0xAAAAAAAAu, v, 2));
    o[4] = __ballot_sync(0xAAAAAAAAu, lane > 20);
  }
}

TEST_F(SimWarp, PartialMasks) {
  DeviceBuffer<unsigned> out(kShflBlock * kPartialOut);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0));
    partial_mask_kernel<<<1, kShflBlock>>>(out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    std::uint32_t low_ballot = 0, odd_ballot = 0;
    for (int l = 0; l < 32; ++l) {
      if (l < 16 && l % 3 == 0) low_ballot |= 1u << l;
      if ((l & 1) && l > 20) odd_ballot |= 1u << l;
    }
    for (int t = 0; t < kShflBlock; ++t) {
      const int lane = t % 32, base = t - lane;
      const unsigned* o = &h[t * kPartialOut];
      if (lane < 16) {
        ASSERT_EQ(o[0], low_ballot) << "ballot, thread " << t << " " << sched;
        ASSERT_EQ(o[1], static_cast<unsigned>(lane_value(base + 15 - lane)))
            << "shfl, thread " << t << " " << sched;
        ASSERT_EQ(o[2], static_cast<unsigned>(lane_value(base + src_down(lane, 2, 16))))
            << "shfl_down, thread " << t << " " << sched;
      } else {
        ASSERT_EQ(o[0], 0u);
        ASSERT_EQ(o[1], 0u);
        ASSERT_EQ(o[2], 0u);
      }
      if (lane & 1) {
        ASSERT_EQ(o[3], static_cast<unsigned>(lane_value(base + (lane ^ 2))))
            << "shfl_xor, thread " << t << " " << sched;
        ASSERT_EQ(o[4], odd_ballot) << "ballot, thread " << t << " " << sched;
      } else {
        ASSERT_EQ(o[3], 0u);
        ASSERT_EQ(o[4], 0u);
      }
    }
  });
}

// Both halves of a warp in different branches, each with its own ballot at the same time.
__global__ void divergent_ballots_kernel(unsigned* out) {
  const int lane = threadIdx.x % 32;
  if (lane < 16)
    out[threadIdx.x] = __ballot_sync(0x0000FFFFu, lane & 1);
  else
    out[threadIdx.x] = __ballot_sync(0xFFFF0000u, lane >= 28);
}

TEST_F(SimWarp, DivergentBranchesEachWithTheirOwnBallot) {
  DeviceBuffer<unsigned> out(64);
  simtest::for_each_schedule([&](const std::string& sched) {
    divergent_ballots_kernel<<<1, 64>>>(out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int t = 0; t < 64; ++t)
      ASSERT_EQ(h[t], t % 32 < 16 ? 0x0000AAAAu : 0xF0000000u) << "thread " << t << " " << sched;
  });
}

// A 48-thread block: the second warp has only lanes 0..15.
__global__ void partial_last_warp_kernel(int* out) {
  const int t = threadIdx.x, lane = t % 32;
  const unsigned mask = t < 32 ? kFull : 0x0000FFFFu;
  out[t] = __shfl_down_sync(mask, lane_value(t), 1, 16);
  out[48 + t] = static_cast<int>(__ballot_sync(mask, lane >= 8));
}

TEST_F(SimWarp, PartialLastWarp) {
  DeviceBuffer<int> out(96);
  simtest::for_each_schedule([&](const std::string& sched) {
    partial_last_warp_kernel<<<1, 48>>>(out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int t = 0; t < 48; ++t) {
      const int lane = t % 32, base = t - lane;
      ASSERT_EQ(h[t], lane_value(base + src_down(lane, 1, 16))) << "thread " << t << " " << sched;
      ASSERT_EQ(static_cast<unsigned>(h[48 + t]), t < 32 ? 0xFFFFFF00u : 0x0000FF00u)
          << "thread " << t << " " << sched;
    }
  });
}

// Warps are formed from the linear thread index x + y*Dx (+ z*Dx*Dy).
__global__ void two_d_block_warp_kernel(int* out) {
  const int t = threadIdx.x + threadIdx.y * blockDim.x;
  out[t] = __shfl_xor_sync(kFull, lane_value(t), 16);
  out[64 + t] = __shfl_sync(kFull, lane_value(t), 0);
}

TEST_F(SimWarp, TwoDimensionalBlockLaneNumbering) {
  DeviceBuffer<int> out(128);
  two_d_block_warp_kernel<<<1, dim3(16, 4)>>>(out.get());
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int t = 0; t < 64; ++t) {
    ASSERT_EQ(h[t], lane_value(t ^ 16)) << t;
    ASSERT_EQ(h[64 + t], lane_value(t - t % 32)) << t;
  }
}

// __syncwarp(mask) orders shared-memory accesses among the lanes it names.
__global__ void syncwarp_exchange_kernel(const int* in, int* out) {
  __shared__ int s[64];
  const int t = threadIdx.x, lane = t % 32;
  if (lane < 8) {
    s[t] = in[t] * 2;
    __syncwarp(0x000000FFu);
    out[t] = s[t - lane + 7 - lane];
  }
  __syncwarp();
  if (lane >= 8) {
    s[t] = in[t] + 1;
  }
  __syncwarp();
  if (lane >= 8) out[t] = s[t - lane + 8 + (31 - lane)];
}

TEST_F(SimWarp, SyncwarpOrdersSharedMemory) {
  const auto in = simtest::random_ints(64, 21, -500, 500);
  DeviceBuffer<int> d_in(in), out(64);
  simtest::for_each_schedule([&](const std::string& sched) {
    syncwarp_exchange_kernel<<<1, 64>>>(d_in.get(), out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, base = t - lane;
      const int want = lane < 8 ? in[base + 7 - lane] * 2 : in[base + 39 - lane] + 1;
      ASSERT_EQ(h[t], want) << "thread " << t << " " << sched;
    }
  });
}

}  // namespace
