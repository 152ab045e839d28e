// Device selection (devices.h).
#include "train/devices.h"

#include <cuda_runtime.h>

#include "comm/comm.h"
#include "common/check.h"

namespace nn::train {

std::string select_device(std::string& description, std::string& name) {
  const int local = comm::local_rank();  // collective: called before any early return
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    (void)cudaGetLastError();  // clear it: the error is reported as a user error instead
    return std::string("no CUDA device visible") +
           (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : std::string());
  }
  const int dev = local % count;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  description = "device " + std::to_string(dev) + " of " + std::to_string(count) + ": " + prop.name;
  name = prop.name;
  return "";
}

// GPGPU-Sim (tests/gpgpusim/run.sh) executes our kernels' PTX but has no cuBLAS (CUDA 13's
// ships no PTX) and no stream capture: say so in one line instead of failing inside them.
std::string simulator_limits(const std::string& device_name, const Config& cfg) {
  if (device_name.rfind("GPGPU-Sim", 0) != 0) return "";
  if (cfg.gemm == 0) return "--gemm 0 (cuBLAS) does not run on GPGPU-Sim; use --gemm 1-4";
  if (cfg.graph) return "--graph (CUDA Graphs) does not run on GPGPU-Sim; leave it out";
  return "";
}

}  // namespace nn::train
