// Variant 3 of the persistent step's second kernel (NN_PERSISTENT_VARIANT=3,
// kernels/ops/persistent_step2_v3.h) in the trainer: --verify passes, and the weights and the
// epoch's sums are variant 2's bit for bit. Not host-only (tests/train/test_persistent.cpp is): the
// emulator build runs both variants on 8 emulated SMs (sim::set_workers), as one cannot hold
// the 784-input tiles of this shape. Collective: every rank runs it (skipped past one rank).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/comm.h"
#include "train/trainer.h"
#include "synthetic.h"

#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace nn::train {
namespace {

// The emulator's SMs (workers) and NN_PERSISTENT_VARIANT for one test.
struct Setting {
#ifdef SIM_EMULATOR
  int workers = sim::workers();
  Setting() { sim::set_workers(8); }
  ~Setting() {
    sim::set_workers(workers);
    unsetenv("NN_PERSISTENT_VARIANT");
  }
#else
  ~Setting() { unsetenv("NN_PERSISTENT_VARIANT"); }
#endif
};

TEST(Persistent, Variant3MatchesVariant2BitForBit) {
  if (comm::size() > 1) GTEST_SKIP() << "the persistent step runs at one rank";
  const Setting setting;
  const HostData d = make_data(50, 10);
  Config c = small_config(64, 16, 1);  // 45 training images: 3 steps, the last one short
  c.persistent = Persistent::On;
  TrainResult r[2];
  for (const int v : {2, 3}) {
    setenv("NN_PERSISTENT_VARIANT", std::to_string(v).c_str(), 1);
    r[v - 2] = train_on<float>(c, d, nullptr);
  }
  expect_verified<float>(r[1]);
  EXPECT_EQ(flat(r[1].params), flat(r[0].params));
  ASSERT_EQ(r[1].epochs.size(), r[0].epochs.size());
  EXPECT_EQ(r[1].epochs[0].loss, r[0].epochs[0].loss);
  EXPECT_EQ(r[1].epochs[0].train_acc, r[0].epochs[0].train_acc);
  EXPECT_EQ(r[1].steps, r[0].steps);
}

}  // namespace
}  // namespace nn::train
