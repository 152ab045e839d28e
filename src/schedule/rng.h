// The project's one PRNG: splitmix64 (seeding, stream derivation) feeding xoshiro256**.
// Fully specified integer arithmetic, so every platform/compiler/GPU host gives the same bits.
// Tested in tests/schedule/test_init_schedule.cpp (published known-answer vectors + statistics).
#pragma once
#include <cstdint>
#include <stdexcept>

namespace nn::schedule {

// Vigna's splitmix64 step: advances `state` by the golden-ratio increment and returns a
// mixed 64-bit output. Seed 0 yields 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, ...
constexpr std::uint64_t splitmix64_next(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Independent streams from one user seed: init and each epoch's shuffle draw from their own
// stream, so changing the number of epochs never changes the initial weights and vice versa.
// Two splitmix rounds decorrelate nearby (seed, stream) pairs.
// kTest is for synthetic test data, so tests never reuse a production stream.
enum class Stream : std::uint32_t { kInit = 1, kShuffle = 2, kTest = 3 };

constexpr std::uint64_t derive_seed(std::uint64_t seed, Stream tag, std::uint32_t index = 0) noexcept {
  std::uint64_t s = seed;
  std::uint64_t h = splitmix64_next(s);
  h ^= (static_cast<std::uint64_t>(tag) << 32) | index;
  return splitmix64_next(h);
}

// xoshiro256** 1.0 (Blackman & Vigna). State filled from splitmix64(seed), as its authors
// recommend; splitmix never yields four zero words in a row, so the all-zero state is avoided.
class Rng {
 public:
  constexpr explicit Rng(std::uint64_t seed) noexcept {
    std::uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64_next(sm);
  }
  // Direct state, for the published known-answer test (state {1,2,3,4}).
  constexpr Rng(std::uint64_t s0, std::uint64_t s1, std::uint64_t s2, std::uint64_t s3) noexcept
      : s_{s0, s1, s2, s3} {}

  constexpr std::uint64_t next_u64() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform on [0,1): the top 53 bits times 2^-53. Both steps are exact in binary64,
  // so the value is bit-identical everywhere; it can be 0 but never 1.
  constexpr double uniform() noexcept {
    return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  }

  // Unbiased integer in [0, n) by rejection: values below 2^64 mod n are discarded so the
  // accepted range is an exact multiple of n. Plain 64-bit arithmetic (no __int128), so it
  // is portable; expected draws < 2 for any n.
  constexpr std::uint64_t below(std::uint64_t n) {
    if (n == 0) throw std::invalid_argument("Rng::below: n must be positive");
    const std::uint64_t threshold = (std::uint64_t{0} - n) % n;  // == 2^64 mod n
    for (;;) {
      const std::uint64_t r = next_u64();
      if (r >= threshold) return r % n;
    }
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  std::uint64_t s_[4]{};
};

}  // namespace nn::schedule
