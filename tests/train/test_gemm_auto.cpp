// --gemm auto and the measured part of --persistent auto (src/train/gemm_auto.h): the rules
// on the table of measurements (kernels/gemm/auto_table.h) for made-up GPU classes and shapes,
// then the trainer: in the emulator build auto runs variant 4 (the emulator is not a measured
// GPU, though it reports compute capability 9.0), the checkpoint records the variant that ran,
// and a resumed run with auto keeps the saved run's variant. Collective: every rank runs each test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "comm/comm.h"
#include "common/errors.h"
#include "io/checkpoint.h"
#include "synthetic.h"
#include "train/gemm_auto.h"
#include "train/trainer.h"

namespace nn::train {
namespace {

GpuClass hopper() { return GpuClass{9, 0, true, "NVIDIA H200"}; }

TEST(GemmAuto, MeasuredShapesGiveTheMeasuredChoice) {
  for (const AutoRow& r : gemm_auto::kAutoTable) {
    const GpuClass g{r.cc_major, r.cc_minor, true, "a GPU"};
    const GemmPick p = pick_gemm(g, r.hidden, std::size_t(r.batch), false, false);
    EXPECT_EQ(p.gemm, r.gemm) << r.hidden << ":" << r.batch;
    EXPECT_NE(p.why.find("measured fastest at " + std::to_string(r.hidden) + ":" + std::to_string(r.batch)),
              std::string::npos) << p.why;
    ASSERT_EQ(exact_row(g, r.hidden, std::size_t(r.batch)), &r);
  }
  // What docs/performance.md's GPU-step table says of the H200: --gemm 5 wins the fused step at
  // every shape measured; the persistent step wins at 256:100 only.
  EXPECT_EQ(pick_gemm(hopper(), 1024, 1000, false, false).gemm, 5);
  EXPECT_TRUE(exact_row(hopper(), 256, 100)->persistent);
  EXPECT_FALSE(exact_row(hopper(), 512, 800)->persistent);
}

TEST(GemmAuto, EverythingUnmeasuredFallsBackToVariant4) {
  EXPECT_EQ(kGemmAutoFallback, 4);
  for (const GpuClass& g : {GpuClass{7, 0, true, "Tesla V100"}, GpuClass{8, 0, true, "A100"},
                            GpuClass{9, 0, false, "the emulator"}, GpuClass{7, 0, false, "GPGPU-Sim"}}) {
    const GemmPick p = pick_gemm(g, 1024, 1000, false, false);
    EXPECT_EQ(p.gemm, 4) << g.name;
    EXPECT_EQ(p.why.find("measured fastest"), std::string::npos) << p.why;
    EXPECT_EQ(nearest_row(g, 1024, 1000), nullptr) << g.name;
    EXPECT_EQ(exact_row(g, 256, 100), nullptr) << g.name;
  }
  EXPECT_NE(pick_gemm({8, 6, true, "RTX"}, 256, 100, false, false).why.find("compute capability 8.6"), std::string::npos);
  // --exact on and double keep the fallback on the measured class at a measured shape.
  EXPECT_EQ(pick_gemm(hopper(), 1024, 1000, false, true).gemm, 4);
  EXPECT_NE(pick_gemm(hopper(), 1024, 1000, false, true).why.find("--exact on"), std::string::npos);
  EXPECT_EQ(pick_gemm(hopper(), 1024, 1000, true, false).gemm, 4);
  EXPECT_NE(pick_gemm(hopper(), 1024, 1000, true, false).why.find("double"), std::string::npos);
}

TEST(GemmAuto, NearestMeasuredShapeWithinAFactorOf2) {
  const GpuClass g = hopper();
  EXPECT_EQ(nearest_row(g, 300, 120), exact_row(g, 256, 100));
  EXPECT_EQ(nearest_row(g, 2048, 2000), exact_row(g, 1024, 3000));  // log-nearer 3000 than 1000
  EXPECT_EQ(nearest_row(g, 1024, 1500), exact_row(g, 1024, 1000));  // log-nearer 1000 (1.5x) than 3000 (2x)
  EXPECT_EQ(nearest_row(g, 512, 400), exact_row(g, 512, 800));      // exactly 2x: still in
  EXPECT_EQ(nearest_row(g, 4096, 1000), nullptr);                   // H 4x away
  EXPECT_EQ(nearest_row(g, 256, 10), nullptr);                      // B 10x away
  const GemmPick near = pick_gemm(g, 300, 120, false, false);
  EXPECT_EQ(near.gemm, 5);
  EXPECT_NE(near.why.find("nearest to 300:120"), std::string::npos) << near.why;
  EXPECT_EQ(pick_gemm(g, 64, 100, false, false).gemm, 4);
  // The persistent step's choice needs the shape itself.
  EXPECT_EQ(exact_row(g, 300, 120), nullptr);
}

// A file name chosen on rank 0, removed at the end.
std::string shared_path(const std::string& name) {
  return comm::broadcast(testing::TempDir() + "nn_gemm_auto_" + std::to_string(::getpid()) + "_" + name);
}

// The header's first line of a run (rank 0; "" elsewhere).
std::string header_of(const Config& c, const HostData& d) {
  std::FILE* f = comm::rank() == 0 ? std::tmpfile() : nullptr;
  train_on<float>(c, d, f);
  std::string line;
  if (f) {
    std::rewind(f);
    char buf[512] = {};
    if (std::fgets(buf, sizeof buf, f)) line = buf;
    std::fclose(f);
  }
  return line;
}

std::uint32_t saved_gemm(const std::string& path) {
  return comm::broadcast_value(comm::rank() == 0 ? load_checkpoint(path).state->fingerprint.gemm : 0u);
}

TEST(GemmAuto, TheTrainerResolvesAutoAndAResumeKeepsTheSavedVariant) {
  const HostData d = make_data(120, 20);
  const std::string path = shared_path("resume.ck");
  // 256:100, a shape the table measured on compute capability 9.0, which the emulator reports.
  Config c = small_config(256, 100, 1);
  c.verify = false;
  c.save = path;
  c.gemm_auto = true;
  const std::string fresh = header_of(c, d);
  const std::uint32_t ran = saved_gemm(path);
#ifdef SIM_EMULATOR
  EXPECT_EQ(ran, 4u);
  if (comm::rank() == 0) {
    EXPECT_NE(fresh.find("GEMM variant 4 (warptile; auto: the emulator is not a measured GPU)"), std::string::npos)
        << fresh;
  }
#endif
  if (comm::rank() == 0) {
    EXPECT_NE(fresh.find("GEMM variant " + std::to_string(ran) + " ("), std::string::npos) << fresh;
    EXPECT_NE(fresh.find("; auto: "), std::string::npos) << fresh;
  }
#ifndef SIM_EMULATOR
  const GpuClass g = this_rank_gpu();
  if (!comm::all_ok(g.major >= 8 && g.measured_class)) {
    comm::barrier();
    if (comm::rank() == 0) std::remove(path.c_str());
    GTEST_SKIP() << "the resume half runs --gemm 5: compute capability 8.0 or newer, not GPGPU-Sim";
  }
#endif
  // Saved with --gemm 5, resumed with auto: the saved variant, not a new choice.
  if (comm::rank() == 0) std::remove(path.c_str());
  c.hidden = 16;
  c.batch = 12;
  c.gemm_auto = false;
  c.gemm = 5;
  train_on<float>(c, d, nullptr);
  c.gemm_auto = true;
  c.gemm = 4;
  c.resume = true;
  c.epochs = 2;
  const std::string resumed = header_of(c, d);
  EXPECT_EQ(saved_gemm(path), 5u);
  if (comm::rank() == 0) {
    EXPECT_NE(resumed.find("GEMM variant 5 (tf32x3; auto: the variant of the run resumed from"), std::string::npos)
        << resumed;
  }
  // An explicit other variant is still refused.
  c.gemm_auto = false;
  c.epochs = 3;
  try {
    train_on<float>(c, d, nullptr);
    ADD_FAILURE() << "--gemm 4 resumed a --gemm 5 run";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--gemm 5 in the saved run"), std::string::npos) << e.what();
  }
  comm::barrier();
  if (comm::rank() == 0) std::remove(path.c_str());
}

}  // namespace
}  // namespace nn::train
