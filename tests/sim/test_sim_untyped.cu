// Untyped launches of kernels the program never names typed (sim/simcc registers every kernel
// and every used instantiation of a kernel template when the program loads, as nvcc does:
// sim/include/sim/launch.h, sim/runtime/launch_ex.cpp): cudaLaunchKernel,
// cudaLaunchCooperativeKernel and cudaLaunchKernelExC with a `const void*` kernel compute what
// the kernel computes; an overload is launched with its own parameter types; a pointer that is
// no kernel is refused with cudaErrorInvalidDeviceFunction. Valid CUDA.
//
// The kernels of this file are used only through `const void*` (no <<<...>>>, no typed
// occupancy or attribute query, no typed launch call): a typed use would enter them into the
// emulator's registry and the tests would no longer show that the registration at load does.
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace {

using simtest::DeviceBuffer;

// out[i] = a * in[i] + b for every i < n, in a grid-stride loop.
__global__ void untyped_axpb(const float* in, float* out, int n, float a, float b) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    out[i] = a * in[i] + b;
}

// The same for any element type, scaled by a template constant.
template <class T, int Scale>
__global__ void untyped_scale(const T* in, T* out, int n, T add) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    out[i] = T(Scale) * in[i] + add;
}

// Two overloads of one name: each launch must run the one whose types it was given.
__global__ void untyped_fill(float* out, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) out[i] = 1.5f;
}
__global__ void untyped_fill(int* out, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) out[i] = 7;
}

constexpr int kN = 300;

std::vector<float> ramp() {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) v[i] = float(i) - 100.0f;
  return v;
}

cudaLaunchConfig_t config(dim3 grid, dim3 block, cudaLaunchAttribute* attr, bool cooperative) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = cooperative ? attr : nullptr;
  cfg.numAttrs = cooperative ? 1 : 0;
  return cfg;
}

// how: 0 cudaLaunchKernel, 1 cudaLaunchCooperativeKernel, 2 cudaLaunchKernelExC, 3 the same with
// the cooperative attribute.
cudaError_t launch(int how, const void* kernel, dim3 grid, dim3 block, void** args) {
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = config(grid, block, attr, how == 3);
  if (how == 0) return cudaLaunchKernel(kernel, grid, block, args, 0, nullptr);
  if (how == 1) return cudaLaunchCooperativeKernel(kernel, grid, block, args, 0, nullptr);
  return cudaLaunchKernelExC(&cfg, kernel, args);
}

class SimUntyped : public simtest::SimTest {};

TEST_F(SimUntyped, PlainKernelThroughEveryUntypedLaunch) {
  const std::vector<float> h = ramp();
  const void* kernel = reinterpret_cast<const void*>(untyped_axpb);
  for (int how = 0; how < 4; ++how) {  // cudaLaunchKernel, cooperative, ExC, ExC cooperative
    DeviceBuffer<float> in(h), out(kN);
    ASSERT_CUDA_OK(out.fill_bytes(0));
    const float* pin = in.get();
    float* pout = out.get();
    int n = kN;
    float a = 2.0f, b = 0.5f + float(how);
    void* args[] = {&pin, &pout, &n, &a, &b};
    ASSERT_CUDA_OK(launch(how, kernel, dim3(2), dim3(64), args));
    ASSERT_LAUNCH_OK();
    const std::vector<float> got = out.download();
    for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], 2.0f * h[i] + b) << "launch " << how << ", element " << i;
  }
}

TEST_F(SimUntyped, TemplateInstantiationsThroughEveryUntypedLaunch) {
  const std::vector<float> hf = ramp();
  std::vector<int> hi(kN);
  for (int i = 0; i < kN; ++i) hi[i] = i - 7;
  for (int how = 0; how < 4; ++how) {  // as above
    DeviceBuffer<float> inf(hf), outf(kN);
    DeviceBuffer<int> ini(hi), outi(kN);
    const float* pinf = inf.get();
    float* poutf = outf.get();
    const int* pini = ini.get();
    int* pouti = outi.get();
    int n = kN;
    float addf = 0.25f;
    int addi = -3;
    void* argsf[] = {&pinf, &poutf, &n, &addf};
    void* argsi[] = {&pini, &pouti, &n, &addi};
    const void* kf = reinterpret_cast<const void*>(untyped_scale<float, 3>);
    const void* ki = reinterpret_cast<const void*>(untyped_scale<int, -2>);
    ASSERT_CUDA_OK(launch(how, kf, dim3(3), dim3(32), argsf));
    ASSERT_CUDA_OK(launch(how, ki, dim3(3), dim3(32), argsi));
    ASSERT_LAUNCH_OK();
    const std::vector<float> gf = outf.download();
    const std::vector<int> gi = outi.download();
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(gf[i], 3.0f * hf[i] + 0.25f) << "launch " << how << ", element " << i;
      ASSERT_EQ(gi[i], -2 * hi[i] - 3) << "launch " << how << ", element " << i;
    }
  }
}

TEST_F(SimUntyped, EachOverloadRunsWithItsOwnTypes) {
  DeviceBuffer<float> outf(kN);
  DeviceBuffer<int> outi(kN);
  float* pf = outf.get();
  int* pi = outi.get();
  int n = kN;
  void* argsf[] = {&pf, &n};
  void* argsi[] = {&pi, &n};
  void (*ff)(float*, int) = untyped_fill;
  void (*fi)(int*, int) = untyped_fill;
  ASSERT_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(ff), dim3(2), dim3(64), argsf, 0, nullptr));
  ASSERT_CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(fi), dim3(2), dim3(64), argsi, 0, nullptr));
  ASSERT_LAUNCH_OK();
  EXPECT_EQ(outf.download(), std::vector<float>(kN, 1.5f));
  EXPECT_EQ(outi.download(), std::vector<int>(kN, 7));
}

TEST_F(SimUntyped, PointerThatIsNoKernelIsRefused) {
  static int not_a_kernel = 0;
  int n = 1;
  void* args[] = {&n};
  const void* p = &not_a_kernel;
  EXPECT_EQ(cudaLaunchKernel(p, dim3(1), dim3(32), args, 0, nullptr), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = config(dim3(1), dim3(32), attr, false);
  EXPECT_EQ(cudaLaunchKernelExC(&cfg, p, args), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // not sticky
}

}  // namespace
