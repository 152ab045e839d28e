// The fused GPU step (--fused, src/model/device_model_step.cpp) against the Armadillo
// reference and against the separate kernels it replaces: weights within the --verify
// tolerance for both, the epoch's loss and accuracy (kept on the device until the epoch ends)
// equal to the separate kernels' per-step sums, --print-every and --save-every reading them
// mid-epoch, and the option's refusals. Collective: every rank runs each test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/errors.h"
#include "train/trainer.h"
#include "synthetic.h"

namespace nn::train {
namespace {

template <class T>
void fused_and_separate_match_the_reference() {
  const HostData d = make_data(95, 20);
  for (const int H : {16, 64}) {
    SCOPED_TRACE("H " + std::to_string(H));
    Config c = small_config(H, 10, 2);
    c.fused = Fused::On;
    const TrainResult f = train_on<T>(c, d, nullptr);
    expect_verified<T>(f);
    expect_ranks_agree(f.params);
    c.fused = Fused::Off;
    const TrainResult s = train_on<T>(c, d, nullptr);
    expect_verified<T>(s);
    // The epoch statistics: the fused step's device sums against the separate kernels'
    // per-step sums read by the host (different rounding only).
    ASSERT_EQ(f.epochs.size(), s.epochs.size());
    for (std::size_t e = 0; e < f.epochs.size(); ++e) {
      EXPECT_NEAR(f.epochs[e].loss, s.epochs[e].loss, 1e-4 * s.epochs[e].loss) << "epoch " << e + 1;
      EXPECT_NEAR(f.epochs[e].train_acc, s.epochs[e].train_acc, 1.5 / double(f.n_fit)) << "epoch " << e + 1;
      EXPECT_GT(f.epochs[e].loss, 0.0);
    }
  }
}

TEST(Fused, FusedAndSeparateKernelsMatchTheReferenceFloat) { fused_and_separate_match_the_reference<float>(); }
TEST(Fused, FusedAndSeparateKernelsMatchTheReferenceDouble) { fused_and_separate_match_the_reference<double>(); }

// Every exchange path (the overlap's two phases, without overlap, the parameter server) and
// CUDA Graphs run the same fused kernels: the same weights bit for bit.
TEST(Fused, OverlapGraphsAndStrategiesGiveTheSameWeights) {
  const HostData d = make_data(60, 10);
  Config c = small_config(12, 7, 2);
  c.verify = false;
  c.fused = Fused::On;
  c.graph = Graphs::Off;
  const std::vector<double> base = flat(train_on<float>(c, d, nullptr).params);
  Config g = c;
  g.graph = Graphs::On;
  EXPECT_EQ(flat(train_on<float>(g, d, nullptr).params), base) << "--graph";
  Config o = c;
  o.overlap = false;
  EXPECT_EQ(flat(train_on<float>(o, d, nullptr).params), base) << "--no-overlap";
  Config ps = c;
  ps.strategy = Strategy::ParamServer;
  const std::vector<double> with_ps = flat(train_on<float>(ps, d, nullptr).params);
  // The server adds the ranks' gradients in another order than MPI_Allreduce may: equal at
  // one rank, within rounding at more.
  if (comm::size() == 1) {
    EXPECT_EQ(with_ps, base) << "--strategy ps";
  }
}

// --print-every and --save-every read the device's sums mid-epoch; the epoch line's loss
// does not change because they did.
TEST(Fused, MidEpochReadsLeaveTheEpochSumsUnchanged) {
  const HostData d = make_data(60, 10);
  Config c = small_config(8, 7, 2);
  c.verify = false;
  c.fused = Fused::On;
  const TrainResult plain = train_on<float>(c, d, nullptr);
  c.print_every = 2;
  const std::string path =
      comm::broadcast(testing::TempDir() + "nn_fused_" + std::to_string(::getpid()) + ".ck");
  c.save = path;
  c.save_every = 3;
  const TrainResult read = train_on<float>(c, d, nullptr);
  ASSERT_EQ(plain.epochs.size(), read.epochs.size());
  for (std::size_t e = 0; e < plain.epochs.size(); ++e) {
    EXPECT_EQ(plain.epochs[e].loss, read.epochs[e].loss);
    EXPECT_EQ(plain.epochs[e].train_acc, read.epochs[e].train_acc);
  }
  EXPECT_EQ(flat(plain.params), flat(read.params));
  comm::barrier();
  if (comm::rank() == 0) std::remove(path.c_str());
}

TEST(Fused, FusedOnIsRefusedWhereItCannotRun) {
  const HostData d = make_data(30, 5);
  const auto refused = [&](Config c, const std::string& words) {
    c.fused = Fused::On;
    try {
      train_on<float>(c, d, nullptr);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Config c = small_config(8, 7, 1);
  c.gemm = 2;
  refused(c, "--fused on needs --gemm 4");
  c = small_config(8, 7, 1);
  c.strategy = Strategy::Model;
  refused(c, "not model");
  c = small_config(8, 7, 1);
  c.device = Device::Cpu;
  refused(c, "--fused on is for --device gpu");
  // auto falls back to the separate kernels without a word.
  c = small_config(8, 7, 1);
  c.gemm = 2;
  c.fused = Fused::Auto;
  EXPECT_FALSE(fused_in_use(c));
  expect_verified<float>(train_on<float>(c, d, nullptr));
}

}  // namespace
}  // namespace nn::train
