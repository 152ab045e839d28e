// The exact format's edges (src/exchange/fixed_point.h), float and double: zeros, one value,
// the largest values, values below the LSB, the headroom, NaN and Inf. No MPI, no device.
#include <gtest/gtest.h>

#include "fixed_point_test_util.h"

namespace nn::exchange::fixed {
namespace {

using namespace testing_util;

template <class T>
class FixedPointEdgesTyped : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FixedPointEdgesTyped, Types);

// ---- edges ------------------------------------------------------------------------------------

TYPED_TEST(FixedPointEdgesTyped, AllZero) {
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
TYPED_TEST(FixedPointEdgesTyped, SingleValueRoundTrips) {
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

TYPED_TEST(FixedPointEdgesTyped, LargestValues) {
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
TYPED_TEST(FixedPointEdgesTyped, HeadroomHoldsTheLargestValues) {
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
TYPED_TEST(FixedPointEdgesTyped, NonFiniteAndOutOfRangeAreRefused) {
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
