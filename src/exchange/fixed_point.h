// The exact format: a gradient as fixed-point integers whose sum does not depend on how the
// chunks were grouped. Header-only and free of MPI and CUDA: the per-value functions are
// constexpr and use plain integer operations (__builtin_bit_cast for the IEEE bits, no <cmath>),
// so a device kernel can reuse them (a .cu defines NN_FIXED_HD as __host__ __device__ before it
// includes this file).
//
// The format. A segment (one tensor of the gradient, say W1) has one scale for every chunk of
// the global batch: max_exp, the largest binary exponent of any value in any chunk (max_exponent
// on each chunk, then a max over the chunks and the ranks), and the chunks C that are summed.
// A value v becomes the integer q = round(v / 2^lsb), stored in `words` 64-bit words as
// sign-magnitude limbs: limb k holds bits [kB, kB + B) of |q|, negated when v < 0, so every limb
// of a value carries its sign and v = 2^lsb * sum_k limb_k * 2^(kB) (word 0 the least
// significant). Chunks are summed word by word with wrapping 64-bit adds and no carry from one
// word to the next: exactly what MPI_Allreduce(MPI_UINT64_T, MPI_SUM), a parameter server's sum
// or an NCCL uint64 sum do to each word. Integer addition is associative and commutative, so a
// rank's local sum over its chunks, then the sum over the ranks, gives the same bits for any
// partition and order.
//
// Headroom. h = ceil(log2(C)) + 1 bits a word (headroom_bits), limbs of B = 64 - h bits. A limb
// is below 2^B and C <= 2^(h - 1), so a word's sum stays within C * (2^B - 1) < 2^63 in
// magnitude: the wrapping uint64 sum read as int64 is the exact sum, whatever the order of the
// adds. lsb = max_exp + 2 - words * B (lsb_exponent): a value below 2^(max_exp + 1), rounded,
// is at most 2^(words * B - 1) LSBs, so its top limb is at most 2^(B - 1). A value at or above
// 2^(max_exp + 1), NaN or Inf does not fit: accumulate counts it and adds nothing, never wraps.
// More than capacity() = 2^(h - 1) chunks may wrap a word, so the caller sums at most C (the
// chunk count depends on the batch size alone, so every rank knows it).
//
// Rounding. Twice, each deterministic: a value is rounded to the nearest multiple of 2^lsb,
// ties to even (accumulate), and the exact integer sum times 2^lsb is rounded once to T, to
// nearest, ties to even, subnormals included (round_back); a sum beyond T's range becomes +-Inf
// and is reported. A zero sum is +0.
//
// Error. Against the exact sum S of the C chunks' values: |result - S| <= ulp(result) / 2 +
// C * 2^(lsb - 1), with 2^lsb = 2^(max_exp + 2 - words * B), far below the tensor's largest
// value (float, C = 1024: B = 53, 2^lsb = 2^(max_exp - 104)). Values whose lowest mantissa bit
// is at or above 2^lsb convert exactly; then the result is S correctly rounded, the same as an
// exact sum would give, where a float sum's error grows as (C - 1) * u * sum |v|. Only values
// more than words * B - 25 (float) or words * B - 54 (double) binades below the max_exp lose
// bits, in absolute terms below C * 2^(lsb - 1) for the whole sum.
//
// Words. 2 for float: with B = 63 - ceil(log2 C) (53 at C = 1024) the fixed point spans 105
// bits, so values 81 binades below the largest convert exactly (24-bit mantissas); one word
// would keep 28 binades, fewer than a tensor's gradient spans, and a small entry would then sum
// less accurately than in float. 3 for double: 158 bits at C = 1024, 105 binades exact to 53
// bits; two words would keep 52. The price: 16 bytes a float value on the wire (a float sum's
// 4) and 24 a double (8).
//
// accumulate and round_back, the bulk host paths over a segment, are in fixed_point_host.h
// (included at the end): the words and results of add_value and from_words, faster.
//
// Tested by tests/exchange/test_fixed_point.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#ifndef NN_FIXED_HD
#define NN_FIXED_HD
#endif

namespace nn::exchange::fixed {

// The IEEE layout of T and the words a value takes in the format.
template <class T>
struct Ieee;
template <>
struct Ieee<float> {
  using Bits = std::uint32_t;
  static constexpr int digits = 24, emin = -126, emax = 127, words = 2;
};
template <>
struct Ieee<double> {
  using Bits = std::uint64_t;
  static constexpr int digits = 53, emin = -1022, emax = 1023, words = 3;
};

// T's bits: width, the sign bit, the exponent of the smallest subnormal (the finest quantum).
template <class T>
inline constexpr int kWidth = int(8 * sizeof(T));
template <class T>
inline constexpr typename Ieee<T>::Bits kSign = typename Ieee<T>::Bits(1) << (kWidth<T> - 1);
template <class T>
inline constexpr typename Ieee<T>::Bits kInfBits = typename Ieee<T>::Bits(2 * Ieee<T>::emax + 1)
                                                   << (Ieee<T>::digits - 1);
template <class T>
inline constexpr int kQuantum = Ieee<T>::emin - Ieee<T>::digits + 1;

// What max_exponent reports besides an exponent. As plain ints they combine with a max (MPI_MAX
// over the chunks and ranks): any non-finite value wins, all-zero loses to any value.
inline constexpr int kAllZero = -(1 << 30);
inline constexpr int kNonFinite = 1 << 30;

// The leading zero bits of x (64 for 0), in plain integer operations, without branches.
NN_FIXED_HD constexpr int clz64(std::uint64_t x) {
  int n = 0;
  for (int s = 32; s > 0; s >>= 1) {
    const int z = (x >> (64 - s)) == 0 ? s : 0;
    n += z;
    x <<= z;
  }
  return n + (x == 0);
}

// ceil(log2(n)) for n >= 1.
NN_FIXED_HD constexpr int ceil_log2(std::uint64_t n) { return n <= 1 ? 0 : 64 - clz64(n - 1); }

// Headroom bits a word for a sum of `chunks` chunks: ceil(log2(chunks)) + 1 (the 1: the sign).
NN_FIXED_HD constexpr int headroom_bits(std::uint64_t chunks) { return ceil_log2(chunks ? chunks : 1) + 1; }

// The exponent of the format's least significant bit: a value below 2^(max_exp + 1) takes at most
// words * (64 - headroom) - 1 bits above it (one spare in the top limb for a rounding carry).
NN_FIXED_HD constexpr int lsb_exponent(int max_exp, int headroom, int words) {
  return max_exp + 2 - words * (64 - headroom);
}

// floor(log2(|v|)) of a finite nonzero value given by its bits without the sign.
template <class T>
NN_FIXED_HD constexpr int exponent_of_bits(typename Ieee<T>::Bits a) {
  using I = Ieee<T>;
  const int field = int(a >> (I::digits - 1));
  if (field) return field + I::emin - 1;
  return kQuantum<T> + 63 - clz64(std::uint64_t(a));
}

// A segment's format: words a value, the scale and the headroom. Made by make_format; plain data,
// so a kernel takes it by value.
template <class T>
struct Format {
  static constexpr int words = Ieee<T>::words;
  int max_exp = kQuantum<T>;  // every value is below 2^(max_exp + 1)
  int headroom = 1;           // h: bits a word kept for the sum's growth and its sign
  int lsb = lsb_exponent(kQuantum<T>, 1, Ieee<T>::words);  // the integer's unit is 2^lsb
  NN_FIXED_HD constexpr int limb_bits() const { return 64 - headroom; }
  // The chunks a sum may take without a word leaving the int64 range: 2^(h - 1).
  NN_FIXED_HD constexpr std::uint64_t capacity() const { return std::uint64_t(1) << (headroom - 1); }
  // The bits of 2^(max_exp + 1) (T's infinity above T's range): a value fits if its bits without
  // the sign are below this.
  NN_FIXED_HD constexpr typename Ieee<T>::Bits limit() const {
    using Bits = typename Ieee<T>::Bits;
    const int e = max_exp + 1;
    if (e > Ieee<T>::emax) return kInfBits<T>;
    if (e >= Ieee<T>::emin) return Bits(e - Ieee<T>::emin + 1) << (Ieee<T>::digits - 1);
    return Bits(1) << (e - kQuantum<T>);
  }
};

// The most chunks a format takes: more would leave limbs too narrow to be useful.
inline constexpr std::uint64_t kMaxChunks = std::uint64_t(1) << 32;

// The format for a segment whose values over every chunk have max_exponent max_exp (combined with
// a max), summed over `chunks` chunks. All-zero gives the finest format (any zero fits);
// kNonFinite or too many chunks throw, naming the problem.
template <class T>
Format<T> make_format(int max_exp, std::uint64_t chunks) {
  if (max_exp == kNonFinite)
    throw std::domain_error("exact sum: the gradient has a NaN or an infinite value");
  if (chunks > kMaxChunks)
    throw std::domain_error("exact sum: " + std::to_string(chunks) + " chunks, at most " +
                            std::to_string(kMaxChunks));
  if (max_exp > Ieee<T>::emax || (max_exp < kQuantum<T> && max_exp != kAllZero))
    throw std::domain_error("exact sum: exponent " + std::to_string(max_exp) + " is outside the value type's range");
  Format<T> f;
  f.max_exp = max_exp == kAllZero ? kQuantum<T> : max_exp;
  f.headroom = headroom_bits(chunks);
  f.lsb = lsb_exponent(f.max_exp, f.headroom, Format<T>::words);
  return f;
}

// The max over v[0, n) of each magnitude's top 32 bits (all of a float's; a double's sign off,
// exponent field and 20 mantissa bits), in 32 lanes (value i in lane i % 32 up to the last whole
// 32): a loop GCC vectorizes at -O2 for either type.
template <class T>
NN_FIXED_HD constexpr std::uint32_t max_top_bits(const T* v, std::size_t n) {
  using Bits = typename Ieee<T>::Bits;
  constexpr std::size_t K = 32;
  constexpr int shift = kWidth<T> - 32;
  const std::size_t whole = n - n % K;
  std::uint32_t lanes[K] = {};
  for (std::size_t i = 0; i < whole; i += K)
    for (std::size_t k = 0; k < K; ++k) {
      const auto a = std::uint32_t((__builtin_bit_cast(Bits, v[i + k]) & ~kSign<T>) >> shift);
      lanes[k] = a > lanes[k] ? a : lanes[k];
    }
  std::uint32_t top = 0;
  for (std::size_t i = whole; i < n; ++i) {
    const auto a = std::uint32_t((__builtin_bit_cast(Bits, v[i]) & ~kSign<T>) >> shift);
    top = a > top ? a : top;
  }
  for (std::size_t k = 0; k < K; ++k) top = lanes[k] > top ? lanes[k] : top;
  return top;
}

// The largest binary exponent (floor(log2 |v|)) of the finite nonzero values of v[0, n);
// kAllZero if every value is zero (or n is 0), kNonFinite if any is NaN or infinite. One max over
// the magnitudes' bits, which order as the magnitudes do (NaN and Inf above every finite value).
// A double's top 32 bits hold the highest set bit of the largest magnitude, unless every value is
// zero or below 2^-1042 (a subnormal whose bits are all in the low half); then a max over all the
// bits.
template <class T>
NN_FIXED_HD constexpr int max_exponent(const T* v, std::size_t n) {
  using Bits = typename Ieee<T>::Bits;
  constexpr int shift = kWidth<T> - 32;
  Bits top = Bits(max_top_bits(v, n)) << shift;
  if (shift && top == 0)
    for (std::size_t i = 0; i < n; ++i) {
      const Bits a = __builtin_bit_cast(Bits, v[i]) & ~kSign<T>;
      top = a > top ? a : top;
    }
  if (top >= kInfBits<T>) return kNonFinite;
  if (top == 0) return kAllZero;
  return exponent_of_bits<T>(top);
}

// Adds v, rounded to the nearest multiple of 2^f.lsb (ties to even), to its words acc[0, words):
// limb k of |q| into word k, negated for a negative v, each word a wrapping add with no carry
// into the next. limit: f.limit(), taken once by the caller. Returns false, adding nothing, when
// v does not fit (|v| >= 2^(f.max_exp + 1), NaN or Inf). Branch-free.
template <class T>
NN_FIXED_HD constexpr bool add_value(T v, const Format<T>& f, typename Ieee<T>::Bits limit, std::uint64_t* acc) {
  using I = Ieee<T>;
  using Bits = typename I::Bits;
  const Bits u = __builtin_bit_cast(Bits, v);
  const Bits a = u & ~kSign<T>;
  const bool fits = a < limit;
  const int field = int(a >> (I::digits - 1));
  const std::uint64_t hidden = std::uint64_t(1) << (I::digits - 1);
  const std::uint64_t m = (std::uint64_t(a) & (hidden - 1)) | (field ? hidden : 0);
  // The exponent of the mantissa's last bit, relative to the LSB.
  const int s = (field ? field : 1) + I::emin - 1 - (I::digits - 1) - f.lsb;
  const int r = s >= 0 ? 0 : (-s < 63 ? -s : 63);  // bits rounded off
  std::uint64_t q = m >> r;
  const std::uint64_t rem = m & ((std::uint64_t(1) << r) - 1);
  const std::uint64_t half = (std::uint64_t(1) << r) >> 1;
  q += std::uint64_t(r > 0 && (rem > half || (rem == half && (q & 1))));
  q = fits ? q : 0;
  const int shift = s > 0 ? s : 0;
  const int B = f.limb_bits();
  const std::uint64_t mask = (std::uint64_t(1) << B) - 1;
  const std::uint64_t neg = 0 - std::uint64_t(u >> (kWidth<T> - 1));
  for (int k = 0; k < Format<T>::words; ++k) {
    const int d = shift - B * k;  // where q's last bit sits in limb k
    const std::uint64_t left = d >= 0 && d < 64 ? q << (d & 63) : 0;
    const std::uint64_t right = d < 0 && d > -64 ? q >> (-d & 63) : 0;
    const std::uint64_t limb = (left | right) & mask;
    acc[k] += (limb ^ neg) - neg;
  }
  return fits;
}

// Adds the words of one partial sum to another: the sum MPI_SUM on MPI_UINT64_T makes of them.
inline void combine(const std::uint64_t* from, std::size_t words, std::uint64_t* acc) {
  for (std::size_t i = 0; i < words; ++i) acc[i] += from[i];
}

// How round_back found a value: Ok, or beyond T's range (written as +-Inf).
enum class Check { Ok, Overflow };

// The magnitude of the exact sum X = sum_k w[k] * 2^(kB) (each w[k] read as int64) as base-2^B
// digits d[k] in [0, 2^B) and a top digit, returned: |X| = sum_k d[k] * 2^(kB) + top * 2^(WB);
// negative: whether X < 0. Carries the digits once, then negates them (ones' complement and 1)
// when the top digit is negative; no branches.
template <int W>
NN_FIXED_HD constexpr std::uint64_t magnitude_digits(const std::uint64_t* w, int B, std::uint64_t* d, bool& negative) {
  const std::uint64_t mask = (std::uint64_t(1) << B) - 1;
  std::int64_t carry = 0;
  for (int k = 0; k < W; ++k) {
    const auto s = std::int64_t(w[k]);  // |s| < 2^63 within the capacity
    const auto t = std::int64_t(std::uint64_t(s) & mask) + carry;
    d[k] = std::uint64_t(t) & mask;
    carry = (s >> B) + (t >> B);
  }
  const std::uint64_t neg = 0 - std::uint64_t(carry < 0);
  std::uint64_t up = neg & 1;
  for (int k = 0; k < W; ++k) {
    const std::uint64_t t = (d[k] ^ (neg & mask)) + up;
    d[k] = t & mask;
    up = t >> B;
  }
  negative = carry < 0;
  return (std::uint64_t(carry) ^ neg) + up;
}

// Bits [pos, pos + 64) of the little-endian words m[0, N) (zeros beyond).
template <int N>
NN_FIXED_HD constexpr std::uint64_t window(const std::uint64_t* m, int pos) {
  const int j = pos >> 6, o = pos & 63;
  const std::uint64_t lo = j < N ? m[j] >> o : 0;
  const std::uint64_t hi = o && j + 1 < N ? m[j + 1] << (64 - o) : 0;
  return lo | hi;
}

// Whether any of bits [0, pos) of m[0, N) is set.
template <int N>
NN_FIXED_HD constexpr bool any_below(const std::uint64_t* m, int pos) {
  const int j = pos >> 6, o = pos & 63;
  bool any = false;
  for (int i = 0; i < N && i < j; ++i) any = any || m[i] != 0;
  if (j < N && o) any = any || (m[j] & ((std::uint64_t(1) << o) - 1)) != 0;
  return any;
}

// The exact value of one sum's words w[0, words) times 2^f.lsb, rounded once to T (to nearest,
// ties to even, subnormals included) into out. Check::Overflow: beyond T's range, out is +-Inf.
template <class T>
NN_FIXED_HD constexpr Check from_words(const std::uint64_t* w, const Format<T>& f, T& out) {
  using I = Ieee<T>;
  using Bits = typename I::Bits;
  constexpr int W = Format<T>::words, N = W + 1;
  const int B = f.limb_bits();
  std::uint64_t d[W] = {};
  bool negative = false;
  const std::uint64_t top = magnitude_digits<W>(w, B, d, negative);
  // The magnitude as N little-endian 64-bit words: digit k at bit kB, the top digit at bit WB.
  std::uint64_t m[N] = {};
  for (int k = 0; k <= W; ++k) {
    const std::uint64_t v = k < W ? d[k] : top;
    const int pos = B * k, j = pos >> 6, o = pos & 63;
    m[j] |= v << o;
    if (o && j + 1 < N) m[j + 1] |= v >> (64 - o);
  }
  const Bits sign = negative ? kSign<T> : 0;
  int p = -1;  // the magnitude's highest set bit
  for (int j = N - 1; j >= 0 && p < 0; --j)
    if (m[j]) p = 64 * j + 63 - clz64(m[j]);
  if (p < 0) {
    out = T(0);
    return Check::Ok;
  }
  const int e = p + f.lsb;
  if (e > I::emax) {
    out = __builtin_bit_cast(T, Bits(kInfBits<T> | sign));
    return Check::Overflow;
  }
  const int q = (e > I::emin ? e : I::emin) - (I::digits - 1);  // the result's ulp exponent
  const int r = q - f.lsb;                                        // bits rounded off
  std::uint64_t mant = 0;
  if (r <= 0) {
    mant = m[0] << -r;
  } else {
    const std::uint64_t g = window<N>(m, r - 1);
    mant = g >> 1;
    mant += std::uint64_t((g & 1) && (any_below<N>(m, r - 1) || (mant & 1)));
  }
  // Exponent field and mantissa add up: a carry out of the mantissa raises the exponent, a
  // subnormal (q at the smallest quantum) has field 0 unless it rounds up to the smallest normal.
  const Bits bits = (Bits(q - kQuantum<T>) << (I::digits - 1)) + Bits(mant);
  if (bits >= kInfBits<T>) {
    out = __builtin_bit_cast(T, Bits(kInfBits<T> | sign));
    return Check::Overflow;
  }
  out = __builtin_bit_cast(T, Bits(bits | sign));
  return Check::Ok;
}

}  // namespace nn::exchange::fixed

// accumulate and round_back, over a segment.
#include "exchange/fixed_point_host.h"
