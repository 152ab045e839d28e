// One RAII owner, Buffer, for device memory (DeviceBuffer) and pinned host memory
// (PinnedBuffer), plus the one helper for 1-D launch sizes. Kernels take raw pointers and sizes; host
// code owns memory only through these. Same code in the CUDA and the emulator build.
#pragma once
#include <cstddef>
#include <cstring>
#include <utility>

#include "common/check.h"

namespace nn {

// Where a Buffer's memory lives, and how it is taken and given back.
struct DeviceMemory {
  static void* take(std::size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  static void give_back(void* p) { CUDA_CHECK_NOTHROW(cudaFree(p)); }
  static constexpr cudaMemcpyKind kFromHost = cudaMemcpyHostToDevice, kToHost = cudaMemcpyDeviceToHost;
};
// Page-locked host memory: the staging buffer for device<->host copies and MPI.
struct PinnedMemory {
  static void* take(std::size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  static void give_back(void* p) { CUDA_CHECK_NOTHROW(cudaFreeHost(p)); }
  static constexpr cudaMemcpyKind kFromHost = cudaMemcpyHostToHost, kToHost = cudaMemcpyHostToHost;
};

// n values of T in Memory's kind of memory, owned: moved, never copied, freed by the destructor.
template <class T, class Memory>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) : n_(n) {
    if (n_ > 0) p_ = static_cast<T*>(Memory::take(n_ * sizeof(T)));
  }
  ~Buffer() {
    if (p_) Memory::give_back(p_);
  }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer tmp(std::move(o));
    std::swap(p_, tmp.p_);
    std::swap(n_, tmp.n_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

  // Host memory <-> this buffer, synchronously.
  void upload(const T* h, std::size_t n, std::size_t offset = 0) {
    if (n) CUDA_CHECK(cudaMemcpy(p_ + offset, h, n * sizeof(T), Memory::kFromHost));
  }
  void download(T* h, std::size_t n, std::size_t offset = 0) const {
    if (n) CUDA_CHECK(cudaMemcpy(h, p_ + offset, n * sizeof(T), Memory::kToHost));
  }
  void zero() {  // device memory: cudaMemset; pinned memory is host memory
    if (n_ && Memory::kToHost == cudaMemcpyHostToHost) std::memset(static_cast<void*>(p_), 0, bytes());
    else if (n_) CUDA_CHECK(cudaMemset(p_, 0, bytes()));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
using DeviceBuffer = Buffer<T, DeviceMemory>;
template <class T>
using PinnedBuffer = Buffer<T, PinnedMemory>;

// Grid size for a 1-D launch covering n elements with `block` threads per block.
inline unsigned blocks_for(std::size_t n, unsigned block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

}  // namespace nn
