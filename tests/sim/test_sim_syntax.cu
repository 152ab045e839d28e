// Positive tests of the CUDA C++ the emulator accepts: index variables and dim3, static/dynamic
// shared memory, __syncthreads_count/_and/_or (atomics, intrinsics, vector types, __ldg and
// #pragma unroll: test_sim_syntax_ops.cu; templates: test_sim_syntax_templates.cu). Valid CUDA
// (simcc and nvcc); runs in nn_tests or alone (-lgtest_main, with those two files).
#include <cmath>
#include <type_traits>
#include <vector>

#include "sim_syntax_util.h"

namespace {

using simtest::DeviceBuffer;

// ---- built-in index variables -------------------------------------------------------------

constexpr int kIndexFields = 13;

__global__ void index_kernel(int* out) {
  const int threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  const int block_linear = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int thread_linear = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  int* o = out + (block_linear * threads_per_block + thread_linear) * kIndexFields;
  o[0] = threadIdx.x;
  o[1] = threadIdx.y;
  o[2] = threadIdx.z;
  o[3] = blockIdx.x;
  o[4] = blockIdx.y;
  o[5] = blockIdx.z;
  o[6] = blockDim.x;
  o[7] = blockDim.y;
  o[8] = blockDim.z;
  o[9] = gridDim.x;
  o[10] = gridDim.y;
  o[11] = gridDim.z;
  o[12] = warpSize;
}

// Every (block, thread) combination wrote exactly its own record.
void check_indices(const std::vector<int>& h, dim3 g, dim3 b) {
  std::size_t idx = 0;
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx)
        for (unsigned tz = 0; tz < b.z; ++tz)
          for (unsigned ty = 0; ty < b.y; ++ty)
            for (unsigned tx = 0; tx < b.x; ++tx, ++idx) {
              const int want[kIndexFields] = {int(tx),  int(ty),  int(tz),  int(bx),  int(by),
                                              int(bz),  int(b.x), int(b.y), int(b.z), int(g.x),
                                              int(g.y), int(g.z), 32};
              for (int f = 0; f < kIndexFields; ++f)
                ASSERT_EQ(h[idx * kIndexFields + f], want[f])
                    << "field " << f << " of block (" << bx << "," << by << "," << bz << ") thread (" << tx
                    << "," << ty << "," << tz << ") " << simtest::schedule();
            }
}

TEST_F(SimSyntax, Dim3DefaultsToOne) {
  const dim3 a;
  const dim3 b(7);
  const dim3 c(2, 3);
  EXPECT_EQ(a.x, 1u);
  EXPECT_EQ(a.y, 1u);
  EXPECT_EQ(a.z, 1u);
  EXPECT_EQ(b.x, 7u);
  EXPECT_EQ(b.y, 1u);
  EXPECT_EQ(b.z, 1u);
  EXPECT_EQ(c.x, 2u);
  EXPECT_EQ(c.y, 3u);
  EXPECT_EQ(c.z, 1u);
}

TEST_F(SimSyntax, ThreeDimensionalGridAndBlockIndexCorrectly) {
  const dim3 grids[] = {dim3(3, 2, 2), dim3(2, 3), dim3(1, 1, 3)};
  const dim3 blocks[] = {dim3(4, 3, 2), dim3(5), dim3(2, 2, 8)};
  for (int c = 0; c < 3; ++c) {
    const dim3 g = grids[c], b = blocks[c];
    const std::size_t threads = std::size_t(g.x) * g.y * g.z * b.x * b.y * b.z;
    DeviceBuffer<int> out(threads * kIndexFields);
    ASSERT_CUDA_OK(out.fill_bytes(0xFF));
    index_kernel<<<g, b>>>(out.get());
    ASSERT_LAUNCH_OK();
    check_indices(out.download(), g, b);
    if (HasFatalFailure()) return;
  }
}

TEST_F(SimSyntax, PlainIntLaunchConfiguration) {
  DeviceBuffer<int> out(3 * 7 * kIndexFields);
  ASSERT_CUDA_OK(out.fill_bytes(0xFF));
  index_kernel<<<3, 7>>>(out.get());
  ASSERT_LAUNCH_OK();
  check_indices(out.download(), dim3(3), dim3(7));
}

// ---- shared memory -------------------------------------------------------------------------

constexpr int kStaticBlock = 128;

__global__ void reverse_static_shared_kernel(const int* in, int* out) {
  __shared__ int buf[kStaticBlock];
  __shared__ float table[8][9];
  const int t = threadIdx.x;
  buf[t] = in[blockIdx.x * kStaticBlock + t];
  if (t < 72) table[t / 9][t % 9] = static_cast<float>(t);
  __syncthreads();
  const int u = 71 - t;
  out[blockIdx.x * kStaticBlock + t] =
      buf[kStaticBlock - 1 - t] + (t < 72 ? static_cast<int>(table[u / 9][u % 9]) : 0);
}

TEST_F(SimSyntax, StaticSharedMemory) {
  const int blocks = 5;
  const auto in = simtest::random_ints(blocks * kStaticBlock, 11, -1000, 1000);
  DeviceBuffer<int> d_in(in), d_out(in.size());
  ASSERT_CUDA_OK(d_in.status());
  simtest::for_each_schedule([&](const std::string& sched) {
    reverse_static_shared_kernel<<<blocks, kStaticBlock>>>(d_in.get(), d_out.get());
    ASSERT_LAUNCH_OK();
    const auto h = d_out.download();
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < kStaticBlock; ++t)
        ASSERT_EQ(h[b * kStaticBlock + t],
                  in[b * kStaticBlock + kStaticBlock - 1 - t] + (t < 72 ? 71 - t : 0))
            << "block " << b << " thread " << t << " " << sched;
  });
}

// A __shared__ scalar updated with shared-memory atomics, and a __device__ helper that has its
// own static __shared__ array and barriers (a block-wide sum).
__device__ int block_sum(int v) {
  __shared__ int partial[kStaticBlock];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const int total = partial[0];
  __syncthreads();  // partial is reused by the next call
  return total;
}

__global__ void shared_scalar_kernel(const int* in, int* out) {
  __shared__ int counter;
  __shared__ int maximum;
  const int t = threadIdx.x, v = in[blockIdx.x * kStaticBlock + t];
  if (t == 0) {
    counter = 0;
    maximum = -1000000;
  }
  __syncthreads();
  atomicAdd(&counter, v);
  atomicMax(&maximum, v);
  const int first = block_sum(v);
  const int second = block_sum(2 * v);
  __syncthreads();
  if (t == 0) {
    out[blockIdx.x * 4 + 0] = counter;
    out[blockIdx.x * 4 + 1] = maximum;
    out[blockIdx.x * 4 + 2] = first;
    out[blockIdx.x * 4 + 3] = second;
  }
}

TEST_F(SimSyntax, SharedScalarsAtomicsAndSharedInDeviceFunctions) {
  const int blocks = 4;
  const auto in = simtest::random_ints(blocks * kStaticBlock, 13, -1000, 1000);
  DeviceBuffer<int> d_in(in), out(blocks * 4);
  simtest::for_each_schedule([&](const std::string& sched) {
    shared_scalar_kernel<<<blocks, kStaticBlock>>>(d_in.get(), out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int b = 0; b < blocks; ++b) {
      int sum = 0, mx = -1000000;
      for (int t = 0; t < kStaticBlock; ++t) {
        sum += in[b * kStaticBlock + t];
        mx = std::max(mx, in[b * kStaticBlock + t]);
      }
      EXPECT_EQ(h[b * 4 + 0], sum) << "block " << b << " " << sched;
      EXPECT_EQ(h[b * 4 + 1], mx) << "block " << b << " " << sched;
      EXPECT_EQ(h[b * 4 + 2], sum) << "block " << b << " " << sched;
      EXPECT_EQ(h[b * 4 + 3], 2 * sum) << "block " << b << " " << sched;
    }
  });
}

// Two arrays carved out of one dynamic shared allocation, as real kernels do.
__global__ void reverse_dynamic_shared_kernel(const float* in, float* out, int n) {
  extern __shared__ float dyn_floats[];
  int* tags = reinterpret_cast<int*>(dyn_floats + blockDim.x);
  const int t = threadIdx.x;
  const int base = blockIdx.x * blockDim.x;
  dyn_floats[t] = base + t < n ? in[base + t] : 0.0f;
  tags[t] = t;
  __syncthreads();
  const int src = blockDim.x - 1 - t;
  if (base + t < n) out[base + t] = dyn_floats[src] + static_cast<float>(tags[src]);
}

TEST_F(SimSyntax, DynamicSharedMemory) {
  const int block = 96, blocks = 5, n = block * blocks - 10;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i % 50) * 0.25f;
  DeviceBuffer<float> d_in(in), d_out(n);
  ASSERT_CUDA_OK(d_in.status());
  simtest::for_each_schedule([&](const std::string& sched) {
    reverse_dynamic_shared_kernel<<<blocks, block, block*(sizeof(float) + sizeof(int))>>>(d_in.get(),
                                                                                          d_out.get(), n);
    ASSERT_LAUNCH_OK();
    const auto h = d_out.download();
    for (int i = 0; i < n; ++i) {
      const int base = i / block * block, src = block - 1 - i % block;
      const float want = (base + src < n ? in[base + src] : 0.0f) + static_cast<float>(src);
      ASSERT_EQ(h[i], want) << "element " << i << " " << sched;
    }
  });
}

// ---- barriers with a predicate ---------------------------------------------------------------

constexpr int kPredBlock = 256;

__global__ void barrier_predicate_kernel(int* out) {
  const int t = threadIdx.x;
  int* o = out + (blockIdx.x * blockDim.x + t) * 5;
  o[0] = __syncthreads_count((t + blockIdx.x) % 3 == 0);
  o[1] = __syncthreads_and(t < 100000);
  o[2] = __syncthreads_and(t != 77);
  o[3] = __syncthreads_or(t == kPredBlock - 1);
  o[4] = __syncthreads_or(0);
}

TEST_F(SimSyntax, SyncthreadsCountAndOr) {
  const int blocks = 3;
  DeviceBuffer<int> out(blocks * kPredBlock * 5);
  simtest::for_each_schedule([&](const std::string& sched) {
    ASSERT_CUDA_OK(out.fill_bytes(0xFF));
    barrier_predicate_kernel<<<blocks, kPredBlock>>>(out.get());
    ASSERT_LAUNCH_OK();
    const auto h = out.download();
    for (int b = 0; b < blocks; ++b) {
      int want_count = 0;
      for (int t = 0; t < kPredBlock; ++t) want_count += (t + b) % 3 == 0;
      for (int t = 0; t < kPredBlock; ++t) {
        const int* o = &h[(b * kPredBlock + t) * 5];
        ASSERT_EQ(o[0], want_count) << "count, block " << b << " thread " << t << " " << sched;
        ASSERT_NE(o[1], 0) << "and(all true), block " << b << " thread " << t << " " << sched;
        ASSERT_EQ(o[2], 0) << "and(one false), block " << b << " thread " << t << " " << sched;
        ASSERT_NE(o[3], 0) << "or(one true), block " << b << " thread " << t << " " << sched;
        ASSERT_EQ(o[4], 0) << "or(all false), block " << b << " thread " << t << " " << sched;
      }
    }
  });
}

}  // namespace
