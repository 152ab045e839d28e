// Positive tests of the CUDA C++ the emulator accepts: index variables and dim3, static/dynamic
// shared memory, __syncthreads_count/_and/_or, atomics, math intrinsics, vector types, __ldg,
// #pragma unroll, templates. Valid CUDA (simcc and nvcc); runs in nn_tests or alone (-lgtest_main).
#include <cmath>
#include <type_traits>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

class SimSyntax : public simtest::SimTest {};

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

// ---- atomics ---------------------------------------------------------------------------------

struct AtomicTargets {
  int* add_i;
  unsigned* add_u;
  float* add_f;
  double* add_d;
  int* max_i;
  unsigned* max_u;
  int* cas_i;
  unsigned* cas_u;
  int* ticket;
  int* ticket_hits;
};

__global__ void atomics_kernel(AtomicTargets a, int total) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(a.add_i, 1);
  atomicAdd(a.add_u, 2u);
  atomicAdd(a.add_f, 1.0f);
  atomicAdd(a.add_d, 0.5);
  atomicMax(a.max_i, (g * 7919) % total - total / 2);
  atomicMax(a.max_u, static_cast<unsigned>(g) * 3u);
  // Lock-free increments through compare-and-swap loops.
  int old_i = *a.cas_i;
  for (;;) {
    const int assumed = old_i;
    old_i = atomicCAS(a.cas_i, assumed, assumed + 1);
    if (old_i == assumed) break;
  }
  unsigned old_u = *a.cas_u;
  for (;;) {
    const unsigned assumed = old_u;
    old_u = atomicCAS(a.cas_u, assumed, assumed + 3u);
    if (old_u == assumed) break;
  }
  // atomicAdd returns the old value: every ticket is handed out exactly once.
  const int t = atomicAdd(a.ticket, 1);
  if (t >= 0 && t < total) atomicAdd(&a.ticket_hits[t], 1);
}

TEST_F(SimSyntax, AtomicsFromManyBlocksAreExact) {
  const int blocks = 64, block = 128, total = blocks * block;
  DeviceBuffer<int> add_i(1), max_i(1), cas_i(1), ticket(1), hits(total);
  DeviceBuffer<unsigned> add_u(1), max_u(1), cas_u(1);
  DeviceBuffer<float> add_f(1);
  DeviceBuffer<double> add_d(1);
  const AtomicTargets a{add_i.get(), add_u.get(), add_f.get(), add_d.get(),  max_i.get(),
                        max_u.get(), cas_i.get(), cas_u.get(), ticket.get(), hits.get()};
  int want_max_i = -total;
  for (int g = 0; g < total; ++g) want_max_i = std::max(want_max_i, (g * 7919) % total - total / 2);
  simtest::for_each_schedule([&](const std::string& sched) {
    for (auto* p : {add_i.get(), cas_i.get(), ticket.get(), hits.get()})
      ASSERT_CUDA_OK(cudaMemset(p, 0, p == hits.get() ? hits.bytes() : sizeof(int)));
    ASSERT_CUDA_OK(add_u.fill_bytes(0));
    ASSERT_CUDA_OK(cas_u.fill_bytes(0));
    ASSERT_CUDA_OK(max_u.fill_bytes(0));
    ASSERT_CUDA_OK(add_f.fill_bytes(0));
    ASSERT_CUDA_OK(add_d.fill_bytes(0));
    const int lowest = -total - 1;
    ASSERT_CUDA_OK(cudaMemcpy(max_i.get(), &lowest, sizeof lowest, cudaMemcpyHostToDevice));
    atomics_kernel<<<blocks, block>>>(a, total);
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(add_i.download()[0], total) << sched;
    EXPECT_EQ(add_u.download()[0], 2u * total) << sched;
    EXPECT_EQ(add_f.download()[0], static_cast<float>(total)) << sched;
    EXPECT_EQ(add_d.download()[0], 0.5 * total) << sched;
    EXPECT_EQ(max_i.download()[0], want_max_i) << sched;
    EXPECT_EQ(max_u.download()[0], 3u * (total - 1)) << sched;
    EXPECT_EQ(cas_i.download()[0], total) << sched;
    EXPECT_EQ(cas_u.download()[0], 3u * total) << sched;
    EXPECT_EQ(ticket.download()[0], total) << sched;
    const auto h = hits.download();
    for (int t = 0; t < total; ++t) ASSERT_EQ(h[t], 1) << "ticket " << t << " " << sched;
  });
}

// ---- math intrinsics -------------------------------------------------------------------------

constexpr int kMathOut = 10;

__global__ void math_kernel(const float* x, const float* y, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float a = x[i], b = y[i], p = fabsf(a) + 0.5f;
  float* o = out + i * kMathOut;
  o[0] = __expf(a);
  o[1] = __fdividef(a, b);
  o[2] = rsqrtf(p);
  o[3] = expf(a);
  o[4] = logf(p);
  o[5] = sqrtf(p);
  o[6] = tanhf(a);
  o[7] = fmaxf(a, b);
  o[8] = fminf(a, b);
  o[9] = fabsf(a);
}

TEST_F(SimSyntax, MathIntrinsics) {
  const int n = 200;
  const auto x = simtest::random_floats(n, 3, -4.0f, 4.0f);
  const auto y = simtest::random_floats(n, 4, 0.5f, 3.0f);
  DeviceBuffer<float> dx(x), dy(y), out(n * kMathOut);
  math_kernel<<<(n + 63) / 64, 64>>>(dx.get(), dy.get(), out.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  auto near = [](double got, double want, double rel) {
    return std::fabs(got - want) <= rel * std::fabs(want) + 1e-30;
  };
  for (int i = 0; i < n; ++i) {
    const double a = x[i], b = y[i], p = std::fabs(a) + 0.5;
    const float* o = &h[i * kMathOut];
    EXPECT_TRUE(near(o[0], std::exp(a), 1e-5)) << "__expf(" << a << ") = " << o[0];
    EXPECT_TRUE(near(o[1], a / b, 1e-5)) << "__fdividef(" << a << ", " << b << ") = " << o[1];
    EXPECT_TRUE(near(o[2], 1.0 / std::sqrt(p), 1e-5)) << "rsqrtf(" << p << ") = " << o[2];
    EXPECT_TRUE(near(o[3], std::exp(a), 1e-6)) << "expf(" << a << ") = " << o[3];
    EXPECT_TRUE(near(o[4], std::log(p), 1e-6) || std::fabs(o[4] - std::log(p)) < 1e-7) << "logf(" << p << ")";
    EXPECT_TRUE(near(o[5], std::sqrt(p), 1e-6)) << "sqrtf(" << p << ")";
    EXPECT_TRUE(near(o[6], std::tanh(a), 1e-6)) << "tanhf(" << a << ")";
    EXPECT_EQ(o[7], std::fmax(x[i], y[i]));
    EXPECT_EQ(o[8], std::fmin(x[i], y[i]));
    EXPECT_EQ(o[9], std::fabs(x[i]));
    if (HasFailure()) return;
  }
}

// ---- vector types, __ldg, #pragma unroll ------------------------------------------------------

__global__ void vector_types_kernel(const float4* in, float4* out4, float2* out2, double2* outd, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 v = in[i];
  out4[i] = make_float4(v.w, v.z, v.y, v.x);
  out2[i] = make_float2(v.x + v.y, v.z * v.w);
  outd[i] = make_double2(static_cast<double>(v.x) * 2.0, static_cast<double>(v.w) - 1.0);
}

TEST_F(SimSyntax, VectorTypes) {
  EXPECT_EQ(sizeof(float2), 8u);
  EXPECT_EQ(sizeof(float4), 16u);
  EXPECT_EQ(sizeof(double2), 16u);
  EXPECT_EQ(alignof(float2), 8u);
  EXPECT_EQ(alignof(float4), 16u);
  EXPECT_EQ(alignof(double2), 16u);
  const int n = 77;
  std::vector<float4> in(n);
  for (int i = 0; i < n; ++i) in[i] = make_float4(i * 1.0f, i * 0.5f, i - 3.0f, 2.0f - i);
  DeviceBuffer<float4> d_in(in), out4(n);
  DeviceBuffer<float2> out2(n);
  DeviceBuffer<double2> outd(n);
  vector_types_kernel<<<3, 32>>>(d_in.get(), out4.get(), out2.get(), outd.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h4 = out4.download();
  const auto h2 = out2.download();
  const auto hd = outd.download();
  for (int i = 0; i < n; ++i) {
    const float4 v = in[i];
    ASSERT_EQ(h4[i].x, v.w);
    ASSERT_EQ(h4[i].y, v.z);
    ASSERT_EQ(h4[i].z, v.y);
    ASSERT_EQ(h4[i].w, v.x);
    ASSERT_EQ(h2[i].x, v.x + v.y);
    ASSERT_EQ(h2[i].y, v.z * v.w);
    ASSERT_EQ(hd[i].x, static_cast<double>(v.x) * 2.0);
    ASSERT_EQ(hd[i].y, static_cast<double>(v.w) - 1.0);
  }
}

__global__ void ldg_kernel(const float* __restrict__ in, const int* __restrict__ idx, float* __restrict__ out,
                           int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __ldg(&in[__ldg(&idx[i])]) * 2.0f;
}

TEST_F(SimSyntax, Ldg) {
  const int n = 100;
  std::vector<float> in(n);
  std::vector<int> idx(n);
  for (int i = 0; i < n; ++i) {
    in[i] = 0.5f * i;
    idx[i] = (i * 37) % n;
  }
  DeviceBuffer<float> d_in(in), out(n);
  DeviceBuffer<int> d_idx(idx);
  ldg_kernel<<<2, 64>>>(d_in.get(), d_idx.get(), out.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], in[idx[i]] * 2.0f) << i;
}

__global__ void unroll_kernel(const int* in, int* out, int n, int reps) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int acc = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) acc += in[i] * (k + 1);
#pragma unroll 4
  for (int k = 0; k < reps; ++k) acc += k;
#pragma unroll 1
  for (int k = 0; k < 3; ++k) acc ^= k << 20;
  out[i] = acc;
}

TEST_F(SimSyntax, PragmaUnroll) {
  const int n = 50, reps = 13;
  const auto in = simtest::random_ints(n, 5, -100, 100);
  DeviceBuffer<int> d_in(in), out(n);
  unroll_kernel<<<1, 64>>>(d_in.get(), out.get(), n, reps);
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], (36 * in[i] + reps * (reps - 1) / 2) ^ (3 << 20)) << i;
}

// ---- templates, structs by value, __host__ __device__ -------------------------------------------

template <typename T, int kScale>
__global__ void scale_add_kernel(const T* in, T* out, int n, T offset) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * static_cast<T>(kScale) + offset;
}

template <typename T, int kScale>
void check_scale_add(int n, T offset) {
  std::vector<T> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<T>(i - n / 2);
  DeviceBuffer<T> d_in(in), out(n);
  scale_add_kernel<T, kScale><<<(n + 31) / 32, 32>>>(d_in.get(), out.get(), n, offset);
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], in[i] * static_cast<T>(kScale) + offset) << i;
}

template <typename T>
__global__ void axpy_kernel(T a, const T* x, T* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

TEST_F(SimSyntax, TemplatedKernels) {
  check_scale_add<float, 3>(70, 0.5f);
  check_scale_add<double, -2>(45, 0.25);
  check_scale_add<int, 5>(33, 7);
  // Template arguments deduced from the launch's arguments.
  const int n = 40;
  std::vector<double> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = i;
    y[i] = 1.0 - i;
  }
  DeviceBuffer<double> dx(x), dy(y);
  axpy_kernel<<<2, 32>>>(3.0, dx.get(), dy.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h = dy.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], 3.0 * x[i] + y[i]) << i;
}

struct SaxpyParams {
  int n;
  float a;
  const float* x;
  float* y;
};

__global__ void struct_param_kernel(SaxpyParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.a * p.x[i] + p.y[i];
}

__host__ __device__ inline int mix(int a, int b) { return a * 31 + (b ^ 5); }
__device__ int device_helper(int v) { return mix(v, v + 1); }

__global__ void device_function_kernel(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = device_helper(i);
}

TEST_F(SimSyntax, StructArgumentAndDeviceFunctions) {
  const int n = 90;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(3 * i - 1);
  }
  DeviceBuffer<float> dx(x), dy(y);
  struct_param_kernel<<<2, 64>>>(SaxpyParams{n, 2.0f, dx.get(), dy.get()});
  ASSERT_LAUNCH_OK();
  const auto hy = dy.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(hy[i], 2.0f * x[i] + y[i]) << i;

  DeviceBuffer<int> out(n);
  device_function_kernel<<<3, 32>>>(out.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h = out.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], mix(i, i + 1)) << i;
}

}  // namespace
