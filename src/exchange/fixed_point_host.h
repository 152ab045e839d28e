// The exact format's bulk host paths (fixed_point.h): accumulate and round_back over a segment.
// Each gives the words and results, and the counts, that add_value and from_words give value by
// value, for every input; most values take a shorter path, and the rest go through those two.
//
// accumulate. A normal value that fits and loses no bits below the LSB (its last mantissa bit at
// or above 2^lsb: every normal value within words * B - digits binades below 2^(max_exp + 1)),
// and a zero, is split into its limbs by double arithmetic in which every step is exact: y = v *
// 2^(B - max_exp - 2) = q / 2^((words - 1) B), |y| < 2^(B - 1); the top limb is y truncated toward
// zero (so it carries v's sign, as every limb does), y less that limb times 2^B is the fraction
// whose integer part is the next limb, and so on down to limb 0. Exact steps on normal numbers
// give the same bits in any rounding mode and with subnormals flushed or not. A value to round, a
// subnormal, NaN, Inf, or one at or above 2^(max_exp + 1) goes through add_value, as does every
// value of a format whose 2^(B - max_exp - 2) is beyond double's range (max_exp below -961).
//
// round_back. The words' exact sum X = sum_k w[k] * 2^(kB) (each word read as int64) is carried
// into digits: a top digit t (int64) and digits in [0, 2^B) below it. float: X = t * 2^B + d0,
// and a 64-bit window of X holds it exactly or holds at least 27 of its leading bits with the bits
// below folded into the window's last bit (set where any is set: rounding to odd, which keeps
// the rounding to nearest that follows exact, the window having 3 bits more than float's 24); the
// window's int64 -> float conversion rounds to nearest, ties to even, and the scale goes into the
// exponent field. double: the magnitude of X in three 64-bit words, its top 64 bits and a sticky
// bit, to odd in 63 bits, converted the same way. A zero sum is +0. A sum whose rounded exponent
// is outside T's normal range (a subnormal or past the largest value) goes through from_words, as
// does every sum where the rounding mode is not to nearest (the conversions follow it).
//
// Tested against add_value and from_words by tests/exchange/test_fixed_point_fast.cpp; speeds by
// bench/fixed_point/accumulate_bench.cpp.
#pragma once
#include <cfenv>
#include <cstddef>
#include <cstdint>

#include "exchange/fixed_point.h"

namespace nn::exchange::fixed {
namespace host {

// 2^e as a double, e in [-1022, 1023].
constexpr double pow2(int e) { return __builtin_bit_cast(double, std::uint64_t(e + 1023) << 52); }

// The bits (without the sign) of the smallest normal magnitude whose last mantissa bit is at or
// above 2^(f.lsb + shift), capped at f.limit(): with shift 0, the values that convert exactly.
template <class T>
constexpr typename Ieee<T>::Bits exact_floor(const Format<T>& f, int shift) {
  using I = Ieee<T>;
  using Bits = typename I::Bits;
  // The last bit of a normal value with exponent field F is 2^(F + emin - digits).
  const int field = f.lsb + shift + I::digits - I::emin;
  const Bits limit = f.limit();
  if (field >= 2 * I::emax + 1) return limit;
  const Bits lo = Bits(field > 1 ? field : 1) << (I::digits - 1);
  return lo < limit ? lo : limit;
}

// Adds the limbs of y = q / 2^((W - 1) B) (q's sign, |q| below 2^(WB - 1), an integer) to w[0, W):
// limb W - 1 is y's integer part, then each fraction times 2^B (up) gives the next limb. Exact.
template <int W>
inline void add_limbs(double y, double up, std::uint64_t* w) {
  for (int k = W - 1; k > 0; --k) {
    const auto limb = std::int64_t(y);  // toward zero: the magnitude's limb, with y's sign
    w[k] += std::uint64_t(limb);
    y = (y - double(limb)) * up;
  }
  w[0] += std::uint64_t(std::int64_t(y));
}

// The values of v[0, n) that convert exactly (bits without the sign in [lo, limit)) and zeros
// through all the limbs (v * scale = q / 2^((words - 1) B)), the others through add_value;
// returns those that did not fit.
template <class T>
std::size_t accumulate_exact(const T* v, std::size_t n, const Format<T>& f, typename Ieee<T>::Bits lo,
                             double scale, std::uint64_t* acc) {
  using Bits = typename Ieee<T>::Bits;
  constexpr int W = Format<T>::words;
  const Bits limit = f.limit();
  const double up = pow2(f.limb_bits());
  std::size_t misfits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Bits a = __builtin_bit_cast(Bits, v[i]) & ~kSign<T>;
    if (__builtin_expect(Bits(a - lo) < Bits(limit - lo) || a == 0, 1))
      add_limbs<W>(double(v[i]) * scale, up, acc + i * W);
    else
      misfits += !add_value(v[i], f, limit, acc + i * W);
  }
  return misfits;
}

// Whether each of v[0, K) is zero or has its bits without the sign in [lo, lo + span). (A fixed
// K and no branch: GCC vectorizes it at -O2 for float.)
template <std::size_t K, class T>
bool all_within(const T* v, typename Ieee<T>::Bits lo, typename Ieee<T>::Bits span) {
  using Bits = typename Ieee<T>::Bits;
  Bits outside = 0;
  for (std::size_t i = 0; i < K; ++i) {
    const Bits a = __builtin_bit_cast(Bits, v[i]) & ~kSign<T>;
    outside |= Bits(Bits(a - lo) >= span) & Bits(a != 0);
  }
  return outside == 0;
}

// accumulate (fixed_point.h) over v[0, n). float's values go in blocks of 64, each checked first
// without a branch a value (where values of different kinds mix, such a branch is mispredicted):
// a block whose values all have limb 0 zero (their last bit at or above 2^(lsb + B): within
// B - 25 binades of the max_exp) or are zeros goes through the top limb alone, one conversion a
// value rather than three; any other block through accumulate_exact. (double's 64-bit compares do
// not vectorize without SSE4.2: all of double's values go through accumulate_exact.)
template <class T>
std::size_t accumulate_values(const T* v, std::size_t n, const Format<T>& f, std::uint64_t* acc) {
  using Bits = typename Ieee<T>::Bits;
  constexpr int W = Format<T>::words;
  constexpr std::size_t K = 64;
  const int B = f.limb_bits(), top = B - f.max_exp - 2;  // v * 2^top: the top limb and a fraction
  const Bits limit = f.limit(), upper = exact_floor(f, B), lo = exact_floor(f, 0);
  std::size_t misfits = 0, i = 0;
  if (top > 1023) {  // a format for values below 2^-961 only
    for (; i < n; ++i) misfits += !add_value(v[i], f, limit, acc + i * W);
    return misfits;
  }
  const double scale = pow2(top);
  for (; W == 2 && i + K <= n; i += K) {
    if (all_within<K>(v + i, upper, Bits(limit - upper))) {
#pragma GCC unroll 4
      for (std::size_t j = i; j < i + K; ++j) acc[j * W + 1] += std::uint64_t(std::int64_t(double(v[j]) * scale));
    } else {
      misfits += accumulate_exact(v + i, K, f, lo, scale, acc + i * W);
    }
  }
  return misfits + accumulate_exact(v + i, n - i, f, lo, scale, acc + i * W);
}

// round_back one sum at a time (from_words).
template <class T>
std::size_t round_back_each(const std::uint64_t* acc, std::size_t n, const Format<T>& f, T* out) {
  std::size_t overflows = 0;
  for (std::size_t i = 0; i < n; ++i) overflows += from_words(acc + i * Format<T>::words, f, out[i]) != Check::Ok;
  return overflows;
}

// The bits of r, a nonzero int64 converted to T, times 2^scale where that is a normal T; 0 where
// r is 0 (X is 0: +0). Otherwise ok is false.
template <class T>
inline typename Ieee<T>::Bits rescaled(T r, int scale, bool& ok) {
  using Bits = typename Ieee<T>::Bits;
  constexpr int D = Ieee<T>::digits;
  const Bits bits = __builtin_bit_cast(Bits, r);
  const int field = int((bits & ~kSign<T>) >> (D - 1)) + scale;
  ok = unsigned(field - 1) < unsigned(2 * Ieee<T>::emax) || bits == 0;
  return bits + (bits ? Bits(scale) << (D - 1) : 0);
}

// round_back for float in the rounding to nearest: X = t * 2^B + d0 through one of three windows,
// chosen by |t|: t itself (|t| >= 2^26, d0 to odd); X (|X| < 2^63); X / 2^k, to odd (between).
inline std::size_t round_back_float(const std::uint64_t* acc, std::size_t n, const Format<float>& f, float* out) {
  const int B = f.limb_bits();
  const std::uint64_t mask = (std::uint64_t(1) << B) - 1;
  const int k = B > 37 ? B - 37 : 0;  // |t| <= 2^26, |X| >= 2^63: X / 2^k below 2^63, above 2^37
  const std::uint64_t below_k = (std::uint64_t(1) << k) - 1;
  const std::int64_t fits = std::int64_t(1) << (63 - B);  // t in [-fits, fits): X in int64
  constexpr std::int64_t wide = std::int64_t(1) << 26;
  std::size_t overflows = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t* w = acc + 2 * i;
    const std::uint64_t d0 = w[0] & mask;
    std::int64_t t = 0;
    const bool over = __builtin_add_overflow(std::int64_t(w[1]), std::int64_t(w[0]) >> B, &t);
    const std::int64_t at = t ^ (t >> 63);  // |t|, less 1 where t < 0
    const auto top = std::int64_t(std::uint64_t(t) | (d0 != 0));
    const auto all = std::int64_t((std::uint64_t(t) << B) + d0);
    const auto mid = std::int64_t(((std::uint64_t(t) << (B - k)) + (d0 >> k)) | ((d0 & below_k) != 0));
    const bool is_top = at >= wide, is_all = at < fits;
    const std::int64_t window = is_top ? top : is_all ? all : mid;
    const int scale = (is_top ? B : is_all ? 0 : k) + f.lsb;
    bool ok = false;
    const std::uint32_t bits = rescaled(float(window), scale, ok);
    if (__builtin_expect(ok && !over, 1))
      out[i] = __builtin_bit_cast(float, bits);
    else
      overflows += from_words(w, f, out[i]) != Check::Ok;
  }
  return overflows;
}

// double's sum in three words: the top digit t = w2 + carry (int64) and two digits in [0, 2^B),
// then the magnitude (ones' complement and 1 where X < 0) as little-endian words m[0, 3), for B >=
// 32. false where t leaves the int64 range (a word beyond the capacity's bound).
inline bool magnitude3(const std::uint64_t* w, int B, std::uint64_t* m, bool& negative) {
  const std::uint64_t mask = (std::uint64_t(1) << B) - 1;
  std::uint64_t d[2];
  std::int64_t t = std::int64_t(w[0]);
  bool over = false;
  for (int k = 0; k < 2; ++k) {
    d[k] = std::uint64_t(t) & mask;
    over |= __builtin_add_overflow(std::int64_t(w[k + 1]), t >> B, &t);
  }
  const std::uint64_t s = std::uint64_t(t >> 63);  // all ones where X < 0
  std::uint64_t carry = s & 1;
  for (int k = 0; k < 2; ++k) {
    const std::uint64_t u = (d[k] ^ (s & mask)) + carry;
    d[k] = u & mask;
    carry = u >> B;
  }
  const std::uint64_t top = (std::uint64_t(t) ^ s) + carry;
  const int h = 2 * B - 64;  // where the top digit starts in word 1
  m[0] = d[0] | (d[1] << B);
  m[1] = (d[1] >> (64 - B)) | (top << h);
  m[2] = (top >> 1) >> (63 - h);
  negative = s & 1;
  return !over;
}

// A magnitude m[0, 3)'s top 63 bits, to odd (the last set where any bit below them is), as an
// int64, and the position of its highest set bit less 62. 0 for a zero magnitude. The word with
// the highest set bit is chosen by masks rather than branches.
inline std::int64_t top_to_odd(const std::uint64_t* m, int& scale) {
  const std::uint64_t in2 = 0 - std::uint64_t(m[2] != 0);
  const std::uint64_t in1 = (0 - std::uint64_t(m[1] != 0)) & ~in2, in0 = ~(in2 | in1);
  const std::uint64_t x = (m[2] & in2) | (m[1] & in1) | (m[0] & in0);
  const std::uint64_t y = (m[1] & in2) | (m[0] & in1);  // the word below it
  const int z = __builtin_clzll(x | 1);
  const std::uint64_t bits = (x << z) | ((y >> 1) >> (63 - z));
  const bool sticky = ((y << z) | (m[0] & in2) | (bits & 1)) != 0;
  scale = int((128 & in2) | (64 & in1)) + 1 - z;
  return std::int64_t((bits >> 1) | sticky);
}

// round_back for double in the rounding to nearest.
inline std::size_t round_back_double(const std::uint64_t* acc, std::size_t n, const Format<double>& f, double* out) {
  const int B = f.limb_bits();
  std::size_t overflows = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t* w = acc + 3 * i;
    std::uint64_t m[3];
    bool negative = false, ok = false;
    const bool fits = magnitude3(w, B, m, negative);
    int scale = 0;
    const std::int64_t window = top_to_odd(m, scale);
    const std::uint64_t bits = rescaled(double(window), scale + f.lsb, ok);
    if (__builtin_expect(ok && fits, 1))
      out[i] = __builtin_bit_cast(double, bits | (std::uint64_t(negative) << 63));
    else
      overflows += from_words(w, f, out[i]) != Check::Ok;
  }
  return overflows;
}

// round_back (fixed_point.h) over n sums.
template <class T>
std::size_t round_back_values(const std::uint64_t* acc, std::size_t n, const Format<T>& f, T* out) {
  // The conversions round as the rounding mode says; double's digits need B >= 32 (C <= 2^31).
  if (std::fegetround() != FE_TONEAREST || (Format<T>::words == 3 && f.limb_bits() < 32))
    return round_back_each(acc, n, f, out);
  if constexpr (Format<T>::words == 2)
    return round_back_float(acc, n, f, out);
  else
    return round_back_double(acc, n, f, out);
}

}  // namespace host

// Adds v[0, n) to acc[0, n * words) (value i in acc[i * words, (i + 1) * words)). Returns the
// values that did not fit (NaN, Inf or |v| >= 2^(f.max_exp + 1)) and were not added: the caller
// stops when it is not 0, as the sum is then not the gradient's. The words add_value gives.
template <class T>
std::size_t accumulate(const T* v, std::size_t n, const Format<T>& f, std::uint64_t* acc) {
  return host::accumulate_values(v, n, f, acc);
}

// out[i] = the sum in acc[i * words, (i + 1) * words), rounded once (from_words). Returns the
// values beyond T's range (written as +-Inf): the caller stops when it is not 0.
template <class T>
std::size_t round_back(const std::uint64_t* acc, std::size_t n, const Format<T>& f, T* out) {
  return host::round_back_values(acc, n, f, out);
}

}  // namespace nn::exchange::fixed
