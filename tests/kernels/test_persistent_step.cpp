// The persistent training step (kernels/ops/persistent_step*.cu), both kernels, against float64
// SGD computed from the definition (forward, softmax cross-entropy, backward, the L2 term, the
// step), over a run whose last batch is short; the same bits for any grid and for any split of
// the steps into launches (what a resumed run relies on); the epoch's loss, hits and step counts;
// a non-finite loss recorded at its step; bad arguments refused. Every emulator schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "persistent_test_util.h"
#include "schedules.h"

namespace {

using namespace nn::test::persist;

// The plan of a variant: at the device's grid (persistent_plan picks 2 where it fits), or with a
// given grid and tile width (variant 2: 32 rows a tile, so that the cut, and with it the sums'
// order, does not follow the grid).
template <class T>
nn::PersistentPlan plan_of(int variant, const Data& d, int blocks = 0, int tile_d = 0) {
  if (variant == 2 && blocks == 0) return nn::persistent_plan<T>(d.D, d.H, d.B);
  const nn::PersistentPlan p = nn::persistent_plan<T>(d.D, d.H, d.B);
  return nn::persistent_plan_with<T>(d.D, d.H, d.B, variant, blocks > 0 ? blocks : p.blocks,
                                     tile_d > 0 ? tile_d : (variant == 1 ? 32 : 12), variant == 2 ? 32 : 0);
}

template <class T>
void matches_reference(int variant, int D, double tol) {
  Data d(D, 70, 10, 37, 16, 11);  // 3 steps: 16, 16 and a short 5
  const std::vector<T> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = plan_of<T>(variant, d);
  ASSERT_GT(plan.blocks, 0);
  ASSERT_EQ(plan.variant, variant);
  ASSERT_EQ(plan.slices, (d.D + plan.tile_d - 1) / plan.tile_d);
  double loss = 0;
  unsigned hits = 0;
  Data ref = d;
  ref.P.assign(P0.begin(), P0.end());
  ref.reference(3, 0.5, 1e-3, &loss, &hits);
  nn::test::for_each_schedule([&] {
    const Outcome<T> r = run_device<T>(d, P0, plan, {3}, T(0.5), T(1e-3));
    double worst = 0;
    for (std::size_t i = 0; i < r.P.size(); ++i) worst = std::max(worst, std::abs(double(r.P[i]) - ref.P[i]));
    EXPECT_LT(worst, tol);
    EXPECT_NEAR(r.loss, loss, tol * 100 * (1 + std::abs(loss)));
    EXPECT_EQ(r.counts[0], hits);
    EXPECT_EQ(r.counts[1], 3u);  // steps
    EXPECT_EQ(r.counts[2], 0u);  // no non-finite loss
  });
}

// D = 50: the gathered slices are plain loads (no aligned copy); D = 48: asynchronous copies.
TEST(PersistentStep, MatchesFloat64SgdOverAShortLastBatch) { matches_reference<float>(2, 50, 2e-5); }
TEST(PersistentStep, AsyncGatherMatchesFloat64Sgd) { matches_reference<float>(2, 48, 2e-5); }
TEST(PersistentStep, DoubleMatchesFloat64Sgd) { matches_reference<double>(2, 48, 1e-12); }
TEST(PersistentStep, Variant1MatchesFloat64Sgd) { matches_reference<float>(1, 50, 2e-5); }
TEST(PersistentStep, Variant1DoubleMatchesFloat64Sgd) { matches_reference<double>(1, 50, 1e-12); }

void same_bits_for_any_grid_and_split(int variant, int tile_d, int other_tile_d) {
  Data d(48, 70, 10, 37, 16, 5);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan base = plan_of<float>(variant, d, 1, tile_d);
  ASSERT_GT(base.blocks, 0);
  const Outcome<float> one = run_device<float>(d, P0, base, {3}, 0.5f, 1e-3f);
  nn::test::for_each_schedule([&] {
    for (const int blocks : {2, 3}) {
      const Outcome<float> r = run_device<float>(d, P0, plan_of<float>(variant, d, blocks, tile_d), {3}, 0.5f, 1e-3f);
      EXPECT_EQ(r.P, one.P) << blocks << " blocks";
      EXPECT_EQ(r.loss, one.loss);
    }
    const Outcome<float> split = run_device<float>(d, P0, base, {1, 2}, 0.5f, 1e-3f);
    EXPECT_EQ(split.P, one.P) << "launches of 1 and 2 steps";
    EXPECT_EQ(split.loss, one.loss);
    EXPECT_EQ(split.counts[1], 3u);
  });
  // Another tile width changes the forward sums' grouping (other roundings), not the result.
  const Outcome<float> other = run_device<float>(d, P0, plan_of<float>(variant, d, 2, other_tile_d), {3}, 0.5f, 1e-3f);
  for (std::size_t i = 0; i < one.P.size(); ++i) EXPECT_NEAR(other.P[i], one.P[i], 1e-5) << i;
}
TEST(PersistentStep, SameBitsForAnyGridTileAndSplitIntoLaunches) { same_bits_for_any_grid_and_split(2, 12, 16); }
TEST(PersistentStep, Variant1SameBitsForAnyGridAndSplit) { same_bits_for_any_grid_and_split(1, 32, 12); }

// Both kernels compute the same SGD (other summation orders: within rounding).
TEST(PersistentStep, BothVariantsAgree) {
  Data d(48, 300, 10, 40, 20, 7);  // H > 256: phase B's threads hold two hidden units
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const Outcome<float> v1 = run_device<float>(d, P0, plan_of<float>(1, d, 2, 16), {2}, 0.5f, 1e-3f);
  const Outcome<float> v2 = run_device<float>(d, P0, plan_of<float>(2, d, 2, 16), {2}, 0.5f, 1e-3f);
  double worst = 0;
  for (std::size_t i = 0; i < v1.P.size(); ++i) worst = std::max(worst, std::abs(double(v1.P[i]) - v2.P[i]));
  EXPECT_LT(worst, 2e-5);
  EXPECT_NEAR(v1.loss, v2.loss, 1e-4 * (1 + std::abs(v1.loss)));
  EXPECT_EQ(v1.counts[0], v2.counts[0]);
}

TEST(PersistentStep, NonFiniteLossRecordedAtItsStep) {
  for (const int variant : {1, 2}) {
    Data d(20, 30, 10, 24, 8, 3);
    const nn::PersistentPlan plan = plan_of<float>(variant, d, 0, variant == 1 ? 32 : 8);
    // A huge step sends the scores to infinity in the second step at the latest.
    std::vector<float> P0(d.P.begin(), d.P.end());
    P0[std::size_t(d.H) * d.D + d.H] = std::numeric_limits<float>::infinity();  // W2(0, 0)
    const Outcome<float> r = run_device<float>(d, P0, plan, {3}, 0.5f, 0.0f);
    EXPECT_EQ(r.counts[1], 3u) << "variant " << variant;
    EXPECT_EQ(r.counts[2], 1u) << "variant " << variant;  // the first step's loss is already not finite
    EXPECT_FALSE(std::isfinite(r.loss)) << "variant " << variant;
  }
}

TEST(PersistentStep, BadArgumentsAreRefused) {
  Data d(20, 30, 10, 24, 8, 3);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan<float>(d.D, d.H, d.B);
  EXPECT_THROW(run_device<float>(d, P0, plan, {4}, 0.5f, 0.0f), std::invalid_argument);  // past the shard
  nn::PersistentPlan wrong = plan;
  wrong.tile_d = plan.tile_d == 8 ? 12 : 8;  // the shape's cut is not the plan's
  nn::PersistentShape<float> a;
  a.D = d.D, a.H = d.H, a.C = 11, a.B = d.B, a.steps = 1, a.n = unsigned(d.n), a.tile_d = plan.tile_d,
  a.slices = plan.slices;
  EXPECT_THROW(nn::persistent_steps<float>(plan, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);  // 11 classes
  a.C = d.C;
  EXPECT_THROW(nn::persistent_steps<float>(wrong, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
  // A variant-2 plan sized for a smaller batch: its shared memory would not hold this one.
  const nn::PersistentPlan small = nn::persistent_plan<float>(d.D, d.H, 4);
  ASSERT_EQ(small.variant, 2);
  a.B = 64, a.tile_d = small.tile_d, a.slices = small.slices;
  EXPECT_THROW(nn::persistent_steps<float>(small, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
