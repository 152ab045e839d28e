// Per-access checks of kernel loads and stores (sim/runtime/checks.cpp): shared-memory bounds
// (static arrays, dynamic shared memory, pointers derived from them), global bounds of cudaMalloc
// allocations and of __device__ variables, shared-memory races between warps (racecheck), reads
// of never-written device memory (initcheck), launches on freed memory and double cudaFree; each
// fault with its error code and the message parts that locate it. Then the correct patterns
// that must stay silent: tree reduction, warp-level exchange, shared atomics, double buffering,
// memset/copy/cuBLAS/device_view as writers. The correct-pattern kernels are valid CUDA and run
// in both builds; everything that inspects the emulator is inside #ifdef SIM_EMULATOR.
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#ifdef SIM_EMULATOR
#include <cublas_v2.h>
#endif

#include "sim_test_util.h"
#ifdef SIM_EMULATOR
#include "vector_helper.h"
#endif

namespace {

using simtest::DeviceBuffer;

// ---- correct patterns (both builds) ---------------------------------------------------------

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

__global__ void fill_kernel(float* p, int n, float v) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

// One thread sums p[lo..hi) in order (so the first bad element is the one a fault names).
__global__ void sum_range_kernel(const float* p, int lo, int hi, float* out) {
  if (threadIdx.x != 0) return;
  float s = 0.0f;
  for (int i = lo; i < hi; ++i) s += p[i];
  out[0] = s;
}

class SimChecks : public simtest::SimTest {
 protected:
#ifdef SIM_EMULATOR
  // Both checks on for every test (whatever SIM_RACECHECK/SIM_INITCHECK said), restored after.
  // The race check covers every launch here, not only the first 3 of each configuration (the
  // default), so that a test does not depend on how often its kernels ran before.
  void SetUp() override {
    simtest::SimTest::SetUp();
    saved_racecheck_ = sim::racecheck();
    saved_initcheck_ = sim::initcheck();
    sim::set_racecheck_all();
    sim::set_initcheck(true);
  }
  void TearDown() override {
    sim::set_racecheck(saved_racecheck_);
    sim::set_initcheck(saved_initcheck_);
    simtest::SimTest::TearDown();
  }
  bool saved_racecheck_ = true;
  bool saved_initcheck_ = true;
#endif
};

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

// ---- the emulator's checks -----------------------------------------------------------------

#ifdef SIM_EMULATOR

// A 16-entry lookup table (a __device__ variable: GCC's red zones bound it).
__device__ float sim_checks_lut[16];

namespace {

using simtest::contains;

// Without the instrumentation (the ASan build: simcc leaves -fsanitize=kernel-address out, and
// ASan itself reports shared and red-zone accesses), the per-access checks do not exist. GCC
// defines __SANITIZE_ADDRESS__ for -fsanitize=kernel-address too, so the macro cannot tell the
// two apart; the ASan runtime can: only a -fsanitize=address build links __asan_init.
extern "C" void __asan_init() __attribute__((weak));
bool asan_build() { return &__asan_init != nullptr; }
#define SKIP_WITHOUT_CHECKS()                                                                 \
  do {                                                                                       \
    if (asan_build()) GTEST_SKIP() << "no per-access checks under ASan (simcc leaves them out)"; \
  } while (0)

// "test_sim_checks.cu:<line>" for a message check.
std::string at(int line) { return "test_sim_checks.cu:" + std::to_string(line); }

// ---- faulting kernels (the constants after each are the lines of its accesses) ----

__global__ void shared_oob_static_kernel(float* out) {
  __shared__ float cache[32];
  cache[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[0] = cache[0];
}
constexpr int kCacheStoreLine = __LINE__ - 4;

__global__ void shared_oob_dynamic_kernel(float* out) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = dyn[0];
}

// Reads through a pointer derived from a shared array: tile + 4 + offset.
__global__ void shared_derived_kernel(const float* in, int offset, float* out) {
  __shared__ float tile[16];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  const float* p = tile + 4;
  if (threadIdx.x == 0) out[0] = p[offset];
}

// Two static arrays; thread 0 then writes first[i] or second[j] (out of bounds by the caller's
// choice, into the red zone between or around them).
__global__ void shared_two_arrays_kernel(int i, int j, float* out) {
  __shared__ float first[8];
  __shared__ float second[8];
  const int t = threadIdx.x;
  first[t] = 1.0f;
  second[t] = 2.0f;
  __syncthreads();
  if (t == 0) {
    first[i] = 3.0f;
    second[j] = 4.0f;
  }
  __syncthreads();
  out[t] = first[t] + second[t];
}

__global__ void read_at_kernel(const float* p, long long i, float* out) {
  if (threadIdx.x == 0) out[0] = p[i];
}
constexpr int kReadAtLine = __LINE__ - 2;

__global__ void write_at_kernel(float* p, long long i, float v) {
  if (threadIdx.x == 0) p[i] = v;
}

__global__ void lut_kernel(int i, float* out) {
  if (threadIdx.x == 0) out[0] = sim_checks_lut[i];
}

__global__ void count_kernel(int* counter) { atomicAdd(counter, 1); }

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

// ---- running a faulting launch ----

struct Fault {
  cudaError_t error;  // what cudaDeviceSynchronize (or cudaGetLastError) returned
  std::string msg;    // sim::last_fault()
  cudaError_t again;  // the same call once more: faults are sticky
};
// Runs body() (which makes its own buffers, launches and returns the status of the call that
// reports the fault), records the fault, and clears it with sim::reset(). The reset frees every
// allocation, so buffers used afterwards must be made afterwards: body's own die before the
// reset (their cudaFree is refused with the sticky error and the reset frees them).
template <class Body>
Fault run_faulting(Body&& body) {
  Fault f{};
  f.error = body();
  f.msg = sim::last_fault();
  f.again = cudaDeviceSynchronize();
  sim::reset();
  (void)cudaGetLastError();
  return f;
}

std::string addr_of(const void* p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

// ---- shared-memory bounds ----

TEST_F(SimChecks, StaticSharedArrayOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_static_kernel<<<1, 33>>>(out.get());  // thread 32 writes cache[32]
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_EQ(f.again, cudaErrorIllegalAddress);  // sticky
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'shared_oob_static_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of __shared__ 'cache' (128 bytes")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kCacheStoreLine))) << f.msg << "\nshould name the store's line " << kCacheStoreLine;
  DeviceBuffer<float> out(1);
  shared_oob_static_kernel<<<1, 32>>>(out.get());  // in bounds, after the reset
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 0.0f);
}

TEST_F(SimChecks, DynamicSharedOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_dynamic_kernel<<<1, 2, sizeof(float)>>>(out.get());  // room for one float, 2 threads
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'shared_oob_dynamic_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of the dynamic shared memory (4 bytes")) << f.msg;
  DeviceBuffer<float> out(1);
  shared_oob_dynamic_kernel<<<1, 2, 2 * sizeof(float)>>>(out.get());  // big enough
  ASSERT_LAUNCH_OK();
}

TEST_F(SimChecks, PointerDerivedFromSharedArrayIsBoundsChecked) {
  SKIP_WITHOUT_CHECKS();
  auto derived = [](int offset) {
    DeviceBuffer<float> in(std::vector<float>(16, 1.0f)), out(1);
    shared_derived_kernel<<<1, 16>>>(in.get(), offset, out.get());
    return cudaDeviceSynchronize();
  };
  Fault f = run_faulting([&] { return derived(-5); });  // tile[-1]
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of __shared__ 'tile'")) << f.msg;
  f = run_faulting([&] { return derived(14); });  // tile[18]: 8 bytes past the end
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "8 bytes past the end of __shared__ 'tile'")) << f.msg;
  EXPECT_CUDA_OK(derived(11));  // tile[15]: the last element
}

TEST_F(SimChecks, OverrunIntoTheRedZoneBetweenStaticArraysNamesTheOverrunArray) {
  SKIP_WITHOUT_CHECKS();
  auto two = [](int i, int j) {
    DeviceBuffer<float> out(8);
    shared_two_arrays_kernel<<<1, 8>>>(i, j, out.get());
    return cudaDeviceSynchronize();
  };
  Fault f = run_faulting([&] { return two(0, 11); });  // second[11]: 12 bytes past its end
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "12 bytes past the end of __shared__ 'second' (32 bytes")) << f.msg;
  f = run_faulting([&] { return two(-3, 0); });  // first[-3]: 12 bytes before its start
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "12 bytes before the start of __shared__ 'first' (32 bytes")) << f.msg;
  DeviceBuffer<float> out(8);
  shared_two_arrays_kernel<<<1, 8>>>(7, 7, out.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), (std::vector<float>{3, 3, 3, 3, 3, 3, 3, 7}));
}

// ---- global bounds ----

TEST_F(SimChecks, GlobalReadRightAfterTheEndIsReported) {
  SKIP_WITHOUT_CHECKS();
  std::string addr;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> p(std::vector<float>(100, 1.0f)), out(1);
    addr = addr_of(p.get());
    read_at_kernel<<<1, 1>>>(p.get(), 100, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_EQ(f.again, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'read_at_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of cudaMalloc allocation " + addr + " (400 bytes)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kReadAtLine))) << f.msg << "\nshould name the load's line " << kReadAtLine;
}

TEST_F(SimChecks, GlobalReadBeforeTheStartIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(100, 1.0f)), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), -1, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of cudaMalloc allocation")) << f.msg;
}

TEST_F(SimChecks, GlobalWritePastTheEndIsReportedAtTheAccess) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(10);
    write_at_kernel<<<1, 1>>>(p.get(), 12, 1.0f);  // 8 bytes past the end, inside the red zone
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "8 bytes past the end of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'write_at_kernel'")) << f.msg;
}

TEST_F(SimChecks, DeviceVariableOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  std::vector<float> table(16);
  std::iota(table.begin(), table.end(), 0.0f);
  ASSERT_CUDA_OK(cudaMemcpyToSymbol(sim_checks_lut, table.data(), sizeof(float) * 16));
  {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(15, out.get());  // the last entry
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 15.0f);
  }
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(16, out.get());  // one past the end
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "right after the end of __device__ variable 'sim_checks_lut' (64 bytes")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'lut_kernel'")) << f.msg;
}

// ---- whole vector accesses (sim::load_whole / store_whole, the __ldg family) ----
// A float4 is one 16-byte access on a GPU and must be one here too: checked and reported as 16
// bytes, still faulting when misaligned, and seen by racecheck. (A plain struct copy is split
// into its four fields before the checks are inserted; see sim/include/sim/device.h.)

__global__ void ldg_float4_kernel(const float* p, int i, float* out) {
  if (threadIdx.x == 0) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p + i));
    out[0] = v.x + v.y + v.z + v.w;
  }
}
constexpr int kLdgFloat4Line = __LINE__ - 4;

// Thread t stores its float4 to slot t (whole), then thread 0 reads slot `from` whole while
// thread 32 (warp 1) overwrites slot 32, with no barrier between.
__global__ void whole_shared_kernel(int from, int to, float* out) {
  __shared__ float4 slots[64];
  const int t = threadIdx.x;
  sim::store_whole(&slots[t], make_float4(t, t, t, t));
  __syncthreads();
  if (t == 0) out[0] = sim::load_whole(&slots[from]).w;
  if (t == 32) sim::store_whole(&slots[to], make_float4(-1, -1, -1, -1));
}

TEST_F(SimChecks, WholeVectorLoadIsInBoundsUpToTheLastVector) {
  DeviceBuffer<float> p(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), out(1);
  ldg_float4_kernel<<<1, 1>>>(p.get(), 8, out.get());  // bytes 32..47 of 48
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 9.0f + 10 + 11 + 12);
}

TEST_F(SimChecks, WholeVectorLoadStraddlingTheEndIsOneSixteenByteAccess) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(10, 1.0f)), out(1);  // 40 bytes
    ldg_float4_kernel<<<1, 1>>>(p.get(), 8, out.get());          // bytes 32..47
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16 bytes at")) << f.msg;  // one access, not four fields
  EXPECT_TRUE(contains(f.msg, "bytes 32..47 (past the end) of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'ldg_float4_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kLdgFloat4Line))) << f.msg << "\nshould name the load's line " << kLdgFloat4Line;
}

TEST_F(SimChecks, MisalignedWholeVectorLoadStillFaults) {
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(12, 1.0f)), out(1);
    ldg_float4_kernel<<<1, 1>>>(p.get(), 1, out.get());  // 4 bytes off a 16-byte boundary
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorMisalignedAddress);
  EXPECT_TRUE(contains(f.msg, "misaligned address")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "misaligned address: load on")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16-byte alignment")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'ldg_float4_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kLdgFloat4Line))) << f.msg << "\nshould name the load's line " << kLdgFloat4Line;
}

__global__ void stcg_float2_kernel(float* p, int i) {
  if (threadIdx.x == 0) __stcg(reinterpret_cast<float2*>(p + i), make_float2(1, 2));
}
constexpr int kStcgLine = __LINE__ - 2;

TEST_F(SimChecks, MisalignedWholeVectorStoreFaultsAndDoesNotHappen) {
  std::vector<float> seen;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> p(std::vector<float>(8, 0.0f));
    stcg_float2_kernel<<<1, 1>>>(p.get(), 1);  // 4 bytes off an 8-byte boundary
    const cudaError_t e = cudaDeviceSynchronize();
    const auto* d = static_cast<const float*>(sim::device_view(p.get()));
    seen.assign(d, d + 8);
    return e;
  });
  EXPECT_EQ(f.error, cudaErrorMisalignedAddress);
  EXPECT_TRUE(contains(f.msg, "misaligned address: store on")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "8-byte alignment")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kStcgLine))) << f.msg << "\nshould name the store's line " << kStcgLine;
  EXPECT_EQ(seen, std::vector<float>(8, 0.0f)) << "the store must not happen";
}

__global__ void helper_load_kernel(const float* p, int i, float* out) {
  if (threadIdx.x == 0) out[0] = helper_load(reinterpret_cast<const float4*>(p + i)).x;
}
constexpr int kHelperCallLine = __LINE__ - 2;

TEST_F(SimChecks, AccessInAHeaderHelperNamesItsLineAndTheCaller) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(std::vector<float>(8, 1.0f)), out(1);
    helper_load_kernel<<<1, 1>>>(p.get(), 8, out.get());  // right after the end
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  const std::string where = "vector_helper.h:" + std::to_string(kHelperLoadLine) + " (inlined into ";
  EXPECT_TRUE(contains(f.msg, where)) << f.msg << "\nshould contain " << where;
  EXPECT_TRUE(contains(f.msg, at(kHelperCallLine) + ")")) << f.msg << "\nshould name the caller's line " << kHelperCallLine;
}

TEST_F(SimChecks, WholeVectorSharedOverrunIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    whole_shared_kernel<<<1, 64>>>(0, 64, out.get());  // thread 32 stores slots[64]
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "16 bytes right after the end of __shared__ 'slots' (1024 bytes")) << f.msg;
}

TEST_F(SimChecks, WholeVectorSharedAccessesAreRaceChecked) {
  SKIP_WITHOUT_CHECKS();
  sim::set_order(sim::Order::Forward);  // thread 0 reads first
  const Fault f = run_faulting([] {
    DeviceBuffer<float> out(1);
    whole_shared_kernel<<<1, 64>>>(32, 32, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "shared memory race (write-after-read hazard)")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "thread (32,0,0) (warp 1) wrote 'slots'")) << f.msg;
  DeviceBuffer<float> out(1);
  whole_shared_kernel<<<1, 64>>>(1, 32, out.get());  // different slots: no hazard
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download()[0], 1.0f);
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

// ---- initcheck ----

TEST_F(SimChecks, ReadOfNeverWrittenMemoryIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(64), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), 5, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_EQ(f.again, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "'read_at_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 20 of cudaMalloc allocation")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(kReadAtLine))) << f.msg << "\nshould name the load's line " << kReadAtLine;
}

TEST_F(SimChecks, ReadPastTheWrittenPartIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head(8, 1.0f);
    const cudaError_t e = cudaMemcpy(p.get(), head.data(), 8 * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return e;
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 9, out.get());  // element 8 was never written
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 32 ")) << f.msg;
}

TEST_F(SimChecks, DeviceToDeviceCopyCarriesTheUnwrittenState) {
  SKIP_WITHOUT_CHECKS();
  std::string addr;
  const Fault f = run_faulting([&] {
    DeviceBuffer<float> a(16), b(16), out(1);
    addr = addr_of(b.get());
    EXPECT_CUDA_OK(cudaMemset(a.get(), 0, 8 * sizeof(float)));  // the first half of a
    EXPECT_CUDA_OK(cudaMemcpy(b.get(), a.get(), a.bytes(), cudaMemcpyDeviceToDevice));
    sum_range_kernel<<<1, 1>>>(b.get(), 0, 8, out.get());  // b's copied written half
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    sum_range_kernel<<<1, 1>>>(b.get(), 8, 9, out.get());  // b's copied unwritten half
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 32 of cudaMalloc allocation " + addr)) << f.msg;
}

__global__ void write_floats_kernel(float* p, int lo, int hi) {
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += blockDim.x) p[i] = 1.0f;
}
__global__ void write_bytes_kernel(unsigned char* p, int n) {
  if (static_cast<int>(threadIdx.x) < n) p[threadIdx.x] = 7;
}
__global__ void read_byte_kernel(const unsigned char* p, int i, unsigned char* out) {
  if (threadIdx.x == 0) out[0] = p[i];
}

// The written state is per byte, also inside one 8-byte granule of the inline checks' shadow.
TEST_F(SimChecks, InitcheckIsExactInsideEightByteGranules) {
  SKIP_WITHOUT_CHECKS();
  {  // 3 floats copied in: the second granule is half written
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head = {1, 2, 3};
    ASSERT_CUDA_OK(cudaMemcpy(p.get(), head.data(), sizeof(float) * 3, cudaMemcpyHostToDevice));
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 3, out.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 6.0f);
  }
  Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    const std::vector<float> head = {1, 2, 3};
    EXPECT_CUDA_OK(cudaMemcpy(p.get(), head.data(), sizeof(float) * 3, cudaMemcpyHostToDevice));
    read_at_kernel<<<1, 1>>>(p.get(), 3, out.get());  // the unwritten half of that granule
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "byte offset 12 ")) << f.msg;
  {  // a kernel writes only element 1: the second half of the first granule
    DeviceBuffer<float> p(4), out(1);
    write_floats_kernel<<<1, 1>>>(p.get(), 1, 2);
    ASSERT_LAUNCH_OK();
    read_at_kernel<<<1, 1>>>(p.get(), 1, out.get());
    ASSERT_LAUNCH_OK();
  }
  f = run_faulting([] {
    DeviceBuffer<float> p(4), out(1);
    write_floats_kernel<<<1, 1>>>(p.get(), 1, 2);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    read_at_kernel<<<1, 1>>>(p.get(), 0, out.get());  // its unwritten first half
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "byte offset 0 ")) << f.msg;
  {  // 7 of 8 bytes written by single-byte stores
    DeviceBuffer<unsigned char> p(8), out(1);
    write_bytes_kernel<<<1, 32>>>(p.get(), 7);
    ASSERT_LAUNCH_OK();
    read_byte_kernel<<<1, 1>>>(p.get(), 6, out.get());
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download()[0], 7);
  }
  f = run_faulting([] {
    DeviceBuffer<unsigned char> p(8), out(1);
    write_bytes_kernel<<<1, 32>>>(p.get(), 7);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    read_byte_kernel<<<1, 1>>>(p.get(), 7, out.get());  // the 8th byte
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "1 bytes at byte offset 7 ")) << f.msg;
}

TEST_F(SimChecks, AtomicOnNeverWrittenCounterIsReported) {
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<int> counter(1);
    count_kernel<<<1, 32>>>(counter.get());  // forgot the cudaMemset(counter, 0)
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  DeviceBuffer<int> zeroed(1);
  ASSERT_CUDA_OK(zeroed.fill_bytes(0));
  count_kernel<<<2, 32>>>(zeroed.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(zeroed.download()[0], 64);
}

// C = A * B with beta = 0 into a C with 2 padding rows per column; then sums C[lo..hi).
cudaError_t gemm_then_sum(int lo, int hi, float* sum) {
  const int m = 3, n = 2, k = 4, ldc = m + 2;
  DeviceBuffer<float> A(std::vector<float>(m * k, 1.0f)), B(std::vector<float>(k * n, 2.0f));
  DeviceBuffer<float> C(ldc * n), out(1);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A.get(), m, B.get(), k,
                                       &beta, C.get(), ldc);
  cublasDestroy(h);
  if (s != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  sum_range_kernel<<<1, 1>>>(C.get(), lo, hi, out.get());
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) *sum = out.download()[0];
  return e;
}

TEST_F(SimChecks, CublasOutputCountsAsWrittenButNotItsPadding) {
  float sum = 0.0f;
  ASSERT_CUDA_OK(gemm_then_sum(0, 3, &sum));  // column 0
  EXPECT_EQ(sum, 24.0f);
  ASSERT_CUDA_OK(gemm_then_sum(5, 8, &sum));  // column 1
  EXPECT_EQ(sum, 24.0f);
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([&] { return gemm_then_sum(0, 4, &sum); });  // column 0's first padding row
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
  EXPECT_TRUE(contains(f.msg, "uninitialised global memory read")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "byte offset 12 ")) << f.msg;
}

TEST_F(SimChecks, DeviceViewCountsTheWholeAllocationAsWritten) {
  SKIP_WITHOUT_CHECKS();  // it proves that initcheck stays silent: nothing to prove without it
  DeviceBuffer<float> p(32), out(1);
  (void)sim::device_view(p.get() + 5);  // what the emulated CUDA-aware MPI does with a buffer
  sum_range_kernel<<<1, 1>>>(p.get(), 0, 32, out.get());
  ASSERT_LAUNCH_OK();
}

TEST_F(SimChecks, InitcheckOffLetsUnwrittenReadsRun) {
  sim::set_initcheck(false);
  EXPECT_FALSE(sim::initcheck());
  {
    DeviceBuffer<float> p(8), out(1);
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 8, out.get());
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(sim::last_fault(), "");
  }
  sim::set_initcheck(true);
  EXPECT_TRUE(sim::initcheck());
  SKIP_WITHOUT_CHECKS();
  const Fault f = run_faulting([] {
    DeviceBuffer<float> p(8), out(1);
    sum_range_kernel<<<1, 1>>>(p.get(), 0, 8, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorLaunchFailure);
}

TEST_F(SimChecks, BoundsChecksStayOnWithRacecheckAndInitcheckOff) {
  SKIP_WITHOUT_CHECKS();
  sim::set_racecheck(false);
  sim::set_initcheck(false);
  Fault f = run_faulting([] {
    DeviceBuffer<float> p(16), out(1);
    read_at_kernel<<<1, 1>>>(p.get(), 16, out.get());  // unwritten and out of bounds
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds global memory read")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> out(1);
    shared_oob_static_kernel<<<1, 33>>>(out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "out-of-bounds shared memory write")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> in(std::vector<float>(16, 1.0f)), out(1);
    shared_derived_kernel<<<1, 16>>>(in.get(), -5, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "4 bytes before the start of __shared__ 'tile'")) << f.msg;
  f = run_faulting([] {
    DeviceBuffer<float> out(1);
    lut_kernel<<<1, 1>>>(16, out.get());
    return cudaDeviceSynchronize();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "__device__ variable 'sim_checks_lut'")) << f.msg;
}

// ---- freed memory ----

TEST_F(SimChecks, LaunchOnFreedMemoryIsRefused) {
  int free_line = 0;
  const Fault f = run_faulting([&] {
    float* p = nullptr;
    EXPECT_CUDA_OK(cudaMalloc(&p, 256 * sizeof(float)));
    fill_kernel<<<1, 256>>>(p, 256, 1.0f);
    EXPECT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_CUDA_OK(cudaFree(p));
    free_line = __LINE__ - 1;
    fill_kernel<<<1, 256>>>(p, 256, 2.0f);  // use after free
    return cudaGetLastError();
  });
  EXPECT_EQ(f.error, cudaErrorIllegalAddress);
  EXPECT_TRUE(contains(f.msg, "kernel 'fill_kernel'")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "freed device memory")) << f.msg;
  EXPECT_TRUE(contains(f.msg, "freed by cudaFree")) << f.msg;
  EXPECT_TRUE(contains(f.msg, at(free_line))) << f.msg << "\nshould name the cudaFree's line " << free_line;
}

TEST_F(SimChecks, DoubleFreeIsInvalidValueAndNotSticky) {
  float* p = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&p, 64));
  ASSERT_CUDA_OK(cudaFree(p));
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_CUDA_OK(cudaGetLastError());  // not sticky: the program goes on
  DeviceBuffer<float> q(4);
  fill_kernel<<<1, 4>>>(q.get(), 4, 1.0f);
  ASSERT_LAUNCH_OK();
}

}  // namespace

#endif  // SIM_EMULATOR
