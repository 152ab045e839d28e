// RAII owners for device memory (DeviceBuffer) and pinned host memory (PinnedBuffer),
// plus the one helper for 1-D launch sizes. Kernels take raw pointers and sizes; host
// code owns memory only through these. Same code in the CUDA and the emulator build.
#pragma once
#include <cstddef>
#include <utility>

#include "common/check.h"

namespace nn {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_ > 0) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) CUDA_CHECK_NOTHROW(cudaFree(p_));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    std::swap(p_, tmp.p_);
    std::swap(n_, tmp.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

  void upload(const T* h, std::size_t n, std::size_t offset = 0) {
    if (n) CUDA_CHECK(cudaMemcpy(p_ + offset, h, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(T* h, std::size_t n, std::size_t offset = 0) const {
    if (n) CUDA_CHECK(cudaMemcpy(h, p_ + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
  }
  void zero() {
    if (n_) CUDA_CHECK(cudaMemset(p_, 0, bytes()));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Page-locked host memory: the staging buffer for device<->host copies and MPI.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t n) : n_(n) {
    if (n_ > 0) CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (p_) CUDA_CHECK_NOTHROW(cudaFreeHost(p_));
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    PinnedBuffer tmp(std::move(o));
    std::swap(p_, tmp.p_);
    std::swap(n_, tmp.n_);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* get() const { return p_; }
  T& operator[](std::size_t i) const { return p_[i]; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Grid size for a 1-D launch covering n elements with `block` threads per block.
inline unsigned blocks_for(std::size_t n, unsigned block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

}  // namespace nn
