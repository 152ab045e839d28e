// GoogleTest suite for src/train/report.cpp: the report's arithmetic on hand-made timings
// (rank-local): counts, phases, medians, rates and the roofline, a single rank, zero times, the
// atomic write. The trainer's --report / --profile: test_report_training.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../temp_dir.h"
#include "comm/comm.h"
#include "common/errors.h"
#include "schedule/rng.h"
#include "common/nn_real.h"
#include "train/report.h"
#include "train/trainer.h"

namespace nn::train {
namespace {

using nlohmann::json;

// ---- make_report on hand-made timings (no device, no MPI) ----

BatchTiming timing(double f, double b, double d2h, double ar, double h2d, double step, double batch) {
  BatchTiming t;
  t.forward = f;
  t.backward = b;
  t.compute = f + b;
  t.d2h = d2h;
  t.allreduce = ar;
  t.h2d = h2d;
  t.step = step;
  t.batch = batch;
  return t;
}

ReportInputs inputs(int ranks) {
  ReportInputs in;
  in.device = "test device";
  in.ranks = ranks;
  in.hidden = 8;
  in.batch = 10;
  in.epochs = 1;
  in.n_train = 30;
  in.gemm = 2;
  in.epoch_seconds = {0.5};
  in.total_s = 0.75;
  return in;
}

// Round trip through the text, as the plotting script sees it.
json parsed(const ReportInputs& in) { return json::parse(make_report(in).dump()); }

TEST(Report, FlopAndByteCountsFollowTheCourse) {
  EXPECT_EQ(batch_flops(100, 256, 784, 10), 4.0 * 100 * 256 * (784 + 10));
  // forward 2BHD + 2BCH, backward dW1 2BHD + dW2 2BCH
  EXPECT_EQ(batch_flops(7, 3, 5, 2), 2.0 * 7 * 3 * 5 + 2.0 * 7 * 2 * 3 + 2.0 * 7 * 3 * 5 + 2.0 * 7 * 2 * 3);
  EXPECT_EQ(gradient_bytes(256, 784, 10, 4), 2.0 * (256 * 784 + 256 + 10 * 256 + 10) * 4);
  EXPECT_EQ(gradient_bytes(3, 5, 2, 8), 2.0 * (15 + 3 + 6 + 2) * 8);
}

TEST(Report, PhasesMediansRatesAndRooflineFromTimings) {
  ReportInputs in = inputs(2);
  in.batches = {timing(1e-3, 2e-3, 5e-4, 1e-3, 5e-4, 2e-4, 5.2e-3),
                timing(2e-3, 2e-3, 1e-3, 3e-3, 1e-3, 2e-4, 9.2e-3),
                timing(1e-3, 4e-3, 5e-4, 2e-3, 5e-4, 4e-4, 8.4e-3)};
  const json r = parsed(in);
  EXPECT_EQ(r["schema"], "nn-report-1");
  EXPECT_EQ(r["device"], "test device");
  EXPECT_EQ(r["build"], "cuda");
  EXPECT_EQ(r["ranks"], 2);
  EXPECT_EQ(r["precision"], "float");
  EXPECT_EQ(r["config"], json::parse(R"({"hidden": 8, "batch": 10, "epochs": 1, "n_train": 30,
                                         "gemm": 2, "profile": false})"));
  const json& ph = r["phases"];
  EXPECT_EQ(ph["forward"]["count"], 3);
  EXPECT_DOUBLE_EQ(ph["forward"]["total_s"].get<double>(), 4e-3);
  EXPECT_DOUBLE_EQ(ph["forward"]["median_s"].get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(ph["backward"]["median_s"].get<double>(), 2e-3);
  EXPECT_DOUBLE_EQ(ph["forward_backward"]["median_s"].get<double>(), 4e-3);
  EXPECT_DOUBLE_EQ(ph["allreduce"]["median_s"].get<double>(), 2e-3);
  EXPECT_DOUBLE_EQ(ph["allreduce"]["total_s"].get<double>(), 6e-3);
  EXPECT_DOUBLE_EQ(ph["step"]["median_s"].get<double>(), 2e-4);
  EXPECT_DOUBLE_EQ(ph["batch"]["median_s"].get<double>(), 8.4e-3);
  for (const char* name : {"d2h", "h2d", "batch"}) EXPECT_EQ(ph[name]["count"], 3) << name;

  const double F = 4.0 * 10 * 8 * 794, bytes = 2.0 * (8 * 784 + 8 + 10 * 8 + 10) * 4;
  EXPECT_EQ(r["per_batch"], (json{{"flops", F}, {"pci_bytes", bytes}, {"mpi_bytes", bytes}, {"batches", 3}}));
  const json& m = r["measured"];
  EXPECT_DOUBLE_EQ(m["p_flops"].get<double>(), F / 4e-3);      // median of forward + backward
  EXPECT_DOUBLE_EQ(m["p_pci"].get<double>(), bytes / 1e-3);    // median of d2h + h2d
  EXPECT_DOUBLE_EQ(m["p_mpi"].get<double>(), bytes / 2e-3);
  EXPECT_DOUBLE_EQ(m["flops_per_s"].get<double>(), F / 8.4e-3);
  const double ai = F / bytes;
  EXPECT_DOUBLE_EQ(r["arithmetic_intensity"].get<double>(), ai);
  EXPECT_DOUBLE_EQ(r["roofline_prediction_flops_per_s"].get<double>(),
                   ai / (ai / (F / 4e-3) + (1e-3 / bytes + 2e-3 / bytes) / 2));
  EXPECT_EQ(r["epoch_seconds"], json::array({0.5}));
  EXPECT_EQ(r["total_s"], 0.75);

  // An even number of samples: the median is the mean of the middle two.
  in.batches.pop_back();
  EXPECT_DOUBLE_EQ(parsed(in)["phases"]["allreduce"]["median_s"].get<double>(), 2e-3);
}

TEST(Report, SingleRankHasNoCommunicationAndAComputeOnlyPrediction) {
  ReportInputs in = inputs(1);
  in.is_double = true;
  in.emulator = true;
  BatchTiming t = timing(1e-3, 1e-3, kNotRun, kNotRun, kNotRun, 1e-4, 2.1e-3);
  in.batches = {t, t};
  const json r = parsed(in);
  EXPECT_EQ(r["build"], "emulator");
  EXPECT_EQ(r["precision"], "double");
  for (const char* name : {"d2h", "allreduce", "h2d"}) {
    EXPECT_EQ(r["phases"][name]["count"], 0) << name;
    EXPECT_EQ(r["phases"][name]["total_s"], 0.0) << name;
    EXPECT_TRUE(r["phases"][name]["median_s"].is_null()) << name;
  }
  EXPECT_EQ(r["per_batch"]["pci_bytes"], 2.0 * (8 * 784 + 8 + 10 * 8 + 10) * 8);
  EXPECT_TRUE(r["measured"]["p_pci"].is_null());
  EXPECT_TRUE(r["measured"]["p_mpi"].is_null());
  EXPECT_DOUBLE_EQ(r["roofline_prediction_flops_per_s"].get<double>(), r["measured"]["p_flops"].get<double>());
}

TEST(Report, ZeroTimesAndNoBatchesGiveNullsNotInfinities) {
  ReportInputs in = inputs(2);
  in.batches = {timing(1e-3, 1e-3, 1e-4, 0.0, 1e-4, 1e-4, 2.3e-3)};  // an allreduce below resolution
  json r = parsed(in);
  EXPECT_TRUE(r["measured"]["p_mpi"].is_null());
  EXPECT_TRUE(r["measured"]["p_pci"].is_number());
  EXPECT_TRUE(r["roofline_prediction_flops_per_s"].is_null());
  in.batches.clear();  // zero epochs
  in.epoch_seconds.clear();
  r = parsed(in);
  for (const auto& [name, p] : r["phases"].items()) {
    EXPECT_EQ(p["count"], 0) << name;
    EXPECT_TRUE(p["median_s"].is_null()) << name;
  }
  for (const auto& [name, v] : r["measured"].items()) EXPECT_TRUE(v.is_null()) << name;
  EXPECT_TRUE(r["roofline_prediction_flops_per_s"].is_null());
  EXPECT_TRUE(r["arithmetic_intensity"].is_number());
  EXPECT_EQ(r["epoch_seconds"], json::array());
  // Forward and backward timed as one: only their sum is known.
  BatchTiming t = timing(kNotRun, kNotRun, kNotRun, kNotRun, kNotRun, 1e-4, 3e-3);
  t.compute = 2e-3;
  in.batches = {t};
  r = parsed(in);
  EXPECT_EQ(r["phases"]["forward"]["count"], 0);
  EXPECT_EQ(r["phases"]["forward_backward"]["count"], 1);
  EXPECT_DOUBLE_EQ(r["measured"]["p_flops"].get<double>(), 4.0 * 10 * 8 * 794 / 2e-3);
}

TEST(Report, WrittenAtomicallyAndRefusedWhereItCannotBe) {
  nn::test::TempDir tmp("nn_report");
  ASSERT_TRUE(tmp.ok());
  ReportInputs in = inputs(1);
  const std::string path = tmp.path("r.json");
  write_report(path, make_report(in));
  in.device = "second";
  write_report(path, make_report(in));  // replaces the first
  std::ifstream f(path);
  EXPECT_EQ(json::parse(f)["device"], "second");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.str())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
  try {
    write_report(tmp.path("missing/r.json"), make_report(in));
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--report " + tmp.path("missing/r.json")), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nn::train
