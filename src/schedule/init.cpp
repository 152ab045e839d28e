// Glorot-uniform initialisation from the project PRNG (the scheme is specified in init.h).
// Only + - * / and one correctly rounded sqrt per layer, so the values are reproducible bit for bit.
// Tested in tests/schedule/test_init_schedule.cpp.
#include "schedule/init.h"

#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "schedule/rng.h"

namespace nn::schedule {

double glorot_limit(int fan_in, int fan_out) {
  return std::sqrt(6.0 / (static_cast<double>(fan_in) + static_cast<double>(fan_out)));
}

namespace {

// Fills `w` (already sized) with a * (2u - 1), in storage (column-major) order.
void fill_uniform(std::vector<double>& w, double a, Rng& rng) {
  for (double& v : w) v = a * (2.0 * rng.uniform() - 1.0);
}

}  // namespace

InitParams init_params(int D, int H, int C, std::uint64_t seed) {
  if (D <= 0 || H <= 0 || C <= 0) throw std::invalid_argument("init_params: D, H, C must be positive");
  InitParams p;
  p.D = D;
  p.H = H;
  p.C = C;
  const auto d = static_cast<std::size_t>(D), h = static_cast<std::size_t>(H), c = static_cast<std::size_t>(C);
  p.W1.resize(h * d);
  p.b1.assign(h, 0.0);
  p.W2.resize(c * h);
  p.b2.assign(c, 0.0);
  Rng rng(derive_seed(seed, Stream::kInit));
  fill_uniform(p.W1, glorot_limit(D, H), rng);
  fill_uniform(p.W2, glorot_limit(H, C), rng);
  return p;
}

}  // namespace nn::schedule
