// The persistent step's plan (kernels/ops/persistent_plan.cu) and probe (persistent_probe.cu):
// variant 2 where its shared memory fits, variant 1 forced by NN_PERSISTENT_VARIANT; the cut's
// invariants; the model's verdict against the fused step at the trainer's shapes on an H200's 132
// SMs (a prediction); NN_PERSISTENT_PROBE's summary and rows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ops/persistent_step2.h"
#include "persistent_test_util.h"

namespace {

using namespace nn::test::persist;

TEST(PersistentPlan, Variant2WhereItFitsAndVariant1OnRequest) {
  // 48 x 70 at batches of 16 fits one emulated SM (SMs = workers); on an H200, 784 x 256 x 100 does.
  const nn::PersistentPlan p = nn::persistent_plan<float>(48, 70, 16);
  ASSERT_GT(p.blocks, 0);
  EXPECT_EQ(p.variant, 2);
  const nn::PersistentPlan g = nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 52, 32);
  ASSERT_GT(g.blocks, 0);
  EXPECT_EQ(g.slices, 16);
  EXPECT_EQ(g.tiles, 8 * 16);
  EXPECT_EQ(g.tiles_per_block, 1);
  EXPECT_EQ(g.jsplit, 2);       // 104 thread tiles of 4 x 4 in phase C, the batch in halves
  EXPECT_EQ(g.copy_bytes, 4);   // 52-byte slices of 784-byte images
  EXPECT_EQ(g.dz_cols, 100);
  int optin = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_LE(g.smem, std::size_t(optin));
  EXPECT_EQ(g.smem, nn::persist2::layout<float>(52, 32, 100, 1, 100, 2).total);
  EXPECT_EQ(nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 48, 32).copy_bytes, 16);
  // A tile whose phase C needs more than 256 thread tiles does not fit.
  EXPECT_EQ(nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 128, 64).blocks, 0);
  {
    ScopedEnv v("NN_PERSISTENT_VARIANT", "1");
    const nn::PersistentPlan p1 = nn::persistent_plan<float>(48, 70, 16);
    EXPECT_EQ(p1.variant, 1);
    EXPECT_GT(p1.blocks, 0);
    EXPECT_FALSE(nn::persistent_predicted_faster(p1));  // never chosen by the model
  }
  {
    ScopedEnv t("NN_PERSISTENT_TILE", "16x20");
    const nn::PersistentPlan pt = nn::persistent_plan<float>(48, 70, 16);
    EXPECT_EQ(pt.tile_h, 16);
    EXPECT_EQ(pt.tile_d, 20);
  }
  // Past 1024 hidden units phase B's registers do not hold a thread's units: variant 1 only.
  EXPECT_EQ(nn::persistent_plan<float>(784, 1100, 10).variant, 1);
  {
    ScopedEnv v("NN_PERSISTENT_VARIANT", "2");
    EXPECT_EQ(nn::persistent_plan<float>(784, 1100, 10).blocks, 0);  // forced where it does not fit
  }
}

// The trainer's shapes on an H200's grid (132 blocks): what --persistent auto would be told. The
// numbers are the model's (persistent_plan.cu), not measurements.
TEST(PersistentPlan, ModelAgainstTheFusedStepOn132Blocks) {
  struct Shape {
    int H, B;
  };
  for (const Shape s : {Shape{256, 100}, Shape{512, 800}, Shape{1024, 1000}, Shape{1024, 3000}}) {
    nn::PersistentPlan best;
    for (int td = 8; td <= 128; td += 4) {
      const nn::PersistentPlan p = nn::persistent_plan_with<float>(784, s.H, s.B, 2, 132, td);
      if (p.blocks > 0 && (best.blocks == 0 || p.predicted_us < best.predicted_us)) best = p;
    }
    std::printf("model, 132 blocks, %d:%d: %s", s.H, s.B, best.blocks ? "" : "no variant-2 plan fits\n");
    if (!best.blocks) {
      EXPECT_GE(s.H * s.B, 1024 * 1000) << "a latency-bound shape without a plan";
      continue;
    }
    std::printf("tile %dx%d, %d slices, %d tiles a block, %.1f us a step (fused step %.1f us)\n", best.tile_h,
                best.tile_d, best.slices, best.tiles_per_block, best.predicted_us, best.predicted_fused_us);
    EXPECT_GT(best.predicted_us, 2 * 1.06) << "two grid barriers a step at least";
    // 256:100 is latency-bound: the model must see the win the kernel is for.
    if (s.H == 256) {
      EXPECT_TRUE(nn::persistent_predicted_faster(best)) << s.H << ":" << s.B;
    }
  }
}

// The plan's own choice on an H200's grid: at 256:100 the tile measured fastest there (32 rows x
// 52 inputs; persistent_plan.cu has the run) and a predicted gain, so --persistent auto runs it;
// at 512:800, where the persistent step measured slower than the fused step, no predicted gain.
TEST(PersistentPlan, AutoChoosesTheMeasuredTileAndOnlyWhereItGains) {
  const nn::PersistentPlan p256 = nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 0);
  ASSERT_GT(p256.blocks, 0);
  EXPECT_EQ(p256.tile_h, 32);
  EXPECT_EQ(p256.tile_d, 52);
  EXPECT_TRUE(nn::persistent_predicted_faster(p256));
  const nn::PersistentPlan p512 = nn::persistent_plan_with<float>(784, 512, 800, 2, 132, 0);
  EXPECT_FALSE(p512.blocks > 0 && nn::persistent_predicted_faster(p512));
}

TEST(PersistentProbe, WritesEveryPhaseOfEveryStep) {
  const std::string file = testing::TempDir() + "persistent_probe.txt";
  std::remove(file.c_str());
  Data d(48, 70, 10, 37, 16, 5);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan_with<float>(d.D, d.H, d.B, 2, 2, 16);
  ASSERT_GT(plan.blocks, 0);
  Outcome<float> probed, plain;
  {
    ScopedEnv f("NN_PERSISTENT_PROBE", file.c_str());
    ScopedEnv n("NN_PERSISTENT_PROBE_LAUNCHES", "1");
    probed = run_device<float>(d, P0, plan, {2, 1}, 0.5f, 1e-3f);  // the second launch is past the limit
  }
  plain = run_device<float>(d, P0, plan, {3}, 0.5f, 1e-3f);
  EXPECT_EQ(probed.P, plain.P);  // the probe changes nothing
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  std::string line, summary;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# persistent probe", 0) == 0) summary = line;
    else ++rows;
  }
  EXPECT_NE(summary.find("launch 1, variant 2, 2 steps, 2 blocks"), std::string::npos) << summary;
  for (const char* phase : {" A ", " barrier1 ", " B ", " barrier2 ", " C ", " step "})
    EXPECT_NE(summary.find(phase), std::string::npos) << phase << " in " << summary;
  EXPECT_EQ(rows, 2 * 2 * 5);  // steps x blocks x phases of the one probed launch
  std::remove(file.c_str());
}

}  // namespace
