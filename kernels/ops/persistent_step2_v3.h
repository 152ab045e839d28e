// Internal to kernels/ops: what variant 3 of the second persistent kernel (persistent_step2.cu,
// NN_PERSISTENT_VARIANT=3) does differently from variant 2, with the same arithmetic: a tile's
// input slice gathered as the 16-byte-aligned window of each image row around it (16-byte
// asynchronous copies wherever the image rows are 16-byte aligned), the bytes converted four at a
// time with no division in the loop, and the tail of a step ([b1 | W2 | b2], the loss) moved into
// the next step's phase A, onto the warps that have no forward work (and, in
// persistent_step2_tiles.h, forward_tile<true>: the forward's loads a step ahead). Device code for
// persistent_step2.cu; tested through tests/kernels/test_persistent_step*.cpp.
#pragma once
#include "ops/persistent_step2_io.h"

namespace nn::persist2::detail {

// Step s's images of the owned tiles' slices as windows: row j of tile k's buffer holds bytes
// [floor16(d0), ceil16(d0 + tdl)) of image idx[j] (D a multiple of 16: every copy 16 bytes,
// both ends aligned). A thread keeps one 16-byte chunk of the window and strides over the rows.
template <class T>
__device__ void gather_window(const Shape2<T>& g, const std::uint8_t* images, const std::uint32_t* idx, int b,
                              unsigned char* sm) {
  std::uint8_t* xb = reinterpret_cast<std::uint8_t*>(sm + g.L.xb);
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    const int w0 = q.d0 & ~15, per = ((q.d0 + q.tdl + 15) >> 4) - (q.d0 >> 4);
    const int rows = kThreads / per, c = int(threadIdx.x) % per, j0 = int(threadIdx.x) / per;
    if (j0 >= rows) continue;
    std::uint8_t* dst = xb + static_cast<std::size_t>(k) * g.a.B * g.L.ldxb + c * 16;
    const std::uint8_t* src = images + w0 + c * 16;
    for (int j = j0; j < b; j += rows)
      __pipeline_memcpy_async(dst + j * g.L.ldxb, src + static_cast<std::size_t>(idx[j]) * g.a.D, 16);
  }
  __pipeline_commit();
}

// The step's gather: windows where the plan says so (variant 3), else gather's copies.
template <bool V3, class T>
__device__ __forceinline__ void gather_step(const Shape2<T>& g, const std::uint8_t* images, const std::uint32_t* idx,
                                            int b, unsigned char* sm) {
  if (V3 && g.window) gather_window(g, images, idx, b, sm);
  else gather(g, images, idx, b, sm);
}

__device__ __forceinline__ void st4(float* p, const float (&v)[4]) {
  store_vector(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
}
__device__ __forceinline__ void st4(double* p, const double (&v)[4]) {
  store_vector(reinterpret_cast<double2*>(p), make_double2(v[0], v[1]));
  store_vector(reinterpret_cast<double2*>(p) + 1, make_double2(v[2], v[3]));
}

// convert's result (byte / 255 through the table, zeros past the tile's width and in the rows up
// to the next multiple of 4), four inputs a thread at a time: a thread keeps one group of 4
// inputs and strides over the rows, reading the group's 4 bytes as one word (the window's offset
// d0 - floor16(d0) and the tile width are multiples of 4) and writing 4 T with 16-byte stores.
template <class T>
__device__ void convert_words(const Shape2<T>& g, int b, unsigned char* sm) {
  const T* lut = reinterpret_cast<const T*>(sm + g.L.lut);
  const int q4 = round4(g.td) / 4, b4 = round4(b), rows = kThreads / q4;
  const int j0 = int(threadIdx.x) / q4, d = 4 * (int(threadIdx.x) % q4);
  if (j0 >= rows) return;
  for (int k = 0; k < g.tpb; ++k) {
    const int t = int(blockIdx.x) + k * int(gridDim.x);
    if (t >= g.tiles) break;
    const Tile q = tile_of(g, t);
    const std::uint8_t* src = reinterpret_cast<const std::uint8_t*>(sm + g.L.xb) +
                              static_cast<std::size_t>(k) * g.a.B * g.L.ldxb + (g.window ? q.d0 & 15 : 0) + d;
    T* dst = reinterpret_cast<T*>(sm + g.L.x) + static_cast<std::size_t>(k) * round4(g.a.B) * g.L.ldx + d;
    const int n = min(4, q.tdl - d);  // this group's inputs inside the tile (<= 0: none)
    for (int j = j0; j < b4; j += rows) {
      T v[4] = {T(0), T(0), T(0), T(0)};
      if (j < b && n == 4) {
        const uchar4 w = load_vector(reinterpret_cast<const uchar4*>(src + j * g.L.ldxb));
        v[0] = lut[w.x], v[1] = lut[w.y], v[2] = lut[w.z], v[3] = lut[w.w];
      } else if (j < b) {
        for (int u = 0; u < n; ++u) v[u] = lut[src[j * g.L.ldxb + u]];  // the bytes past tdl may be unwritten
      }
      st4(dst + j * g.L.ldx, v);
    }
  }
}

// The warps that run the previous step's tail during phase A (variant 3): every warp of a block
// that holds no tile, the warps past the forward's thread tiles in one that does. Returns this
// warp's slot (-1: none) and in *count the slots of the grid (0: no warp is free in phase A, the
// tail stays after phase C).
template <class T>
__device__ inline int tail_slot(const Shape2<T>& g, int* count) {
  const int warps = kThreads / 32, warp = int(threadIdx.x) / 32, blk = int(blockIdx.x);
  const int busy = min(warps, (g.th / 4 * ((g.a.B + 3) / 4) + 31) / 32);  // forward_tile's warps
  const int holders = min(int(gridDim.x), g.tiles), free = int(gridDim.x) - holders;
  *count = warps * free + (warps - busy) * holders;
  if (blk >= holders) return warp * free + (blk - holders);
  return warp >= busy ? warps * free + (warp - busy) * holders + blk : -1;
}

}  // namespace nn::persist2::detail
