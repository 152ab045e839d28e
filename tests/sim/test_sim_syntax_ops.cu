// Positive tests of the CUDA C++ the emulator accepts, its operations: atomics from many blocks,
// math intrinsics, vector types, __ldg and #pragma unroll. Valid CUDA (simcc and nvcc).
#include <cmath>
#include <type_traits>
#include <vector>

#include "sim_syntax_util.h"

namespace {

using simtest::DeviceBuffer;

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

}  // namespace
