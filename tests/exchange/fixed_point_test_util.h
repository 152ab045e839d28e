// What the fixed-point format's tests share (test_fixed_point.cpp, test_fixed_point_edges.cpp):
// an independent exact sum (a big integer of T's smallest subnormals), random values, the
// format of a set of chunks, sums in any grouping, rounding back, bitwise comparison.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "exchange/fixed_point.h"

namespace nn::exchange::fixed::testing_util {

using Words = std::vector<std::uint64_t>;
template <class T>
using Chunks = std::vector<std::vector<T>>;

template <class T>
typename Ieee<T>::Bits bits(T v) {
  typename Ieee<T>::Bits b;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
T from_bits(typename Ieee<T>::Bits b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// The exact sum of values of T: an integer in units of T's smallest subnormal, as signed 32-bit
// digits kept in int64 (carried only when read).
template <class T>
class ExactSum {
 public:
  void add(T v) {
    if (v == 0) return;
    int e = 0;
    const T frac = std::frexp(v, &e);  // v = frac * 2^e, 0.5 <= |frac| < 1
    auto m = std::int64_t(std::ldexp(frac, Ieee<T>::digits));
    e -= Ieee<T>::digits;  // v = m * 2^e
    while (e < kQuantum<T>) {
      m /= 2;  // exact: a subnormal's m ends in zeros below the quantum
      ++e;
    }
    const int shift = e - kQuantum<T>;
    const int j = shift / 32;
    using U128 = unsigned __int128;
    const U128 wide = U128(std::uint64_t(m < 0 ? -m : m)) << (shift % 32);
    for (int k = 0; k < 4; ++k) {
      const auto part = std::int64_t(std::uint64_t(wide >> (32 * k)) & 0xffffffffu);
      d_[j + k] += m < 0 ? -part : part;
    }
  }
  // "-0x...p-149": the exact value as a hexadecimal float.
  std::string hex() const {
    std::vector<std::int64_t> d = d_;
    bool negative = carry(d) < 0;
    if (negative) {
      for (auto& x : d) x = -x;
      carry(d);
    }
    std::string s = negative ? "-0x" : "0x";
    static const char* kHex = "0123456789abcdef";
    bool started = false;
    for (std::size_t i = d.size(); i-- > 0;)
      for (int nib = 7; nib >= 0; --nib) {
        const int h = int((d[i] >> (4 * nib)) & 15);
        if (h || started || (i == 0 && nib == 0)) {
          s += kHex[h];
          started = true;
        }
      }
    return s + "p" + std::to_string(kQuantum<T>);
  }
  T rounded() const {
    if constexpr (std::is_same_v<T, float>) return std::strtof(hex().c_str(), nullptr);
    else return std::strtod(hex().c_str(), nullptr);
  }
  long double approx() const { return std::strtold(hex().c_str(), nullptr); }

 private:
  // Carries the digits into [0, 2^32); returns the carry out of the top (0 or -1).
  static std::int64_t carry(std::vector<std::int64_t>& d) {
    std::int64_t c = 0;
    for (auto& x : d) {
      const std::int64_t t = x + c;
      x = t & 0xffffffff;
      c = t >> 32;
    }
    return c;
  }
  std::vector<std::int64_t> d_ = std::vector<std::int64_t>((Ieee<T>::emax - kQuantum<T>) / 32 + 8, 0);
};

// Random values of T: zeros (either sign) with probability pz, subnormals with ps, otherwise
// exponents uniform in [elo, ehi] (clamped to the normal range), random mantissas and signs.
template <class T>
struct Gen {
  using Bits = typename Ieee<T>::Bits;
  explicit Gen(std::uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  T operator()(int elo, int ehi, double pz = 0.05, double ps = 0.0) {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng);
    const Bits sign = (rng() & 1) ? kSign<T> : 0;
    const Bits frac = Bits(rng()) & ((Bits(1) << (Ieee<T>::digits - 1)) - 1);
    if (r < pz) return from_bits<T>(sign);
    if (r < pz + ps) return from_bits<T>(sign | (frac ? frac : 1));
    const int lo = std::max(elo, Ieee<T>::emin), hi = std::min(ehi, Ieee<T>::emax);
    const int e = std::uniform_int_distribution<int>(lo, hi)(rng);
    const Bits field = Bits(e - Ieee<T>::emin + 1);
    return from_bits<T>(sign | (field << (Ieee<T>::digits - 1)) | frac);
  }
  Chunks<T> chunks(std::size_t c, std::size_t n, int elo, int ehi, double pz = 0.05, double ps = 0.0) {
    Chunks<T> out(c, std::vector<T>(n));
    for (auto& chunk : out)
      for (auto& v : chunk) v = (*this)(elo, ehi, pz, ps);
    return out;
  }
};

// The format for these chunks: the max of every chunk's max_exponent, as the ranks would take it.
template <class T>
Format<T> format_for(const Chunks<T>& chunks) {
  int e = kAllZero;
  for (const auto& c : chunks) e = std::max(e, max_exponent(c.data(), c.size()));
  return make_format<T>(e, chunks.size());
}

// Every chunk accumulated in order into one sum.
template <class T>
Words sum_in_order(const Chunks<T>& chunks, const Format<T>& f) {
  const std::size_t n = chunks[0].size();
  Words acc(n * Format<T>::words, 0);
  for (const auto& c : chunks) EXPECT_EQ(accumulate(c.data(), n, f, acc.data()), 0u);
  return acc;
}

// The chunks shuffled and cut into `groups` groups (some may be empty, as a rank with no chunk);
// each group sums its chunks into its own words, then the groups' words are combined in a
// shuffled order, as MPI_SUM on MPI_UINT64_T combines ranks.
template <class T>
Words sum_in_groups(const Chunks<T>& chunks, const Format<T>& f, int groups, std::mt19937_64& rng) {
  const std::size_t n = chunks[0].size(), words = n * Format<T>::words;
  std::vector<std::size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::size_t> cuts{0, order.size()};
  for (int g = 1; g < groups; ++g) cuts.push_back(std::uniform_int_distribution<std::size_t>(0, order.size())(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<Words> partial;
  for (std::size_t g = 0; g + 1 < cuts.size(); ++g) {
    Words acc(words, 0);
    for (std::size_t i = cuts[g]; i < cuts[g + 1]; ++i)
      EXPECT_EQ(accumulate(chunks[order[i]].data(), n, f, acc.data()), 0u);
    partial.push_back(std::move(acc));
  }
  std::shuffle(partial.begin(), partial.end(), rng);
  Words total(words, 0);
  for (const auto& p : partial) combine(p.data(), words, total.data());
  return total;
}

template <class T>
std::vector<T> rounded(const Words& acc, const Format<T>& f, std::size_t n, std::size_t expect_overflows = 0) {
  std::vector<T> out(n);
  EXPECT_EQ(round_back(acc.data(), n, f, out.data()), expect_overflows);
  return out;
}

template <class T>
std::vector<T> exact(const Chunks<T>& chunks) {
  std::vector<T> out(chunks[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    ExactSum<T> s;
    for (const auto& c : chunks) s.add(c[i]);
    out[i] = s.rounded();
  }
  return out;
}

// Bitwise equality, reported at the first difference.
template <class T>
void expect_same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bits(a[i]), bits(b[i])) << "value " << i << ": " << a[i] << " against " << b[i];
}


}  // namespace nn::exchange::fixed::testing_util
