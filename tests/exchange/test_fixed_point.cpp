// The exact format (src/exchange/fixed_point.h), float and double: the scale (max_exponent,
// headroom, lsb); the sum's bits are the same for any grouping and order of the chunks, partial
// sums added word by word as MPI_SUM adds them; the result is the exact sum correctly rounded
// when every value converts exactly, and within ulp/2 + C * 2^(lsb - 1) of it otherwise (never
// worse than a float sum by more than C * 2^(lsb - 1)); the edges: zeros, one value, the largest
// values, values below the LSB, the headroom, NaN and Inf. The reference sums the chunks'
// values exactly as a big integer (frexp, not the format's bit handling) and rounds it with
// strtof/strtod on a hexadecimal float, which glibc rounds correctly. No MPI, no device.
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

namespace nn::exchange::fixed {
namespace {

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

template <class T>
class FixedPointTyped : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FixedPointTyped, Types);

// ---- the scale -------------------------------------------------------------------------------

TEST(FixedPointFormat, HeadroomLsbAndCapacity) {
  EXPECT_EQ(clz64(0), 64);
  EXPECT_EQ(clz64(1), 63);
  EXPECT_EQ(clz64(~std::uint64_t(0)), 0);
  EXPECT_EQ(clz64(std::uint64_t(1) << 40), 23);
  EXPECT_EQ(headroom_bits(0), 1);
  EXPECT_EQ(headroom_bits(1), 1);
  EXPECT_EQ(headroom_bits(2), 2);
  EXPECT_EQ(headroom_bits(3), 3);
  EXPECT_EQ(headroom_bits(4), 3);
  EXPECT_EQ(headroom_bits(1024), 11);
  EXPECT_EQ(headroom_bits(1025), 12);
  EXPECT_EQ(lsb_exponent(0, 11, 2), 2 - 2 * 53);
  for (std::uint64_t c : std::initializer_list<std::uint64_t>{1, 2, 3, 7, 8, 9, 1000, 60000, kMaxChunks}) {
    const auto f = make_format<float>(5, c);
    EXPECT_GE(f.capacity(), c);
    EXPECT_LT(f.capacity(), 2 * std::max<std::uint64_t>(c, 1));
    // A word's sum over the capacity of limbs below 2^B stays below 2^63.
    EXPECT_LE(f.limb_bits() + ceil_log2(f.capacity()), 63);
    EXPECT_EQ(f.lsb, 5 + 2 - 2 * f.limb_bits());
  }
  static_assert(Format<float>::words == 2 && Format<double>::words == 3);
  static_assert(headroom_bits(8) == 4 && lsb_exponent(-3, 4, 3) == -3 + 2 - 3 * 60);
  EXPECT_THROW(make_format<float>(0, kMaxChunks + 1), std::domain_error);
  EXPECT_THROW(make_format<float>(kNonFinite, 4), std::domain_error);
  EXPECT_THROW(make_format<float>(128, 4), std::domain_error);
  EXPECT_NO_THROW(make_format<double>(1023, 4));
}

// The per-value functions are constexpr (plain integer operations), as a device kernel needs.
constexpr float round_trip(float v, int max_exp, int headroom) {
  const Format<float> f{max_exp, headroom, lsb_exponent(max_exp, headroom, 2)};
  std::uint64_t w[2] = {};
  add_value(v, f, f.limit(), w);
  add_value(v, f, f.limit(), w);
  float out = 0;
  return from_words(w, f, out) == Check::Ok ? out : -1.0f;
}
static_assert(round_trip(1.5f, 0, 2) == 3.0f && round_trip(-0x1p-149f, -149, 2) == -0x1p-148f);
static_assert(round_trip(0x1p-30f, 0, 60) == 0.0f && round_trip(0x1p-30f, 0, 2) == 0x1p-29f);
constexpr double kTwo[] = {1.0, -2.0, 0.0};
static_assert(max_exponent(kTwo, 3) == 1 && max_exponent(kTwo + 2, 1) == kAllZero);

TEST(FixedPointMaxExponent, FloatValues) {
  auto me = [](std::vector<float> v) { return max_exponent(v.data(), v.size()); };
  EXPECT_EQ(me({0.75f}), -1);
  EXPECT_EQ(me({1.0f, -3.0f, 0.5f}), 1);
  EXPECT_EQ(me({-4.0f, 3.99f}), 2);
  EXPECT_EQ(me({FLT_MAX}), 127);
  EXPECT_EQ(me({-FLT_MIN}), -126);
  EXPECT_EQ(me({std::numeric_limits<float>::denorm_min()}), -149);
  EXPECT_EQ(me({0.0f, 3 * std::numeric_limits<float>::denorm_min()}), -148);
  EXPECT_EQ(me({0.0f, -0.0f}), kAllZero);
  EXPECT_EQ(me({}), kAllZero);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(me({1.0f, nan, 2.0f}), kNonFinite);
  EXPECT_EQ(me({-nan}), kNonFinite);
  EXPECT_EQ(me({0.0f, 0.0f, -inf}), kNonFinite);
  EXPECT_EQ(me({inf, FLT_MAX}), kNonFinite);
  // Combined with a max, a non-finite value anywhere wins and all-zero loses.
  EXPECT_EQ(std::max({kAllZero, me({2.0f}), kAllZero}), 1);
  EXPECT_EQ(std::max({me({2.0f}), me({nan})}), kNonFinite);
}

TYPED_TEST(FixedPointTyped, MaxExponentIsFrexpsExponentLessOne) {
  using T = TypeParam;
  Gen<T> gen(11);
  for (int rep = 0; rep < 2000; ++rep) {
    std::vector<T> v(17);
    for (auto& x : v) x = gen(Ieee<T>::emin - 5, Ieee<T>::emax, 0.1, 0.1);
    int want = kAllZero;
    for (T x : v)
      if (x != 0) {
        int e = 0;
        std::frexp(x, &e);
        want = std::max(want, e - 1);
      }
    ASSERT_EQ(max_exponent(v.data(), v.size()), want);
  }
}

// ---- exactness: the same bits for any grouping ------------------------------------------------

TYPED_TEST(FixedPointTyped, AnyGroupingGivesTheSameBits) {
  using T = TypeParam;
  Gen<T> gen(2024);
  std::mt19937_64 rng(7);
  // 13 chunks of 1500 values over 150 binades (float) or 600 (double), zeros and subnormals.
  const int span = std::is_same_v<T, float> ? 150 : 600;
  const auto chunks = gen.chunks(13, 1500, 20 - span, 20, 0.05, 0.05);
  const auto f = format_for(chunks);
  const Words ref = sum_in_order(chunks, f);
  const auto ref_out = rounded(ref, f, chunks[0].size());
  for (int groups : {1, 2, 3, 4, 7, 13, 20})
    for (int rep = 0; rep < 4; ++rep) {
      const Words acc = sum_in_groups(chunks, f, groups, rng);
      ASSERT_EQ(acc, ref) << groups << " groups, shuffle " << rep;
      expect_same_bits(rounded(acc, f, chunks[0].size()), ref_out);
    }
  // Chunks in reverse order, each converted into words of its own first and those then combined.
  Words sum(ref.size(), 0);
  for (std::size_t c = chunks.size(); c-- > 0;) {
    Words one(ref.size(), 0);
    ASSERT_EQ(accumulate(chunks[c].data(), chunks[c].size(), f, one.data()), 0u);
    combine(one.data(), one.size(), sum.data());
  }
  EXPECT_EQ(sum, ref);
}

// ---- accuracy ---------------------------------------------------------------------------------

// Values whose lowest mantissa bit is at or above 2^lsb convert exactly: the result is the
// exact sum correctly rounded, bit for bit, cancellations included.
TYPED_TEST(FixedPointTyped, CorrectlyRoundedWhenEveryValueConvertsExactly) {
  using T = TypeParam;
  Gen<T> gen(99);
  const std::size_t C = 8;  // h = 4, B = 60: 119 (float) or 179 (double) bits below 2^(max_exp + 1)
  const int low = std::is_same_v<T, float> ? -70 : -100;  // above max_exp + 2 - words * 60 + digits - 1
  auto chunks = gen.chunks(C, 4000, low, 20);
  // Cancellations: chunk 1 undoes chunk 0 for the first 1000 values, leaving the others' sum.
  for (std::size_t i = 0; i < 1000; ++i) chunks[1][i] = -chunks[0][i];
  const auto f = format_for(chunks);
  ASSERT_EQ(f.max_exp, 20);
  ASSERT_GE(low - (Ieee<T>::digits - 1), f.lsb);
  expect_same_bits(rounded(sum_in_order(chunks, f), f, chunks[0].size()), exact(chunks));
}

// Sums in the subnormal range, and across its boundary with the normal numbers, round as T does.
TYPED_TEST(FixedPointTyped, CorrectlyRoundedSubnormalSums) {
  using T = TypeParam;
  Gen<T> gen(5);
  const int emin = Ieee<T>::emin;
  auto chunks = gen.chunks(6, 4000, emin, emin + 3, 0.1, 0.6);
  const auto f = format_for(chunks);
  ASSERT_LE(f.lsb, kQuantum<T>);
  const auto got = rounded(sum_in_order(chunks, f), f, chunks[0].size());
  expect_same_bits(got, exact(chunks));
  // Some sums are subnormal, some normal.
  const auto small = std::count_if(got.begin(), got.end(), [](T v) { return v != 0 && std::fabs(v) < std::numeric_limits<T>::min(); });
  EXPECT_GT(small, 100);
  EXPECT_LT(small, std::ptrdiff_t(got.size()) - 100);
}

// A value far below the others survives their cancellation (a float sum in this order loses it).
TEST(FixedPointAccuracy, CancellationKeepsSmallValues) {
  const Chunks<float> chunks{{0x1p20f, -3.0f}, {0x1p-60f, 0x1p-50f}, {-0x1p20f, 3.0f}};
  const auto f = format_for(chunks);
  const auto got = rounded(sum_in_order(chunks, f), f, 2);
  EXPECT_EQ(got[0], 0x1p-60f);
  EXPECT_EQ(got[1], 0x1p-50f);
  EXPECT_EQ((0x1p20f + 0x1p-60f) + -0x1p20f, 0.0f);
}

// Values below the LSB: |result - exact| <= ulp(result) / 2 + C * 2^(lsb - 1), so never worse
// than a float sum's error by more than C * 2^(lsb - 1), which is ~2^-100 of the largest value.
TYPED_TEST(FixedPointTyped, ErrorBoundWhenValuesFallBelowTheLsb) {
  using T = TypeParam;
  Gen<T> gen(31);
  const std::size_t C = 16, n = 3000;
  // Exponents over the whole range below 2^41, subnormals included: most of them below the LSB.
  auto chunks = gen.chunks(C, n, Ieee<T>::emin, 40, 0.05, 0.05);
  // A third of the values spread over a few binades only, so their sums round in the format, and
  // a sixth far below the LSB, so their sums are lost to it.
  for (auto& c : chunks) {
    for (std::size_t i = 0; i < n / 3; ++i) c[i] = gen(-10, 0, 0.0);
    for (std::size_t i = n / 3; i < n / 2; ++i) c[i] = gen(Ieee<T>::emin, Ieee<T>::emin + 30, 0.0, 0.3);
  }
  const auto f = format_for(chunks);
  const auto got = rounded(sum_in_order(chunks, f), f, n);
  const long double fixed_term = C * std::ldexp(1.0L, f.lsb - 1);
  int below = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ExactSum<T> s;
    T fsum = 0;
    for (const auto& c : chunks) {
      s.add(c[i]);
      fsum += c[i];
    }
    const long double ex = s.approx();
    const long double slack = std::fabs(ex) * std::ldexp(1.0L, -62);  // long double's own rounding
    const long double err = std::fabs((long double)got[i] - ex);
    const T up = std::nextafter(std::fabs(got[i]), std::numeric_limits<T>::infinity());
    const long double half_ulp = ((long double)up - std::fabs((long double)got[i])) / 2;
    ASSERT_LE(err, half_ulp + fixed_term + slack) << i << ": " << got[i] << " exact " << (double)ex;
    ASSERT_LE(err, std::fabs((long double)fsum - ex) + fixed_term + slack) << i;
    below += std::fabs(ex) < fixed_term;
  }
  EXPECT_LT(f.lsb, 40 - 90);
  EXPECT_GE(below, int(n / 6));  // the sums lost to the LSB
}

// ---- edges ------------------------------------------------------------------------------------

TYPED_TEST(FixedPointTyped, AllZero) {
  using T = TypeParam;
  const Chunks<T> chunks{{0, -T(0), 0}, {-T(0), -T(0), 0}};
  EXPECT_EQ(max_exponent(chunks[0].data(), 3), kAllZero);
  const auto f = format_for(chunks);
  const Words acc = sum_in_order(chunks, f);
  EXPECT_EQ(acc, Words(acc.size(), 0));
  for (T v : rounded(acc, f, 3)) EXPECT_EQ(bits(v), 0u);  // +0
}

// One value in one chunk comes back bit for bit, for any finite value (-0 as +0), with the
// headroom of 1 or of 60000 chunks.
TYPED_TEST(FixedPointTyped, SingleValueRoundTrips) {
  using T = TypeParam;
  using Bits = typename Ieee<T>::Bits;
  std::mt19937_64 rng(3);
  int tested = 0;
  for (int rep = 0; rep < 200000; ++rep) {
    const Bits b = Bits(rng());
    const T v = from_bits<T>(b);
    if (!std::isfinite(v)) continue;
    for (std::uint64_t chunks : {1, 60000}) {
      const auto f = make_format<T>(max_exponent(&v, 1), chunks);
      std::uint64_t w[Format<T>::words] = {};
      ASSERT_EQ(accumulate(&v, 1, f, w), 0u);
      T back = 1;
      ASSERT_EQ(from_words(w, f, back), Check::Ok);
      ASSERT_EQ(bits(back), v == 0 ? Bits(0) : b) << v;
    }
    ++tested;
  }
  EXPECT_GT(tested, 190000);
}

TYPED_TEST(FixedPointTyped, LargestValues) {
  using T = TypeParam;
  const T big = std::numeric_limits<T>::max();
  const T inf = std::numeric_limits<T>::infinity();
  {  // alone, against itself, and a sum past the range: +-Inf, reported
    const Chunks<T> chunks{{big, -big, big, -big, big}, {0, big, -big, -big, -big / 2}};
    const auto f = format_for(chunks);
    EXPECT_EQ(f.max_exp, Ieee<T>::emax);
    const auto got = rounded(sum_in_order(chunks, f), f, 5, 1);
    EXPECT_EQ(got[0], big);
    EXPECT_EQ(got[1], 0);
    EXPECT_EQ(got[2], 0);
    EXPECT_EQ(got[3], -inf);
    EXPECT_EQ(got[4], big / 2);
  }
  {  // half an ulp above the largest value is a tie that rounds (to even) past the range
    const T half_ulp = std::ldexp(T(1), Ieee<T>::emax - Ieee<T>::digits);
    const Chunks<T> chunks{{big, -big, big}, {half_ulp, -half_ulp, half_ulp / 2}};
    const auto f = format_for(chunks);
    const auto got = rounded(sum_in_order(chunks, f), f, 3, 2);
    EXPECT_EQ(got[0], inf);
    EXPECT_EQ(got[1], -inf);
    EXPECT_EQ(got[2], big);
  }
  {  // many chunks of it that round back down below the range
    Chunks<T> chunks(100, std::vector<T>{big});
    for (std::size_t c = 50; c < 99; ++c) chunks[c][0] = -big;
    chunks[99][0] = 0;
    const auto f = format_for(chunks);
    EXPECT_EQ(rounded(sum_in_order(chunks, f), f, 1)[0], big);
  }
}

// The LSB rounds to nearest, ties to even, the same for every value wherever it sits.
TEST(FixedPointEdges, ValuesBelowTheLsbRoundToNearestEven) {
  const auto f = make_format<float>(0, 1);  // lsb = 2 - 2 * 63 = -124
  ASSERT_EQ(f.lsb, -124);
  const float lsb = 0x1p-124f;
  const std::vector<float> v{0.25f * lsb, 0.5f * lsb, 0.75f * lsb, 1.5f * lsb, 2.5f * lsb, -2.5f * lsb,
                             -0.5f * lsb, -0.75f * lsb, 3.5f * lsb, std::numeric_limits<float>::denorm_min()};
  const std::vector<std::int64_t> want{0, 0, 1, 2, 2, -2, 0, -1, 4, 0};
  Words acc(v.size() * 2, 0);
  ASSERT_EQ(accumulate(v.data(), v.size(), f, acc.data()), 0u);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(std::int64_t(acc[2 * i]), want[i]) << i;
    EXPECT_EQ(acc[2 * i + 1], 0u) << i;
  }
  // A thousand half-LSBs still sum to nothing: each is rounded on its own.
  Words one(2, 0);
  const std::vector<float> half(1000, 0.5f * lsb);
  for (float h : half) ASSERT_EQ(accumulate(&h, 1, f, one.data()), 0u);
  EXPECT_EQ(one, Words(2, 0));
}

// The capacity 2^(h - 1) >= C chunks of the largest values below 2^(max_exp + 1), of one sign or
// the other, sum exactly: no word leaves the int64 range. (The capacity is the bound: double's
// largest value below 2^11 with 1000 chunks has a limb of 2^(B - 1) below its top one, which
// 2^h chunks would carry to 2^63.)
TYPED_TEST(FixedPointTyped, HeadroomHoldsTheLargestValues) {
  using T = TypeParam;
  for (std::uint64_t c : {1ull, 5ull, 8ull, 1000ull}) {
    const int max_exp = 10;
    const auto f = make_format<T>(max_exp, c);
    const T top = std::nextafter(std::ldexp(T(1), max_exp + 1), T(0));
    const T wide = std::ldexp(T(1), max_exp) + std::ldexp(T(1), max_exp - 20);
    struct Case {
      T v;
      std::uint64_t times;
    };
    const Case cases[] = {{top, f.capacity()}, {-top, f.capacity()}, {wide, f.capacity()}, {-wide, f.capacity()}};
    for (const Case& k : cases) {
      std::uint64_t w[Format<T>::words] = {};
      for (std::uint64_t i = 0; i < k.times; ++i) ASSERT_EQ(accumulate(&k.v, 1, f, w), 0u);
      T back = 0;
      ASSERT_EQ(from_words(w, f, back), Check::Ok);
      EXPECT_EQ(back, T(k.times) * k.v) << c << " chunks, " << k.times << " times " << k.v;  // exact: a power of 2
      EXPECT_EQ(std::int64_t(w[Format<T>::words - 1]) < 0, k.v < 0);
    }
  }
}

// NaN, Inf and values past the format's max_exp are refused, counted and not added; the others
// are added as usual.
TYPED_TEST(FixedPointTyped, NonFiniteAndOutOfRangeAreRefused) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t at : {0, 500, 999}) {
    for (T bad : {nan, -nan, inf, -inf}) {
      std::vector<T> v(1000, T(1.5));
      v[at] = bad;
      EXPECT_EQ(max_exponent(v.data(), v.size()), kNonFinite);
      try {
        make_format<T>(max_exponent(v.data(), v.size()), 4);
        ADD_FAILURE() << "no error";
      } catch (const std::domain_error& e) {
        EXPECT_NE(std::string(e.what()).find("NaN or an infinite value"), std::string::npos);
      }
    }
  }
  const auto f = make_format<T>(3, 4);  // values below 16
  const std::vector<T> v{1, nan, 16, -16, inf, T(15.9), -inf, -T(15.9), std::numeric_limits<T>::max()};
  Words acc(v.size() * Format<T>::words, 0);
  EXPECT_EQ(accumulate(v.data(), v.size(), f, acc.data()), 6u);
  const auto got = rounded(acc, f, v.size());
  const std::vector<T> want{1, 0, 0, 0, 0, T(15.9), 0, -T(15.9), 0};
  expect_same_bits(got, want);
}

}  // namespace
}  // namespace nn::exchange::fixed
