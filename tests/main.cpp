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

// The tests this rank ran, in order, and how each ended here.
struct Outcomes {
  std::vector<int> failed, skipped;
  std::vector<std::string> names;
};

Outcomes outcomes() {
  Outcomes o;
  auto* ut = testing::UnitTest::GetInstance();
  for (int s = 0; s < ut->total_test_suite_count(); ++s) {
    const auto* suite = ut->GetTestSuite(s);
    for (int t = 0; t < suite->total_test_count(); ++t) {
      const auto* info = suite->GetTestInfo(t);
      if (!info->should_run()) continue;
      o.failed.push_back(info->result()->Failed() ? 1 : 0);
      o.skipped.push_back(info->result()->Skipped() ? 1 : 0);
      o.names.push_back(std::string(suite->name()) + "." + info->name());
    }
  }
  return o;
}

// Guard against ranks that ran different test lists (a filter given to one rank only); collective.
bool same_lists(const Outcomes& o, int nranks) {
  std::vector<double> count{static_cast<double>(o.failed.size())};
  nn::comm::sum(count);
  return nn::comm::all_ok(count[0] == static_cast<double>(o.failed.size()) * nranks);
}

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};

// A test fails if it failed on any rank (collective); rank 0 names those that failed elsewhere only.
Tally tally(const Outcomes& o, int rank) {
  std::vector<int> any_failed = o.failed;
  nn::comm::any_of_each(any_failed);
  Tally t;
  for (std::size_t i = 0; i < o.failed.size(); ++i) {
    if (any_failed[i]) {
      ++t.failed;
      if (rank == 0 && !o.failed[i])
        std::printf("FAILED on another rank: %s\n", o.names[i].c_str());
    } else if (o.skipped[i]) {
      ++t.skipped;
    } else {
      ++t.passed;
    }
  }
  return t;
}

void print_summary(int nranks, const Tally& t) {
#ifdef SIM_EMULATOR
  std::printf("MPI ranks: %d, emulator schedule: %s\n", nranks, sim::describe_schedule().c_str());
#else
  std::printf("MPI ranks: %d\n", nranks);
#endif
  std::printf("tests: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
  std::fflush(stdout);
}

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
  const Outcomes o = outcomes();
  if (!same_lists(o, nranks)) {
    if (rank == 0) std::fprintf(stderr, "error: ranks ran different sets of tests\n");
    return 1;
  }
  const Tally t = tally(o, rank);
  const bool ok = nn::comm::all_ok(rc == 0) && t.failed == 0;
  if (rank == 0) print_summary(nranks, t);
  return ok ? 0 : 1;
}
