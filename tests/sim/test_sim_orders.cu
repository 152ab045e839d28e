// Correct kernels (16x16 shared-memory tiled GEMM, two-pass block reduction) are bit-identical to a
// CPU computation under every emulator thread order and with two workers; racy variants (negative
// test a) are caught. Runs in nn_tests (make test) or alone (link -lgtest_main); GPU: one pass.
#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

class SimOrders : public simtest::SimTest {};

constexpr int kTile = 16;

// C = A * B, column-major (A is M x K, B is K x N, C is M x N), 16 x 16 threads per block.
// Barrier (1) makes the tile complete before anyone reads it; barrier (2) makes everyone finish
// reading it before the next iteration's loads overwrite it. kBarrier2 = false drops barrier (2).
template <bool kBarrier2>
__global__ void tiled_gemm_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[kTile][kTile];  // As[k][i] = A(row0 + i, t + k)
  __shared__ float Bs[kTile][kTile];  // Bs[j][k] = B(t + k, col0 + j)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.x * kTile + tx, col = blockIdx.y * kTile + ty;
  float acc = 0.0f;
  for (int t = 0; t < K; t += kTile) {
    As[ty][tx] = (row < M && t + ty < K) ? A[row + (t + ty) * M] : 0.0f;
    Bs[ty][tx] = (t + tx < K && col < N) ? B[(t + tx) + col * K] : 0.0f;
    __syncthreads();  // (1)
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc = fmaf(As[k][tx], Bs[ty][k], acc);
    if constexpr (kBarrier2) __syncthreads();  // (2)
  }
  if (row < M && col < N) C[row + col * M] = acc;
}

// The kernel's arithmetic, in the kernel's order, including the zero padding of partial tiles.
std::vector<float> cpu_tiled_gemm(const std::vector<float>& A, const std::vector<float>& B, int M, int N,
                                  int K) {
  std::vector<float> C(static_cast<std::size_t>(M) * N);
  for (int j = 0; j < N; ++j)
    for (int i = 0; i < M; ++i) {
      float acc = 0.0f;
      for (int t = 0; t < K; t += kTile)
        for (int k = 0; k < kTile; ++k) {
          const bool in = t + k < K;
          acc = std::fmaf(in ? A[i + (t + k) * M] : 0.0f, in ? B[(t + k) + j * K] : 0.0f, acc);
        }
      C[i + static_cast<std::size_t>(j) * M] = acc;
    }
  return C;
}

struct GemmCase {
  int M, N, K;
  std::vector<float> A, B, want;
  GemmCase(int m, int n, int k, unsigned seed)
      : M(m),
        N(n),
        K(k),
        A(simtest::random_floats(std::size_t(m) * k, seed)),
        B(simtest::random_floats(std::size_t(k) * n, seed + 1)),
        want(cpu_tiled_gemm(A, B, m, n, k)) {}
};

// Runs the GEMM on fresh (poisoned, on the emulator) output memory; returns C.
template <bool kBarrier2>
std::vector<float> run_gemm(const GemmCase& g, cudaError_t* err) {
  DeviceBuffer<float> A(g.A), B(g.B), C(g.want.size());
  const dim3 block(kTile, kTile), grid((g.M + kTile - 1) / kTile, (g.N + kTile - 1) / kTile);
  tiled_gemm_kernel<kBarrier2><<<grid, block>>>(A.get(), B.get(), C.get(), g.M, g.N, g.K);
  *err = cudaGetLastError();
  if (*err == cudaSuccess) *err = cudaDeviceSynchronize();
  return C.download();
}

TEST_F(SimOrders, TiledGemmIsBitIdenticalUnderAllOrders) {
  const GemmCase cases[] = {{37, 29, 45, 1}, {16, 16, 16, 2}, {50, 3, 70, 3}, {1, 40, 17, 4}};
  for (const auto& g : cases) {
    simtest::for_each_schedule([&](const std::string& sched) {
      cudaError_t err;
      const auto C = run_gemm<true>(g, &err);
      ASSERT_CUDA_OK(err);
      EXPECT_EQ(simtest::count_bit_mismatches(C, g.want), 0u)
          << g.M << "x" << g.N << "x" << g.K << " " << sched;
    });
  }
}

constexpr int kReduceThreads = 256;

// Grid-stride partial sums, then a shared-memory tree with a barrier after every level.
__global__ void block_sum_kernel(const float* in, float* partial, int n) {
  __shared__ float s[kReduceThreads];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

std::vector<float> cpu_block_sum(const std::vector<float>& in, int blocks) {
  const int n = static_cast<int>(in.size());
  std::vector<float> partial(blocks);
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> s(kReduceThreads, 0.0f);
    for (int t = 0; t < kReduceThreads; ++t)
      for (int i = b * kReduceThreads + t; i < n; i += blocks * kReduceThreads) s[t] += in[i];
    for (int stride = kReduceThreads / 2; stride > 0; stride >>= 1)
      for (int t = 0; t < stride; ++t) s[t] += s[t + stride];
    partial[b] = s[0];
  }
  return partial;
}

// Two passes: 24 blocks of partial sums, then one block over the partials.
float gpu_two_pass_sum(const DeviceBuffer<float>& in, int n, cudaError_t* err) {
  const int blocks = 24;
  DeviceBuffer<float> partial(blocks), total(1);
  block_sum_kernel<<<blocks, kReduceThreads>>>(in.get(), partial.get(), n);
  block_sum_kernel<<<1, kReduceThreads>>>(partial.get(), total.get(), blocks);
  *err = cudaGetLastError();
  if (*err == cudaSuccess) *err = cudaDeviceSynchronize();
  return total.download()[0];
}

TEST_F(SimOrders, BlockReductionIsBitIdenticalUnderAllOrders) {
  const int n = 20000;
  const auto in = simtest::random_floats(n, 9);
  const float want = cpu_block_sum(cpu_block_sum(in, 24), 1)[0];
  DeviceBuffer<float> d_in(in);
  simtest::for_each_schedule([&](const std::string& sched) {
    cudaError_t err;
    const float got = gpu_two_pass_sum(d_in, n, &err);
    ASSERT_CUDA_OK(err);
    EXPECT_EQ(simtest::bits_of(got), simtest::bits_of(want)) << got << " vs " << want << " " << sched;
  });
}

#ifdef SIM_EMULATOR

__global__ void count_blocks_kernel(int* per_block, int* total) {
  atomicAdd(&per_block[blockIdx.x], 1);
  atomicAdd(total, 1);
}

TEST_F(SimOrders, TwoWorkersGiveIdenticalResults) {
  const GemmCase g(61, 45, 50, 11);
  const int n = 30000;
  const auto in = simtest::random_floats(n, 12);
  const float want_sum = cpu_block_sum(cpu_block_sum(in, 24), 1)[0];
  DeviceBuffer<float> d_in(in);
  for (const int workers : {1, 2}) {
    sim::set_workers(workers);
    ASSERT_EQ(sim::workers(), workers);
    simtest::for_each_schedule([&](const std::string& sched) {
      cudaError_t err;
      const auto C = run_gemm<true>(g, &err);
      ASSERT_CUDA_OK(err);
      EXPECT_EQ(simtest::count_bit_mismatches(C, g.want), 0u) << sched;
      const float got = gpu_two_pass_sum(d_in, n, &err);
      ASSERT_CUDA_OK(err);
      EXPECT_EQ(simtest::bits_of(got), simtest::bits_of(want_sum)) << sched;
      // Atomics from blocks running on different workers.
      const int blocks = 96, threads = 64;
      DeviceBuffer<int> per_block(blocks), total(1);
      ASSERT_CUDA_OK(per_block.fill_bytes(0));
      ASSERT_CUDA_OK(total.fill_bytes(0));
      count_blocks_kernel<<<blocks, threads>>>(per_block.get(), total.get());
      ASSERT_LAUNCH_OK();
      EXPECT_EQ(total.download()[0], blocks * threads) << sched;
      EXPECT_EQ(per_block.download(), std::vector<int>(blocks, threads)) << sched;
    });
  }
}

// Negative test (a): tiled_gemm_kernel<false> lacks barrier (2). A thread that finishes its
// 16 multiply-adds on tile t goes straight on to load tile t+1 into As[ty][tx] and Bs[ty][tx]
// while other threads still have to read those slots for tile t (As[ty][tx] is read by every
// thread of column tx, Bs[ty][tx] by every thread of row ty): a write-after-read race.
// Reverse order alone can miss a missing barrier: running higher thread indices first, it hides
// a read-after-write race whose readers have lower indices than the writer, and a write-after-
// read race whose readers have higher ones; forward order hides the mirror cases
// (OneDirectionalRacesNeedSeveralOrders shows both). Checked for this kernel: each slot has
// readers on both sides of its writer, so forward, reverse and both random seeds all catch it
// (about 1070 of the 1073 elements of C wrong); the test asserts that forward and reverse each
// do, besides "at least one order differs".
TEST_F(SimOrders, GemmWithoutSecondBarrierIsCaught) {
  const GemmCase g(37, 29, 45, 1);  // three K-tiles: two tile overwrites per block
  std::string report;
  int orders_catching = 0;
  bool forward_caught = false, reverse_caught = false;
  for (const auto& [order, seed] : simtest::all_orders()) {
    sim::set_order(order, seed);
    cudaError_t err;
    const auto C = run_gemm<false>(g, &err);
    ASSERT_CUDA_OK(err) << sim::last_fault();
    const std::size_t wrong = simtest::count_bit_mismatches(C, g.want);
    report += sim::describe_schedule() + ": " + std::to_string(wrong) + " wrong; ";
    if (wrong > 0) ++orders_catching;
    if (order == sim::Order::Forward) forward_caught = wrong > 0;
    if (order == sim::Order::Reverse) reverse_caught = wrong > 0;
  }
  EXPECT_GE(orders_catching, 1) << "the missing __syncthreads was not caught by any order: " << report;
  EXPECT_TRUE(forward_caught) << report;
  EXPECT_TRUE(reverse_caught) << report;
  // The correct kernel, same data, same orders: nothing wrong.
  for (const auto& [order, seed] : simtest::all_orders()) {
    sim::set_order(order, seed);
    cudaError_t err;
    EXPECT_EQ(simtest::count_bit_mismatches(run_gemm<true>(g, &err), g.want), 0u) << sim::describe_schedule();
  }
}

// Two one-directional races, to show why every test of a racy kernel loops over all orders.
// stencil_kernel<false>: out[i] = s[t] + s[t+1] without a barrier after filling s. Reader t
// needs the value written by thread t+1 (the halo s[blockDim.x] is written by the last thread),
// a read-after-write race that only forward order exposes: reverse order runs t+1 first.
// shift_kernel<false>: thread t reads s[t+1] and then overwrites s[t] without a barrier between;
// the reader of s[t] is thread t-1, a write-after-read race that only reverse order exposes.
constexpr int kRaceBlock = 128;

template <bool kBarrier>
__global__ void stencil_kernel(const float* in, float* out, int n) {
  __shared__ float s[kRaceBlock + 1];
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.0f;
  if (t == kRaceBlock - 1) s[kRaceBlock] = i + 1 < n ? in[i + 1] : 0.0f;
  if constexpr (kBarrier) __syncthreads();
  if (i < n) out[i] = s[t] + s[t + 1];
}

template <bool kBarrier>
__global__ void shift_kernel(const float* in, float* out) {
  __shared__ float s[kRaceBlock];
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = in[i];
  __syncthreads();
  const float v = t + 1 < kRaceBlock ? s[t + 1] : 0.0f;
  if constexpr (kBarrier) __syncthreads();
  s[t] = 2.0f * v;
  __syncthreads();
  out[i] = s[t];
}

template <bool kBarrier>
std::size_t wrong_stencil(const DeviceBuffer<float>& in, int n, const std::vector<float>& want) {
  DeviceBuffer<float> out(n);
  stencil_kernel<kBarrier><<<(n + kRaceBlock - 1) / kRaceBlock, kRaceBlock>>>(in.get(), out.get(), n);
  if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return want.size() + 1;
  return simtest::count_bit_mismatches(out.download(), want);
}

template <bool kBarrier>
std::size_t wrong_shift(const DeviceBuffer<float>& in, int n, const std::vector<float>& want) {
  DeviceBuffer<float> out(n);
  shift_kernel<kBarrier><<<n / kRaceBlock, kRaceBlock>>>(in.get(), out.get());
  if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return want.size() + 1;
  return simtest::count_bit_mismatches(out.download(), want);
}

// The adversarial orders on their own: racecheck (on by default) would stop these racy kernels
// before their wrong data could be seen, so it is off here (restored at the end).
TEST_F(SimOrders, OneDirectionalRacesNeedSeveralOrders) {
  struct RacecheckOff {
    RacecheckOff() { sim::set_racecheck(false); }
    ~RacecheckOff() { sim::set_racecheck(true); }
  } off;
  const int n = 3 * kRaceBlock;
  const auto in = simtest::random_floats(n, 17);
  std::vector<float> want_stencil(n), want_shift(n);
  for (int i = 0; i < n; ++i) {
    want_stencil[i] = in[i] + (i + 1 < n ? in[i + 1] : 0.0f);
    want_shift[i] = i % kRaceBlock + 1 < kRaceBlock ? 2.0f * in[i + 1] : 0.0f;
  }
  DeviceBuffer<float> d_in(in);
  for (const auto& [order, seed] : simtest::all_orders()) {
    sim::set_order(order, seed);
    const std::string sched = sim::describe_schedule();
    const std::size_t stencil = wrong_stencil<false>(d_in, n, want_stencil);
    const std::size_t shift = wrong_shift<false>(d_in, n, want_shift);
    if (order == sim::Order::Forward) {
      EXPECT_GT(stencil, 0u) << "forward order misses the read-after-write race " << sched;
      EXPECT_EQ(shift, 0u) << "forward order cannot see the write-after-read race " << sched;
    } else if (order == sim::Order::Reverse) {
      EXPECT_EQ(stencil, 0u) << "reverse order cannot see the read-after-write race " << sched;
      EXPECT_GT(shift, 0u) << "reverse order misses the write-after-read race " << sched;
    } else {
      EXPECT_GT(stencil, 0u) << sched;
      EXPECT_GT(shift, 0u) << sched;
    }
    EXPECT_EQ(wrong_stencil<true>(d_in, n, want_stencil), 0u) << sched;
    EXPECT_EQ(wrong_shift<true>(d_in, n, want_shift), 0u) << sched;
  }
}

// A seeded random order is a reproducible schedule: the racy GEMM's (wrong) result repeats.
TEST_F(SimOrders, SeededRandomOrderIsReproducible) {
  const GemmCase g(37, 29, 45, 5);
  sim::set_workers(1);
  sim::set_order(sim::Order::Random, 99);
  EXPECT_EQ(sim::order(), sim::Order::Random);
  EXPECT_EQ(sim::seed(), 99ULL);
  cudaError_t err;
  const auto first = run_gemm<false>(g, &err);
  ASSERT_CUDA_OK(err);
  sim::set_order(sim::Order::Random, 99);
  const auto second = run_gemm<false>(g, &err);
  ASSERT_CUDA_OK(err);
  EXPECT_EQ(simtest::count_bit_mismatches(first, second), 0u) << sim::describe_schedule();
}

#endif  // SIM_EMULATOR

}  // namespace
