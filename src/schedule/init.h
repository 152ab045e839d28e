// Deterministic parameter initialisation shared by the CPU reference and the GPU trainer.
// No Armadillo, no MPI: plain column-major std::vector<double>; convert with static_cast<T>.
// Tested in tests/schedule/test_init_schedule.cpp (reproducibility, bounds, moments).
//
// Scheme (Glorot/Xavier uniform, biases zero):
//   a1 = std::sqrt(6.0 / (D + H)),  W1 (H x D) ~ U[-a1, a1)
//   a2 = std::sqrt(6.0 / (H + C)),  W2 (C x H) ~ U[-a2, a2)
//   b1 = 0 (H), b2 = 0 (C)
// Each weight is a * (2u - 1) with u = Rng::uniform() (53-bit, exact). 2u - 1 is exact in
// binary64, so each value is one correctly rounded product; std::sqrt is correctly rounded
// by IEEE 754. Hence the result is bit-identical on every conforming platform.
// Draw order: one Rng seeded with derive_seed(seed, Stream::kInit); all of W1 in
// column-major order (i fastest), then all of W2 in column-major order.
#pragma once
#include <cstdint>
#include <vector>

namespace nn::schedule {

struct InitParams {
  std::vector<double> W1, b1, W2, b2;  // W1: H*D, b1: H, W2: C*H, b2: C (column-major)
  int D = 0, H = 0, C = 0;             // the shapes they were made for
};

// Half-width of the Glorot uniform interval for a layer with these fan-in/fan-out.
double glorot_limit(int fan_in, int fan_out);

// Throws std::invalid_argument unless D, H, C are all positive.
InitParams init_params(int D, int H, int C, std::uint64_t seed);

}  // namespace nn::schedule
