// Shared by the tests of the elementwise and reduction kernels, tests/kernels/test_ops*.cpp: a
// device scalar read back, the per-type epsilon and subnormal slack, uniform random vectors and
// the typed OpsTest fixture (float and double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/device_buffer.h"
#include "device_vectors.h"
#include "ops/ops.h"
#include "schedules.h"

// One class template for every file (gtest requires one fixture per suite), so not in an
// anonymous namespace.
template <class T>
class OpsTest : public ::testing::Test {};

namespace {

using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OpsTest, Types);

using nn::test::to_device;
using nn::test::to_host;

template <class T>
T scalar_of(const nn::DeviceBuffer<T>& d) {
  T v{};
  d.download(&v, 1);
  return v;
}

template <class T>
constexpr double kEps = std::numeric_limits<T>::epsilon();
// Absolute slack for results in the subnormal range, where precision is absolute.
template <class T>
constexpr double kTiny = 8.0 * std::numeric_limits<T>::denorm_min();

template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

}  // namespace
