// The step timeout's pieces (src/train/watchdog.h): the lines, the allowance, the thread's
// deadline with a test handler instead of ending the process, and the MPI call it names
// (comm::waiting_in) while a rank really waits in one. End to end, with a SIGSTOPped rank and
// the real exit: tests/cli/hung_rank.sh.
#include <gtest/gtest.h>

#include <atomic>
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
  for (int i = 0; i < 50 && !w.fired(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(w.fired());
  std::this_thread::sleep_for(300ms);  // no second line for the same deadline
  const auto got = lines.copy();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].find("the test's step did not complete within 0.2 s"), std::string::npos) << got[0];
}

TEST(Watchdog, ProgressAndDisarmKeepItQuiet) {
  Lines lines;
  Watchdog w(0.3, 0, "here", 6, lines.handler());
  for (int i = 0; i < 12; ++i) {  // 0.6 s of steps, each well within 0.3 s
    w.arm("step " + std::to_string(i), 0.3);
    std::this_thread::sleep_for(50ms);
  }
  w.disarm();
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(w.fired());
  EXPECT_TRUE(lines.copy().empty());
}

// At 2+ ranks: rank 0 waits in a barrier that the last rank reaches 1.5 s late; rank 0's
// watchdog (0.3 s) fires while it is inside the barrier and names it.
TEST(Watchdog, NamesTheCollectiveARankWaitsIn) {
  if (comm::size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  Lines lines;
  {
    Watchdog w(0.3, comm::rank(), "here", 6, lines.handler());
    if (comm::rank() == comm::size() - 1) std::this_thread::sleep_for(1500ms);
    else w.arm("the barrier step", 0.3);
    comm::barrier();
    w.disarm();
  }
  const auto got = lines.copy();
  if (comm::rank() == 0) {
    ASSERT_EQ(got.size(), 1u);
    EXPECT_NE(got[0].find("in MPI_Barrier for the ranks that have not reached it"), std::string::npos) << got[0];
  }
  EXPECT_EQ(comm::waiting_in().call, nullptr);  // nothing marked once the call returned
  comm::barrier();
}

}  // namespace
}  // namespace nn::train
