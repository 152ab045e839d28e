// The fourth persistent kernel (kernels/ops/persistent_step4.cu: thread block clusters, distributed
// shared memory, one grid barrier a step) against float64 SGD computed from the definition, at 784
// inputs (slices of 98 over clusters of 8 blocks): 64 hidden units over a run whose last batch is
// short, and 256 units at batches of 100 (16 clusters, 128 blocks, on a GPU); the same bits for any
// split of the steps into launches; its plan and its refusals. The emulator's device gets 64 SMs
// (one a worker), and its hazard checks are on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/persistent_step4.h"
#include "persistent_test_util.h"
#include "schedules.h"

#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace {

using namespace nn::test::persist;

// Enough emulated SMs for a grid of 128 blocks (restored after the test); skipped on a GPU without
// clusters (compute capability below 9.0), where the plan refuses variant 4.
class PersistentCluster : public testing::Test {
 protected:
  void SetUp() override {
#ifdef SIM_EMULATOR
    saved_ = sim::workers();
    sim::set_workers(64);
#endif
    int major = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    if (major < 9) GTEST_SKIP() << "thread block clusters need compute capability 9.0";
  }
  void TearDown() override {
#ifdef SIM_EMULATOR
    sim::set_workers(saved_);
#endif
  }

 private:
  int saved_ = 0;
};

template <class T>
double worst_difference(const std::vector<T>& p, const std::vector<double>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) worst = std::max(worst, std::abs(double(p[i]) - ref[i]));
  return worst;
}

// steps of d's batches in the given launches with variant 4 (clusters of cl blocks of units hidden
// units), against float64 SGD; every emulator schedule where all_schedules.
template <class T>
void matches_reference(const Data& d, int cl, int units, const std::vector<int>& launches, double tol,
                       bool all_schedules) {
  const std::vector<T> P0(d.P.begin(), d.P.end());
  std::string why;
  const nn::PersistentPlan plan = nn::persistent_plan_v4<T>(d.D, d.H, d.B, cl, units, 0, &why);
  ASSERT_GT(plan.blocks, 0) << why;
  ASSERT_EQ(plan.variant, 4);
  EXPECT_EQ(plan.blocks, d.H / units * cl);
  EXPECT_EQ(plan.slices, cl);
  EXPECT_EQ(plan.tile_d, (d.D + cl - 1) / cl);
  int steps = 0;
  for (const int n : launches) steps += n;
  double loss = 0;
  unsigned hits = 0;
  Data ref = d;
  ref.reference(steps, 0.5, 1e-3, &loss, &hits);
  auto check = [&] {
    const Outcome<T> r = run_device<T>(d, P0, plan, launches, T(0.5), T(1e-3));
    EXPECT_LT(worst_difference(r.P, ref.P), tol);
    EXPECT_NEAR(r.loss, loss, tol * 100 * (1 + std::abs(loss)));
    EXPECT_EQ(r.counts[0], hits);
    EXPECT_EQ(r.counts[1], unsigned(steps));
    EXPECT_EQ(r.counts[2], 0u);  // no non-finite loss
  };
  if (all_schedules) nn::test::for_each_schedule(check);
  else check();
}

// 64 units in 4 clusters of 8 blocks; batches of 37, 37 and a short 11.
TEST_F(PersistentCluster, MatchesFloat64SgdOverAShortLastBatch) {
  matches_reference<float>(Data(784, 64, 10, 85, 37, 11), 8, 16, {3}, 2e-5, true);
}
TEST_F(PersistentCluster, DoubleMatchesFloat64Sgd) {
  matches_reference<double>(Data(784, 64, 10, 85, 37, 11), 8, 16, {3}, 1e-12, false);
}
// The trainer's latency-bound shape: 16 clusters x 8 blocks on a GPU. The emulator runs 8 clusters
// of 32 units: its 128 blocks x 256 fibers would take two memory maps a fiber stack, over Linux's
// default vm.max_map_count (65530) with another launch's stacks still mapped.
#ifdef SIM_EMULATOR
constexpr int kUnitsAt256 = 32;
#else
constexpr int kUnitsAt256 = 16;
#endif
TEST_F(PersistentCluster, MatchesFloat64SgdAt256UnitsAndBatchesOf100) {
  matches_reference<float>(Data(784, 256, 10, 200, 100, 5), 8, kUnitsAt256, {2}, 2e-5, false);
}
// Clusters of 4 blocks (slices of 196) and of 32 units: another cut, the same SGD.
TEST_F(PersistentCluster, OtherCutsMatchFloat64Sgd) {
  matches_reference<float>(Data(784, 64, 10, 85, 37, 11), 4, 32, {1, 2}, 2e-5, false);
}

// A resumed run relies on it: the same bits for any split of the steps into launches.
TEST_F(PersistentCluster, SameBitsForAnySplitIntoLaunches) {
  const Data d(784, 64, 10, 85, 37, 7);
  const std::vector<float> P0(d.P.begin(), d.P.end());
  const nn::PersistentPlan plan = nn::persistent_plan_v4<float>(d.D, d.H, d.B, 8, 16);
  ASSERT_GT(plan.blocks, 0);
  const Outcome<float> one = run_device<float>(d, P0, plan, {3}, 0.5f, 1e-3f);
  nn::test::for_each_schedule([&] {
    for (const std::vector<int>& split : {std::vector<int>{1, 2}, std::vector<int>{2, 1}, std::vector<int>{1, 1, 1}}) {
      const Outcome<float> r = run_device<float>(d, P0, plan, split, 0.5f, 1e-3f);
      EXPECT_EQ(r.P, one.P) << split.size() << " launches";
      EXPECT_EQ(r.loss, one.loss);
      EXPECT_EQ(r.counts[0], one.counts[0]);
      EXPECT_EQ(r.counts[1], 3u);
    }
  });
}

TEST_F(PersistentCluster, PlanGivesOneBlockAnSmAndRefusesInOneLine) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const nn::PersistentPlan p = nn::persistent_plan_v4<float>(784, 256, 100);
  ASSERT_GT(p.blocks, 0);
  EXPECT_EQ(p.cluster, 8);
  EXPECT_EQ(256 % p.units, 0);
  if (sms >= 8) {  // one block an SM, with the fewest units: on an H100's or H200's 132 SMs, 16
    EXPECT_LE(p.blocks, sms);
    EXPECT_GT(2 * p.blocks, sms) << "half the units a cluster would fit: " << p.units;
  }
  EXPECT_EQ(p.scratch, std::size_t(2) * (256 / p.units) * 100 * nn::persist4::kMaxC);
  EXPECT_FALSE(nn::persistent_predicted_faster(p));  // untimed: --persistent auto never runs it
  std::string why;
  // 16 units a cluster do not divide 70.
  EXPECT_EQ(nn::persistent_plan_v4<float>(784, 70, 16, 8, 16, 0, &why).blocks, 0);
  EXPECT_NE(why.find("NN_PERSISTENT_VARIANT=4"), std::string::npos) << why;
  why.clear();
  // A batch whose inputs alone exceed a block's shared memory.
  EXPECT_EQ(nn::persistent_plan_v4<float>(784, 64, 4000, 8, 0, 0, &why).blocks, 0);
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  // NN_PERSISTENT_VARIANT=4 gives variant 4, or blocks = 0 and the reason.
  const char* old = std::getenv("NN_PERSISTENT_VARIANT");
  const std::string saved = old ? old : "";
  setenv("NN_PERSISTENT_VARIANT", "4", 1);
  const nn::PersistentPlan forced = nn::persistent_plan<float>(784, 64, 37);
  const nn::PersistentPlan refused = nn::persistent_plan<float>(784, 64, 4000);
  if (old) setenv("NN_PERSISTENT_VARIANT", saved.c_str(), 1);
  else unsetenv("NN_PERSISTENT_VARIANT");
  EXPECT_EQ(forced.variant, 4);
  EXPECT_GT(forced.blocks, 0) << forced.why;
  EXPECT_EQ(refused.blocks, 0);
  EXPECT_NE(refused.why.find("NN_PERSISTENT_VARIANT=4"), std::string::npos);
}

}  // namespace
