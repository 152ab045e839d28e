// The emulator's devices (SIM_DEVICES, sim::set_devices): cudaGetDeviceCount answers k,
// cudaSetDevice accepts 0..k-1 and is per host thread, every device has its properties and
// its own PCI bus, and all of them share one host memory. Emulator only (a real machine has
// the devices it has; tests/sim/test_sim_runtime.cu covers the API there). A bad SIM_DEVICES
// value is checked end to end by tests/cli/device_map.sh (the variable is read once).
#ifdef SIM_EMULATOR
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim/sim_api.h"

namespace {

#define SIM_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Sets k devices for one test and puts the count and the current device back afterwards.
class SimDevices : public ::testing::Test {
 protected:
  // Record mode: these tests ask for invalid devices on purpose, and in abort mode every
  // refused call prints a line.
  void SetUp() override {
    saved_ = sim::devices();
    saved_mode_ = sim::fault_mode();
    sim::set_fault_mode(sim::FaultMode::Record);
  }
  void TearDown() override {
    sim::set_devices(saved_);
    (void)cudaSetDevice(0);
    (void)cudaGetLastError();
    sim::set_fault_mode(saved_mode_);
  }
  int saved_ = 1;
  sim::FaultMode saved_mode_ = sim::FaultMode::Abort;
};

TEST_F(SimDevices, DefaultIsSimDevicesOrOne) {
  const char* e = std::getenv("SIM_DEVICES");
  const int want = e && *e ? std::atoi(e) : 1;
  int count = 0;
  SIM_OK(cudaGetDeviceCount(&count));
  EXPECT_EQ(count, want);
  EXPECT_EQ(sim::devices(), want);
}

TEST_F(SimDevices, CountSetGetAndInvalidOrdinals) {
  for (const int k : {1, 2, 4, 64}) {
    sim::set_devices(k);
    int count = 0;
    SIM_OK(cudaGetDeviceCount(&count));
    EXPECT_EQ(count, k);
    for (int d = 0; d < k; ++d) {
      SIM_OK(cudaSetDevice(d));
      int got = -1;
      SIM_OK(cudaGetDevice(&got));
      EXPECT_EQ(got, d);
    }
    SIM_OK(cudaSetDevice(0));
    for (const int bad : {-1, k, k + 1}) {
      EXPECT_EQ(cudaSetDevice(bad), cudaErrorInvalidDevice) << "k=" << k << " device " << bad;
      EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
      int got = -1;
      SIM_OK(cudaGetDevice(&got));
      EXPECT_EQ(got, 0) << "a refused cudaSetDevice changed the current device";
      cudaDeviceProp p{};
      EXPECT_EQ(cudaGetDeviceProperties(&p, bad), cudaErrorInvalidDevice);
      int v = 0;
      EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, bad), cudaErrorInvalidDevice);
      (void)cudaGetLastError();
    }
  }
  sim::set_devices(0);  // clamped
  EXPECT_EQ(sim::devices(), 1);
  sim::set_devices(1000);
  EXPECT_EQ(sim::devices(), 64);
}

TEST_F(SimDevices, EveryDeviceHasPropertiesAndItsOwnBus) {
  const int k = 4;
  sim::set_devices(k);
  std::set<int> buses;
  for (int d = 0; d < k; ++d) {
    cudaDeviceProp p{};
    SIM_OK(cudaGetDeviceProperties(&p, d));
    EXPECT_NE(std::string(p.name).find("emulator"), std::string::npos) << p.name;
    EXPECT_EQ(p.warpSize, 32);
    EXPECT_EQ(p.maxThreadsPerBlock, 1024);
    buses.insert(p.pciBusID);
    int v = -1;
    SIM_OK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, d));
    EXPECT_EQ(v, p.pciBusID);
    SIM_OK(cudaDeviceGetAttribute(&v, cudaDevAttrPciDeviceId, d));
    EXPECT_EQ(v, p.pciDeviceID);
    SIM_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, d));
    EXPECT_EQ(v, p.multiProcessorCount);
  }
  EXPECT_EQ(int(buses.size()), k) << "two devices on one PCI bus";
}

TEST_F(SimDevices, CurrentDeviceIsPerHostThread) {
  sim::set_devices(4);
  SIM_OK(cudaSetDevice(2));
  int other_before = -1, other_after = -1;
  cudaError_t e1 = cudaErrorUnknown, e2 = cudaErrorUnknown, e3 = cudaErrorUnknown;
  std::thread t([&] {
    e1 = cudaGetDevice(&other_before);  // a new thread starts on device 0, as in CUDA
    e2 = cudaSetDevice(3);
    e3 = cudaGetDevice(&other_after);
  });
  t.join();
  EXPECT_EQ(e1, cudaSuccess);
  EXPECT_EQ(e2, cudaSuccess);
  EXPECT_EQ(e3, cudaSuccess);
  EXPECT_EQ(other_before, 0);
  EXPECT_EQ(other_after, 3);
  int mine = -1;
  SIM_OK(cudaGetDevice(&mine));
  EXPECT_EQ(mine, 2) << "another thread's cudaSetDevice changed this thread's device";
}

TEST_F(SimDevices, DevicesShareOneMemory) {
  sim::set_devices(3);
  SIM_OK(cudaSetDevice(1));
  int* d = nullptr;
  SIM_OK(cudaMalloc(&d, 4 * sizeof(int)));
  const std::vector<int> in = {1, 2, 3, 4};
  SIM_OK(cudaMemcpy(d, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice));
  SIM_OK(cudaSetDevice(2));  // the allocation is still there: one memory underneath
  std::vector<int> out(4, 0);
  SIM_OK(cudaMemcpy(out.data(), d, out.size() * sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(out, in);
  SIM_OK(cudaFree(d));
}

}  // namespace
#endif  // SIM_EMULATOR
