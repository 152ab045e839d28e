// Positive tests of the CUDA C++ the emulator accepts, its abstractions: templated kernels, structs
// passed by value, __host__ __device__ and __device__ functions. Valid CUDA (simcc and nvcc).
#include <cmath>
#include <type_traits>
#include <vector>

#include "sim_syntax_util.h"

namespace {

using simtest::DeviceBuffer;

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
