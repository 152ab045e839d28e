// Internal to kernels/ops: the second persistent kernel's shape, its probe marks, its tiles and its
// inputs: the asynchronous gather of a step's input slices and their conversion to T. Device code
// for persistent_step2.cu (nvcc and sim/simcc); tested through tests/kernels/test_persistent_step*.cpp.
#pragma once
#include <cuda_pipeline.h>

#include <chrono>
#include <cstdint>

#include "common/vector_access.h"
#include "ops/persistent_step2.h"

namespace nn::persist2::detail {

template <class T>
struct Shape2 {
  PersistentShape<T> a;
  int th, td, nht, tiles, tpb, jsplit, copy, dz_cols;
  int window;  // variant 3's 16-byte windows (windowed()): gather_window and convert_words
  Layout L;
};

// 4 consecutive T from 16-byte-aligned shared memory: one LDS.128 (two for double).
__device__ __forceinline__ void ld4(const float* p, float (&o)[4]) {
  const float4 v = load_vector(reinterpret_cast<const float4*>(p));
  o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
}
__device__ __forceinline__ void ld4(const double* p, double (&o)[4]) {
  const double2 a = load_vector(reinterpret_cast<const double2*>(p));
  const double2 b = load_vector(reinterpret_cast<const double2*>(p) + 1);
  o[0] = a.x, o[1] = a.y, o[2] = b.x, o[3] = b.y;
}

__device__ __forceinline__ unsigned long long clock_ns() {
#ifdef SIM_EMULATOR
  return static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}
// Thread 0 of each block notes when it reached mark m of step s (probe on only); K marks a step.
template <int K = kProbeMarks>
__device__ __forceinline__ void mark(unsigned long long* probe, int s, int m) {
  if (probe && threadIdx.x == 0) probe[(static_cast<std::size_t>(s) * gridDim.x + blockIdx.x) * K + m] = clock_ns();
}

struct Tile {
  int h0, thl, d0, tdl, slice;
};
template <class T>
__device__ __forceinline__ Tile tile_of(const Shape2<T>& g, int t) {
  Tile q;
  q.slice = t / g.nht;
  q.h0 = (t % g.nht) * g.th;
  q.thl = min(g.th, g.a.H - q.h0);
  q.d0 = q.slice * g.td;
  q.tdl = min(g.td, g.a.D - q.d0);
  return q;
}

template <class T>
__device__ __forceinline__ int cols_of(const Shape2<T>& g, int s) {  // the batch columns of step s
  const unsigned long long left = g.a.n - (g.a.offset + static_cast<unsigned long long>(s) * unsigned(g.a.B));
  return int(left < static_cast<unsigned long long>(g.a.B) ? left : static_cast<unsigned long long>(g.a.B));
}
template <class T>
__device__ __forceinline__ const std::uint32_t* order_of(const Shape2<T>& g, const std::uint32_t* order, int s) {
  return order + g.a.offset + static_cast<unsigned long long>(s) * unsigned(g.a.B);
}

// Step s's images of the owned tiles' slices, into the byte buffers: copy_bytes-sized asynchronous
// copies (the last one of a short slice zero-filled), or plain loads where D or the tile width
// allows no aligned copy. idx holds the step's image indices. Issued, committed, not waited for.
template <class T>
__device__ void gather(const Shape2<T>& g, const std::uint8_t* images, const std::uint32_t* idx, int b,
                       unsigned char* sm) {
  std::uint8_t* xb = reinterpret_cast<std::uint8_t*>(sm + g.L.xb);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    std::uint8_t* dst = xb + static_cast<std::size_t>(k) * g.a.B * g.L.ldxb;
    if (g.copy > 0) {
      const int per = (q.tdl + g.copy - 1) / g.copy;
      for (int i = int(threadIdx.x); i < b * per; i += kThreads) {
        const int j = i / per, c = i % per, left = q.tdl - c * g.copy;
        const std::uint8_t* src = images + static_cast<std::size_t>(idx[j]) * g.a.D + q.d0 + c * g.copy;
        __pipeline_memcpy_async(dst + j * g.L.ldxb + c * g.copy, src, std::size_t(g.copy),
                                left < g.copy ? std::size_t(g.copy - left) : 0);
      }
    } else {
      for (int i = int(threadIdx.x); i < b * q.tdl; i += kThreads) {
        const int j = i / q.tdl, d = i % q.tdl;
        dst[j * g.L.ldxb + d] = images[static_cast<std::size_t>(idx[j]) * g.a.D + q.d0 + d];
      }
    }
  }
  __pipeline_commit();
}

// The gathered bytes to inputs (exactly byte / 255, through the table), zeros past the tile's
// width and in the rows up to the next multiple of 4 (read by the 4-column thread tiles).
template <class T>
__device__ void convert(const Shape2<T>& g, int b, unsigned char* sm) {
  const std::uint8_t* xb = reinterpret_cast<const std::uint8_t*>(sm + g.L.xb);
  T* x = reinterpret_cast<T*>(sm + g.L.x);
  const T* lut = reinterpret_cast<const T*>(sm + g.L.lut);
  const int td4 = round4(g.td), b4 = round4(b);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const int tdl = tile_of(g, t).tdl;
    const std::uint8_t* src = xb + static_cast<std::size_t>(k) * g.a.B * g.L.ldxb;
    T* dst = x + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx;
    for (int i = int(threadIdx.x); i < b4 * td4; i += kThreads) {
      const int j = i / td4, d = i % td4;
      dst[j * g.L.ldx + d] = j < b && d < tdl ? lut[src[j * g.L.ldxb + d]] : T(0);
    }
  }
}

}  // namespace nn::persist2::detail
