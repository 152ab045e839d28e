// Host vectors to and from device buffers, and a bitwise comparison, for the kernel tests
// (tests/kernels/test_*.cpp).
#pragma once
#include <cstring>
#include <vector>

#include "common/device_buffer.h"

namespace nn::test {

template <class T>
nn::DeviceBuffer<T> to_device(const std::vector<T>& h) {
  nn::DeviceBuffer<T> d(h.size());
  d.upload(h.data(), h.size());
  return d;
}

template <class T>
std::vector<T> to_host(const nn::DeviceBuffer<T>& d) {
  std::vector<T> h(d.size());
  d.download(h.data(), h.size());
  return h;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace nn::test
