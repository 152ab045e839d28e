// The exact format (src/exchange/fixed_point.h), float and double: the scale (max_exponent,
// headroom, lsb); the sum's bits are the same for any grouping and order of the chunks, partial
// sums added word by word as MPI_SUM adds them; the result is the exact sum correctly rounded
// when every value converts exactly, and within ulp/2 + C * 2^(lsb - 1) of it otherwise (never
// worse than a float sum by more than C * 2^(lsb - 1)). The edges (zeros, one value, the largest
// values, values below the LSB, the headroom, NaN and Inf) are test_fixed_point_edges.cpp's. The reference sums the chunks'
// values exactly as a big integer (frexp, not the format's bit handling) and rounds it with
// strtof/strtod on a hexadecimal float, which glibc rounds correctly. No MPI, no device.
#include <gtest/gtest.h>

#include "fixed_point_test_util.h"

namespace nn::exchange::fixed {
namespace {

using namespace testing_util;

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

}  // namespace
}  // namespace nn::exchange::fixed
