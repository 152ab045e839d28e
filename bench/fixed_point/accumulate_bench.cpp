// accumulate_bench: the exact format's conversion speed (src/exchange/fixed_point.h), ns a value,
// for a chunk's gradient of N values added into its words, and for max_exponent and round_back.
//
// Build (no project libraries):
//   g++ -std=c++20 -O2 -Isrc bench/fixed_point/accumulate_bench.cpp -o /tmp/accumulate_bench
// Usage: accumulate_bench [N...]   (default 200000 800000; float and double each)
//
// Values: random mantissas and signs over 30 binades below 2^-3, as a gradient's, then over 60;
// the format for 64 chunks. round_back reads the sums of 64 chunks (chunk c: the values from c
// on). Each measurement is the best of 7 runs of enough repeats to last about 0.1 s.
//
// Measured on a 2-core AMD EPYC (family 26, under KVM), ns a value, n = 200000 and 800000 alike:
//               max_exponent     accumulate       round_back
//               float  double    float  double    float  double
//   30 binades  0.13   0.18      0.42   1.25      1.5    5.8-6.2
//   60 binades  0.13   0.18      1.0    1.3       1.5    5.8-6.2
// float's accumulate takes one conversion a value where a block of 64 values all sit within
// B - 25 binades of the max_exp (here 32), three otherwise (fixed_point_host.h). The per-value
// loops these replaced: max_exponent 0.47 (both types); accumulate 3.1 and 6.7 (float), 3.8 and
// 4.0 (double); round_back 20 and 18 (float), 22 and 21 (double).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "exchange/fixed_point.h"

namespace fx = nn::exchange::fixed;

template <class F>
double best_ns_per_value(std::size_t n, F&& run) {
  using Clock = std::chrono::steady_clock;
  int reps = 1;
  for (;;) {  // enough repeats for about 0.1 s
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) run();
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 0.1) break;
    reps *= 2;
  }
  double best = 1e30;
  for (int k = 0; k < 7; ++k) {
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s * 1e9 / (double(reps) * double(n)));
  }
  return best;
}

// Values of T: random mantissas and signs, exponents uniform over `binades` binades below 2^-3.
template <class T>
std::vector<T> gradient(std::size_t n, int binades) {
  std::mt19937_64 rng(1);
  std::vector<T> v(n);
  for (auto& x : v) {
    const int e = std::uniform_int_distribution<int>(-3 - binades, -4)(rng);
    x = std::ldexp(T(std::uniform_real_distribution<double>(1, 2)(rng)), e) * ((rng() & 1) ? 1 : -1);
  }
  return v;
}

template <class T>
void bench(std::size_t n, const char* name, int binades) {
  constexpr std::size_t kChunks = 64;
  // Chunk c is v[c, c + n): every sum adds 64 different values.
  const std::vector<T> v = gradient<T>(n + kChunks, binades);
  const auto f = fx::make_format<T>(fx::max_exponent(v.data(), n + kChunks), kChunks);
  std::vector<std::uint64_t> acc(n * fx::Format<T>::words, 0);
  std::size_t misfits = 0, overflows = 0;
  for (std::size_t c = 0; c < kChunks; ++c) misfits += fx::accumulate(v.data() + c, n, f, acc.data());
  const std::vector<std::uint64_t> sums = acc;  // the words round_back reads
  std::vector<T> out(n);
  volatile int sink = 0;
  const double ns_max = best_ns_per_value(n, [&] { sink = sink + fx::max_exponent(v.data(), n); });
  const double ns_acc = best_ns_per_value(n, [&] { misfits += fx::accumulate(v.data(), n, f, acc.data()); });
  const double ns_back = best_ns_per_value(n, [&] { overflows += fx::round_back(sums.data(), n, f, out.data()); });
  std::printf("%-6s n=%-8zu words=%d binades=%d  max_exponent %.2f ns  accumulate %.2f ns  round_back %.2f ns a value%s\n",
              name, n, fx::Format<T>::words, binades, ns_max, ns_acc, ns_back, misfits || overflows ? "  (misfits!)" : "");
}

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {200000, 800000};
  for (int binades : {30, 60}) {
    for (std::size_t n : sizes) bench<float>(n, "float", binades);
    for (std::size_t n : sizes) bench<double>(n, "double", binades);
  }
}
