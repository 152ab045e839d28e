// Variant 3 of the second persistent kernel (NN_PERSISTENT_VARIANT=3; persistent_step2_v3.h): the
// input slices gathered as 16-byte windows, converted four bytes at a time, the tail run in the
// next step's phase A. The same arithmetic as variant 2, so the same bits: checked at windows
// with every offset, tiles whose width is no multiple of 16, a short last batch, D with no
// aligned copy (variant 2's copies), a grid with blocks that hold no tile, double, every emulator
// schedule; its plan (the window's bytes, the automatic choice staying variant 2); the probe's
// marks inside phase A.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ops/persistent_step2.h"
#include "persistent_test_util.h"
#include "schedules.h"

namespace {

using namespace nn::test::persist;

struct Cut {
  int blocks, tile_d, tile_h;
};

// Variants 2 and 3 of the same cut and grid, over launches of 2 and 1 steps: every output equal.
template <class T>
void same_bits(const Data& d, const Cut& c, bool windowed) {
  const std::vector<T> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan p2 = nn::persistent_plan_with<T>(d.D, d.H, d.B, 2, c.blocks, c.tile_d, c.tile_h);
  const nn::PersistentPlan p3 = nn::persistent_plan_with<T>(d.D, d.H, d.B, 3, c.blocks, c.tile_d, c.tile_h);
  ASSERT_GT(p2.blocks, 0);
  ASSERT_GT(p3.blocks, 0);
  ASSERT_EQ(p2.variant, 2);
  ASSERT_EQ(p3.variant, 3);
  EXPECT_EQ(nn::persist2::windowed(p3), windowed);
  EXPECT_EQ(p3.tile_d, p2.tile_d);
  EXPECT_EQ(p3.slices, p2.slices);
  const int steps = (d.n + d.B - 1) / d.B;
  const Outcome<T> v2 = run_device<T>(d, P0, p2, {steps}, T(0.5), T(1e-3));
  const Outcome<T> v3 = run_device<T>(d, P0, p3, {steps - 1, 1}, T(0.5), T(1e-3));
  EXPECT_EQ(v3.P, v2.P) << c.blocks << " blocks, tile " << c.tile_h << "x" << c.tile_d;
  EXPECT_EQ(v3.loss, v2.loss);
  EXPECT_EQ(v3.counts[0], v2.counts[0]);
  EXPECT_EQ(v3.counts[1], unsigned(steps));
  EXPECT_EQ(v3.counts[2], 0u);
}

// 256 hidden units, batches of 100: phase A's forward keeps 4 of the 8 warps busy (16-row tiles),
// the other 4 run the previous step's tail.
TEST(PersistentStep3, SameBitsAsVariant2At256x100) {
  Data d(16, 256, 10, 250, 100, 3);  // 3 steps: 100, 100 and a short 50
  same_bits<float>(d, {1, 16, 16}, true);
}

// Windows at offsets 0, 4, 8 and 12 into the 16-byte rows (12- and 20-input tiles of 48-byte
// images, the last slice short), on 1, 2 and 3 blocks; 3 blocks over 2 tiles leave one without a
// tile (all its warps run the tail), every schedule.
TEST(PersistentStep3, SameBitsAsVariant2AtEveryWindowOffset) {
  Data d(48, 70, 10, 37, 16, 5);  // 16, 16 and a short 5
  nn::test::for_each_schedule([&] {
    for (const Cut c : {Cut{1, 12, 32}, Cut{2, 20, 32}, Cut{3, 20, 16}, Cut{3, 24, 128}})
      same_bits<float>(d, c, true);
  });
}

// D = 50: no 16-byte-aligned rows, so variant 2's plain loads (and a last slice of 2 inputs whose
// group of 4 is converted byte by byte).
TEST(PersistentStep3, SameBitsAsVariant2WithoutAlignedRows) {
  Data d(50, 70, 10, 37, 16, 11);
  for (const Cut c : {Cut{2, 12, 32}, Cut{1, 16, 16}}) same_bits<float>(d, c, false);
}

TEST(PersistentStep3, DoubleSameBitsAsVariant2) {
  Data d(48, 70, 10, 37, 16, 7);
  for (const Cut c : {Cut{2, 20, 32}, Cut{1, 16, 16}}) same_bits<double>(d, c, true);
}

// The plan: variant 3 only on request, with the same cut as variant 2 and a byte buffer row that
// holds the window (16 bytes more where the tile width is no multiple of 16).
TEST(PersistentStep3, PlanOnRequestWithTheWindowsBytes) {
  EXPECT_EQ(nn::persistent_plan<float>(48, 70, 16).variant, 2);
  const nn::PersistentPlan p2 = nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 52, 32);
  const nn::PersistentPlan p3 = nn::persistent_plan_with<float>(784, 256, 100, 3, 132, 52, 32);
  ASSERT_GT(p3.blocks, 0);
  EXPECT_EQ(p2.copy_bytes, 4);
  EXPECT_EQ(p3.copy_bytes, 16);
  EXPECT_EQ(p3.tiles, p2.tiles);
  EXPECT_EQ(p3.dz_cols, p2.dz_cols);
  EXPECT_EQ(nn::persist2::layout_of<float>(p3, 100).ldxb, 80);  // 64 + 16: the window around 52 bytes
  EXPECT_EQ(p3.smem, nn::persist2::layout_of<float>(p3, 100).total);
  EXPECT_GT(p3.smem, p2.smem);
  EXPECT_EQ(p3.predicted_us, p2.predicted_us);
  EXPECT_EQ(nn::persistent_plan_with<float>(784, 256, 100, 3, 132, 48, 32).smem,
            nn::persistent_plan_with<float>(784, 256, 100, 2, 132, 48, 32).smem);  // aligned: no more bytes
  EXPECT_EQ(nn::persistent_plan_with<float>(50, 70, 16, 3, 1, 12, 32).copy_bytes, 0);
  {
    ScopedEnv v("NN_PERSISTENT_VARIANT", "3");
    const nn::PersistentPlan p = nn::persistent_plan<float>(48, 70, 16);
    EXPECT_EQ(p.variant, 3);
    EXPECT_GT(p.blocks, 0);
    EXPECT_EQ(nn::persistent_plan<float>(784, 1100, 10).blocks, 0);  // forced where it does not fit
  }
}

// The probe of a variant-3 launch: the summary splits phase A, and per step and block the marks
// (wait, convert, gather, A, barrier1, B, barrier2, C) come in order.
TEST(PersistentProbe, Variant3MarksInsidePhaseAInOrder) {
  const std::string file = testing::TempDir() + "persistent_probe3.txt";
  std::remove(file.c_str());
  Data d(48, 70, 10, 37, 16, 5);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan_with<float>(d.D, d.H, d.B, 3, 2, 20, 32);
  ASSERT_GT(plan.blocks, 0);
  {
    ScopedEnv f("NN_PERSISTENT_PROBE", file.c_str());
    ScopedEnv n("NN_PERSISTENT_PROBE_LAUNCHES", "1000");  // the count is the process's: other tests probe too
    run_device<float>(d, P0, plan, {3}, 0.5f, 1e-3f);
  }
  std::ifstream in(file);
  ASSERT_TRUE(in) << file;
  const std::vector<std::string> names = {"wait", "convert", "gather", "A", "barrier1", "B", "barrier2", "C"};
  std::map<std::pair<int, int>, std::vector<std::pair<std::string, unsigned long long>>> marks;
  std::string line, summary;
  while (std::getline(in, line)) {
    if (line.rfind("# persistent probe", 0) == 0) {
      summary = line;
      continue;
    }
    std::istringstream row(line);
    std::string f[5];
    for (auto& x : f) std::getline(row, x, ',');
    marks[{std::stoi(f[1]), std::stoi(f[2])}].push_back({f[3], std::stoull(f[4])});
  }
  EXPECT_NE(summary.find(", variant 3, 3 steps, 2 blocks"), std::string::npos) << summary;
  for (const char* part : {" A ", " wait ", " convert ", " gather ", " forward ", " barrier1 ", " C ", " step "})
    EXPECT_NE(summary.find(part), std::string::npos) << part << " in " << summary;
  EXPECT_EQ(marks.size(), 3u * 2u);  // steps x blocks
  for (const auto& [key, row] : marks) {
    ASSERT_EQ(row.size(), names.size());
    for (std::size_t m = 0; m < row.size(); ++m) {
      EXPECT_EQ(row[m].first, names[m]);
      if (m > 0) {
        EXPECT_LE(row[m - 1].second, row[m].second) << "step " << key.first << ", block " << key.second;
      }
    }
  }
  std::remove(file.c_str());
}

}  // namespace
