// The persistent step (--persistent, kernels/ops/persistent_step.cu) in the trainer: against
// the Armadillo reference and the fused step it replaces (weights within the --verify
// tolerance, the epoch's loss and accuracy within rounding), the same weights bit for bit
// however --print-every and --save-every cut the epoch into runs of steps, and the refusals of
// --persistent on where it cannot run. Collective: every rank runs each test (the step itself
// runs at one rank; at more, --persistent on is refused).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "comm/comm.h"
#include "common/errors.h"
#include "train/trainer.h"
#include "synthetic.h"

namespace nn::train {
namespace {

void expect_refused(Config c, const HostData& d, const std::string& words) {
  c.persistent = Persistent::On;
  try {
    train_on<float>(c, d, nullptr);
    ADD_FAILURE() << "accepted: " << words;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

template <class T>
void matches_reference_and_fused_step() {
  const HostData d = make_data(95, 20);
  Config c = small_config(70, 10, 2);  // H not a multiple of the tile's 64 rows; a short last batch
  if (comm::size() > 1) {
    expect_refused(c, d, "--persistent on: it runs at one rank only");
    return;
  }
  c.persistent = Persistent::On;
  const TrainResult p = train_on<T>(c, d, nullptr);
  expect_verified<T>(p);
  expect_ranks_agree(p.params);
  c.persistent = Persistent::Off;
  const TrainResult f = train_on<T>(c, d, nullptr);
  ASSERT_EQ(p.epochs.size(), f.epochs.size());
  for (std::size_t e = 0; e < p.epochs.size(); ++e) {
    EXPECT_NEAR(p.epochs[e].loss, f.epochs[e].loss, 1e-4 * f.epochs[e].loss) << "epoch " << e + 1;
    EXPECT_NEAR(p.epochs[e].train_acc, f.epochs[e].train_acc, 1.5 / double(p.n_fit)) << "epoch " << e + 1;
  }
  EXPECT_EQ(p.steps, f.steps);
}

TEST(Persistent, MatchesTheReferenceAndTheFusedStepFloat) { matches_reference_and_fused_step<float>(); }
TEST(Persistent, MatchesTheReferenceAndTheFusedStepDouble) { matches_reference_and_fused_step<double>(); }

// --print-every and --save-every end runs early (the host reads the sums there): every step's
// arithmetic is the same in any run, so the weights and the epochs' sums are too.
TEST(Persistent, RunBoundariesLeaveTheWeightsBitForBit) {
  if (comm::size() > 1) GTEST_SKIP() << "the persistent step runs at one rank";
  const HostData d = make_data(80, 10);
  Config c = small_config(20, 7, 2);  // 11 steps an epoch: one run each, then cut at every print and save
  c.verify = false;
  c.persistent = Persistent::On;
  const TrainResult plain = train_on<float>(c, d, nullptr);
  c.print_every = 2;
  const std::string path = testing::TempDir() + "nn_persistent_" + std::to_string(::getpid()) + ".ck";
  c.save = path;
  c.save_every = 3;
  const TrainResult cut = train_on<float>(c, d, nullptr);
  std::remove(path.c_str());
  EXPECT_EQ(flat(cut.params), flat(plain.params));
  ASSERT_EQ(cut.epochs.size(), plain.epochs.size());
  for (std::size_t e = 0; e < plain.epochs.size(); ++e) {
    EXPECT_EQ(cut.epochs[e].loss, plain.epochs[e].loss);
    EXPECT_EQ(cut.epochs[e].train_acc, plain.epochs[e].train_acc);
  }
  EXPECT_EQ(cut.steps, plain.steps);
}

TEST(Persistent, OnIsRefusedWhereItCannotRun) {
  const HostData d = make_data(30, 5);
  Config c = small_config(8, 7, 1);
  c.fused = Fused::Off;
  expect_refused(c, d, "--persistent on: it needs the fused step");
  c = small_config(8, 7, 1);
  c.gemm = 2;
  expect_refused(c, d, "--persistent on: it needs the fused step");
  // auto: in the emulator build the fused step, without a word (its plan's model predicts a GPU's
  // time, setup.cpp's resolve_persistent); on a GPU whichever the plan predicts faster.
  c = small_config(8, 7, 1);
  c.persistent = Persistent::Auto;
  EXPECT_EQ(Config{}.persistent, Persistent::Auto);
  expect_verified<float>(train_on<float>(c, d, nullptr));
}

}  // namespace
}  // namespace nn::train
