// The one test main: every MPI rank runs every test; a test fails if it fails on any
// rank; only rank 0 prints (other ranks print just their failures, tagged with the rank).
// Run: mpirun -np P build/cpu/bin/nn_tests  (make test does P = 1, 2, 3, 4).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.h"
#ifdef SIM_EMULATOR
#include "sim/sim_api.h"
#endif

namespace {

// On ranks other than 0: print failures only, so a failure on any rank is visible.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const testing::TestInfo& t) override {
    if (t.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  nn::comm::Session mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int rank = nn::comm::rank(), nranks = nn::comm::size();

  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }

  const int rc = RUN_ALL_TESTS();

  // Every rank ran the same tests in the same order: OR the per-test failure flags.
  auto* ut = testing::UnitTest::GetInstance();
  std::vector<int> failed, skipped;
  std::vector<std::string> names;
  for (int s = 0; s < ut->total_test_suite_count(); ++s) {
    const auto* suite = ut->GetTestSuite(s);
    for (int t = 0; t < suite->total_test_count(); ++t) {
      const auto* info = suite->GetTestInfo(t);
      if (!info->should_run()) continue;
      failed.push_back(info->result()->Failed() ? 1 : 0);
      skipped.push_back(info->result()->Skipped() ? 1 : 0);
      names.push_back(std::string(suite->name()) + "." + info->name());
    }
  }
  // Guard against ranks that ran different test lists (a filter given to one rank only).
  std::vector<double> count{static_cast<double>(failed.size())};
  nn::comm::sum(count);
  const bool same_lists = count[0] == static_cast<double>(failed.size()) * nranks;
  if (!nn::comm::all_ok(same_lists)) {
    if (rank == 0) std::fprintf(stderr, "error: ranks ran different sets of tests\n");
    return 1;
  }
  std::vector<int> any_failed = failed;
  nn::comm::any_of_each(any_failed);

  int n_failed = 0, n_skipped = 0, n_passed = 0;
  for (std::size_t i = 0; i < failed.size(); ++i) {
    if (any_failed[i]) {
      ++n_failed;
      if (rank == 0 && !failed[i])
        std::printf("FAILED on another rank: %s\n", names[i].c_str());
    } else if (skipped[i]) {
      ++n_skipped;
    } else {
      ++n_passed;
    }
  }
  const bool ok = nn::comm::all_ok(rc == 0) && n_failed == 0;
  if (rank == 0) {
#ifdef SIM_EMULATOR
    std::printf("MPI ranks: %d, emulator schedule: %s\n", nranks, sim::describe_schedule().c_str());
#else
    std::printf("MPI ranks: %d\n", nranks);
#endif
    std::printf("tests: %d passed, %d failed, %d skipped\n", n_passed, n_failed, n_skipped);
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
