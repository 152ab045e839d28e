// HugePageAllocator: a std::allocator for the host images (CpuImages), in
// 2 MiB pages where the kernel allows them (Linux transparent huge pages in `madvise` or
// `always` mode). The training shard is tens of MB of images read one image at a time in a
// shuffled order, so with 4 KiB pages nearly every image also misses the TLB, and a page walk
// that misses the caches costs as much as the image itself: the gather at H = 512, B = 800
// took 0.22 ms a step with 4 KiB pages and 0.12 ms with 2 MiB pages (Zen 5, measured in a
// harness beside the GEMMs). The validation and test images, read in order, get the same
// pages (harmless). Blocks under 1 MiB, other systems, or a kernel that says no: the same
// memory in ordinary pages. Values and layout are those of std::allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nn::model {

inline constexpr std::size_t kHugePage = std::size_t(2) << 20;

template <class T>
struct HugePageAllocator {
  static_assert(alignof(T) <= alignof(std::max_align_t), "malloc's alignment must suffice below 1 MiB");
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > (std::size_t(-1) - 2 * kHugePage) / sizeof(T)) throw std::bad_array_new_length();  // rounding below
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage / 2) {
      if (void* p = std::malloc(bytes ? bytes : 1)) return static_cast<T*>(p);
      throw std::bad_alloc();
    }
    const std::size_t rounded = whole_pages(bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // A mapping of its own, never touched before, 2 MiB aligned (the slack around it given
    // back) and advised before the first touch: the kernel then backs each first fault with a
    // huge page. (malloc may hand back heap pages that an earlier buffer touched already, in
    // 4 KiB pages, which the advice no longer changes: seen in the test binary.)
    void* raw = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t end = start + rounded + kHugePage, used_end = aligned + rounded;
    if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
    (void)madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // advice only
    return reinterpret_cast<T*>(aligned);
#else
    if (void* p = std::aligned_alloc(kHugePage, rounded)) return static_cast<T*>(p);
    throw std::bad_alloc();
#endif
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= kHugePage / 2) {
      munmap(p, whole_pages(bytes));
      return;
    }
#endif
    (void)bytes;
    std::free(p);
  }

 private:
  static std::size_t whole_pages(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
};

template <class T, class U>
bool operator==(const HugePageAllocator<T>&, const HugePageAllocator<U>&) noexcept {
  return true;
}

}  // namespace nn::model
