// Preemptible, exactly resumable training: a run stopped after any step -- in the
// middle of an epoch, at an epoch's end, right after a --save-every save -- once or several
// times, and resumed with --resume, ends with a --save file byte-identical to the
// uninterrupted run's: every strategy, float and double, at every rank count the suite runs
// (1-4). The stop is requested on ONE rank only (the step hook), so the ranks must agree;
// one test raises a real SIGUSR1. Also: fingerprint mismatches, --epochs to extend a run,
// --epochs 0 to score a saved model. Collective, like test_train.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "common/errors.h"
#include "synthetic.h"
#include "io/checkpoint.h"
#include "train/trainer.h"
#include "app/exit_codes.h"
#include "app/run.h"
#include "app/signals.h"
#include "train/stop.h"
#include "train/verify.h"

namespace nn::train {
namespace {

using app::install_stop_signals;
using app::restore_stop_signals;
using app::run_training;

// The steps at which the hook stops the run, and how: request_stop() or a real SIGUSR1, on
// rank (step % p) only.
std::vector<std::uint64_t> g_stops;
bool g_raise = false;
void stop_hook(std::uint64_t step) {
  if (std::find(g_stops.begin(), g_stops.end(), step) == g_stops.end()) return;
  if (int(step % std::uint64_t(comm::size())) != comm::rank()) return;
  if (g_raise)
    std::raise(SIGUSR1);
  else
    request_stop();
}

struct HookGuard {
  explicit HookGuard(std::vector<std::uint64_t> stops, bool raise = false) {
    g_stops = std::move(stops);
    g_raise = raise;
    set_step_hook(stop_hook);
    if (raise) install_stop_signals();
  }
  ~HookGuard() {
    set_step_hook(nullptr);
    restore_stop_signals();
    g_stops.clear();
  }
};

// A file name chosen on rank 0 (every rank must use the same one), removed at the end.
struct SharedFile {
  explicit SharedFile(const std::string& name)
      : path(comm::broadcast(testing::TempDir() + "nn_resume_" + std::to_string(::getpid()) + "_" + name)) {
    remove();
  }
  ~SharedFile() { remove(); }
  void remove() const {
    comm::barrier();
    if (comm::rank() == 0) std::remove(path.c_str());
    comm::barrier();
  }
  std::string path;
};

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

// Rank 0 compares the files; every rank gets the verdict.
bool same_files(const std::string& a, const std::string& b) {
  bool same = true;
  if (comm::rank() == 0) {
    const std::vector<char> x = bytes_of(a), y = bytes_of(b);
    same = !x.empty() && x == y;
  }
  return comm::broadcast_value(same);
}

// Runs cfg (with --resume) until it finishes; returns how many times it stopped.
template <class T>
int run_to_the_end(const Config& cfg, const HostData& d, TrainResult& last) {
  int stops = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    last = train_on<T>(cfg, d, nullptr);
    EXPECT_EQ(last.resumed, attempt > 0) << "attempt " << attempt;
    if (!last.stopped) return stops;
    ++stops;
  }
  ADD_FAILURE() << "never finished";
  return stops;
}

// n_fit = 54, B = 7: 8 steps per epoch (the last one short), 3 epochs = 24 steps. Stops
// after step 5 (mid-epoch), 8 (an epoch's end), 12 (right after a --save-every 4 save) and
// 13 (the step after a restart), each on one rank only.
template <class T>
void check_exact_resume(Strategy st, bool real_signal, Device dev = Device::Gpu,
                        NodeShared shared = NodeShared::Auto) {
  SCOPED_TRACE(std::string(strategy_name(st)) + (std::is_same_v<T, double> ? " double" : " float") +
               (dev == Device::Cpu ? " --device cpu --node-shared " + std::string(node_shared_name(shared)) : ""));
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 3);
  c.strategy = st;
  c.device = dev;
  c.node_shared = shared;
  c.verify = false;
  SharedFile a("a.ck"), b("b.ck");
  c.save = a.path;
  const TrainResult whole = train_on<T>(c, d, nullptr);
  ASSERT_FALSE(whole.stopped);
  EXPECT_EQ(whole.steps, 24u);

  c.save = b.path;
  c.resume = true;
  c.save_every = 4;
  c.verify = true;  // the replay of each restart's own steps
  TrainResult last;
  int stops = 0;
  {
    HookGuard hook({5, 8, 12, 13}, real_signal);
    stops = run_to_the_end<T>(c, d, last);
  }
  EXPECT_EQ(stops, 4);
  EXPECT_EQ(last.steps, 24u);
  EXPECT_EQ(last.node_shared, whole.node_shared);
  if (dev == Device::Cpu && st == Strategy::Allreduce) {
    EXPECT_EQ(whole.node_shared, shared != NodeShared::Off && comm::size() > 1 && comm::one_node());
  }
  EXPECT_TRUE(last.verify.ok());
  EXPECT_TRUE(same_files(a.path, b.path)) << "the resumed run's file differs from the uninterrupted run's";
  EXPECT_EQ(last.params.W1, whole.params.W1);
  EXPECT_EQ(last.params.b2, whole.params.b2);
  expect_ranks_agree(last.params);
  EXPECT_EQ(last.test_precision, whole.test_precision);
  ASSERT_EQ(last.epochs.size(), whole.epochs.size());
  for (std::size_t i = 0; i < whole.epochs.size(); ++i) EXPECT_EQ(last.epochs[i].train_acc, whole.epochs[i].train_acc);
}

TEST(Resume, StoppedAnywhereAndResumedGivesTheUninterruptedBytesInFloat) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer, Strategy::Model}) check_exact_resume<float>(st, false);
}

TEST(Resume, StoppedAnywhereAndResumedGivesTheUninterruptedBytesInDouble) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer, Strategy::Model}) check_exact_resume<double>(st, false);
}

// --persistent (one rank): a run of steps ends at every --save-every save, and a stop requested
// inside a run lands at its end (steps 5 and 13 of 8-step epochs with saves every 3: after steps
// 6 and 15, both mid-epoch); the resumed run still ends with the uninterrupted run's bytes.
TEST(Resume, PersistentRunsStopAtTheirEndAndResumeBitForBit) {
  if (comm::size() > 1) GTEST_SKIP() << "the persistent step runs at one rank";
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 3);
  c.persistent = Persistent::On;
  c.verify = false;
  SharedFile a("pa.ck"), b("pb.ck");
  c.save = a.path;
  const TrainResult whole = train_on<float>(c, d, nullptr);
  ASSERT_FALSE(whole.stopped);
  c.save = b.path;
  c.resume = true;
  c.save_every = 3;
  TrainResult last;
  int stops = 0;
  {
    HookGuard hook({5, 13});
    stops = run_to_the_end<float>(c, d, last);
  }
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(last.steps, whole.steps);
  EXPECT_TRUE(same_files(a.path, b.path)) << "the resumed run's file differs from the uninterrupted run's";
  EXPECT_EQ(last.params.W1, whole.params.W1);
}

// --device cpu with the weights in the node's shared memory (every rank on this machine) and
// with the whole gradient all-reduced: each resumes bit for bit.
TEST(Resume, CpuRunResumesBitForBitWithAndWithoutNodeSharedWeights) {
  check_exact_resume<float>(Strategy::Allreduce, false, Device::Cpu, NodeShared::Auto);
  check_exact_resume<float>(Strategy::Allreduce, false, Device::Cpu, NodeShared::Off);
}

// The two --device cpu exchanges sum in different orders: a run saved with the weights in
// shared memory is refused by name with --node-shared off (and resumes with it on), at 2+ ranks.
TEST(Resume, CpuNodeSharedRunIsNotResumedWithTheWholeGradientAllReduced) {
  if (comm::size() < 2) GTEST_SKIP() << "one rank shares nothing";
  if (!comm::one_node()) GTEST_SKIP() << "ranks on several nodes share no memory";
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 2);
  c.device = Device::Cpu;
  c.verify = false;
  SharedFile f("ns.ck");
  c.save = f.path;
  c.resume = true;
  {
    HookGuard hook({3});
    ASSERT_TRUE(train_on<float>(c, d, nullptr).stopped);  // --node-shared auto: on, one node
  }
  Config x = c;
  x.node_shared = NodeShared::Off;
  try {
    train_on<float>(x, d, nullptr);
    ADD_FAILURE() << "resumed with --node-shared off";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the exchange (--strategy, --node-shared) is allreduce with --node-shared "
                                         "weights in the saved run, allreduce in this one"),
              std::string::npos)
        << e.what();
  }
  x.node_shared = NodeShared::On;
  const TrainResult r = train_on<float>(x, d, nullptr);
  EXPECT_TRUE(r.resumed);
  EXPECT_FALSE(r.stopped);
}

// A real SIGUSR1 on one rank: the handler's flag, OR-ed after the step, stops every rank.
TEST(Resume, RealSignalOnOneRankStopsEveryRankAfterTheSameStep) {
  check_exact_resume<float>(Strategy::Allreduce, true);
}

// The state a stop saved, then resumed with one option changed: one error naming the option
// and both values; the saved file is untouched.
TEST(Resume, ChangedOptionsAreRefusedByName) {
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 2);
  c.verify = false;
  SharedFile f("fp.ck");
  c.save = f.path;
  c.resume = true;
  {
    HookGuard hook({3});
    ASSERT_TRUE(train_on<float>(c, d, nullptr).stopped);
  }
  const std::vector<char> before = comm::rank() == 0 ? bytes_of(f.path) : std::vector<char>{};
  const auto expect_refused = [&](Config bad, const std::string& phrase) {
    try {
      train_on<float>(bad, d, nullptr);
      ADD_FAILURE() << "accepted: " << phrase;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  Config x = c;
  x.lr = 0.25;
  expect_refused(x, "cannot resume: --lr is 0.5 in the saved run, 0.25 in this one");
  x = c;
  x.batch = 9;
  expect_refused(x, "--batch is 7 in the saved run, 9 in this one");
  x = c;
  x.seed = 6;
  expect_refused(x, "--seed is 5 in the saved run, 6 in this one");
  x = c;
  x.strategy = Strategy::Model;
  expect_refused(x, "the exchange (--strategy, --node-shared) is allreduce in the saved run, model in this one");
  x = c;
  x.device = Device::Cpu;  // other bits: BLAS instead of our GEMM
  x.cpu_gemm = CpuGemm::OpenBLAS;
  expect_refused(x, "the device and GEMM (--device, --gemm, --cpu-gemm) is --device gpu --gemm " +
                        std::to_string(c.gemm) + " in the saved run, --device cpu --cpu-gemm openblas in this one");
  x = c;
  x.hidden = 6;
  expect_refused(x, "set --hidden 5");
  x = c;
  x.train_size = 50;  // other training data: 45 images instead of 54
  expect_refused(x, "the number of training images (--train-size, --val-fraction) is 54 in the saved run, 45");
  x = c;
  x.epochs = 0;
  x.load = "unused";  // --epochs 0 needs a model to score; the saved state is mid-epoch 1
  expect_refused(x, "the saved run is past --epochs 0");
  if (comm::rank() == 0) {
    EXPECT_EQ(bytes_of(f.path), before) << "a refused resume changed the saved file";
  }
  // A weights-only (version 1) file cannot be resumed, only --load'ed.
  if (comm::rank() == 0) {
    Checkpoint ck = load_checkpoint(f.path);
    ck.state.reset();
    save_checkpoint(f.path, ck);
  }
  comm::barrier();
  expect_refused(c, "holds weights only (checkpoint version 1)");
}

// --device cpu: the GEMM library is part of the saved run. A file saved on OpenBLAS (as every
// --device cpu file before oneDNN became the default) is refused by name under the default
// (oneDNN, where the build has it), untouched, and resumes with --cpu-gemm openblas.
TEST(Resume, CpuRunResumesOnlyOnItsGemmLibrary) {
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 2);
  c.verify = false;
  c.device = Device::Cpu;
  c.cpu_gemm = CpuGemm::OpenBLAS;
  SharedFile f("lib.ck");
  c.save = f.path;
  c.resume = true;
  {
    HookGuard hook({3});
    ASSERT_TRUE(train_on<float>(c, d, nullptr).stopped);
  }
  const std::vector<char> before = comm::rank() == 0 ? bytes_of(f.path) : std::vector<char>{};
  if (cpu_gemm_available(CpuGemm::OneDNN)) {
    Config x = c;
    x.cpu_gemm = CpuGemm::Auto;
    try {
      train_on<float>(x, d, nullptr);
      ADD_FAILURE() << "resumed an OpenBLAS run on oneDNN";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("is --device cpu --cpu-gemm openblas in the saved run, --device cpu "
                                           "--cpu-gemm onednn in this one"),
                std::string::npos)
          << e.what();
    }
    if (comm::rank() == 0) {
      EXPECT_EQ(bytes_of(f.path), before) << "a refused resume changed the saved file";
    }
  }
  const TrainResult r = train_on<float>(c, d, nullptr);
  EXPECT_TRUE(r.resumed);
  EXPECT_FALSE(r.stopped);
}

// --epochs extends a finished run: 2 epochs, then the same command with --epochs 3, gives
// the bytes of a 3-epoch run.
TEST(Resume, MoreEpochsExtendAFinishedRun) {
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 3);
  c.verify = false;
  SharedFile a("ext_a.ck"), b("ext_b.ck");
  c.save = a.path;
  const TrainResult whole = train_on<float>(c, d, nullptr);
  c.save = b.path;
  c.resume = true;
  c.epochs = 2;
  EXPECT_FALSE(train_on<float>(c, d, nullptr).stopped);
  EXPECT_FALSE(same_files(a.path, b.path));
  c.epochs = 3;
  const TrainResult ext = train_on<float>(c, d, nullptr);
  EXPECT_TRUE(ext.resumed);
  EXPECT_EQ(ext.epochs.size(), 3u);
  EXPECT_EQ(ext.epochs[0].seconds, 0.0);  // restored: timings are not kept
  EXPECT_TRUE(same_files(a.path, b.path));
  // Run again: nothing left to train, the same file, the same test precision.
  const TrainResult again = train_on<float>(c, d, nullptr);
  EXPECT_EQ(again.test_precision, whole.test_precision);
  EXPECT_TRUE(same_files(a.path, b.path));
}

// --load FILE --epochs 0 scores the saved weights without training.
TEST(Resume, EpochsZeroScoresALoadedModel) {
  const HostData d = make_data(60, 20);
  Config c = small_config(5, 7, 2);
  c.verify = false;
  SharedFile f("score.ck");
  c.save = f.path;
  const TrainResult trained = train_on<double>(c, d, nullptr);
  Config s = small_config(5, 7, 0);
  s.verify = false;
  s.load = f.path;
  const TrainResult scored = train_on<double>(s, d, nullptr);
  EXPECT_EQ(scored.steps, 0u);
  EXPECT_TRUE(scored.epochs.empty());
  EXPECT_EQ(scored.params.W1, trained.params.W1);
  EXPECT_EQ(scored.test_precision, trained.test_precision);
  s.load.clear();
  EXPECT_THROW(train_on<double>(s, d, nullptr), UserError);  // nothing to score
}

}  // namespace
}  // namespace nn::train
