// Variant 4's building blocks, internal to its kernel file 4_warptile.cu: 16-byte vector access,
// the tile configurations (block, warp and thread tiles, checked against the plan's table in
// 4_warptile.h), and the loaders that move one operand tile global -> registers -> shared memory
// (TileLoader). Included by 4_warptile.cu only (its anonymous namespace is that file's).
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/vector_access.h"
#include "gemm/4_warptile.h"
#include "gemm/gemm.h"

namespace nn::gemm_detail {
namespace {

// 16-byte vectors: the widest global/shared access a thread can issue.
template <class T> struct Vec;
template <> struct Vec<float> { using type = float4; static constexpr int n = 4; };
template <> struct Vec<double> { using type = double2; static constexpr int n = 2; };

__device__ __forceinline__ void unpack(float* d, float4 v) { d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w; }
__device__ __forceinline__ void unpack(double* d, double2 v) { d[0] = v.x; d[1] = v.y; }
__device__ __forceinline__ float4 pack(const float* s) { return make_float4(s[0], s[1], s[2], s[3]); }
__device__ __forceinline__ double2 pack(const double* s) { return make_double2(s[0], s[1]); }

// Four consecutive elements (one fragment group) to/from 16-byte aligned memory.
template <class T>
__device__ __forceinline__ void load4(T* d, const T* p) {
  using V = typename Vec<T>::type;
  constexpr int n = Vec<T>::n;
#pragma unroll
  for (int v = 0; v < 4 / n; ++v) unpack(d + v * n, load_vector(reinterpret_cast<const V*>(p + v * n)));
}
template <class T>
__device__ __forceinline__ void store4(T* p, const T* s) {
  using V = typename Vec<T>::type;
  constexpr int n = Vec<T>::n;
#pragma unroll
  for (int v = 0; v < 4 / n; ++v) store_vector(reinterpret_cast<V*>(p + v * n), pack(s + v * n));
}

// Block tile BM x BN x BK; each warp owns WM x WN; each thread TM x TN outputs, as TM/4 x TN/4
// groups of 4x4 spread LM*4 rows (LN*4 columns) apart, so that a warp's fragment reads from
// shared memory are consecutive 16-byte chunks (no bank conflicts, broadcast across the other
// lane dimension) and its stores to D cover whole 128-byte column segments.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_>
struct Shape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int LM = WM / TM, LN = WN / TN;  // lanes along M and N inside a warp
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static_assert(LM * LN == 32 && TM % 4 == 0 && TN % 4 == 0, "a warp is 32 lanes of 4x4 groups");
  static_assert(BM % WM == 0 && BN % WN == 0, "warps tile the block");
};

// The tiles (same BM x BN for both types so the plan does not depend on T). M=H up to 2048 and
// N=B/p in 750..3000 give 8-32 x 12-47 tiles of 64: 128x128 tiles would leave most of an
// H100's 132 SMs idle, so the largest tile is 128x64 and smaller ones fill the machine; 16x64
// is for the M=10 output layer. double halves BK (same shared-memory bytes) and keeps 32
// accumulators per thread (64 registers) so nothing spills.
template <class T, int ID> struct Cfg;
template <> struct Cfg<float, 0> : Shape<128, 64, 16, 64, 32, 8, 8> {};
template <> struct Cfg<float, 1> : Shape<64, 64, 16, 32, 32, 4, 8> {};
template <> struct Cfg<float, 2> : Shape<64, 32, 16, 32, 16, 4, 4> {};
template <> struct Cfg<float, 3> : Shape<16, 64, 32, 16, 32, 4, 4> {};
template <> struct Cfg<double, 0> : Shape<128, 64, 8, 64, 16, 8, 4> {};
template <> struct Cfg<double, 1> : Shape<64, 64, 8, 32, 32, 4, 8> {};
template <> struct Cfg<double, 2> : Shape<64, 32, 8, 32, 16, 4, 4> {};
template <> struct Cfg<double, 3> : Shape<16, 64, 16, 16, 32, 4, 4> {};
template <class T, int ID>
constexpr bool matches_plan() {  // the plan (4_warptile_plan.cu) counts tiles of kTileM x kTileN
  return Cfg<T, ID>::BM == warptile::kTileM[ID] && Cfg<T, ID>::BN == warptile::kTileN[ID];
}
static_assert(matches_plan<float, 0>() && matches_plan<float, 1>() && matches_plan<float, 2>() &&
                  matches_plan<float, 3>() && matches_plan<double, 0>() && matches_plan<double, 1>() &&
                  matches_plan<double, 2>() && matches_plan<double, 3>(),
              "Cfg tiles must match warptile::kTileM/kTileN");

enum VecFlags { kVecA = 1, kVecB = 2, kVecD = 4 };

// Moves one operand tile (R rows of M or N, by BK) global -> registers -> shared memory, so
// the global loads of tile t+1 are in flight while tile t is multiplied. Shared layout is
// always S[k][r] (r contiguous, padded by one vector so the transposed stores of the
// k-contiguous case spread over the banks while rows stay 16-byte aligned).
// kRowContig: element (r, k) is X[r + k*ld] (A with op N, B with op T); otherwise X[k + r*ld].
template <class T, int R, int BK, int NT, bool kRowContig>
struct TileLoader {
  static constexpr int VN = Vec<T>::n;
  static constexpr int kChunks = R * BK / (VN * NT);  // vectors per thread
  static_assert(kChunks >= 1 && kChunks * VN * NT == R * BK, "tile must split evenly");
  T reg[kChunks * VN];

  __device__ __forceinline__ static T at(const T* X, int ld, int r, int k) {
    return kRowContig ? X[r + static_cast<std::size_t>(k) * ld] : X[k + static_cast<std::size_t>(r) * ld];
  }

  // Chunk c of the tile: consecutive threads take consecutive VN-long pieces of the
  // contiguous dimension, so a warp reads whole 128-byte lines in either layout.
  __device__ __forceinline__ static void chunk(int c, int& rr, int& kk) {
    rr = kRowContig ? (c % (R / VN)) * VN : c / (BK / VN);
    kk = kRowContig ? c / (R / VN) : (c % (BK / VN)) * VN;
  }

  // Rows r0.., k in [k0, k_end); out-of-range elements are 0 so edge tiles add nothing. The
  // vector load needs the whole chunk in range and 16-byte alignment (vec: decided at launch);
  // otherwise the same chunk is read element by element (the warp still covers whole lines).
  __device__ __forceinline__ void load(const T* X, int ld, int rows, int r0, int k0, int k_end,
                                       bool vec, int tid) {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int rr, kk;
      chunk(tid + q * NT, rr, kk);
      const int r = r0 + rr, k = k0 + kk;
      T* d = reg + q * VN;
      const bool full = kRowContig ? (k < k_end && r + VN <= rows) : (r < rows && k + VN <= k_end);
      if (vec && full) {
        const T* p = kRowContig ? X + r + static_cast<std::size_t>(k) * ld
                                : X + k + static_cast<std::size_t>(r) * ld;
        unpack(d, __ldg(reinterpret_cast<const typename Vec<T>::type*>(p)));
      } else {
#pragma unroll
        for (int v = 0; v < VN; ++v) {
          const int rv = kRowContig ? r + v : r, kv = kRowContig ? k : k + v;
          d[v] = (rv < rows && kv < k_end) ? at(X, ld, rv, kv) : T(0);
        }
      }
    }
  }

  __device__ __forceinline__ void store(T (*S)[R + VN], int tid) const {
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      int rr, kk;
      chunk(tid + q * NT, rr, kk);
      if (kRowContig) {
        store_vector(reinterpret_cast<typename Vec<T>::type*>(&S[kk][rr]), pack(reg + q * VN));
      } else {
#pragma unroll
        for (int v = 0; v < VN; ++v) S[kk + v][rr] = reg[q * VN + v];
      }
    }
  }
};

}  // namespace
}  // namespace nn::gemm_detail
