// Launch bounds and misaligned addresses (sim/strict.h, runtime/strict.cpp, simcc).
// (a) A launch with more threads per block than the kernel's __launch_bounds__ fails with
//     cudaErrorInvalidValue (what CUDA 13.0 answers on an H200: sim/docs/faults.md, "Checked on a
//     GPU"), runs nothing and is not sticky; at the bound it runs. These tests are valid CUDA and also build under nvcc; the emulator-only
//     parts (messages, the three-argument form, sim:: calls) are inside #ifdef SIM_EMULATOR.
// (b) Misaligned vector loads/stores and atomics in a kernel are the sticky
//     cudaErrorMisalignedAddress fault, naming kernel, address, alignment and file:line
//     (emulator only: on a GPU the fault would spoil the context for the other tests).
// Runs in nn_tests (--gtest_filter='SimBoundsAlign*') or alone (link -lgtest_main).
#include <cstdio>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

class SimBoundsAlign : public simtest::SimTest {};

// ---- launch bounds --------------------------------------------------------------------------

constexpr int kBound = 64;
struct Tile {
  static constexpr int kThreads = 2 * kBound;  // a constexpr member, as kernels/gemm/4_warptile.cu uses
};
#define SIM_TEST_BOUNDS_OBJ __launch_bounds__(kBound)
#define SIM_TEST_BOUNDS_FN(n, m) __launch_bounds__(n, m)

// Every thread that runs counts itself.
__global__ void __launch_bounds__(kBound) bounded_count(unsigned* count) { atomicAdd(count, 1u); }
#ifdef SIM_EMULATOR
constexpr int kBoundedLine = __LINE__ - 2;
#endif

__global__ void __launch_bounds__(kBound, 4)
    bounded_min_blocks(unsigned* count) {
  atomicAdd(count, 1u);
}

template <int N>
__global__ void __launch_bounds__(N) bounded_template(unsigned* count) {
  atomicAdd(count, 1u);
}

// Bounds from a constexpr member of a template parameter; the kernel is deduced at the launch.
template <class S, class T>
__global__ void __launch_bounds__(S::kThreads) bounded_member(T* count) {
  atomicAdd(count, T(1));
}

__global__ void SIM_TEST_BOUNDS_OBJ bounded_macro(unsigned* count) { atomicAdd(count, 1u); }
__global__ void SIM_TEST_BOUNDS_FN(2 * kBound, 1) bounded_macro_fn(unsigned* count) {
  atomicAdd(count, 1u);
}

// A prototype with the bounds; the definition has none (CUDA keeps the prototype's).
__global__ void __launch_bounds__(kBound) bounded_prototype(unsigned* count);
__global__ void bounded_prototype(unsigned* count) { atomicAdd(count, 1u); }

// Bounds before __global__, and a body whose first line has code.
__launch_bounds__(kBound / 2) __global__ void bounded_first(unsigned* count) { atomicAdd(count, 1u); }

#ifdef SIM_EMULATOR
// The third argument (maxBlocksPerCluster, sm_90) is accepted and not checked (no clusters).
__global__ void __launch_bounds__(kBound, 2, 1) bounded_cluster(unsigned* count) {
  atomicAdd(count, 1u);
}
#endif

unsigned read_count(const DeviceBuffer<unsigned>& c) { return c.download()[0]; }

// Launches `launch(count)` with an over-bound block: refused with the launch error, nothing ran,
// the error is reported once (not sticky) and the device stays usable.
template <class Launch>
void expect_refused(DeviceBuffer<unsigned>& count, Launch launch, const std::string& what) {
  ASSERT_CUDA_OK(cudaMemset(count.get(), 0, count.bytes()));
  launch(count.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << what;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not sticky: " << what;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(read_count(count), 0u) << "no thread of a refused launch may run: " << what;
#ifdef SIM_EMULATOR
  EXPECT_EQ(sim::last_fault(), "") << "a refused launch is not a fault: " << what;
#endif
}

template <class Launch>
void expect_runs(DeviceBuffer<unsigned>& count, Launch launch, unsigned threads, const std::string& what) {
  ASSERT_CUDA_OK(cudaMemset(count.get(), 0, count.bytes()));
  launch(count.get());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(read_count(count), threads) << what;
}

TEST_F(SimBoundsAlign, LaunchOverTheBoundIsRefusedAndNotSticky) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  expect_refused(count, [](unsigned* c) { bounded_count<<<3, kBound + 1>>>(c); }, "65 threads");
  expect_refused(count, [](unsigned* c) { bounded_count<<<2, dim3(16, 8)>>>(c); }, "16x8 threads");
  expect_refused(count, [](unsigned* c) { bounded_count<<<1, 1024>>>(c); }, "1024 threads");
  // The same kernel within its bound, before and after: exactly as without bounds.
  expect_runs(count, [](unsigned* c) { bounded_count<<<3, kBound>>>(c); }, 3 * kBound, "at the bound");
  expect_runs(count, [](unsigned* c) { bounded_count<<<2, dim3(8, 4, 2)>>>(c); }, 2 * kBound, "8x4x2");
  expect_runs(count, [](unsigned* c) { bounded_count<<<5, 1>>>(c); }, 5, "one thread");
}

TEST_F(SimBoundsAlign, EveryScheduleAndTwoWorkersRunNothingOverTheBound) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
#ifdef SIM_EMULATOR
  sim::set_workers(2);
#endif
  simtest::for_each_schedule([&](const std::string& sched) {
    expect_refused(count, [](unsigned* c) { bounded_count<<<16, 2 * kBound>>>(c); }, sched);
    expect_runs(count, [](unsigned* c) { bounded_count<<<16, kBound>>>(c); }, 16 * kBound, sched);
  });
}

TEST_F(SimBoundsAlign, MinBlocksFormBoundsOnlyTheThreads) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  expect_refused(count, [](unsigned* c) { bounded_min_blocks<<<1, kBound + 32>>>(c); }, "(64, 4)");
  // minBlocksPerMultiprocessor is an occupancy hint: any grid within the thread bound runs.
  expect_runs(count, [](unsigned* c) { bounded_min_blocks<<<1, kBound>>>(c); }, kBound, "1 block");
  expect_runs(count, [](unsigned* c) { bounded_min_blocks<<<7, 32>>>(c); }, 7 * 32, "7 blocks");
#ifdef SIM_EMULATOR
  expect_refused(count, [](unsigned* c) { bounded_cluster<<<1, kBound + 1>>>(c); }, "(64, 2, 1)");
  expect_runs(count, [](unsigned* c) { bounded_cluster<<<2, kBound>>>(c); }, 2 * kBound, "(64, 2, 1)");
#endif
}

TEST_F(SimBoundsAlign, TemplateKernelsUseTheirInstantiationsBound) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  expect_refused(count, [](unsigned* c) { bounded_template<32><<<1, 64>>>(c); }, "<32> at 64");
  expect_runs(count, [](unsigned* c) { bounded_template<64><<<1, 64>>>(c); }, 64, "<64> at 64");
  expect_runs(count, [](unsigned* c) { bounded_template<32><<<2, 32>>>(c); }, 64, "<32> at 32");
  expect_refused(count, [](unsigned* c) { bounded_template<256><<<1, 257>>>(c); }, "<256> at 257");
  // Bound Tile::kThreads == 128; T deduced from the argument.
  expect_refused(count, [](unsigned* c) { bounded_member<Tile><<<1, Tile::kThreads + 1>>>(c); },
                 "member bound, deduced");
  expect_runs(count, [](unsigned* c) { bounded_member<Tile><<<2, Tile::kThreads>>>(c); },
              2 * Tile::kThreads, "member bound at the bound");
}

TEST_F(SimBoundsAlign, MacrosPrototypesAndLeadingBounds) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  expect_refused(count, [](unsigned* c) { bounded_macro<<<1, kBound + 1>>>(c); }, "object-like macro");
  expect_runs(count, [](unsigned* c) { bounded_macro<<<1, kBound>>>(c); }, kBound, "object-like macro");
  expect_refused(count, [](unsigned* c) { bounded_macro_fn<<<1, 2 * kBound + 1>>>(c); }, "macro(n, m)");
  expect_runs(count, [](unsigned* c) { bounded_macro_fn<<<1, 2 * kBound>>>(c); }, 2 * kBound, "macro(n, m)");
  expect_refused(count, [](unsigned* c) { bounded_prototype<<<1, kBound + 1>>>(c); }, "prototype");
  expect_runs(count, [](unsigned* c) { bounded_prototype<<<1, kBound>>>(c); }, kBound, "prototype");
  expect_refused(count, [](unsigned* c) { bounded_first<<<1, kBound / 2 + 1>>>(c); }, "leading bounds");
  expect_runs(count, [](unsigned* c) { bounded_first<<<1, kBound / 2>>>(c); }, kBound / 2, "leading bounds");
}

#ifdef SIM_EMULATOR

const std::string kThisFile = "test_sim_bounds_align.cu";

TEST_F(SimBoundsAlign, RefusalPrintsOneLineInAbortMode) {
  DeviceBuffer<unsigned> count(1);
  ASSERT_CUDA_OK(count.status());
  ASSERT_CUDA_OK(cudaMemset(count.get(), 0, count.bytes()));
  sim::set_fault_mode(sim::FaultMode::Abort);  // a refused launch does not abort
  ::testing::internal::CaptureStderr();
  bounded_count<<<2, dim3(32, 3)>>>(count.get());
  const cudaError_t e = cudaGetLastError();
  const std::string err = ::testing::internal::GetCapturedStderr();
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_EQ(read_count(count), 0u);
  EXPECT_NE(err.find("launch of kernel 'bounded_count'"), std::string::npos) << err;
  EXPECT_NE(err.find("cudaErrorInvalidValue"), std::string::npos) << err;
  EXPECT_NE(err.find("96 threads (32x3x1)"), std::string::npos) << err;
  EXPECT_NE(err.find("__launch_bounds__(64) at "), std::string::npos) << err;
  EXPECT_NE(err.find(kThisFile + ":" + std::to_string(kBoundedLine)), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line for the launch:\n" << err;
}

// ---- misaligned addresses ---------------------------------------------------------------------

__global__ void load_float4(const float* in, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(in);
  out[0] = v.x + v.y + v.z + v.w;
}
constexpr int kLoadFloat4Line = __LINE__ - 3;

__global__ void store_float2(float* out) { *reinterpret_cast<float2*>(out) = make_float2(1.0f, 2.0f); }
constexpr int kStoreFloat2Line = __LINE__ - 1;

__global__ void load_double2(const double* in, double* out) {
  const double2 v = reinterpret_cast<const double2*>(in)[0];
  out[0] = v.x + v.y;
}

__global__ void load_double4(const double* in, double* out) {
  const double4 v = *reinterpret_cast<const double4*>(in);
  out[0] = v.x + v.w;
}

__global__ void store_int4(int* out) { *reinterpret_cast<int4*>(out) = make_int4(1, 2, 3, 4); }

__global__ void add_int(int* p) { atomicAdd(p, 1); }
constexpr int kAddIntLine = __LINE__ - 1;
__global__ void add_float(float* p) { atomicAdd(p, 1.0f); }
__global__ void cas_ull(unsigned long long* p) { atomicCAS(p, 0ull, 1ull); }

__global__ void shared_float4(float* out) {
  __shared__ float s[8];
  s[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) {
    const float4 v = *reinterpret_cast<const float4*>(s + 1);  // s is 16-byte aligned
    out[0] = v.x;
  }
}

// Aligned vector traffic: one float4 (or float2 / double2 / int4) per thread.
__global__ void copy_vectors(const float4* a, float4* b, const double2* c, double2* d, int2* e, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  b[i] = a[i];
  d[i] = make_double2(c[i].y, c[i].x);
  e[i] = make_int2(i, -i);
  if (i == 0) atomicAdd(reinterpret_cast<unsigned long long*>(&e[n]), 5ull);
}

std::string ptr_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// How many of the n bytes at device address p are zero. Read through the emulator's device
// view: cudaMemcpy is refused while a fault is sticky.
int device_bytes_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(sim::device_view(p));
  int z = 0;
  for (size_t k = 0; k < n; ++k) z += b[k] == 0;
  return z;
}

// The device holds the sticky misaligned-address fault; the message names `kernel`, `addr`,
// `align`-byte alignment and, when line > 0, this file's line.
void expect_misaligned(const std::string& kernel, const void* addr, int align, int line,
                       const std::string& what) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorMisalignedAddress) << what;
  EXPECT_EQ(cudaGetLastError(), cudaErrorMisalignedAddress) << what;
  EXPECT_EQ(cudaGetLastError(), cudaErrorMisalignedAddress) << "sticky: " << what;
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorMisalignedAddress) << "sticky: " << what;
  const std::string f = sim::last_fault();
  EXPECT_NE(f.find("misaligned address"), std::string::npos) << f;
  EXPECT_NE(f.find("kernel '" + kernel + "'"), std::string::npos) << f;
  EXPECT_NE(f.find(ptr_text(addr)), std::string::npos) << f;
  EXPECT_NE(f.find(std::to_string(align) + "-byte alignment"), std::string::npos) << f;
  if (line > 0) {
    EXPECT_NE(f.find(kThisFile + ":" + std::to_string(line)), std::string::npos) << f;
  }
  sim::reset();
}

TEST_F(SimBoundsAlign, MisalignedFloat4LoadIsAStickyFault) {
  float* buf = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&buf, 64 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMemset(buf, 0, 64 * sizeof(float)));
  load_float4<<<1, 1>>>(buf + 1, buf + 32);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMisalignedAddress);
  EXPECT_EQ(device_bytes_zero(buf, 64 * sizeof(float)), int(64 * sizeof(float)))
      << "the thread stopped at the misaligned load: out[0] was not written";
  std::vector<float> host(64, -1.0f);
  EXPECT_EQ(cudaMemcpy(host.data(), buf, 64 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaErrorMisalignedAddress);
  expect_misaligned("load_float4", buf + 1, 16, kLoadFloat4Line, "float4 load");
  // After the reset the same kernel runs on an aligned address.
  ASSERT_CUDA_OK(cudaMalloc(&buf, 64 * sizeof(float)));
  const std::vector<float> ones(64, 1.0f);
  ASSERT_CUDA_OK(cudaMemcpy(buf, ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  load_float4<<<1, 1>>>(buf + 4, buf + 32);
  ASSERT_LAUNCH_OK();
  float r = 0;
  ASSERT_CUDA_OK(cudaMemcpy(&r, buf + 32, sizeof r, cudaMemcpyDeviceToHost));
  EXPECT_EQ(r, 4.0f);
  ASSERT_CUDA_OK(cudaFree(buf));
}

TEST_F(SimBoundsAlign, MisalignedStoreDoesNotHappen) {
  float* buf = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&buf, 16 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMemset(buf, 0, 16 * sizeof(float)));
  store_float2<<<1, 1>>>(buf + 1);  // 4 mod 8
  EXPECT_EQ(device_bytes_zero(buf, 16 * sizeof(float)), int(16 * sizeof(float)))
      << "the misaligned store did not happen";
  expect_misaligned("store_float2", buf + 1, 8, kStoreFloat2Line, "float2 store");
}

TEST_F(SimBoundsAlign, MisalignedDouble2Double4AndInt4) {
  double* d = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&d, 8 * sizeof(double)));
  load_double2<<<1, 1>>>(d + 1, d + 4);  // 8 mod 16
  expect_misaligned("load_double2", d + 1, 16, 0, "double2 load");

  ASSERT_CUDA_OK(cudaMalloc(&d, 16 * sizeof(double)));
  load_double4<<<1, 1>>>(d + 3, d + 12);  // 8 mod 16
  expect_misaligned("load_double4", d + 3, 16, 0, "double4 load");

  int* i = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&i, 16 * sizeof(int)));
  store_int4<<<1, 1>>>(i + 2);  // 8 mod 16
  expect_misaligned("store_int4", i + 2, 16, 0, "int4 store");
}

TEST_F(SimBoundsAlign, MisalignedAtomics) {
  char* raw = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&raw, 64));
  ASSERT_CUDA_OK(cudaMemset(raw, 0, 64));
  add_int<<<1, 1>>>(reinterpret_cast<int*>(raw + 2));
  EXPECT_EQ(device_bytes_zero(raw, 64), 64) << "the misaligned atomic did not happen";
  expect_misaligned("add_int", raw + 2, 4, kAddIntLine, "atomicAdd(int*)");

  ASSERT_CUDA_OK(cudaMalloc(&raw, 64));
  add_float<<<1, 1>>>(reinterpret_cast<float*>(raw + 1));
  expect_misaligned("add_float", raw + 1, 4, 0, "atomicAdd(float*)");

  ASSERT_CUDA_OK(cudaMalloc(&raw, 64));
  cas_ull<<<1, 1>>>(reinterpret_cast<unsigned long long*>(raw + 4));
  expect_misaligned("cas_ull", raw + 4, 8, 0, "atomicCAS(unsigned long long*)");
}

TEST_F(SimBoundsAlign, MisalignedSharedMemoryAndSecondWorker) {
  sim::set_workers(2);
  float* out = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&out, 4 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMemset(out, 0, 4 * sizeof(float)));
  shared_float4<<<4, 8>>>(out);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorMisalignedAddress);
  const std::string f = sim::last_fault();
  EXPECT_NE(f.find("kernel 'shared_float4'"), std::string::npos) << f;
  EXPECT_NE(f.find("16-byte alignment"), std::string::npos) << f;
  sim::reset();
}

TEST_F(SimBoundsAlign, AlignedVectorAccessesAreUnaffected) {
  constexpr int n = 300;
  DeviceBuffer<float4> a(n), b(n);
  DeviceBuffer<double2> c(n), d(n);
  DeviceBuffer<int2> e(n + 1);
  std::vector<float4> ha(n);
  std::vector<double2> hc(n);
  for (int i = 0; i < n; ++i) {
    ha[i] = make_float4(float(i), 0.5f * i, -1.0f * i, 2.0f);
    hc[i] = make_double2(double(i), -0.25 * i);
  }
  ASSERT_CUDA_OK(a.upload(ha));
  ASSERT_CUDA_OK(c.upload(hc));
  ASSERT_CUDA_OK(e.fill_bytes(0));
  simtest::for_each_schedule([&](const std::string& sched) {
    copy_vectors<<<(n + 127) / 128, 128>>>(a.get(), b.get(), c.get(), d.get(), e.get(), n);
    ASSERT_LAUNCH_OK();
    const auto hb = b.download();
    const auto hd = d.download();
    const auto he = e.download();
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(hb[i].x, ha[i].x) << sched;
      ASSERT_EQ(hb[i].w, ha[i].w) << sched;
      ASSERT_EQ(hd[i].x, hc[i].y) << sched;
      ASSERT_EQ(hd[i].y, hc[i].x) << sched;
      ASSERT_EQ(he[i].x, i) << sched;
      ASSERT_EQ(he[i].y, -i) << sched;
    }
  });
  EXPECT_EQ(sim::last_fault(), "");
}

#endif  // SIM_EMULATOR

}  // namespace
