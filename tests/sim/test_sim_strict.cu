// Emulator-only strictness: NaN-poisoned fresh memory, barrier divergence (negative test b), host
// pointers as kernel arguments (c), memcpy kinds, sticky faults, the sim:: control API. All inside
// #ifdef SIM_EMULATOR (empty under nvcc); runs in nn_tests or alone (link -lgtest_main).
#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"

#ifdef SIM_EMULATOR

namespace {

using simtest::contains;
using simtest::DeviceBuffer;
using simtest::lower;

class SimStrict : public simtest::SimTest {};

// ---- divergence kernels: the constants after each kernel are the lines of its barriers -------------

__global__ void early_return_kernel(int* out, int n) {
  __shared__ int s[64];
  const int t = threadIdx.x;
  if (t >= n) return;  // threads t >= n leave before the barrier
  s[t] = t;
  __syncthreads();
  out[t] = s[n - 1 - t];
}
constexpr int kEarlyReturnBarrierLine = __LINE__ - 3;

__global__ void two_sites_kernel(int* out) {
  __shared__ int s[64];
  const int t = threadIdx.x;
  if (t < 32) {
    s[t] = 1;
    __syncthreads();
  } else {
    s[t] = 2;
    __syncthreads();
  }
  out[t] = s[63 - t];
}
constexpr int kTwoSitesLineA = __LINE__ - 7;
constexpr int kTwoSitesLineB = __LINE__ - 5;

const std::string kThisFile = "test_sim_strict.cu";

__global__ void copy_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

__global__ void copy_double_kernel(const double* in, double* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// The device is in a sticky error state: every call reports it, cudaGetLastError included.
void expect_sticky(const std::string& context) {
  const cudaError_t first = cudaDeviceSynchronize();
  EXPECT_TRUE(first == cudaErrorLaunchFailure || first == cudaErrorIllegalAddress)
      << "error " << static_cast<int>(first) << " (" << cudaGetErrorString(first) << "): " << context;
  EXPECT_NE(cudaGetLastError(), cudaSuccess) << "cudaGetLastError must not clear a fault: " << context;
  EXPECT_NE(cudaGetLastError(), cudaSuccess) << "second cudaGetLastError: " << context;
  EXPECT_NE(cudaPeekAtLastError(), cudaSuccess) << context;
  EXPECT_EQ(cudaDeviceSynchronize(), first) << context;
  void* p = nullptr;
  const cudaError_t malloc_err = cudaMalloc(&p, 64);
  EXPECT_NE(malloc_err, cudaSuccess) << "cudaMalloc during a fault: " << context;
  if (malloc_err == cudaSuccess) (void)cudaFree(p);
}

// sim::reset() (or cudaDeviceReset(), its equal) clears the fault, and correct kernels run again.
// Called once the faulting test's buffers are gone (a reset may free every allocation).
void reset_and_expect_usable(const std::string& context, bool via_cuda_device_reset = false) {
  if (via_cuda_device_reset) {
    EXPECT_EQ(cudaDeviceReset(), cudaSuccess) << context;
  } else {
    sim::reset();
  }
  EXPECT_EQ(sim::last_fault(), "") << context;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "after sim::reset(): " << context;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "after sim::reset(): " << context;
  DeviceBuffer<float> in(std::vector<float>(40, 2.5f)), out(40);
  copy_kernel<<<1, 64>>>(in.get(), out.get(), 40);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(out.download(), std::vector<float>(40, 2.5f)) << context;
}

// ---- control API -------------------------------------------------------------------------------------

TEST_F(SimStrict, ControlApiRoundTrips) {
  sim::set_order(sim::Order::Reverse);
  EXPECT_EQ(sim::order(), sim::Order::Reverse);
  sim::set_order(sim::Order::Random, 7);
  EXPECT_EQ(sim::order(), sim::Order::Random);
  EXPECT_EQ(sim::seed(), 7ULL);
  sim::set_workers(2);
  EXPECT_EQ(sim::workers(), 2);
  const std::string d = lower(sim::describe_schedule());
  EXPECT_TRUE(contains(d, "random")) << d;
  EXPECT_TRUE(contains(d, "7")) << d;
  EXPECT_TRUE(contains(d, "workers=2")) << d;
  sim::set_order(sim::Order::Forward);
  EXPECT_TRUE(contains(lower(sim::describe_schedule()), "forward")) << sim::describe_schedule();
  sim::set_order(sim::Order::Reverse);
  EXPECT_TRUE(contains(lower(sim::describe_schedule()), "reverse")) << sim::describe_schedule();
  sim::set_fault_mode(sim::FaultMode::Abort);
  EXPECT_EQ(sim::fault_mode(), sim::FaultMode::Abort);
  sim::set_fault_mode(sim::FaultMode::Record);
  EXPECT_EQ(sim::fault_mode(), sim::FaultMode::Record);
  EXPECT_EQ(sim::last_fault(), "");
}

// Resizing the worker pool between multi-block launches, to the same size included.
TEST_F(SimStrict, SetWorkersRepeatedlyBetweenLaunches) {
  const int n = 16 * 64;
  DeviceBuffer<float> in(std::vector<float>(n, 1.5f)), out(n);
  for (const int workers : {2, 2, 3, 1, 2, 1}) {
    sim::set_workers(workers);
    EXPECT_EQ(sim::workers(), workers);
    ASSERT_CUDA_OK(out.fill_bytes(0));
    copy_kernel<<<16, 64>>>(in.get(), out.get(), n);
    ASSERT_LAUNCH_OK();
    EXPECT_EQ(out.download(), std::vector<float>(n, 1.5f)) << sim::describe_schedule();
  }
}

TEST_F(SimStrict, StatsCountLaunchesBlocksAndThreads) {
  DeviceBuffer<float> in(std::vector<float>(300, 1.0f)), out(300);
  const sim::Stats before = sim::stats();
  copy_kernel<<<5, 64>>>(in.get(), out.get(), 300);
  ASSERT_LAUNCH_OK();
  const sim::Stats mid = sim::stats();
  EXPECT_EQ(mid.launches - before.launches, 1ULL);
  EXPECT_EQ(mid.blocks - before.blocks, 5ULL);
  EXPECT_EQ(mid.threads - before.threads, 320ULL);
  DeviceBuffer<int> o(64);
  early_return_kernel<<<1, 64>>>(o.get(), 64);  // n = 64: nobody leaves early, one barrier
  ASSERT_LAUNCH_OK();
  const sim::Stats after = sim::stats();
  EXPECT_EQ(after.launches - mid.launches, 1ULL);
  EXPECT_GT(after.barriers, mid.barriers);
  EXPECT_GT(after.fiber_switches, mid.fiber_switches);
}

// ---- poisoned memory ---------------------------------------------------------------------------------

// The fill pattern itself, read by a kernel: initcheck (on by default) would stop that read,
// so it is off here (restored at the end); tests/sim/test_sim_checks_init.cu covers initcheck.
TEST_F(SimStrict, FreshDeviceMemoryReadsAsNaN) {
  struct InitcheckOff {
    InitcheckOff() { sim::set_initcheck(false); }
    ~InitcheckOff() { sim::set_initcheck(true); }
  } off;
  const int n = 1000;
  DeviceBuffer<float> src(n), dst(n);
  copy_kernel<<<(n + 255) / 256, 256>>>(src.get(), dst.get(), n);
  ASSERT_LAUNCH_OK();
  const auto h = dst.download();
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isnan(h[i])) << i << ": " << h[i];
    ASSERT_EQ(simtest::bits_of(h[i]), 0xFFFFFFFFu) << i;
  }
  DeviceBuffer<double> dsrc(n), ddst(n);
  copy_double_kernel<<<(n + 255) / 256, 256>>>(dsrc.get(), ddst.get(), n);
  ASSERT_LAUNCH_OK();
  const auto hd = ddst.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(simtest::bits_of(hd[i]), 0xFFFFFFFFFFFFFFFFull) << i;
  DeviceBuffer<unsigned char> bytes(77);
  for (const unsigned char b : bytes.download()) ASSERT_EQ(b, 0xFF);
}

constexpr int kPoisonBlock = 128;

// Reads shared memory before anything wrote it, then dirties it for whoever runs next.
__global__ void read_fresh_shared_kernel(float* out_static, float* out_dynamic) {
  __shared__ float fixed_part[kPoisonBlock];
  extern __shared__ float fresh_dyn[];
  const int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  out_static[g] = fixed_part[t];
  out_dynamic[g] = fresh_dyn[t];
  fixed_part[t] = 1.0f;
  fresh_dyn[t] = 2.0f;
}

TEST_F(SimStrict, SharedMemoryStartsAsNaNInEveryBlock) {
  // The kernel reads shared memory nothing wrote on purpose: the uninitialised-read check (in
  // racecheck's blocks) would report it.
  const bool racecheck = sim::racecheck();
  sim::set_racecheck(false);
  struct Restore {
    bool on;
    ~Restore() { sim::set_racecheck(on); }
  } restore{racecheck};
  const int blocks = 12, n = blocks * kPoisonBlock;
  DeviceBuffer<float> s(n), d(n);
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_CUDA_OK(s.fill_bytes(0));
    ASSERT_CUDA_OK(d.fill_bytes(0));
    read_fresh_shared_kernel<<<blocks, kPoisonBlock, kPoisonBlock * sizeof(float)>>>(s.get(), d.get());
    ASSERT_LAUNCH_OK();
    const auto hs = s.download();
    const auto hd = d.download();
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(simtest::bits_of(hs[i]), 0xFFFFFFFFu)
          << "static shared, launch " << launch << ", element " << i;
      ASSERT_EQ(simtest::bits_of(hd[i]), 0xFFFFFFFFu)
          << "dynamic shared, launch " << launch << ", element " << i;
    }
  }
}

// ---- negative test (b): barrier divergence ------------------------------------------------------------

TEST_F(SimStrict, EarlyReturnBeforeBarrierIsDivergence) {
  std::string context;
  {
    DeviceBuffer<int> out(64);
    early_return_kernel<<<1, 64>>>(out.get(), 40);  // threads 40..63 return before the barrier
    const std::string fault = sim::last_fault();
    EXPECT_TRUE(contains(lower(fault), "diverg")) << fault;
    EXPECT_TRUE(contains(fault, "early_return_kernel")) << fault;
    EXPECT_TRUE(contains(fault, kThisFile + ":" + std::to_string(kEarlyReturnBarrierLine))) << fault;
    EXPECT_NE(cudaGetLastError(), cudaSuccess) << "no error after a divergent launch";
    context = "early return: " + fault;
    expect_sticky(context);
  }
  reset_and_expect_usable(context);
}

TEST_F(SimStrict, ThreadsAtTwoDifferentBarriersIsDivergence) {
  std::string context;
  {
    DeviceBuffer<int> out(64);
    two_sites_kernel<<<1, 64>>>(out.get());
    const std::string fault = sim::last_fault();
    EXPECT_TRUE(contains(lower(fault), "diverg")) << fault;
    EXPECT_TRUE(contains(fault, "two_sites_kernel")) << fault;
    const bool names_a_site = contains(fault, kThisFile + ":" + std::to_string(kTwoSitesLineA)) ||
                              contains(fault, kThisFile + ":" + std::to_string(kTwoSitesLineB));
    EXPECT_TRUE(names_a_site) << "expected line " << kTwoSitesLineA << " or " << kTwoSitesLineB << ": "
                              << fault;
    context = "two sites: " + fault;
    expect_sticky(context);
  }
  reset_and_expect_usable(context, /*via_cuda_device_reset=*/true);
}

// One thread of one block (of 16) leaves before the barrier; also with two workers, where
// other blocks are running on the other worker when the fault hits.
__global__ void one_bad_block_kernel(int* out, int bad_block) {
  const int t = threadIdx.x;
  if (static_cast<int>(blockIdx.x) == bad_block && t == 5) return;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = 1;
}

TEST_F(SimStrict, DivergenceIsCaughtUnderEveryOrderAndWorkerCount) {
  for (const int workers : {1, 2}) {
    sim::set_workers(workers);
    for (const auto& [order, seed] : simtest::all_orders()) {
      sim::set_order(order, seed);
      const std::string sched = sim::describe_schedule();
      {
        DeviceBuffer<int> out(16 * 64);
        one_bad_block_kernel<<<16, 64>>>(out.get(), 11);
        const std::string fault = sim::last_fault();
        EXPECT_TRUE(contains(lower(fault), "diverg")) << sched << ": " << fault;
        EXPECT_TRUE(contains(fault, "one_bad_block_kernel")) << sched << ": " << fault;
        EXPECT_TRUE(contains(fault, "(11,0,0)"))
            << "the faulting block is not named: " << sched << ": " << fault;
        EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess) << sched;
      }
      sim::reset();
      EXPECT_EQ(cudaGetLastError(), cudaSuccess) << sched;
    }
  }
}

// ---- negative test (c): host pointers as kernel arguments ----------------------------------------------

// Arguments: 0 a, 1 n, 2 b, 3 c.
__global__ void three_pointer_kernel(const int* a, int n, const int* b, int* c) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + (b != nullptr ? b[i] : 0);
}

// One-past-the-end pointers are legal arguments: [begin, end) ranges.
__global__ void range_kernel(int* begin, const int* end, int value) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (begin + i < end) begin[i] = value + i;
}

// The fault names the kernel and the argument, counted from 1 as the emulator does
// ("argument 3" is the parameter with 0-based index 2).
std::string expect_host_pointer_fault(const std::string& what, int index0) {
  const std::string fault = sim::last_fault();
  EXPECT_FALSE(fault.empty()) << what << ": host pointer not reported";
  EXPECT_TRUE(contains(fault, "three_pointer_kernel")) << what << ": " << fault;
  EXPECT_TRUE(contains(lower(fault), "argument " + std::to_string(index0 + 1)))
      << what << ": parameter " << index0 << " (0-based) not named: " << fault;
  expect_sticky(what + ": " + fault);
  return what + ": " + fault;
}

TEST_F(SimStrict, HostPointerArgumentIsReported) {
  const int n = 32;
  std::vector<int> host_vector(n, 1);
  int* host_new = new int[n]();
  int host_stack[n] = {};
  std::string context;
  {
    DeviceBuffer<int> a(std::vector<int>(n, 5)), c(n);
    three_pointer_kernel<<<1, n>>>(a.get(), n, host_vector.data(), c.get());
    context = expect_host_pointer_fault("std::vector data as argument 2", 2);
  }
  reset_and_expect_usable(context);
  {
    DeviceBuffer<int> a(std::vector<int>(n, 5)), c(n);
    three_pointer_kernel<<<1, n>>>(a.get(), n, host_new, c.get());
    context = expect_host_pointer_fault("new[] memory as argument 2", 2);
  }
  reset_and_expect_usable(context);
  {
    DeviceBuffer<int> a(std::vector<int>(n, 5)), b(std::vector<int>(n, 1));
    three_pointer_kernel<<<1, n>>>(a.get(), n, b.get(), host_stack);
    context = expect_host_pointer_fault("stack array as argument 3", 3);
  }
  reset_and_expect_usable(context);
  // The kernel did not run: host memory untouched.
  for (int i = 0; i < n; ++i) EXPECT_EQ(host_stack[i], 0) << i;
  delete[] host_new;
}

TEST_F(SimStrict, LegalPointerArgumentsAreNotReported) {
  const int n = 48;
  DeviceBuffer<int> a(std::vector<int>(n, 5)), b(std::vector<int>(n, 1)), c(n);
  // Null pointer.
  three_pointer_kernel<<<1, 64>>>(a.get(), n, nullptr, c.get());
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(sim::last_fault(), "");
  EXPECT_EQ(c.download(), std::vector<int>(n, 5));
  // Interior pointers.
  three_pointer_kernel<<<1, 64>>>(a.get() + 8, n - 8, b.get() + 8, c.get() + 8);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(sim::last_fault(), "");
  // One past the end: as the end of a range, and as an empty range.
  range_kernel<<<1, 64>>>(c.get(), c.get() + n, 100);
  range_kernel<<<1, 64>>>(c.get() + n, c.get() + n, -1);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(sim::last_fault(), "");
  const auto h = c.download();
  for (int i = 0; i < n; ++i) ASSERT_EQ(h[i], 100 + i) << i;
  // Pinned host memory from cudaMallocHost and cudaHostAlloc.
  int* pinned = nullptr;
  int* host_alloc = nullptr;
  ASSERT_CUDA_OK(cudaMallocHost(&pinned, n * sizeof(int)));
  ASSERT_CUDA_OK(cudaHostAlloc(&host_alloc, n * sizeof(int), cudaHostAllocDefault));
  for (int i = 0; i < n; ++i) host_alloc[i] = i;
  three_pointer_kernel<<<1, 64>>>(a.get(), n, host_alloc, pinned);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(sim::last_fault(), "");
  for (int i = 0; i < n; ++i) ASSERT_EQ(pinned[i], 5 + i) << i;
  range_kernel<<<1, 64>>>(pinned, pinned + n, 0);
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(sim::last_fault(), "");
  EXPECT_CUDA_OK(cudaFreeHost(pinned));
  EXPECT_CUDA_OK(cudaFreeHost(host_alloc));
}

// ---- memcpy kinds -----------------------------------------------------------------------------------------

TEST_F(SimStrict, MemcpyKindContradictingPointersIsInvalidValue) {
  const int n = 16;
  std::vector<int> host(n, 3), host2(n, 4);
  DeviceBuffer<int> dev(n), dev2(n);
  ASSERT_CUDA_OK(dev.fill_bytes(0));
  const std::size_t bytes = n * sizeof(int);
  EXPECT_EQ(cudaMemcpy(dev.get(), host.data(), bytes, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), dev.get(), bytes, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host2.data(), bytes, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev.get(), dev2.get(), bytes, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dev.get(), host.data(), bytes, cudaMemcpyDeviceToHost, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // Nothing was copied, and the error is not sticky.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(host, std::vector<int>(n, 3));
  EXPECT_EQ(host2, std::vector<int>(n, 4));
  EXPECT_EQ(dev.download(), std::vector<int>(n, 0));
  EXPECT_EQ(sim::last_fault(), "");
}

}  // namespace

#endif  // SIM_EMULATOR
