// The CPU model's building blocks: the sigmoid backward pass by row bands and by column blocks
// (src/model/cpu_kernels.h), bit for bit in any split; the vectorisable exp against std::exp; the
// BLAS thread count (src/model/cpu_threads.h): never more than the rank's cores, the environment
// first. Local to each rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/ref_net.h"
#include "schedule/rng.h"
#include "model/cpu_kernels.h"
#include "model/cpu_model.h"
#include "train/model_parallel.h"

namespace nn::model {
namespace {

// sigmoid' + db1 on a band of rows (the leading-dimension form, as CpuModel splits it over its
// threads) gives exactly the bits of the whole-matrix pass.
TEST(CpuModel, SigmoidBackwardByRowBandsChangesNoBit) {
  const int H = 200, b = 37;
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> A(std::size_t(H) * b), dA(A.size());
  for (float& v : A) v = u(gen);
  for (float& v : dA) v = u(gen) - 0.5f;
  std::vector<float> whole = dA, banded = dA, db_whole(H), db_banded(H);
  cpu::sigmoid_backward_rowsum(whole.data(), A.data(), H, b, db_whole.data());
  for (const auto& [lo, hi] : {std::pair{0, 70}, std::pair{70, 71}, std::pair{71, 200}})
    cpu::sigmoid_backward_rowsum(banded.data() + lo, A.data() + lo, hi - lo, H, b, db_banded.data() + lo);
  EXPECT_EQ(banded, whole);
  EXPECT_EQ(db_banded, db_whole);
}

// sigmoid' by blocks of columns (the model's form): any sharing of the blocks gives the same
// bits, db is the blocks' row sums added in block order, and it is the sum of dZ's rows.
TEST(CpuModel, SigmoidBackwardBlocksGiveTheSameBitsInAnySplit) {
  const int H = 200, b = 3 * cpu::kColumnBlock + 8, blocks = 4;  // the last block is short
  std::mt19937 gen(6);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> A(std::size_t(H) * b), dA(A.size());
  for (float& v : A) v = u(gen);
  for (float& v : dA) v = u(gen) - 0.5f;
  std::vector<float> whole = dA, shared = dA, pw(std::size_t(H) * blocks), ps(pw.size()), db(H), db_shared(H);
  cpu::sigmoid_backward_blocks(whole.data(), A.data(), H, b, 0, blocks, pw.data());
  for (const auto& [k0, k1] : {std::pair{2, 3}, std::pair{0, 2}, std::pair{3, 4}})  // any order, any sizes
    cpu::sigmoid_backward_blocks(shared.data(), A.data(), H, b, k0, k1, ps.data());
  EXPECT_EQ(shared, whole);
  EXPECT_EQ(ps, pw);
  cpu::sum_blocks(pw.data(), blocks, H, db.data());
  cpu::sum_blocks(ps.data(), blocks, H, db_shared.data());
  EXPECT_EQ(db_shared, db);
  for (int h = 0; h < H; ++h) {
    float want = pw[std::size_t(h)];
    for (int k = 1; k < blocks; ++k) want += pw[std::size_t(k) * H + h];
    ASSERT_EQ(db[std::size_t(h)], want) << "row " << h;  // block order, exactly
    double sum = 0;
    for (int j = 0; j < b; ++j) {
      const double a = A[std::size_t(j) * H + h], d = dA[std::size_t(j) * H + h];
      EXPECT_NEAR(whole[std::size_t(j) * H + h], d * a * (1 - a), 1e-7);
      sum += d * a * (1 - a);
    }
    EXPECT_NEAR(db[std::size_t(h)], sum, 1e-5) << "row " << h;
  }
  std::vector<float> none(H, 1.f);
  cpu::sum_blocks(pw.data(), 0, H, none.data());  // an empty slice: zeros
  EXPECT_EQ(none, std::vector<float>(H, 0.f));
}

TEST(CpuModel, VectorisableExpIsWithinAFewUlpOfStdExp) {
  // Every 997th float in [-87, -0] by bit pattern (about 10^6 of them, every binade).
  float worst = 0;
  const std::uint32_t lo = std::bit_cast<std::uint32_t>(-0.0f), hi = std::bit_cast<std::uint32_t>(-87.0f);
  for (std::uint32_t u = lo; u <= hi; u += 997) {
    const float x = std::bit_cast<float>(u);
    const float want = std::exp(x), got = cpu::exp_nonpos(x);
    worst = std::max(worst, std::abs(got - want) / (want * std::numeric_limits<float>::epsilon()));
  }
  EXPECT_LE(worst, 4.0f);
  EXPECT_EQ(cpu::exp_nonpos(0.0f), 1.0f);
  EXPECT_GT(cpu::exp_nonpos(-1000.0f), 0.0f);  // clamped at e^-87, never 0 or subnormal
  EXPECT_LT(cpu::exp_nonpos(-1000.0f), 2e-38f);
}

// What was asked against the room there is: the rank never runs more BLAS threads than the
// cores in its affinity mask, or than its share of the node's cores, and says why.
TEST(CpuModel, ThreadsNeverOutnumberTheRanksCores) {
  CpuThreads t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 1, 2, 1);  // plain mpirun -np 1: one core
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(t.asked, 2);
  EXPECT_EQ(t.room, 1);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=2, but 1 core in its affinity mask");
  t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 2, 2, 1);  // slurm/mpirun.sh: PE=2
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS");
  t = cpu_threads_from(4, "SLURM_CPUS_PER_TASK", 8, 8, 4);  // --bind-to none, 4 ranks x 4 on 8 cores
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "SLURM_CPUS_PER_TASK=4, but 8 cores on the node for 4 ranks");
  t = cpu_threads_from(3, "OMP_NUM_THREADS", 8, 64, 2);  // fewer asked than there is room for
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.room, 8);
  t = cpu_threads_from(0, "", 2, 2, 1);  // nothing asked: all the room
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.asked, 0);
  EXPECT_EQ(t.source, "2 cores / 1 ranks on the node, 2 in this rank's affinity mask");
  EXPECT_EQ(cpu_threads_from(0, "", 1, 2, 4).threads, 1);  // 4 ranks on 2 cores: at least 1
  t = cpu_threads_from(2, "OPENBLAS_NUM_THREADS", 1, 2, 2);  // 2 ranks x 2 threads on 2 cores
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(t.node_cores, 2);
  EXPECT_EQ(t.source, "OPENBLAS_NUM_THREADS=2, but 2 cores on the node for 2 ranks");
  EXPECT_EQ(cpu_threads_from(5, "OMP_NUM_THREADS", 0, 0, 0).threads, 1);  // nothing known: 1
  // OMP_PROC_BIND: the room is the OpenMP places' CPUs (cpu_threads_for), named as such.
  t = cpu_threads_from(0, "", 2, 2, 1, "OpenMP places (OMP_PROC_BIND)");
  EXPECT_EQ(t.threads, 2);
  EXPECT_EQ(t.source, "2 cores / 1 ranks on the node, 2 in this rank's OpenMP places (OMP_PROC_BIND)");
  EXPECT_EQ(cpu_threads_from(4, "OMP_NUM_THREADS", 1, 2, 1, "place").source, "OMP_NUM_THREADS=4, but 1 core in its place");
}

TEST(CpuModel, ThreadsComeFromTheEnvironmentFirst) {
  const char* names[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"};
  std::vector<std::string> saved;
  std::vector<bool> had;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    had.push_back(v != nullptr);
    saved.push_back(v ? v : "");
    unsetenv(n);
  }
  const CpuThreads def = cpu_threads_for(1, true);
  EXPECT_GE(def.threads, 1);
  EXPECT_NE(def.source.find("cores"), std::string::npos);
  EXPECT_LE(cpu_threads_for(1024, true).threads, def.threads);
  // What is asked (the threads used are at most the room: ThreadsNeverOutnumberTheRanksCores).
  setenv("SLURM_CPUS_PER_TASK", "3", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 3);
  EXPECT_EQ(cpu_threads_for(2, true).source.rfind("SLURM_CPUS_PER_TASK", 0), 0u);
  setenv("OMP_NUM_THREADS", "5", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 5);
  setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EQ(cpu_threads_for(2, true).asked, 2);
  EXPECT_EQ(cpu_threads_for(2, true).threads, std::min(2, cpu_threads_for(2, true).room));
  setenv("OPENBLAS_NUM_THREADS", "zero", 1);  // not a count: the next source decides
  EXPECT_EQ(cpu_threads_for(2, true).asked, 5);
  EXPECT_EQ(cpu_threads_for(2, true).source.rfind("OMP_NUM_THREADS", 0), 0u);
  for (std::size_t i = 0; i < 3; ++i) {
    if (had[i]) setenv(names[i], saved[i].c_str(), 1);
    else unsetenv(names[i]);
  }
}

}  // namespace
}  // namespace nn::model
