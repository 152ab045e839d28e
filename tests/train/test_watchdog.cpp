// The step timeout's pieces (src/train/watchdog.h): the lines, the allowance, the thread's
// deadline with a test handler instead of ending the process, and the MPI call it names
// (comm::waiting_in) while a rank really waits in one. End to end, with a SIGSTOPped rank and
// the real exit: tests/cli/hung_rank.sh.
// The timed tests hold on a busy host (docs/testing.md#timing-sensitive-checks): they wait
// for an event with a generous cap instead of a fixed window, and where a test needs a
// thread to run on time (a step within its allowance, a rank late enough), it measures
// whether it did, and runs again with a wider margin when the host did not let it.
#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "train/watchdog.h"

namespace nn::train {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Collects the lines a Watchdog hands to its handler.
struct Lines {
  std::mutex mu;
  std::vector<std::string> got;
  Watchdog::Handler handler() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(l);
    };
  }
  std::vector<std::string> copy() {
    std::lock_guard<std::mutex> lock(mu);
    return got;
  }
};

TEST(Watchdog, LinesNameTheStepTheCallAndThePeer) {
  comm::Waiting none;
  const std::string a = timeout_line(2, "node-b", "step 7 (epoch 1, batch 7/9)", 30, none, 6);
  EXPECT_NE(a.find("rank 2 (node-b): step 7 (epoch 1, batch 7/9) did not complete within 30 s"), std::string::npos) << a;
  EXPECT_NE(a.find("not in an MPI call"), std::string::npos) << a;
  EXPECT_NE(a.find("exit code 6"), std::string::npos) << a;
  comm::Waiting coll{"MPI_Allreduce", -1, 29.5};
  const std::string b = timeout_line(0, "node-a", "step 7", 30, coll, 6);
  EXPECT_NE(b.find("waited 30 s in MPI_Allreduce for the ranks that have not reached it"), std::string::npos) << b;
  comm::Waiting p2p{"MPI_Recv", 3, 2.25};
  const std::string c = timeout_line(0, "node-a", "step 7", 2.5, p2p, 6);
  EXPECT_NE(c.find("within 2.5 s"), std::string::npos) << c;
  EXPECT_NE(c.find("waited 2.2 s in MPI_Recv for rank 3, which has not answered"), std::string::npos) << c;
  EXPECT_NE(frozen_line(1, "node-b", 9.04).find("rank 1 (node-b) did not run at all for 9.0 s"), std::string::npos);
}

TEST(Watchdog, SetupAllowanceIsFourStepsAndAtLeastTwoMinutes) {
  EXPECT_EQ(setup_allowance(5), 120);
  EXPECT_EQ(setup_allowance(300), 1200);
}

TEST(Watchdog, FiresOncePastTheDeadline) {
  Lines lines;
  Watchdog w(0.2, 0, "here", 6, lines.handler());
  w.arm("the test's step", 0.2);
  // The thread looks every 0.1 s; a busy host may let it look later: wait up to 60 s.
  const auto t0 = Clock::now();
  while (!w.fired() && seconds_since(t0) < 60) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(w.fired()) << "no timeout line " << seconds_since(t0) << " s after a 0.2 s deadline";
  std::this_thread::sleep_for(300ms);  // no second line for the same deadline
  // (A host that starved the watchdog's thread for 2 s would add a "did not run at all" line
  // first: that line is right there, so only the timeout lines are counted.)
  std::vector<std::string> got;
  for (const auto& l : lines.copy())
    if (l.find("did not run at all") == std::string::npos) got.push_back(l);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].find("the test's step did not complete within 0.2 s"), std::string::npos) << got[0];
}

// Steps of 50 ms, each re-arming a 0.3 s allowance, for twice the allowance in all: no line.
// A busy host may hold this thread between two marks for longer than the allowance (a real
// late step, which must fire): the test measures each gap and, when one came within 0.1 s of
// the allowance, runs again with an allowance twice as long (up to 4.8 s).
TEST(Watchdog, ProgressAndDisarmKeepItQuiet) {
  for (double allowance = 0.3;; allowance *= 2) {
    Lines lines;
    Watchdog w(allowance, 0, "here", 6, lines.handler());
    double longest = 0;
    auto last = Clock::now();
    const int steps = int(2 * allowance / 0.05);
    for (int i = 0; i < steps; ++i) {
      w.arm("step " + std::to_string(i), allowance);
      std::this_thread::sleep_for(50ms);
      longest = std::max(longest, seconds_since(last));
      last = Clock::now();
    }
    w.disarm();
    const bool on_time = longest < allowance - 0.1;
    if (!on_time && allowance < 4) continue;  // the host, not the watchdog: again, wider
    ASSERT_TRUE(on_time) << "this thread was held " << longest << " s between two marks even with a "
                         << allowance << " s allowance";
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(w.fired()) << "allowance " << allowance << " s, longest step " << longest << " s";
    EXPECT_TRUE(lines.copy().empty());
    return;
  }
}

// At 2+ ranks: rank 0 waits in a barrier that the last rank reaches 1.5 s late; rank 0's
// watchdog (0.3 s) fires while it is inside the barrier and names it. The lateness is what
// rank 0 measures: when a busy host let it reach the barrier so late that it waited there
// less than the allowance plus 0.7 s (the thread looks every 0.1 s), no line is due, and every
// rank runs the case again with the last rank twice as late (up to 12 s).
TEST(Watchdog, NamesTheCollectiveARankWaitsIn) {
  if (comm::size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const double allowance = 0.3;
  for (double late = 1.5;; late *= 2) {
    comm::barrier();
    Lines lines;
    double waited = 0;
    {
      Watchdog w(allowance, comm::rank(), "here", 6, lines.handler());
      if (comm::rank() == comm::size() - 1) {
        std::this_thread::sleep_for(std::chrono::duration<double>(late));
      } else {
        w.arm("the barrier step", allowance);
      }
      const auto t0 = Clock::now();
      comm::barrier();
      waited = seconds_since(t0);
      w.disarm();
    }
    const bool long_enough = comm::rank() != 0 || waited >= allowance + 0.7;
    if (!comm::all_ok(long_enough) && late < 12) continue;  // rank 0 was late itself: again
    const auto got = lines.copy();
    if (comm::rank() == 0) {  // EXPECT, not ASSERT: every rank must reach the barrier below
      EXPECT_GE(waited, allowance + 0.7) << "rank 0 never waited long in the barrier, even with the last rank "
                                         << late << " s late";
      EXPECT_EQ(got.size(), 1u) << "rank 0 waited " << waited << " s in the barrier";
      if (!got.empty()) {
        EXPECT_NE(got[0].find("in MPI_Barrier for the ranks that have not reached it"), std::string::npos) << got[0];
      }
    }
    EXPECT_EQ(comm::waiting_in().call, nullptr);  // nothing marked once the call returned
    comm::barrier();
    return;
  }
}

}  // namespace
}  // namespace nn::train
