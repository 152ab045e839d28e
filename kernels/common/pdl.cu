// The programmatic-dependent-launch switch (common/pdl.h): off by default (on an H200 the fused
// step with PDL measured slower at 512:800 and 1024:1000, 4% and 17%, and 2% faster at 256:100,
// where the persistent step runs instead: docs/performance.md); NN_PDL=1 or
// set_programmatic_launch(true) turns it on where the device is of compute capability 9.0 or later
// and the PDL kernels' code running on it was compiled for 9.0 (their instructions exist: a probe
// kernel built with the same flags tells, without a launch). nvcc (built like the PDL kernels, Makefile) and sim/simcc.
// Tested by tests/kernels/test_pdl.cpp.
#include "common/pdl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace nn {
namespace {

__global__ void pdl_probe_kernel() { pdl_wait(); }

std::atomic<int> g_switch{-1};  // -1: from NN_PDL at first use

// NN_PDL=1 in the environment: on; anything else (unset, 0): off.
int from_environment() {
  const char* env = std::getenv("NN_PDL");
  return env && std::strcmp(env, "1") == 0 ? 1 : 0;
}
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
  return (old >= 0 ? old : from_environment()) != 0;
}

bool programmatic_launch() {
  int s = g_switch.load();
  if (s < 0) {
    s = from_environment();
    int expected = -1;
    if (!g_switch.compare_exchange_strong(expected, s)) s = expected;
  }
  return s != 0 && device_supports();
}

}  // namespace nn
