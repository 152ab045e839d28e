// The communication strategies against the Armadillo reference: allreduce, the
// parameter server and model parallelism, in float and double, at every rank count make
// test runs (1-4); overlap on/off, --graph on/off and --comm host/device/nccl give bitwise
// identical weights; the model-parallel slicing round-trips. Collective, like test_train.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "reference/ref_net.h"  // Armadillo before the emulator's CUDA macros (__noinline__)
#include "comm/comm.h"
#include "model/device_model.h"
#include "train/model_parallel.h"
#include "synthetic.h"
#include "train/run.h"
#include "train/trainer.h"
#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace nn::train {
namespace {

using model::DeviceModel;
using model::DeviceImages;
using model::ParamLayout;

const Strategy kAll[] = {Strategy::Allreduce, Strategy::ParamServer, Strategy::Model};

// n_fit = 54, B = 7: not a multiple of 2, 3 or 4, short last batch; H = 5 splits unevenly
// over 2-4 ranks (model parallelism: 3+2, 2+2+1, 2+1+1+1).
template <class T>
void check_strategy(Strategy st) {
  Config c = small_config(5, 7, 2);
  c.strategy = st;
  const auto r = train_on<T>(c, make_data(60, 20), nullptr);
  SCOPED_TRACE(strategy_name(st));
  expect_verified<T>(r);
  expect_ranks_agree(r.params);
  EXPECT_GT(r.test_precision, 0.0);
}

TEST(Strategies, EveryStrategyMatchesTheReferenceInFloat) {
  for (Strategy st : kAll) check_strategy<float>(st);
}

TEST(Strategies, EveryStrategyMatchesTheReferenceInDouble) {
  for (Strategy st : kAll) check_strategy<double>(st);
}

TEST(Strategies, ModelParallelWithMoreRanksThanHiddenUnits) {
  // H = 2: at 3 and 4 ranks some ranks own no hidden unit and only add zeros to the scores.
  Config c = small_config(2, 10, 2);
  c.strategy = Strategy::Model;
  const auto r = train_on<double>(c, make_data(60, 20), nullptr);
  expect_verified<double>(r);
  expect_ranks_agree(r.params);
}

// The same run twice with one switch flipped must give the same bits.
template <class T, class F>
void expect_identical(Config c, F&& flip, const char* what) {
  const HostData d = make_data(60, 20);
  c.verify = false;
  const auto a = train_on<T>(c, d, nullptr);
  flip(c);
  const auto b = train_on<T>(c, d, nullptr);
  EXPECT_TRUE(flat(a.params) == flat(b.params)) << what << " changed the weights";
  EXPECT_EQ(a.test_precision, b.test_precision) << what;
}

TEST(Strategies, OverlapOnAndOffGiveIdenticalWeights) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) {
    SCOPED_TRACE(strategy_name(st));
    Config c = small_config(6, 7, 2);
    c.strategy = st;
    c.overlap = true;
    expect_identical<float>(c, [](Config& x) { x.overlap = false; }, "--no-overlap");
  }
}

// --exchange-chunk: layer 1's staged exchange in pieces (H = 6: 4,710 values of layer 1, so 1 KiB
// pieces are 19 of them; src/exchange/host_staged.h). At 1 and 2 ranks each value is
// one addition whichever MPI call sums it: the weights are one piece's, bit for bit; at 3 and 4
// the library may add in another order, and the run still matches the reference. Overlap on and
// off stay identical with pieces too.
TEST(Strategies, ExchangeInPiecesGivesOnePiecesWeights) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) {
    SCOPED_TRACE(strategy_name(st));
    Config c = small_config(6, 7, 2);
    c.strategy = st;
    c.exchange_chunk = 0;
    if (comm::size() <= 2 || st == Strategy::ParamServer) {  // ps sums in rank order, piece or not
      expect_identical<float>(c, [](Config& x) { x.exchange_chunk = 1024; }, "--exchange-chunk 1024");
    } else {
      c.exchange_chunk = 1024;
      expect_verified<float>(train_on<float>(c, make_data(60, 20), nullptr));
    }
    c.exchange_chunk = 1024;
    expect_identical<float>(c, [](Config& x) { x.overlap = false; }, "--no-overlap with pieces");
  }
}

TEST(Strategies, ExchangePiecesComeFromTheChunkSize) {
  // 512 KiB of float values by default; at most exchange::kMaxPieces pieces; 0 is one piece.
  EXPECT_EQ(exchange_piece_values(kExchangeChunkAuto, 1u << 20, 4), std::size_t(128) << 10);
  EXPECT_EQ(exchange_piece_values(0, 203'008, 4), 203'008u);
  EXPECT_EQ(exchange_piece_values(4096, 100, 8), 512u);
  EXPECT_EQ(exchange_piece_values(4, 3200, 4), 100u);  // 1-value pieces would be 3,200: capped at 32
  EXPECT_EQ(exchange_piece_values(kExchangeChunkAuto, 0, 4), 1u);
}

TEST(Strategies, GraphOnAndOffGiveIdenticalWeights) {
  for (Strategy st : kAll) {
    SCOPED_TRACE(strategy_name(st));
    Config c = small_config(6, 7, 3);  // 3 epochs: warm-up, capture, then replays
    c.strategy = st;
    c.graph = Graphs::Off;  // the default replays graphs with the fused step: compare both ways
    expect_identical<float>(c, [](Config& x) { x.graph = Graphs::On; }, "--graph");
  }
}

TEST(Strategies, DeviceAndHostStagedMpiGiveIdenticalWeights) {
  // The emulated CUDA-aware MPI reaches the device pointers through their device views
  // (src/comm/mpi_buffer.h); the reductions are the same operations on the same values.
  // On a GPU this needs a CUDA-aware MPI (Debian's Open MPI is not one).
  if (const std::string why = nn::comm::device_pointer_support(); !why.empty())
    GTEST_SKIP() << "--comm device unavailable: " << why;
  for (Strategy st : {Strategy::Allreduce, Strategy::Model}) {
    SCOPED_TRACE(strategy_name(st));
    Config c = small_config(6, 7, 2);
    c.strategy = st;
    expect_identical<float>(c, [](Config& x) { x.comm = Comm::Device; }, "--comm device");
  }
}

#ifdef SIM_EMULATOR
// Under the emulator's lazy streams (sim/runtime/lazy.cpp) work on the model's
// compute and copy streams runs only when an event wait or a sync forces it, so a missing
// cudaStreamWaitEvent / event sync in the overlap, graph or device-pointer paths would hand
// MPI or the host stale gradients. Each variant must give the bits of the synchronous run.
// (Lazy streams are the emulator's default, so the synchronous baseline is forced.)
class StreamMode {
 public:
  explicit StreamMode(sim::StreamMode m) : saved_(sim::stream_mode()) { sim::set_stream_mode(m); }
  ~StreamMode() { sim::set_stream_mode(saved_); }
  StreamMode(const StreamMode&) = delete;
  StreamMode& operator=(const StreamMode&) = delete;

 private:
  sim::StreamMode saved_;
};

TEST(Strategies, LazyStreamsGiveTheSynchronousWeightsOnEveryPath) {
  struct Variant {
    const char* name;
    Strategy st;
    bool overlap, graph, device_pointers;
  };
  const Variant variants[] = {
      {"allreduce overlap", Strategy::Allreduce, true, false, false},
      {"allreduce no-overlap", Strategy::Allreduce, false, false, false},
      {"allreduce overlap graph", Strategy::Allreduce, true, true, false},
      {"allreduce overlap mpi-device", Strategy::Allreduce, true, false, true},
      {"ps overlap", Strategy::ParamServer, true, false, false},
      {"model", Strategy::Model, true, false, false},
      {"model graph mpi-device", Strategy::Model, true, true, true},
  };
  const HostData d = make_data(60, 20);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    Config c = small_config(6, 7, 3);  // 3 epochs: graphs warm up, capture, then replay
    c.strategy = v.st;
    c.overlap = v.overlap;
    c.graph = v.graph ? Graphs::On : Graphs::Off;
    c.comm = v.device_pointers ? Comm::Device : Comm::Host;
    TrainResult sync, lazy;
    {
      StreamMode mode(sim::StreamMode::Sync);
      sync = train_on<float>(c, d, nullptr);
    }
    expect_verified<float>(sync);
    {
      StreamMode mode(sim::StreamMode::Lazy);
      lazy = train_on<float>(c, d, nullptr);
    }
    expect_verified<float>(lazy);
    EXPECT_TRUE(flat(sync.params) == flat(lazy.params)) << "lazy streams changed the weights";
    EXPECT_EQ(sync.test_precision, lazy.test_precision);
  }
}

// The overlap's polling loop (src/train/step.cpp: MPI_Test until layer 1's gradient copy is
// done) must really iterate: the emulator's lazy streams answer cudaEventQuery with "not ready"
// while the copy stream still has work, one step per query, as a GPU still busy would. Every
// step finds that copy pending, so every rank polls at least once per step; without overlap
// nothing polls, and the weights are the same bits either way.
TEST(Strategies, OverlapPollsMpiWhileTheLastGradientCopyIsPending) {
  if (comm::size() < 2) GTEST_SKIP() << "one rank exchanges no gradients";
  const HostData d = make_data(60, 20);
  StreamMode mode(sim::StreamMode::Lazy);
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) {
    SCOPED_TRACE(strategy_name(st));
    Config c = small_config(6, 7, 2);
    c.strategy = st;
    c.verify = false;
    c.overlap = true;
    const TrainResult on = train_on<float>(c, d, nullptr);
    c.overlap = false;
    const TrainResult off = train_on<float>(c, d, nullptr);
    const std::uint64_t steps = std::uint64_t(c.epochs) * ((on.n_fit + c.batch - 1) / c.batch);
    EXPECT_GE(on.overlap_polls, steps * std::uint64_t(comm::size()));
    EXPECT_EQ(off.overlap_polls, 0u);
    EXPECT_TRUE(flat(on.params) == flat(off.params)) << "--no-overlap changed the weights";
  }
}
#endif  // SIM_EMULATOR

TEST(Strategies, DeviceMpiIsRefusedWithoutCudaAwareMpiAndWithTheParameterServer) {
  Config c = small_config(6, 7, 1);
  c.comm = Comm::Device;
  c.strategy = Strategy::ParamServer;
  try {
    train_on<float>(c, make_data(60, 20), nullptr);
    ADD_FAILURE() << "--comm device with ps was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--comm device"), std::string::npos) << e.what();
  }
#ifdef SIM_EMULATOR
  c.strategy = Strategy::Allreduce;
  setenv("SIM_MPI_CUDA_AWARE", "0", 1);
  try {
    train_on<float>(c, make_data(60, 20), nullptr);
    ADD_FAILURE() << "--comm device was accepted by an MPI that is not CUDA-aware";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA-aware"), std::string::npos) << e.what();
  }
  unsetenv("SIM_MPI_CUDA_AWARE");
#endif
}

TEST(Strategies, GraphsAreCapturedOncePerShapeAndReplayed) {
  DeviceModel<float> m(kInputDim, 4, kNumClasses, 8, 4);
  std::vector<std::uint8_t> img(std::size_t(kInputDim) * 16, 7), lab(16, 3);
  m.set_train_data(DeviceImages(img.data(), lab.data(), 16, kInputDim));
  std::vector<std::uint32_t> order(16);
  for (std::uint32_t i = 0; i < 16; ++i) order[i] = 15 - i;
  m.set_order(order);
  m.set_params(std::vector<float>(m.num_params(), 0.01f));
  m.enable_graphs(true);
  for (int step = 0; step < 4; ++step) {
    m.forward_backward(std::size_t(step % 2) * 8, 8, 0.125f, true, 1e-3f);
    m.sgd_step(0.1f);
  }
  const auto& g = m.graph_stats();
  EXPECT_EQ(g.eager, 3u);     // layer-2 phase, layer-1 phase, SGD: once each
  EXPECT_EQ(g.captured, 3u);  // then captured once each
  EXPECT_EQ(g.replays, 9u);   // and replayed on steps 2, 3, 4
  EXPECT_GT(g.nodes, 5u);
}

// ---- model-parallel bookkeeping ----

TEST(Strategies, HiddenSlicesCoverEveryUnitOnce) {
  for (int H : {1, 2, 5, 256})
    for (int p = 1; p <= 5; ++p) {
      int next = 0;
      for (int r = 0; r < p; ++r) {
        const HiddenSlice s = hidden_slice(H, p, r);
        EXPECT_EQ(s.h0, next);
        EXPECT_GE(s.H, H / p);
        EXPECT_LE(s.H, H / p + 1);
        next += s.H;
      }
      EXPECT_EQ(next, H);
      EXPECT_GE(hidden_slice(H, p, 0).H, 1);
    }
}

TEST(Strategies, SlicesAssembleBackIntoTheSameParameters) {
  const int D = 3, H = 5, C = 2;
  const ParamLayout L{D, H, C};
  std::vector<double> full(L.total());
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = double(i) + 0.5;
  for (int p = 1; p <= 6; ++p) {
    std::vector<double> all;
    for (int r = 0; r < p; ++r) {
      const std::vector<double> s = slice_params(full, D, H, C, hidden_slice(H, p, r));
      EXPECT_EQ(s.size(), (ParamLayout{D, hidden_slice(H, p, r).H, C}.total()));
      all.insert(all.end(), s.begin(), s.end());
    }
    EXPECT_EQ(assemble_params(all, D, H, C, p), full) << "p = " << p;
  }
  // Row 1 of W1 (column-major H x D) is units h = 1 at stride H; rank 0 of 2 owns h 0..2.
  const std::vector<double> s0 = slice_params(full, D, H, C, hidden_slice(H, 2, 0));
  EXPECT_EQ(s0[1], full[1]);
  EXPECT_EQ(s0[3], full[5]);  // column 1 of the 3-row slice starts at W1(0, 1) = full[H]
}

}  // namespace
}  // namespace nn::train

namespace nn::train {
namespace {

// A diverging run stops at its first non-finite step, names it, and leaves the
// checkpoint of an earlier good run untouched.
TEST(Faults, NonFiniteLossStopsTrainingAndKeepsTheLastGoodCheckpoint) {
  // Rank 0 names the file (the ranks' pids say nothing about each other); only rank 0 reads
  // it, as the trainer does: on a cluster /tmp is node-local (make test-multinode).
  const std::string path = comm::broadcast(testing::TempDir() + "nn_diverge_" + std::to_string(::getpid()) + ".ck");
  const HostData d = make_data(60, 20);
  Config good = small_config(6, 7, 1);
  good.verify = false;
  good.save = path;
  const auto ok = train_on<float>(good, d, nullptr);
  const bool root = comm::rank() == 0;
  const Checkpoint before = root ? load_checkpoint(path) : Checkpoint{};
  for (Strategy st : kAll) {
    SCOPED_TRACE(strategy_name(st));
    Config bad = good;
    bad.strategy = st;
    bad.lr = 1e6;
    bad.epochs = 3;
    try {
      train_on<float>(bad, d, nullptr);
      ADD_FAILURE() << "lr 1e6 trained to the end";
    } catch (const Diverged& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("non-finite loss at "), std::string::npos) << m;
      EXPECT_NE(m.find("epoch "), std::string::npos) << m;
      comm::barrier();
      const Checkpoint after = root ? load_checkpoint(path) : Checkpoint{};
      if (!root) {
      } else if (m.find("nothing was saved to " + path) != std::string::npos) {
        EXPECT_EQ(after.W1, before.W1);  // the good run's weights, untouched
        EXPECT_EQ(after.b2, before.b2);
      } else {
        // An epoch finished with a finite loss first: its weights are the last good ones.
        EXPECT_NE(m.find(path + " keeps the weights after epoch "), std::string::npos) << m;
        for (double w : after.W1) ASSERT_TRUE(std::isfinite(w));
        for (double w : after.W2) ASSERT_TRUE(std::isfinite(w));
      }
    }
    comm::barrier();
    if (comm::rank() == 0) save_checkpoint(path, before);
    comm::barrier();
  }
  if (root) {
    EXPECT_EQ(before.W1, ok.params.W1);
  }
  comm::barrier();
  if (comm::rank() == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace nn::train
