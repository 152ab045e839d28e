// The exact format's bulk paths (accumulate, round_back and max_exponent of
// src/exchange/fixed_point.h) against the per-value functions, float and double: for every
// format tried (the headroom of 1 to 2^32 chunks, max_exp from the smallest subnormal to the
// largest exponent) and values of every kind (zeros of either sign, subnormals, values that
// convert exactly, values rounded below the LSB, ties among them, values at the limit or past it,
// NaN, Inf, random bits), alone or in runs of a gradient's values, accumulate leaves the words
// that add_value leaves and counts the same misfits; for words of every kind (sums of such
// values, sums whose magnitude has a tie at T's rounding position, normal or subnormal, sums past
// T's range, zero sums written with nonzero words, random words), round_back writes the bits that
// from_words writes and counts the same overflows; in each rounding mode. max_exponent against a
// plain max over the bits. No MPI, no device.
#include <gtest/gtest.h>

#include <cfenv>

#include "fixed_point_test_util.h"

namespace nn::exchange::fixed {
namespace {

using namespace testing_util;

template <class T>
class FixedPointFastTyped : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FixedPointFastTyped, Types);

// ---- the oracles: one value at a time ------------------------------------------------------

template <class T>
std::size_t accumulate_each(const T* v, std::size_t n, const Format<T>& f, std::uint64_t* acc) {
  const auto limit = f.limit();
  std::size_t misfits = 0;
  for (std::size_t i = 0; i < n; ++i) misfits += !add_value(v[i], f, limit, acc + i * Format<T>::words);
  return misfits;
}

// round_back value by value: the header's own loop over from_words (host::round_back_each).
using host::round_back_each;

template <class T>
int max_exponent_each(const T* v, std::size_t n) {
  using Bits = typename Ieee<T>::Bits;
  Bits top = 0;
  for (std::size_t i = 0; i < n; ++i) top = std::max<Bits>(top, bits(v[i]) & ~kSign<T>);
  if (top >= kInfBits<T>) return kNonFinite;
  return top == 0 ? kAllZero : exponent_of_bits<T>(top);
}

// ---- the formats and the values --------------------------------------------------------------

// max_exp from the smallest subnormal to T's largest exponent, some at random, each with the
// headroom of 1 to 2^32 chunks.
template <class T>
std::vector<Format<T>> formats(std::mt19937_64& rng) {
  using I = Ieee<T>;
  std::vector<int> exps{kAllZero, kQuantum<T>, kQuantum<T> + 1, kQuantum<T> + 40, I::emin - 1, I::emin,
                        I::emin + 1, -961, -900, -130, -40, -4, 0, 1, 30, I::emax - 1, I::emax};
  for (int k = 0; k < 6; ++k) exps.push_back(std::uniform_int_distribution<int>(kQuantum<T>, I::emax)(rng));
  std::vector<Format<T>> out;
  for (int e : exps) {
    if (e != kAllZero && (e < kQuantum<T> || e > I::emax)) continue;
    for (std::uint64_t c : std::initializer_list<std::uint64_t>{1, 2, 3, 64, 1000, 1024, 1025, 1 << 20, kMaxChunks})
      out.push_back(make_format<T>(e, c));
  }
  return out;
}

// A value of T around the format f: its kind at random, most of them near f's scale.
template <class T>
T value_for(const Format<T>& f, std::mt19937_64& rng) {
  using I = Ieee<T>;
  using Bits = typename I::Bits;
  Gen<T> gen(rng());
  const T sign = (rng() & 1) ? T(-1) : T(1);
  const auto in = [&](int a, int b) { return std::uniform_int_distribution<int>(std::min(a, b), b)(rng); };
  // A random value with an exponent in [a, b] (clamped to T's normal range), or 0 with p0.
  const auto near = [&](int a, int b, double p0) {
    const int x = std::clamp(a, I::emin, I::emax), y = std::clamp(b, I::emin, I::emax);
    return gen(std::min(x, y), y, p0);
  };
  switch (rng() % 13) {
    case 0: return from_bits<T>(Bits(rng()));                  // anything, NaN and Inf included
    case 1: return sign * T(0);                                // +-0
    case 2: return gen(0, 0, 0.0, 1.0);                        // a subnormal
    case 3: return near(f.lsb - 4, f.max_exp + 1, 0.02);       // fits, rounds or does not fit
    case 4: return near(f.lsb + I::digits - 3, f.lsb + I::digits + 1, 0.0);  // at the exactness edge
    case 5: {  // a tie below the LSB: bits down to 2^(lsb - 1), that one set
      const int k = in(1, I::digits - 1);                       // bits from the top one to it
      const std::uint64_t m = ((rng() | (std::uint64_t(1) << (k - 1))) & ((std::uint64_t(1) << k) - 1)) | 1;
      return sign * std::ldexp(T(m), f.lsb - 1);  // inexact where 2^(lsb - 1) is below T's quantum
    }
    case 6: {  // at the limit 2^(max_exp + 1), or the largest value below it
      const T limit = from_bits<T>(f.limit());
      return sign * ((rng() & 1) ? limit : std::nextafter(limit, T(0)));
    }
    case 7: return (rng() & 1) ? sign * std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
    case 8: return near(f.lsb + f.limb_bits() + I::digits - 3, f.lsb + f.limb_bits() + I::digits + 1, 0.0);  // limb 0's edge
    default: return near(f.max_exp - 30, f.max_exp, 0.1);    // a gradient's values
  }
}

// ---- accumulate and max_exponent -------------------------------------------------------------

// accumulate and add_value on v from the same words (random, as sums so far): the same words and
// misfits. Returns the misfits.
template <class T>
std::size_t expect_same_words(const std::vector<T>& v, const Format<T>& f, std::mt19937_64& rng) {
  constexpr int W = Format<T>::words;
  const std::size_t n = v.size();
  Words start(n * W);
  for (auto& w : start) w = (rng() & 1) ? rng() : rng() >> (rng() % 64);
  Words want = start, got = start;
  const std::size_t want_misfits = accumulate_each(v.data(), n, f, want.data());
  EXPECT_EQ(accumulate(v.data(), n, f, got.data()), want_misfits) << f.max_exp << " " << f.headroom;
  for (std::size_t i = 0; i < n * W; ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "max_exp " << f.max_exp << " headroom " << f.headroom << " value " << std::hexfloat
                    << v[i / W] << " word " << i % W << ": " << got[i] << " against " << want[i];
      break;
    }
  return want_misfits;
}

TYPED_TEST(FixedPointFastTyped, AccumulateGivesAddValuesWords) {
  using T = TypeParam;
  std::mt19937_64 rng(11);
  std::size_t misfits = 0, values = 0;
  for (const Format<T>& f : formats<T>(rng)) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1500)}) {
      std::vector<T> v(n);
      for (T& x : v) x = value_for(f, rng);
      misfits += expect_same_words(v, f, rng);
      values += n;
    }
  }
  EXPECT_GT(misfits, values / 20);  // the slow path was taken too
  EXPECT_LT(misfits, values / 2);
}

// A gradient's values, within 28 binades of the max_exp (limb 0 zero where B >= 53) and zeros,
// in blocks of 64 and a tail; in half of the blocks one value of any kind.
TYPED_TEST(FixedPointFastTyped, AccumulateGradientBlocks) {
  using T = TypeParam;
  std::mt19937_64 rng(15);
  Gen<T> gen(16);
  for (const Format<T>& f : formats<T>(rng)) {
    for (std::size_t n : {std::size_t(64), std::size_t(1000), std::size_t(4096)}) {
      std::vector<T> v(n);
      const int hi = std::clamp(f.max_exp, Ieee<T>::emin, Ieee<T>::emax), lo = std::max(hi - 28, Ieee<T>::emin);
      for (T& x : v) x = gen(lo, hi, 0.1);
      for (std::size_t b = 0; b < n; b += 64)
        if (rng() & 1) v[b + rng() % std::min<std::size_t>(64, n - b)] = value_for(f, rng);
      expect_same_words(v, f, rng);
    }
  }
}

TYPED_TEST(FixedPointFastTyped, MaxExponentGivesTheLargestMagnitudesExponent) {
  using T = TypeParam;
  using Bits = typename Ieee<T>::Bits;
  std::mt19937_64 rng(12);
  Gen<T> gen(13);
  for (int rep = 0; rep < 3000; ++rep) {
    const std::size_t n = rep % 300;
    std::vector<T> v(n);
    for (T& x : v) x = gen(-60, 60, 0.3, 0.1);
    if (rep % 5 == 0)  // zeros and subnormals alone, their highest bit anywhere
      for (T& x : v) {
        const Bits frac = Bits(rng() >> (rng() % 64)) & ((Bits(1) << (Ieee<T>::digits - 1)) - 1);
        x = from_bits<T>(rng() % 3 ? frac : 0);
      }
    if (n && rep % 3 == 0) v[rng() % n] = from_bits<T>(Bits(rng()));  // anything
    if (n && rep % 7 == 0) v[rng() % n] = std::numeric_limits<T>::quiet_NaN();
    ASSERT_EQ(max_exponent(v.data(), n), max_exponent_each(v.data(), n)) << n;
  }
}

// ---- round_back ------------------------------------------------------------------------------

// Words whose sum's magnitude has its top bit at `top`, the digits - 1 bits below it random or
// all ones, then at `cut` (digits below the top, or T's smallest subnormal's position less one)
// no bit, a tie, a tie and a bit somewhere below, or random bits; of either sign; and the same
// sum written differently, t * 2^B moved from each word to the one below it.
template <class T>
void pattern_words(const Format<T>& f, std::mt19937_64& rng, std::uint64_t* w) {
  constexpr int W = Format<T>::words, D = Ieee<T>::digits;
  const int B = f.limb_bits(), bits = W * B;
  std::uint64_t limb[W] = {};
  const auto set = [&](int pos) {
    if (pos >= 0 && pos < bits) limb[pos / B] |= std::uint64_t(1) << (pos % B);
  };
  const int emax = Ieee<T>::emax, emin = Ieee<T>::emin;
  const int picks[] = {emax - f.lsb, emax - f.lsb - 1, emin - f.lsb, emin - f.lsb - 1, kQuantum<T> - f.lsb,
                       bits - 1, bits - 2, 0, 63, 64, B - 1, B, 2 * B};
  int top = (rng() & 3) ? int(rng() % bits) : picks[rng() % std::size(picks)];
  top = std::clamp(top, 0, bits - 1);
  const int cut = (rng() & 3) ? top - D : kQuantum<T> - 1 - f.lsb;
  const bool ones = rng() % 4 == 0;
  set(top);
  for (int p = top - 1; p > cut; --p)
    if (ones || (rng() & 1)) set(p);
  const int tail = int(rng() % 4);  // nothing, a tie, a tie and a bit below, random
  if (tail == 1 || tail == 2) set(cut);
  if (tail == 2 && cut > 0) set(int(rng() % cut));
  for (int p = cut; tail == 3 && p >= 0; --p)
    if (rng() & 1) set(p);
  const bool negative = rng() & 1;
  for (int k = 0; k < W; ++k) w[k] = negative ? 0 - limb[k] : limb[k];
  for (int k = 0; k + 1 < W && B < 62; ++k) {
    const auto t = std::int64_t(rng() % (std::uint64_t(1) << (62 - B))) - (std::int64_t(1) << (61 - B));
    w[k] += std::uint64_t(t) << B;
    w[k + 1] -= std::uint64_t(t);
  }
}

// Words of one of several kinds: a sum of values of the format, a pattern, random words.
template <class T>
void words_for(const Format<T>& f, std::mt19937_64& rng, std::uint64_t* w) {
  constexpr int W = Format<T>::words;
  switch (rng() % 6) {
    case 0:
    case 1: {  // a sum of a few chunks' values (within the capacity)
      const std::uint64_t chunks = 1 + rng() % std::min<std::uint64_t>(f.capacity(), 6);
      for (std::uint64_t c = 0; c < chunks; ++c) {
        const T v = value_for(f, rng);
        accumulate(&v, 1, f, w);
      }
      return;
    }
    case 2:
    case 3: return pattern_words(f, rng, w);
    case 4:
      for (int k = 0; k < W; ++k) w[k] = (rng() & 1) ? rng() : std::uint64_t(std::int64_t(rng()) >> (rng() % 64));
      return;
    default: {  // zero: t * 2^B in word 0 and -t in word 1 (nothing where B is 63)
      const std::uint64_t t = f.limb_bits() < 62 ? rng() % (std::uint64_t(1) << (62 - f.limb_bits())) : 0;
      w[0] = t << f.limb_bits();
      w[1] = 0 - t;
    }
  }
}

TYPED_TEST(FixedPointFastTyped, RoundBackGivesFromWordsBits) {
  using T = TypeParam;
  constexpr int W = Format<T>::words;
  std::mt19937_64 rng(14);
  std::size_t overflows = 0, subnormal = 0, zero = 0, sums = 0;
  for (const Format<T>& f : formats<T>(rng)) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(5), std::size_t(1500)}) {
      Words acc(n * W, 0);
      for (std::size_t i = 0; i < n; ++i) words_for(f, rng, acc.data() + i * W);
      std::vector<T> want(n, T(7)), got(n, T(7));
      const std::size_t want_overflows = round_back_each(acc.data(), n, f, want.data());
      ASSERT_EQ(round_back(acc.data(), n, f, got.data()), want_overflows) << f.max_exp << " " << f.headroom;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(bits(got[i]), bits(want[i]))
            << "max_exp " << f.max_exp << " headroom " << f.headroom << " words " << std::hex << acc[i * W] << " "
            << acc[i * W + 1] << " " << acc[i * W + W - 1] << std::hexfloat << ": " << got[i] << " against " << want[i];
        subnormal += std::fpclassify(want[i]) == FP_SUBNORMAL;
        zero += want[i] == 0;
      }
      overflows += want_overflows;
      sums += n;
    }
  }
  // Every kind was met: overflows, subnormal results and zeros went through the slow path or not.
  EXPECT_GT(overflows, sums / 200);
  EXPECT_GT(subnormal, sums / 100);
  EXPECT_GT(zero, sums / 100);
}

// In every rounding mode the bulk paths give the bits of the per-value functions (which use
// integers alone): accumulate's floating-point steps are exact, and round_back's conversions are
// taken in the rounding to nearest only.
TYPED_TEST(FixedPointFastTyped, EveryRoundingMode) {
  using T = TypeParam;
  constexpr int W = Format<T>::words;
  constexpr std::size_t n = 300;
  struct Restore {
    ~Restore() { std::fesetround(FE_TONEAREST); }
  } restore;
  std::mt19937_64 rng(17);
  const std::vector<Format<T>> all = formats<T>(rng);
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    for (std::size_t k = 0; k < all.size(); k += 5) {
      const Format<T>& f = all[k];
      std::vector<T> v(n);
      for (T& x : v) x = value_for(f, rng);
      expect_same_words(v, f, rng);
      Words acc(n * W, 0);
      for (std::size_t i = 0; i < n; ++i) words_for(f, rng, acc.data() + i * W);
      std::vector<T> want(n), got(n);
      EXPECT_EQ(round_back(acc.data(), n, f, got.data()), round_back_each(acc.data(), n, f, want.data()));
      expect_same_bits(got, want);
    }
  }
}

// The results at T's edges, written out: ties to even at the largest value and past it, at the
// smallest normal and among subnormals.
TYPED_TEST(FixedPointFastTyped, RoundBackTiesAtTheEdges) {
  using T = TypeParam;
  using Bits = typename Ieee<T>::Bits;
  constexpr int W = Format<T>::words, D = Ieee<T>::digits;
  // The positive sum mant * 2^low in units of f's LSB, rounded by round_back and by from_words.
  const auto at = [](const Format<T>& f, int low, std::uint64_t mant) {
    std::vector<std::uint64_t> w(W, 0);
    const int B = f.limb_bits();
    for (int p = 0; p < 64; ++p)
      if ((mant >> p) & 1) w[(low + p) / B] |= std::uint64_t(1) << ((low + p) % B);
    T out = 0, slow = 0;
    const std::size_t over = round_back(w.data(), 1, f, &out);
    EXPECT_EQ(from_words(w.data(), f, slow) != Check::Ok, over != 0);
    EXPECT_EQ(bits(out), bits(slow));
    return out;
  };
  const T max = std::numeric_limits<T>::max(), below_max = std::nextafter(max, T(0));
  const std::uint64_t all = (std::uint64_t(1) << D) - 1;  // D ones
  const auto big = make_format<T>(Ieee<T>::emax, 1);
  const int ulp_max = Ieee<T>::emax - (D - 1) - big.lsb;  // the largest value's ulp, in LSBs
  EXPECT_EQ(at(big, ulp_max - 1, all << 1 | 1), std::numeric_limits<T>::infinity());  // a tie past the range
  EXPECT_EQ(at(big, ulp_max - 1, all << 1), max);                                     // below half
  EXPECT_EQ(at(big, ulp_max - 1, (all - 1) << 1 | 1), below_max);                    // a tie, to even: down
  EXPECT_EQ(at(big, ulp_max - 1, (all - 2) << 1 | 1), below_max);                    // a tie, to even: up
  const auto small = make_format<T>(Ieee<T>::emin + 2, 1);
  const int quantum = kQuantum<T> - small.lsb;  // the smallest subnormal, in LSBs
  const T min = std::numeric_limits<T>::min();
  EXPECT_EQ(at(small, quantum - 2, all << 1 | 1), min);                          // just below: up to it
  EXPECT_EQ(at(small, quantum - 1, (std::uint64_t(1) << (D - 1)) << 1 | 1), min);  // a tie above it: even
  EXPECT_EQ(bits(at(small, quantum - 1, 0b1011)), Bits(0b110));  // 0b101.1 quanta, a tie: 0b110
  EXPECT_EQ(bits(at(small, quantum - 1, 0b1001)), Bits(0b100));  // 0b100.1: 0b100
}

}  // namespace
}  // namespace nn::exchange::fixed
