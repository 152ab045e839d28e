// The whole trainer with --device cpu (CpuModel, no emulator): every strategy against the
// Armadillo reference in float and double at every rank count make test runs (1-4), overlap
// on/off bit for bit, agreement with the emulated GPU run, divergence, refused GPU-only
// options, bad sizes, and the --report of a CPU run. Collective, like test_strategies.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/ref_net.h"  // Armadillo before the emulator's CUDA macros (__noinline__)
#include "comm/comm.h"
#include "common/errors.h"
#include "synthetic.h"
#include "../temp_dir.h"
#include "train/trainer.h"

namespace nn::train {
namespace {

Config cpu_config(int H, std::size_t B, int epochs, Strategy st = Strategy::Allreduce) {
  Config c = small_config(H, B, epochs);
  c.device = Device::Cpu;
  c.strategy = st;
  return c;
}

const Strategy kAll[] = {Strategy::Allreduce, Strategy::ParamServer, Strategy::Model};

// ||a - b|| / ||b|| over every parameter of two runs (sizes checked by the caller's ASSERT).
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

TEST(CpuTrain, EveryStrategyMatchesTheReferenceInFloat) {
  for (Strategy st : kAll)
    for (NodeShared ns : {NodeShared::Auto, NodeShared::Off}) {
      if (st != Strategy::Allreduce && ns == NodeShared::Off) continue;  // only allreduce shares weights
      SCOPED_TRACE(std::string(strategy_name(st)) + " --node-shared " + node_shared_name(ns));
      // n_fit = 54, B = 7: not a multiple of 2, 3 or 4, a short last batch; H = 5 splits unevenly.
      Config c = cpu_config(5, 7, 2, st);
      c.node_shared = ns;
      const auto r = train_on<float>(c, make_data(60, 20), nullptr);
      EXPECT_EQ(r.node_shared,
                st == Strategy::Allreduce && ns == NodeShared::Auto && comm::size() > 1 && comm::one_node());
      expect_verified<float>(r);
      expect_ranks_agree(r.params);
      EXPECT_GT(r.test_precision, 0.0);
    }
}

// --cpu-gemm onednn: the same training through oneDNN's GEMM, verified against the reference
// at every strategy, and within float roundoff of the OpenBLAS run.
TEST(CpuTrain, OneDnnGemmMatchesTheReferenceAndTheOpenBlasRun) {
  if (!cpu_gemm_available(CpuGemm::OneDNN)) GTEST_SKIP() << "a make DNNL=0 build: no oneDNN";
  for (Strategy st : kAll) {
    SCOPED_TRACE(strategy_name(st));
    Config c = cpu_config(5, 7, 2, st);
    c.cpu_gemm = CpuGemm::OpenBLAS;
    const auto ob = train_on<float>(c, make_data(60, 20), nullptr);
    c.cpu_gemm = CpuGemm::OneDNN;
    const auto dn = train_on<float>(c, make_data(60, 20), nullptr);
    expect_verified<float>(dn);
    expect_ranks_agree(dn.params);
    const std::vector<double> a = flat(dn.params), b = flat(ob.params);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(relative_difference(a, b), 1e-5);
  }
}

// --cpu-gemm auto (the default) is oneDNN for float where the build has it, OpenBLAS for
// double (oneDNN has no double GEMM) and in a make DNNL=0 build; an explicit choice stays.
TEST(CpuTrain, AutoGemmIsOneDnnForFloatAndOpenBlasForDouble) {
  const CpuGemm f = cpu_gemm_available(CpuGemm::OneDNN) ? CpuGemm::OneDNN : CpuGemm::OpenBLAS;
  EXPECT_EQ(Config{}.cpu_gemm, CpuGemm::Auto);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::Auto, false), f);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::Auto, true), CpuGemm::OpenBLAS);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::OpenBLAS, false), CpuGemm::OpenBLAS);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::OneDNN, true), CpuGemm::OneDNN);  // refused later, by name
  EXPECT_STREQ(cpu_gemm_name(CpuGemm::Auto), "auto");
}

TEST(CpuTrain, EveryStrategyMatchesTheReferenceInDouble) {
  for (Strategy st : kAll) {
    SCOPED_TRACE(strategy_name(st));
    const auto r = train_on<double>(cpu_config(64, 10, 2, st), make_data(95, 20), nullptr);
    expect_verified<double>(r);
    expect_ranks_agree(r.params);
  }
}

TEST(CpuTrain, BatchSmallerThanTheRanksAndMoreRanksThanHiddenUnits) {
  // B = 2: at 3 and 4 ranks some ranks hold empty slices (they still join the reduction, one
  // of them maybe rank 0 with the regulariser). H = 2, model parallel: ranks without units.
  const auto a = train_on<double>(cpu_config(6, 2, 1), make_data(30, 10), nullptr);
  expect_verified<double>(a);
  expect_ranks_agree(a.params);
  const auto m = train_on<double>(cpu_config(2, 10, 2, Strategy::Model), make_data(60, 20), nullptr);
  expect_verified<double>(m);
  expect_ranks_agree(m.params);
}

TEST(CpuTrain, OverlapOnAndOffGiveIdenticalWeights) {
  const HostData d = make_data(60, 20);
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) {
    SCOPED_TRACE(strategy_name(st));
    Config c = cpu_config(6, 7, 2, st);
    c.verify = false;
    c.node_shared = NodeShared::Off;  // overlap concerns the all-reduce of the whole gradient
    const auto on = train_on<float>(c, d, nullptr);
    c.overlap = false;
    const auto off = train_on<float>(c, d, nullptr);
    EXPECT_TRUE(flat(on.params) == flat(off.params)) << "--no-overlap changed the weights";
    EXPECT_EQ(on.test_precision, off.test_precision);
  }
}

// --node-shared (one copy of the weights in the node's shared memory, each rank steps its
// columns of W1 from every rank's dZ1 and X) against the all-reduce of the whole gradient:
// both verified against the reference, within float roundoff of each other (another order of
// the same sums), every rank holding the same weights; and the shared run repeats bit for bit.
// Batches of 7 over up to 4 ranks: short last batches, and at 4 ranks a rank with one column.
TEST(CpuTrain, NodeSharedWeightsMatchTheAllReduceRunAndTheReference) {
  const HostData d = make_data(60, 20);
  if (!comm::one_node()) {  // make test-multinode: refused in one line on every rank
    Config c = cpu_config(5, 7, 1);
    c.node_shared = NodeShared::On;
    EXPECT_THROW(train_on<float>(c, d, nullptr), UserError);
    GTEST_SKIP() << "ranks on several nodes share no memory";
  }
  for (const int H : {5, 33}) {
    SCOPED_TRACE("H = " + std::to_string(H));
    Config c = cpu_config(H, 7, 2);
    c.node_shared = NodeShared::On;
    const auto on = train_on<float>(c, d, nullptr);
    const auto again = train_on<float>(c, d, nullptr);
    c.node_shared = NodeShared::Off;
    const auto off = train_on<float>(c, d, nullptr);
    EXPECT_EQ(on.node_shared, comm::size() > 1) << "one rank has nothing to share; more ranks must";
    EXPECT_FALSE(off.node_shared);
    expect_verified<float>(on);
    expect_verified<float>(off);
    expect_ranks_agree(on.params);
    EXPECT_TRUE(flat(on.params) == flat(again.params)) << "a node-shared run did not repeat bit for bit";
    const std::vector<double> a = flat(on.params), b = flat(off.params);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(relative_difference(a, b), 1e-5) << "node-shared and all-reduce weights differ beyond roundoff";
  }
}

// --node-shared on where it cannot work is refused in one line before any training.
TEST(CpuTrain, NodeSharedOnIsRefusedWithOtherStrategiesAndOnTheGpu) {
  const HostData d = make_data(60, 20);
  Config c = cpu_config(5, 7, 1, Strategy::ParamServer);
  c.node_shared = NodeShared::On;
  EXPECT_THROW(train_on<float>(c, d, nullptr), UserError);
  c = small_config(5, 7, 1);
  c.node_shared = NodeShared::On;
  EXPECT_THROW(train_on<float>(c, d, nullptr), UserError);
}

TEST(CpuTrain, AgreesWithTheGpuModelRun) {
  // The same batches on the (emulated) device and on the host: two summation orders of the
  // same maths, as close as each is to the reference.
  const HostData d = make_data(60, 20);
  Config c = cpu_config(8, 7, 2);
  c.verify = false;
  const auto cpu = train_on<double>(c, d, nullptr);
  c.device = Device::Gpu;
  const auto gpu = train_on<double>(c, d, nullptr);
  const std::vector<double> a = flat(cpu.params), b = flat(gpu.params);
  ASSERT_EQ(a.size(), b.size());
  const double rel = relative_difference(a, b);
  EXPECT_LT(rel, 1e-10);
  EXPECT_GT(rel, 0.0);  // really two computations, not one path taken twice
}

TEST(CpuTrain, DivergenceStopsAtTheFirstNonFiniteStep) {
  const HostData d = make_data(60, 20);
  for (Strategy st : kAll) {
    SCOPED_TRACE(strategy_name(st));
    Config c = cpu_config(6, 7, 3, st);
    c.verify = false;
    c.lr = 1e6;
    try {
      train_on<float>(c, d, nullptr);
      ADD_FAILURE() << "lr 1e6 trained to the end";
    } catch (const Diverged& e) {
      EXPECT_NE(std::string(e.what()).find("non-finite loss at "), std::string::npos) << e.what();
    }
  }
}

TEST(CpuTrain, GpuOnlyOptionsAndBadSizesAreUserErrors) {
  const HostData d = make_data(60, 20);
  const auto message = [&](Config c) {
    try {
      train_on<float>(c, d, nullptr);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  Config c = cpu_config(6, 7, 1);
  c.comm = Comm::Device;
  EXPECT_NE(message(c).find("--comm device is for --device gpu"), std::string::npos) << message(c);
  c = cpu_config(6, 7, 1);
  c.graph = Graphs::On;
  EXPECT_NE(message(c).find("--graph"), std::string::npos);
  c = cpu_config(6, 100, 1);  // more than the 54 training images
  EXPECT_NE(message(c).find("--batch 100 exceeds the 54 training images"), std::string::npos) << message(c);
  c = cpu_config(6, 7, 1);
  c.device = Device::Gpu;
  c.cpu_gemm = CpuGemm::OneDNN;
  EXPECT_NE(message(c).find("--cpu-gemm onednn is for --device cpu"), std::string::npos) << message(c);
  c = cpu_config(6, 7, 1);
  c.cpu_gemm = CpuGemm::OneDNN;
  try {
    train_on<double>(c, d, nullptr);
    ADD_FAILURE() << "--cpu-gemm onednn in double: no error";
  } catch (const UserError& e) {
    const bool built = cpu_gemm_available(CpuGemm::OneDNN);
    EXPECT_NE(std::string(e.what()).find(built ? "computes in float" : "this build has no oneDNN"), std::string::npos)
        << e.what();
  }
  c = cpu_config(6, 7, 1);
  c.train_size = 1000;
  EXPECT_NE(message(c).find("--train-size 1000 exceeds"), std::string::npos) << message(c);
}

TEST(CpuTrain, ReportTimesTheHostAndUsesTheGemmRateAsCeiling) {
  nn::test::TempDir tmp("nn_cpu_report");
  const std::string dir = comm::broadcast(comm::rank() == 0 ? tmp.str() : std::string());
  ASSERT_FALSE(dir.empty());
  Config c = cpu_config(8, 7, 2);
  c.verify = false;
  c.report = dir + "/r.json";
  const auto res = train_on<float>(c, make_data(60, 20), nullptr);
  const bool one_node = comm::one_node();  // collective: before rank 0 alone reads the report
  bool ok = true;
  if (comm::rank() == 0) {
    std::ifstream f(c.report);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    const auto r = nlohmann::json::parse(text, nullptr, false);  // discarded (not an object) if invalid
    EXPECT_TRUE(r.is_object()) << text;
    if (r.is_object()) {
    const std::size_t K = (res.n_fit + c.batch - 1) / c.batch * std::size_t(c.epochs);
    EXPECT_EQ(r["build"], "cpu");
    EXPECT_EQ(r["phases"]["forward"]["count"], K);  // the phase hook splits the passes
    EXPECT_EQ(r["phases"]["step"]["count"], K);
    EXPECT_EQ(r["phases"]["d2h"]["count"], 0u);  // MPI in place: no staging copies
    EXPECT_EQ(r["phases"]["allreduce"]["count"], comm::size() > 1 ? K : 0u);
    const double rate = r["measured"]["gemm_flops_per_s"];
    EXPECT_GT(rate, 0.0);
    EXPECT_GT(r["cpu"]["threads_per_rank"].get<int>(), 0);
    // The default (auto): oneDNN for float where the build has it.
    EXPECT_EQ(r["cpu"]["gemm"], cpu_gemm_available(CpuGemm::OneDNN) ? "onednn" : "openblas");
    EXPECT_GT(r["cpu"]["blas_bound_epoch_s"].get<double>(), 0.0);
    // At 2+ ranks on one node the weights are node-shared: MPI carries [b1 | W2 | b2] only.
    EXPECT_EQ(r["node_shared"].get<bool>(), res.node_shared);
    EXPECT_EQ(res.node_shared, comm::size() > 1 && one_node);
    if (res.node_shared) {
      EXPECT_EQ(r["per_batch"]["mpi_bytes"].get<double>(), 2.0 * (8 + 10 * 8 + 10) * 4);
    }
    if (comm::size() == 1) EXPECT_DOUBLE_EQ(r["roofline_prediction_flops_per_s"].get<double>(), rate);
    else EXPECT_LE(r["roofline_prediction_flops_per_s"].get<double>(), rate);
    }
    ok = !::testing::Test::HasFailure();
  }
  EXPECT_TRUE(comm::all_ok(ok));
}

// After --resume the restored epochs have no times: the `blas bound:` line's median is over the
// epochs this run trained (here the 4th alone), not zeros. Saved 3 epochs, resumed to 4.
TEST(CpuTrain, BlasBoundMedianLeavesOutRestoredEpochs) {
  nn::test::TempDir tmp("nn_cpu_bound");
  const std::string dir = comm::broadcast(comm::rank() == 0 ? tmp.str() : std::string());
  ASSERT_FALSE(dir.empty());
  Config c = cpu_config(16, 20, 3);
  c.verify = false;
  c.save = dir + "/s.ckpt";
  const HostData data = make_data(3000, 20);  // epochs of milliseconds: the line prints 4 decimals
  train_on<float>(c, data, nullptr);
  c.epochs = 4;
  c.resume = true;
  std::FILE* out = comm::rank() == 0 ? std::tmpfile() : nullptr;
  const auto res = train_on<float>(c, data, out);
  bool ok = true;
  if (comm::rank() == 0) {
    EXPECT_NE(out, nullptr);
    std::string text;
    if (out) {
      std::rewind(out);
      for (int ch; (ch = std::fgetc(out)) != EOF;) text += char(ch);
      std::fclose(out);
    }
    EXPECT_TRUE(res.resumed);
    const std::size_t at = text.find("median epoch ");
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) {
      const double median = std::atof(text.c_str() + at + 13);
      EXPECT_GT(median, 0.0) << text;
      EXPECT_EQ(res.epochs.size(), 4u);
      if (res.epochs.size() == 4) {
        EXPECT_NEAR(median, res.epochs[3].seconds, 6e-5) << text;  // 4 decimals
      }
    }
    EXPECT_NE(text.find("over epochs 4..4"), std::string::npos) << text;
    ok = !::testing::Test::HasFailure();
  }
  EXPECT_TRUE(comm::all_ok(ok));
}

}  // namespace
}  // namespace nn::train
