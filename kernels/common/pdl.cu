// The programmatic-dependent-launch switch (common/pdl.h): on by default where the device is of
// compute capability 9.0 or later and the PDL kernels' code running on it was compiled for 9.0
// (their instructions exist: a probe kernel built with the same flags tells, without a launch);
// NN_PDL=0 turns it off. nvcc (built like the PDL kernels, Makefile) and sim/simcc.
// Tested by tests/kernels/test_pdl.cpp.
#include "common/pdl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace nn {
namespace {

__global__ void pdl_probe_kernel() { pdl_wait(); }

std::atomic<int> g_switch{-1};  // -1: from NN_PDL at first use
std::atomic<int> g_device{-1};  // -1: not asked yet; the device's answer (0 or 1)

bool device_supports() {
  int cached = g_device.load();
  if (cached >= 0) return cached != 0;
  int dev = 0, major = 0;
  cudaFuncAttributes attr{};
  bool ok = cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9 &&
            cudaFuncGetAttributes(&attr, pdl_probe_kernel) == cudaSuccess && attr.ptxVersion >= 90 &&
            attr.binaryVersion >= 90;
  if (!ok) (void)cudaGetLastError();
  g_device.store(ok ? 1 : 0);
  return ok;
}

}  // namespace

bool set_programmatic_launch(bool on) {
  const int old = g_switch.exchange(on ? 1 : 0);
  if (old >= 0) return old != 0;
  const char* env = std::getenv("NN_PDL");
  return !(env && std::strcmp(env, "0") == 0);
}

bool programmatic_launch() {
  int s = g_switch.load();
  if (s < 0) {
    const char* env = std::getenv("NN_PDL");
    s = env && std::strcmp(env, "0") == 0 ? 0 : 1;
    int expected = -1;
    if (!g_switch.compare_exchange_strong(expected, s)) s = expected;
  }
  return s != 0 && device_supports();
}

}  // namespace nn
