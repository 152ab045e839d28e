// The CPU model's elementwise passes (see cpu_kernels.h). Each hot loop is compiled three
// times by GCC's target_clones (x86-64-v4 = AVX-512, v3 = AVX2 + FMA, and the baseline) at
// -O3 and dispatched once at load time; other compilers and CPUs get the plain loop.
#if defined(__GNUC__) && !defined(__clang__)
// For the whole file, before any header (a function with other optimisation flags, std::abs
// included, would not be inlined into the loops, which then do not vectorise):
// vectorise (O3); a compare may be if-converted into a select (no-trapping-math: nothing here
// reads the FP exception flags); no FMA contraction, so every clone rounds p - lr * g alike.
#pragma GCC optimize("O3", "no-trapping-math", "fp-contract=off")
// The vector types below never cross a function boundary outside this file.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include "model/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define NN_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NN_CPU_CLONES
#endif

namespace nn::model::cpu {

namespace {

inline float exp_nonpos_inl(float x) {
  x = x < -87.0f ? -87.0f : x;
  // n = x log2(e) rounded (half down): x <= 0, so truncating x log2(e) - 1/2 toward zero is
  // its ceiling; a conversion, which vectorises where floor() may be a library call.
  const std::int32_t ni = static_cast<std::int32_t>(x * 1.44269504088896341f - 0.5f);
  const float n = static_cast<float>(ni);
  // ln 2 in two parts: n * hi is exact for |n| < 2^10, so r carries no cancellation error.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((ni + 127) << 23);
  return p * scale;
}
inline double exp_nonpos_inl(double x) { return std::exp(x); }

template <class T>
inline T sigmoid(T z) {
  const T e = exp_nonpos_inl(-std::abs(z));
  return (z >= T(0) ? T(1) : e) / (T(1) + e);
}

// Images picked by idx sit anywhere in the shard (tens of MB, mostly outside the caches), and
// the hardware prefetcher cannot guess the next one: without help the loop waits on memory for
// every image. So each image's cache lines are requested kGatherAhead images before they are
// converted. Measured on Zen 5, 800 images of a shuffled 54,000, the gather alone: 0.22 ms
// without, 0.055 ms 4 ahead (1 ahead 0.11, 2 ahead 0.076, 8 ahead no better); between the
// step's GEMMs, which evict the page tables too: 0.36 -> 0.22 ms, and 0.12 ms with the shard
// in 2 MiB pages (huge_pages.h). Same values, same order.
constexpr int kGatherAhead = 4;

// Requests every cache line of one D-byte image.
inline void prefetch_image(const std::uint8_t* image, int D) {
  const char* p = reinterpret_cast<const char*>(image);
  for (int o = 0; o < D; o += 64) __builtin_prefetch(p + o);
  __builtin_prefetch(p + D - 1);
}

template <class T>
inline void gather_impl(const std::uint8_t* images, const std::uint32_t* idx, int b, int D, T* X) {
  if (idx)  // the first images' lines at once, so that their misses overlap too
    for (int j = 0; j < b && j < kGatherAhead; ++j) prefetch_image(images + std::size_t(idx[j]) * std::size_t(D), D);
  for (int j = 0; j < b; ++j) {
    if (idx && j + kGatherAhead < b) prefetch_image(images + std::size_t(idx[j + kGatherAhead]) * std::size_t(D), D);
    const std::uint8_t* src = images + (idx ? std::size_t(idx[j]) : std::size_t(j)) * std::size_t(D);
    T* dst = X + std::size_t(j) * D;
    for (int i = 0; i < D; ++i) dst[i] = static_cast<T>(src[i]) / T(255);
  }
}

template <class T>
inline void bias_sigmoid_impl(T* A, const T* bias, int H, int b) {
  for (int j = 0; j < b; ++j) {
    T* a = A + std::size_t(j) * H;
    for (int h = 0; h < H; ++h) a[h] = sigmoid(a[h] + bias[h]);
  }
}

template <class T>
inline void sigmoid_backward_impl(T* dA, const T* A, int H, int ld, int b, T* db) {
  std::fill(db, db + H, T(0));
  for (int j = 0; j < b; ++j) {
    T* d = dA + std::size_t(j) * ld;
    const T* a = A + std::size_t(j) * ld;
    for (int h = 0; h < H; ++h) {
      const T v = d[h] * a[h] * (T(1) - a[h]);
      d[h] = v;
      db[h] += v;
    }
  }
}

template <class T>
inline void softmax_impl(T* Z, const T* b2, const std::uint8_t* y, int C, int b, T inv_B, double* loss,
                         std::uint64_t* hits) {
  double l = 0;
  std::uint64_t h = 0;
  for (int j = 0; j < b; ++j) {
    T* z = Z + std::size_t(j) * C;
    if (b2)
      for (int k = 0; k < C; ++k) z[k] += b2[k];
    int best = 0;
    for (int k = 1; k < C; ++k)
      if (z[k] > z[best]) best = k;
    const T m = z[best];
    const int yj = y[j];
    const T zy = z[yj] - m;
    T sum = 0;
    for (int k = 0; k < C; ++k) {
      z[k] = exp_nonpos_inl(z[k] - m);
      sum += z[k];
    }
    l += double(std::log(sum)) - double(zy);
    h += best == yj;
    const T inv = T(1) / sum;
    for (int k = 0; k < C; ++k) z[k] = (z[k] * inv - (k == yj ? T(1) : T(0))) * inv_B;
  }
  if (loss) *loss += l;
  if (hits) *hits += h;
}

// ---- the fused layer-2 pass (layer2_block) ----
// 64-byte vectors of GCC's vector extension: one AVX-512 register, two AVX2 ones, four SSE2
// ones; lane by lane the same IEEE operations in every clone, so the same bits.
template <class T>
struct VecOf {
  typedef T type __attribute__((vector_size(64)));
};
template <class T>
inline typename VecOf<T>::type load(const T* p) {
  typename VecOf<T>::type v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T, class V>
inline void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
// The lanes' sum as a fixed tree: lane i + lane i + L/2, then the same on the halves, ...
inline float hsum(const VecOf<float>::type& v) {
  typedef float V8 __attribute__((vector_size(32)));
  typedef float V4 __attribute__((vector_size(16)));
  typedef float V2 __attribute__((vector_size(8)));
  const V8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const V2 c = __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}
inline double hsum(const VecOf<double>::type& v) {
  typedef double V4 __attribute__((vector_size(32)));
  typedef double V2 __attribute__((vector_size(16)));
  const V4 b = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  const V2 c = __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}

// The parts of layer2_block (cpu_kernels.h). always_inline: too large for GCC to inline by
// itself, and a call would run the baseline (SSE2) code in every clone. K = kClassChunk
// classes at once, rows C.. of W2t zero; L = lanes of a vector.

// A = sigmoid(A + b1), then the column's scores Z = W2 A, while the column is in L1.
template <class T>
[[gnu::always_inline]] inline void sigmoid_scores(T* A, const T* b1, const T* W2t, int H, int C, int n, T* Z) {
  using V = typename VecOf<T>::type;
  constexpr int L = int(sizeof(V) / sizeof(T)), K = kClassChunk;
  const int Hv = H / L * L;  // the vector part of a column; rows Hv .. H one at a time
  for (int j = 0; j < n; ++j) {
    T* a = A + std::size_t(j) * H;
    bias_sigmoid_impl(a, b1, H, 1);
    V acc[K] = {};
    for (int h = 0; h < Hv; h += L) {
      const V av = load(a + h);
#pragma GCC unroll 16
      for (int c = 0; c < K; ++c) acc[c] += load(W2t + std::size_t(c) * H + h) * av;
    }
    for (int c = 0; c < C; ++c) {
      T s = hsum(acc[c]);
      for (int h = Hv; h < H; ++h) s += W2t[std::size_t(c) * H + h] * a[h];
      Z[std::size_t(j) * C + std::size_t(c)] = s;
    }
  }
}

// This block's dW2 (row c at c H): sum over the block's columns j, in order, of dz(c, j)
// A(h, j); 2 L rows of A at a time against all K classes, in registers.
template <class T>
[[gnu::always_inline]] inline void weight2_part(const T* A, const T (*dz)[kClassChunk], int H, int C, int n,
                                                T* dW2p) {
  using V = typename VecOf<T>::type;
  constexpr int L = int(sizeof(V) / sizeof(T)), K = kClassChunk;
  int h = 0;
  for (; h + 2 * L <= H; h += 2 * L) {
    V acc0[K] = {}, acc1[K] = {};
    for (int j = 0; j < n; ++j) {
      const T* a = A + std::size_t(j) * H + h;
      const V a0 = load(a), a1 = load(a + L);
#pragma GCC unroll 16
      for (int c = 0; c < K; ++c) {
        acc0[c] += a0 * dz[j][c];
        acc1[c] += a1 * dz[j][c];
      }
    }
    for (int c = 0; c < C; ++c) {
      store(dW2p + std::size_t(c) * H + h, acc0[c]);
      store(dW2p + std::size_t(c) * H + h + L, acc1[c]);
    }
  }
  for (; h < H; ++h)
    for (int c = 0; c < C; ++c) {
      T s = 0;
      for (int j = 0; j < n; ++j) s += A[std::size_t(j) * H + h] * dz[j][c];
      dW2p[std::size_t(c) * H + h] = s;
    }
}

// dZ1 = (W2^T dz) o A o (1 - A) (dZ1 may be A: each entry is read before it is written) and
// db1 = its row sums in column order, column by column. (Along rows instead, with W2's rows
// in registers, took 4.0 ms instead of 2.4 for the whole pass at H = 1024, B = 3000: the
// block's columns are 4 KiB apart there.)
template <class T>
[[gnu::always_inline]] inline void hidden_delta(const T* A, const T* W2t, const T (*dz)[kClassChunk], int H, int n,
                                                T* dZ1, T* db1p) {
  using V = typename VecOf<T>::type;
  constexpr int L = int(sizeof(V) / sizeof(T)), K = kClassChunk;
  std::fill(db1p, db1p + H, T(0));
  for (int j = 0; j < n; ++j) {
    const T* a = A + std::size_t(j) * H;
    T* out = dZ1 + std::size_t(j) * H;
    T d[K];  // a local copy: the stores below cannot change it, so it stays in registers
    for (int c = 0; c < K; ++c) d[c] = dz[j][c];
    int r = 0;
    for (; r + L <= H; r += L) {
      V s = {};
#pragma GCC unroll 16
      for (int c = 0; c < K; ++c) s += load(W2t + std::size_t(c) * H + r) * d[c];
      const V av = load(a + r);
      const V v = s * av * (T(1) - av);
      store(out + r, v);
      store(db1p + r, load(db1p + r) + v);
    }
    for (; r < H; ++r) {  // the last rows, one at a time, the same sums
      T s = 0;
      for (int c = 0; c < K; ++c) s += W2t[std::size_t(c) * H + r] * d[c];
      const T v = s * a[r] * (T(1) - a[r]);
      out[r] = v;
      db1p[r] += v;
    }
  }
}

template <class T>
[[gnu::always_inline]] inline void layer2_block_impl(T* A, const T* b1, const T* W2t, const T* b2,
                                                     const std::uint8_t* y, int H, int C, int n, T inv_B, T* Z,
                                                     T* dZ1, T* dW2p, T* db1p, double* loss, std::uint64_t* hits) {
  constexpr int K = kClassChunk;
  if (C < 1 || C > K || n < 1 || n > kColumnBlock || H < 0)
    throw std::invalid_argument("layer2_block: needs 1 <= C <= kClassChunk, 1 <= n <= kColumnBlock");
  sigmoid_scores(A, b1, W2t, H, C, n, Z);
  // (+ b2), softmax, loss, hits, dZ2 in place of the scores; dz = dZ2 padded to K classes.
  softmax_impl(Z, b2, y, C, n, inv_B, loss, hits);
  T dz[kColumnBlock][K];
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < K; ++c) dz[j][c] = c < C ? Z[std::size_t(j) * C + std::size_t(c)] : T(0);
  weight2_part(A, dz, H, C, n, dW2p);
  hidden_delta(A, W2t, dz, H, n, dZ1, db1p);
}

}  // namespace

float exp_nonpos(float x) { return exp_nonpos_inl(x); }

NN_CPU_CLONES void gather_normalize(const std::uint8_t* im, const std::uint32_t* idx, int b, int D, float* X) {
  gather_impl(im, idx, b, D, X);
}
NN_CPU_CLONES void gather_normalize(const std::uint8_t* im, const std::uint32_t* idx, int b, int D, double* X) {
  gather_impl(im, idx, b, D, X);
}
NN_CPU_CLONES void bias_sigmoid(float* A, const float* bias, int H, int b) { bias_sigmoid_impl(A, bias, H, b); }
NN_CPU_CLONES void bias_sigmoid(double* A, const double* bias, int H, int b) { bias_sigmoid_impl(A, bias, H, b); }
NN_CPU_CLONES void sigmoid_backward_rowsum(float* dA, const float* A, int rows, int ld, int b, float* db) {
  sigmoid_backward_impl(dA, A, rows, ld, b, db);
}
NN_CPU_CLONES void sigmoid_backward_rowsum(double* dA, const double* A, int rows, int ld, int b, double* db) {
  sigmoid_backward_impl(dA, A, rows, ld, b, db);
}
void sigmoid_backward_rowsum(float* dA, const float* A, int H, int b, float* db) {
  sigmoid_backward_rowsum(dA, A, H, H, b, db);
}
void sigmoid_backward_rowsum(double* dA, const double* A, int H, int b, double* db) {
  sigmoid_backward_rowsum(dA, A, H, H, b, db);
}
template <class T>
void sigmoid_backward_blocks_impl(T* dA, const T* A, int H, int b, int k0, int k1, T* partial) {
  for (int k = k0; k < k1; ++k) {
    const int j0 = k * kColumnBlock, n = std::min(kColumnBlock, b - j0);
    const std::size_t at = std::size_t(j0) * H;
    sigmoid_backward_rowsum(dA + at, A + at, H, H, n, partial + std::size_t(k) * H);
  }
}
void sigmoid_backward_blocks(float* dA, const float* A, int H, int b, int k0, int k1, float* partial) {
  sigmoid_backward_blocks_impl(dA, A, H, b, k0, k1, partial);
}
void sigmoid_backward_blocks(double* dA, const double* A, int H, int b, int k0, int k1, double* partial) {
  sigmoid_backward_blocks_impl(dA, A, H, b, k0, k1, partial);
}
template <class T>
inline void sum_blocks_impl(const T* partial, int nblocks, int H, T* db) {
  if (nblocks < 1) {
    std::fill(db, db + H, T(0));
    return;
  }
  std::copy(partial, partial + H, db);
  for (int k = 1; k < nblocks; ++k) {
    const T* p = partial + std::size_t(k) * H;
    for (int h = 0; h < H; ++h) db[h] += p[h];
  }
}
NN_CPU_CLONES void sum_blocks(const float* partial, int nblocks, int H, float* db) {
  sum_blocks_impl(partial, nblocks, H, db);
}
NN_CPU_CLONES void sum_blocks(const double* partial, int nblocks, int H, double* db) {
  sum_blocks_impl(partial, nblocks, H, db);
}
NN_CPU_CLONES void sgd(float* p, const float* g, std::size_t n, float lr) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}
NN_CPU_CLONES void sgd(double* p, const double* g, std::size_t n, double lr) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}
NN_CPU_CLONES void sgd_decay(float* p, const float* g, std::size_t n, float lr, float reg) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + reg * p[i]);
}
NN_CPU_CLONES void sgd_decay(double* p, const double* g, std::size_t n, double lr, double reg) {
  for (std::size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + reg * p[i]);
}
NN_CPU_CLONES void layer2_block(float* A, const float* b1, const float* W2t, const float* b2, const std::uint8_t* y,
                                int H, int C, int n, float inv_B, float* Z, float* dZ1, float* dW2p, float* db1p,
                                double* loss, std::uint64_t* hits) {
  layer2_block_impl(A, b1, W2t, b2, y, H, C, n, inv_B, Z, dZ1, dW2p, db1p, loss, hits);
}
NN_CPU_CLONES void layer2_block(double* A, const double* b1, const double* W2t, const double* b2,
                                const std::uint8_t* y, int H, int C, int n, double inv_B, double* Z, double* dZ1,
                                double* dW2p, double* db1p, double* loss, std::uint64_t* hits) {
  layer2_block_impl(A, b1, W2t, b2, y, H, C, n, inv_B, Z, dZ1, dW2p, db1p, loss, hits);
}
void softmax_xent(float* Z, const float* b2, const std::uint8_t* y, int C, int b, float inv_B, double* loss,
                  std::uint64_t* hits) {
  softmax_impl(Z, b2, y, C, b, inv_B, loss, hits);
}
void softmax_xent(double* Z, const double* b2, const std::uint8_t* y, int C, int b, double inv_B, double* loss,
                  std::uint64_t* hits) {
  softmax_impl(Z, b2, y, C, b, inv_B, loss, hits);
}

}  // namespace nn::model::cpu
