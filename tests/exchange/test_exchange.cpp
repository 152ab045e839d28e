// The exchange engines (src/exchange) on a stand-in model whose "device" is host memory: each
// engine sums every rank's gradient (layer 1 and layer 2, in pieces or not, with and without
// overlap, allreduce or the parameter server), announces its parts in order, and reports its
// pieces; the registry makes the engine it is asked for; the integer sums the exact format
// will use add modulo 2^64 whatever the order. Collective: run at 1-4 ranks (make test, test-more).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "exchange/engines.h"

namespace nn::exchange {
namespace {

// What the engines ask of a model (model/model.h's staging calls), on plain host memory: a copy
// is done when queued, so download_done is true at once; it counts the calls.
struct StandIn {
  explicit StandIn(std::size_t n) : g(n) {}
  std::vector<float> g;
  int downloads = 0, uploads = 0, waits = 0;
  float* grads() { return g.data(); }
  int queue_download(float* host, std::size_t begin, std::size_t end, model::Stage) {
    for (std::size_t i = begin; i < end; ++i) host[i] = g[i];
    return downloads++;
  }
  bool download_done(int) const { return true; }
  void wait_download(int) const {}
  void wait(model::Stage) { ++waits; }
  void upload_grads(const float* host) { upload_grads(host, 0, g.size()); }
  void upload_grads(const float* host, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) g[i] = host[i];
    ++uploads;
  }
};

// The parts an exchange announced, in order.
struct Recorder final : Parts {
  explicit Recorder(std::vector<Part>& log) : log_(log) {}
  void begin(Part p) override { log_.push_back(p); }
  std::vector<Part>& log_;
};

constexpr Regions kRegions{95, 17};  // layer 1 [0, 95), layer 2 [95, 112)

// Rank r's value i: small integers, so every sum is exact in float whatever the order.
float value(int r, std::size_t i) { return float((r + 1) * int(i % 7 + 1)); }
float summed(std::size_t i) {
  const int p = comm::size();
  return float(p * (p + 1) / 2 * int(i % 7 + 1));
}

StandIn filled() {
  StandIn m(kRegions.total());
  for (std::size_t i = 0; i < m.g.size(); ++i) m.g[i] = value(comm::rank(), i);
  return m;
}

void expect_summed(const StandIn& m, std::size_t from = 0) {
  for (std::size_t i = 0; i < m.g.size(); ++i)
    ASSERT_EQ(m.g[i], i < from ? value(comm::rank(), i) : summed(i)) << "value " << i;
}

TEST(Exchange, HostStagedSumsInOnePieceOrManyWithAndWithoutOverlap) {
  for (const comm::Reduction<float> red : {comm::allreduce_reduction<float>(), comm::ps_reduction<float>()})
    for (const std::size_t piece : {std::size_t(95), std::size_t(10)})
      for (const bool overlap : {true, false}) {
        SCOPED_TRACE(std::string(red.range) + ", piece " + std::to_string(piece) + (overlap ? ", overlap" : ""));
        StandIn m = filled();
        HostStaged<float, StandIn> e(m, kRegions, red, piece, overlap);
        std::vector<Part> log;
        e.sum(Recorder(log));
        expect_summed(m);
        EXPECT_EQ(log, (std::vector<Part>{Part::Download, Part::Reduce, Part::Upload}));
        EXPECT_EQ(e.pieces(), piece == 95 ? 1u : 10u);  // 95 values in pieces of 10: the last holds 5
        EXPECT_EQ(e.piece_values(), piece);
        EXPECT_EQ(m.downloads, 1 + int(e.pieces()));  // layer 2, then each piece of layer 1
        EXPECT_EQ(m.uploads, piece == 95 ? 1 : 11);   // all at once, or each piece and then layer 2
      }
}

TEST(Exchange, DevicePointersSumTheModelsBufferInPlace) {
  for (const bool overlap : {true, false}) {
    StandIn m = filled();
    DevicePointers<float, StandIn> e(m, kRegions, comm::allreduce_reduction<float>(), overlap);
    std::vector<Part> log;
    e.sum(Recorder(log));
    expect_summed(m);
    EXPECT_EQ(log, std::vector<Part>{Part::Reduce});
    EXPECT_EQ(m.waits, overlap ? 2 : 1);  // layer 2's stage, then all of it; or all at once
    EXPECT_EQ(m.downloads + m.uploads, 0);
  }
}

TEST(Exchange, HostMemorySumsWithLayer2StartedEarlyOrNot) {
  for (const comm::Reduction<float> red : {comm::allreduce_reduction<float>(), comm::ps_reduction<float>()})
    for (const bool early : {true, false}) {
      StandIn m = filled();
      HostMemory<float, StandIn> e(m, kRegions, red);
      if (early) e.layer2_ready();
      std::vector<Part> log;
      e.sum(Recorder(log));
      expect_summed(m);
      EXPECT_EQ(log, std::vector<Part>{Part::Reduce});
      // The next step starts afresh: summed again, without layer2_ready.
      for (std::size_t i = 0; i < m.g.size(); ++i) m.g[i] = value(comm::rank(), i);
      e.sum(Recorder(log));
      expect_summed(m);
    }
}

TEST(Exchange, NodeSharedSumsFromB1OnBetweenFences) {
  if (!comm::one_node()) GTEST_SKIP() << "the ranks span several nodes: no window to share";
  comm::NodeShared node(64);
  StandIn m = filled();
  NodeSharedSum<float, StandIn> e(m, kRegions, comm::allreduce_reduction<float>(), node, 90);
  std::vector<Part> log;
  e.sum(Recorder(log));
  expect_summed(m, 90);  // W1's gradient (before b1) is never sent
  EXPECT_EQ(log, std::vector<Part>{Part::Reduce});
}

TEST(Exchange, NoneLeavesTheGradientAlone) {
  StandIn m = filled();
  None<float> e(kRegions);
  std::vector<Part> log;
  e.sum(Recorder(log));
  for (std::size_t i = 0; i < m.g.size(); ++i) ASSERT_EQ(m.g[i], value(comm::rank(), i));
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(e.pieces(), 1u);
}

TEST(Exchange, RegistryMakesTheEngineAskedFor) {
  StandIn m = filled();
  // The node-shared engine needs a window, which only ranks of one node can share (collective).
  const bool one_node = comm::one_node();
  std::unique_ptr<comm::NodeShared> node = one_node ? std::make_unique<comm::NodeShared>(64) : nullptr;
  Options<float> o;
  o.regions = kRegions;
  o.piece = 10;
  o.node = node.get();
  o.b1 = 90;
  const auto made = [&](Engine e) { return make_exchange<float, StandIn>(e, m, o); };
  using Staged = HostStaged<float, StandIn>;
  using Pointers = DevicePointers<float, StandIn>;
  using Memory = HostMemory<float, StandIn>;
  using Shared = NodeSharedSum<float, StandIn>;
  EXPECT_NE(dynamic_cast<None<float>*>(made(Engine::None).get()), nullptr);
  EXPECT_NE(dynamic_cast<Staged*>(made(Engine::HostStaged).get()), nullptr);
  EXPECT_NE(dynamic_cast<Pointers*>(made(Engine::DevicePointers).get()), nullptr);
  EXPECT_NE(dynamic_cast<Memory*>(made(Engine::HostMemory).get()), nullptr);
  if (one_node) {
    EXPECT_NE(dynamic_cast<Shared*>(made(Engine::NodeShared).get()), nullptr);
  }
  // NCCL sums device memory on a model's exchange stream: none for a model without one.
  EXPECT_EQ(made(Engine::Nccl), nullptr);
  EXPECT_STREQ(engine_name(Engine::Nccl), "nccl");
  EXPECT_EQ(made(Engine::HostStaged)->pieces(), 10u);
  EXPECT_STREQ(engine_name(Engine::HostStaged), "host-staged");
}

// 64-bit unsigned sums (the exact format's words) wrap modulo 2^64, and every way of summing
// gives the same bits: blocking, nonblocking, the parameter server.
TEST(Exchange, IntegerSumsWrapAndAgreeAcrossReductions) {
  const int p = comm::size(), r = comm::rank();
  const std::uint64_t big = std::uint64_t(1) << 63;
  std::vector<std::uint64_t> a(9), b, c;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = big + std::uint64_t(r) * 1000 + i;
  b = c = a;
  comm::allreduce_sum(a.data(), a.size());
  comm::iallreduce_sum(b.data(), b.size()).wait();
  comm::ps_sum(c.data(), c.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint64_t expect = 0;
    for (int q = 0; q < p; ++q) expect += big + std::uint64_t(q) * 1000 + i;  // wraps at 2 ranks and more
    ASSERT_EQ(a[i], expect) << i;
    ASSERT_EQ(b[i], expect) << i;
    ASSERT_EQ(c[i], expect) << i;
  }
}

}  // namespace
}  // namespace nn::exchange
