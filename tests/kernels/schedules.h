// for_each_schedule(fn): runs fn once per emulator thread order (forward, reverse and two
// seeded random orders) in the emulator build, once in the CUDA build. Kernel tests wrap
// their bodies in it so every kernel is checked under every order, as CI requires.
#pragma once
#include <gtest/gtest.h>

#include <string>

#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace nn::test {

template <class Fn>
void for_each_schedule(Fn&& fn) {
#ifdef SIM_EMULATOR
  const sim::Order saved_order = sim::order();
  const unsigned long long saved_seed = sim::seed();
  const struct {
    sim::Order order;
    unsigned long long seed;
  } schedules[] = {{sim::Order::Forward, 1}, {sim::Order::Reverse, 1},
                   {sim::Order::Random, 12345}, {sim::Order::Random, saved_seed + 7}};
  for (const auto& s : schedules) {
    sim::set_order(s.order, s.seed);
    SCOPED_TRACE("emulator schedule: " + sim::describe_schedule());
    fn();
  }
  sim::set_order(saved_order, saved_seed);
#else
  fn();
#endif
}

}  // namespace nn::test
