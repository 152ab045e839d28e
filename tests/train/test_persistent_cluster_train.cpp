// The persistent step's fourth kernel (thread block clusters, kernels/ops/persistent_step4.cu) in
// the trainer, with NN_PERSISTENT_VARIANT=4: --verify against the reference and the fused step's
// epochs within rounding; --persistent auto never runs it; a shape it cannot run refused in one
// line naming the variable. 32 hidden units at batches of 10: one cluster of 8 blocks fits the
// emulator's one SM. Skipped below compute capability 9.0 and at more than one rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <cuda_runtime.h>

#include "comm/comm.h"
#include "common/errors.h"
#include "train/trainer.h"
#include "synthetic.h"

namespace nn::train {
namespace {

class ScopedVariant4 {
 public:
  ScopedVariant4() {
    if (const char* v = std::getenv("NN_PERSISTENT_VARIANT")) had_ = true, old_ = v;
    setenv("NN_PERSISTENT_VARIANT", "4", 1);
  }
  ~ScopedVariant4() {
    if (had_) setenv("NN_PERSISTENT_VARIANT", old_.c_str(), 1);
    else unsetenv("NN_PERSISTENT_VARIANT");
  }

 private:
  bool had_ = false;
  std::string old_;
};

bool clusters_here() {
  int major = 0;
  return comm::size() == 1 && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
         major >= 9;
}

TEST(PersistentClusterTrain, VerifiesAndMatchesTheFusedStep) {
  if (!clusters_here()) GTEST_SKIP() << "one rank on a device with thread block clusters";
  const ScopedVariant4 v;
  const HostData d = make_data(95, 20);
  Config c = small_config(32, 10, 2);  // a short last batch
  c.persistent = Persistent::On;
  const TrainResult p = train_on<float>(c, d, nullptr);
  expect_verified<float>(p);
  c.persistent = Persistent::Off;
  const TrainResult f = train_on<float>(c, d, nullptr);
  ASSERT_EQ(p.epochs.size(), f.epochs.size());
  for (std::size_t e = 0; e < p.epochs.size(); ++e) {
    EXPECT_NEAR(p.epochs[e].loss, f.epochs[e].loss, 1e-4 * f.epochs[e].loss) << "epoch " << e + 1;
    EXPECT_NEAR(p.epochs[e].train_acc, f.epochs[e].train_acc, 1.5 / double(p.n_fit)) << "epoch " << e + 1;
  }
  EXPECT_EQ(p.steps, f.steps);
  EXPECT_NE(flat(p.params), flat(f.params));  // variant 4 ran: its sums are grouped otherwise
}

TEST(PersistentClusterTrain, AutoNeverRunsItAndOnRefusesWhatDoesNotFit) {
  if (!clusters_here()) GTEST_SKIP() << "one rank on a device with thread block clusters";
  const ScopedVariant4 v;
  const HostData d = make_data(95, 20);
  Config c = small_config(32, 10, 1);
  c.persistent = Persistent::Auto;
  const TrainResult a = train_on<float>(c, d, nullptr);  // the fused step: variant 4 is untimed
  c.persistent = Persistent::Off;
  const TrainResult off = train_on<float>(c, d, nullptr);
  EXPECT_EQ(flat(a.params), flat(off.params));  // bit for bit: variant 4's sums are grouped otherwise
  c = small_config(30, 10, 1);  // no multiple of 4 divides 30 hidden units
  c.persistent = Persistent::On;
  try {
    train_on<float>(c, d, nullptr);
    ADD_FAILURE() << "variant 4 accepted 30 hidden units";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--persistent on: NN_PERSISTENT_VARIANT=4"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace nn::train
