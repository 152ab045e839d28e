// Fiber switching for the emulator: Boost.Context's fcontext by default, a small
// ucontext backend with -DSIM_FIBER_UCONTEXT=1; both tell AddressSanitizer about
// stack switches when it is on. Included by block.cpp, warp.cpp, fiber.cpp; tested by tests/sim.
#pragma once
#include "internal.h"

#if SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SIM_START_SWITCH(fake, lo, size) __sanitizer_start_switch_fiber(fake, lo, size)
#define SIM_FINISH_SWITCH(fake, lo, size) __sanitizer_finish_switch_fiber(fake, lo, size)
#else
#define SIM_START_SWITCH(fake, lo, size) ((void)0)
#define SIM_FINISH_SWITCH(fake, lo, size) ((void)0)
#endif

namespace sim::detail {

inline void Worker::resume(int i) {
  Fiber& f = fibers[i];
  cur = i;
  SIM_START_SWITCH(&sched_fake, f.stack_lo, f.stack_size);
#if SIM_FIBER_UCONTEXT
  swapcontext(&sched_uc, &f.uc);
#else
  boost::context::detail::transfer_t t = boost::context::detail::jump_fcontext(f.fc, this);
  f.fc = t.fctx;
#endif
  SIM_FINISH_SWITCH(sched_fake, nullptr, nullptr);
}

inline void Worker::yield() {
  [[maybe_unused]] Fiber& f = fibers[cur];
  SIM_START_SWITCH(&f.fake_stack, sched_stack_lo, sched_stack_size);
#if SIM_FIBER_UCONTEXT
  swapcontext(&f.uc, &sched_uc);
#else
  boost::context::detail::transfer_t t = boost::context::detail::jump_fcontext(sched_fc, nullptr);
  sched_fc = t.fctx;
#endif
  SIM_FINISH_SWITCH(f.fake_stack, &sched_stack_lo, &sched_stack_size);
}

}  // namespace sim::detail
