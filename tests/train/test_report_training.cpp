// GoogleTest suite for the trainer's --report / --profile: tiny in-memory trainings at every rank
// count whose JSON is parsed and checked key by key against the run (collective: every rank runs
// the same trainings; rank 0 alone reads the file and shares its verdict); kernels per step of
// the fused and the separate step; an unwritable report path refused before training. The
// report's arithmetic on hand-made timings: test_report.cpp.
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
#include "synthetic.h"

namespace nn::train {
namespace {

using nlohmann::json;

Config report_config(const std::string& report) {
  Config c;
  c.hidden = 8;
  c.batch = 7;  // n_fit = 54 = 7 * 7 + 5: a short last batch, and B not a multiple of 2..4
  c.epochs = 2;
  c.val_fraction = 0.1;
  c.seed = 3;
  c.report = report;
  c.persistent = Persistent::Off;  // the fused step's phases and kernels, in every build
  return c;
}

// Rank 0's temporary directory, known to every rank (only rank 0 writes the report).
struct SharedDir {
  nn::test::TempDir tmp{"nn_report"};
  std::string dir = comm::broadcast(comm::rank() == 0 ? tmp.str() : std::string());
  std::string path(const std::string& name) const { return dir + "/" + name; }
};
// The report's header: its keys, schema, device, build, ranks, precision and the run's config.
void check_report_header(const json& r, const Config& c, const TrainResult& res, int p) {
  for (const char* key : {"schema", "device", "build", "ranks", "precision", "config", "phases", "per_batch",
                          "measured", "arithmetic_intensity", "roofline_prediction_flops_per_s",
                          "epoch_seconds", "total_s"})
    EXPECT_TRUE(r.contains(key)) << key;
  EXPECT_EQ(r["schema"], "nn-report-1");
  EXPECT_TRUE(r["device"].is_string() && !r["device"].get<std::string>().empty());
#ifdef SIM_EMULATOR
  EXPECT_EQ(r["build"], "emulator");
#else
  EXPECT_EQ(r["build"], "cuda");
#endif
  EXPECT_EQ(r["ranks"], p);
  EXPECT_EQ(r["precision"], sizeof(nn_real) == 8 ? "double" : "float");
  EXPECT_EQ(r["config"]["hidden"], c.hidden);
  EXPECT_EQ(r["config"]["batch"], c.batch);
  EXPECT_EQ(r["config"]["epochs"], c.epochs);
  EXPECT_EQ(r["config"]["n_train"], res.n_fit);
  EXPECT_EQ(r["config"]["gemm"], c.gemm);
  EXPECT_EQ(r["config"]["profile"], c.profile);
}

// Every phase, with count = the number of batches where it runs; the phases of a batch inside it.
// Returns the batches' total time.
double check_report_phases(const json& r, const Config& c, int p, std::size_t K) {
  const json& ph = r["phases"];
  for (const char* name : {"forward", "backward", "d2h", "allreduce", "h2d", "step", "batch", "forward_backward"}) {
    EXPECT_TRUE(ph.contains(name)) << name;
    for (const char* key : {"total_s", "median_s", "count"}) EXPECT_TRUE(ph[name].contains(key)) << name << key;
    EXPECT_GE(ph[name]["total_s"].get<double>(), 0.0) << name;
  }
  for (const char* name : {"step", "batch", "forward_backward"}) EXPECT_EQ(ph[name]["count"], K) << name;
  for (const char* name : {"d2h", "allreduce", "h2d"}) EXPECT_EQ(ph[name]["count"], p > 1 ? K : 0) << name;
  // Forward and backward apart where the model marks their boundary, else only their sum.
  EXPECT_EQ(ph["forward"]["count"], ph["backward"]["count"]);
  const std::size_t nf = ph["forward"]["count"];
  EXPECT_TRUE(nf == K || nf == 0) << nf;
  if (nf == K) {
    EXPECT_NEAR(ph["forward"]["total_s"].get<double>() + ph["backward"]["total_s"].get<double>(),
                ph["forward_backward"]["total_s"].get<double>(), 1e-6);
  }
  if (p >= 2) {
    EXPECT_GT(ph["allreduce"]["count"].get<std::size_t>(), 0u);
    EXPECT_TRUE(r["measured"]["p_mpi"].is_number() && r["measured"]["p_mpi"].get<double>() > 0);
    EXPECT_TRUE(r["measured"]["p_pci"].is_number() && r["measured"]["p_pci"].get<double>() > 0);
  } else {
    EXPECT_TRUE(r["measured"]["p_pci"].is_null());
    EXPECT_TRUE(r["measured"]["p_mpi"].is_null());
  }

  // The phases of a batch lie inside it; without --profile they tile it (events back to back).
  double parts = 0;
  for (const char* name : {"forward_backward", "d2h", "allreduce", "h2d", "step"})
    parts += ph[name]["total_s"].get<double>();
  const double batch_total = ph["batch"]["total_s"];
  EXPECT_LE(parts, batch_total * (1 + 1e-5) + 1e-7);
  if (!c.profile) {
    EXPECT_NEAR(parts, batch_total, batch_total * 1e-5 + 1e-7);
  }
  return batch_total;
}

// Counts and rates.
void check_report_rates(const json& r, const Config& c, int p, std::size_t K) {
  const double F = 4.0 * double(c.batch) * c.hidden * (kInputDim + kNumClasses);
  const double bytes = 2.0 * (double(c.hidden) * kInputDim + c.hidden + kNumClasses * c.hidden + kNumClasses) *
                       double(sizeof(nn_real));
  EXPECT_EQ(r["per_batch"]["flops"], F);
  EXPECT_EQ(r["per_batch"]["pci_bytes"], bytes);
  EXPECT_EQ(r["per_batch"]["mpi_bytes"], bytes);
  EXPECT_EQ(r["per_batch"]["batches"], K);
  const json& m = r["measured"];
  for (const char* key : {"p_flops", "p_pci", "p_mpi", "flops_per_s"}) EXPECT_TRUE(m.contains(key)) << key;
  EXPECT_GT(m["p_flops"].get<double>(), 0.0);
  EXPECT_GT(m["flops_per_s"].get<double>(), 0.0);
  EXPECT_LE(m["flops_per_s"].get<double>(), m["p_flops"].get<double>() * (1 + 1e-9));  // batch >= its compute
  const double ai = r["arithmetic_intensity"];
  EXPECT_DOUBLE_EQ(ai, F / bytes);
  const double expected = p > 1 ? ai / (ai / m["p_flops"].get<double>() +
                                        (1 / m["p_pci"].get<double>() + 1 / m["p_mpi"].get<double>()) / 2)
                                : m["p_flops"].get<double>();
  EXPECT_NEAR(r["roofline_prediction_flops_per_s"].get<double>(), expected, expected * 1e-12);
}

// Epoch times: the very numbers the trainer printed; the batches fit inside them.
void check_report_epochs(const json& r, const TrainResult& res, double batch_total) {
  std::vector<double> printed;
  double epochs_total = 0;
  for (const EpochStats& e : res.epochs) {
    printed.push_back(e.seconds);
    epochs_total += e.seconds;
  }
  EXPECT_EQ(r["epoch_seconds"].get<std::vector<double>>(), printed);
  EXPECT_LE(batch_total, epochs_total * (1 + 1e-6));
  EXPECT_GE(r["total_s"].get<double>(), epochs_total);
}

// Everything the report of a finished run must say (rank 0, EXPECTs only: no early return
// that would leave the other ranks waiting). Returns false if anything failed.
bool check_report(const std::string& text, const Config& c, const TrainResult& res) {
  if (!json::accept(text)) {
    ADD_FAILURE() << "not JSON: " << text;
    return false;
  }
  const json r = json::parse(text);
  const int p = comm::size();
  const std::size_t batches_per_epoch = (res.n_fit + c.batch - 1) / c.batch;
  const std::size_t K = batches_per_epoch * std::size_t(c.epochs);
  check_report_header(r, c, res, p);
  const double batch_total = check_report_phases(r, c, p, K);
  check_report_rates(r, c, p, K);
  check_report_epochs(r, res, batch_total);
  if (::testing::Test::HasFailure()) std::printf("%s\n", text.c_str());
  return !::testing::Test::HasFailure();
}

TEST(Report, TrainingWritesACompleteConsistentReport) {
  const SharedDir dir;
  ASSERT_FALSE(dir.dir.empty());
  const Config c = report_config(dir.path("report.json"));
  const TrainResult res = train_on<nn_real>(c, noise_data(60, 10, 77, 9), nullptr);
  bool ok = true;
  if (comm::rank() == 0) ok = check_report(slurp(c.report), c, res);
  EXPECT_TRUE(comm::all_ok(ok));
}

TEST(Report, ProfileRunsAndPrintsItsPhases) {
  const SharedDir dir;
  ASSERT_FALSE(dir.dir.empty());
  Config c = report_config(dir.path("profile.json"));
  c.profile = true;
  c.epochs = 1;
  const std::string log = dir.path("log.txt");
  std::FILE* out = comm::rank() == 0 ? std::fopen(log.c_str(), "w") : nullptr;
  const TrainResult res = train_on<nn_real>(c, noise_data(60, 10, 77, 9), out);
  if (out) std::fclose(out);
  bool ok = true;
  if (comm::rank() == 0) {
    ok = check_report(slurp(c.report), c, res);
    const std::string printed = slurp(log);
    EXPECT_NE(printed.find("timing on rank 0"), std::string::npos) << printed;
    EXPECT_NE(printed.find("--profile"), std::string::npos) << printed;
    EXPECT_NE(printed.find("roofline prediction"), std::string::npos) << printed;
    EXPECT_NE(printed.find("report: " + c.report), std::string::npos) << printed;
    ok = !::testing::Test::HasFailure();
  }
  EXPECT_TRUE(comm::all_ok(ok));
  // --profile alone: the same timing on the console, no file.
  c.report.clear();
  const std::string log2 = dir.path("log2.txt");
  const std::string json_before = comm::rank() == 0 ? slurp(dir.path("profile.json")) : "";
  if (comm::rank() == 0) std::remove(dir.path("profile.json").c_str());
  std::FILE* out2 = comm::rank() == 0 ? std::fopen(log2.c_str(), "w") : nullptr;
  EXPECT_NO_THROW(train_on<nn_real>(c, noise_data(60, 10, 77, 9), out2));
  if (out2) std::fclose(out2);
  ok = true;
  if (comm::rank() == 0) {
    EXPECT_FALSE(json_before.empty());  // the first run wrote it
    const std::string printed = slurp(log2);
    EXPECT_NE(printed.find("timing on rank 0"), std::string::npos) << printed;
    EXPECT_NE(printed.find("--profile"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("report: "), std::string::npos) << printed;  // no file named
    std::FILE* f = std::fopen(dir.path("profile.json").c_str(), "r");
    EXPECT_EQ(f, nullptr) << "a report file was written without --report";
    if (f) std::fclose(f);
    ok = !::testing::Test::HasFailure();
  }
  EXPECT_TRUE(comm::all_ok(ok));
}

// "kernels_per_step" counts the launches of a step. The fused step is five kernels at one rank
// (the batch's normalised copy, forward GEMM, layer 2, its finish with the update, dW1 with W1's
// update) and six with an exchange (the update is a kernel of its own); the separate kernels
// are twelve.
TEST(Report, KernelsPerStepCountsTheFusedAndTheSeparateStep) {
  const SharedDir dir;
  ASSERT_FALSE(dir.dir.empty());
  for (const Fused f : {Fused::Auto, Fused::Off}) {
    SCOPED_TRACE(fused_name(f));
    Config c = report_config(dir.path("kernels.json"));
    c.fused = f;
    c.epochs = 1;
    train_on<nn_real>(c, noise_data(60, 10, 77, 9), nullptr);
    if (comm::rank() == 0) {
      const json r = json::parse(slurp(c.report));
      EXPECT_EQ(r["fused"], f == Fused::Auto);
      const std::uint64_t want = f == Fused::Off ? 12 : comm::size() == 1 ? 5 : 6;
      EXPECT_EQ(r["kernels_per_step"].get<std::uint64_t>(), want) << r.dump();
    }
    comm::barrier();
  }
}

TEST(Report, UnwritableReportPathIsAUserErrorBeforeTraining) {
  const SharedDir dir;
  ASSERT_FALSE(dir.dir.empty());
  const std::string log = dir.path("log.txt");
  for (const std::string& bad : {dir.path("missing/report.json"), dir.dir}) {
    const Config c = report_config(bad);
    std::FILE* out = comm::rank() == 0 ? std::fopen(log.c_str(), "w") : nullptr;
    std::string message;
    try {
      train_on<nn_real>(c, noise_data(60, 10, 77, 9), out);
    } catch (const UserError& e) {
      message = e.what();
    }
    if (out) std::fclose(out);
    EXPECT_NE(message.find("--report " + bad + ": "), std::string::npos) << message;
    if (comm::rank() == 0) {
      EXPECT_EQ(slurp(log), "") << "printed before failing: nothing was trained";
    }
  }
}

}  // namespace
}  // namespace nn::train
