// --comm nccl through the trainer (src/exchange/nccl.h) at every rank count make test runs: it
// matches the Armadillo reference in float and double, with overlap on and off and with
// --graph; at one and two ranks its weights are the host exchange's bit for bit (one addition a
// value); under --exact on it sums the same 64-bit words as MPI, so the weights are the host
// exchange's at any rank count; the options it cannot run with are refused in one line. On the
// emulator's NCCL (make test gives every rank a device of its own: SIM_DEVICES), or NVIDIA's on a
// GPU. Collective, like test_train.cpp.
#include <gtest/gtest.h>

#include <string>

#include "reference/ref_net.h"  // Armadillo before the emulator's CUDA macros (__noinline__)
#include <cuda_runtime.h>
#include "comm/comm.h"
#include "comm/nccl.h"
#include "synthetic.h"
#include "train/run.h"
#include "train/trainer.h"

namespace nn::train {
namespace {

// Why this job cannot run --comm nccl ("" when it can): no NCCL in the build, or fewer devices
// on a node than its ranks (then the trainer must refuse, which RefusedWhereItCannotRun checks).
std::string cannot_run() {
  if (const std::string why = comm::nccl_support(); !why.empty()) return why;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  return comm::all_ok(comm::local_size() <= count) ? "" : "ranks share a GPU";
}

template <class T>
TrainResult trained(Config c, Comm how, const HostData& d) {
  c.comm = how;
  return train_on<T>(c, d, nullptr);
}

template <class T>
void expect_like_the_host_exchange(Config c, const char* what) {
  SCOPED_TRACE(what);
  const HostData d = make_data(60, 20);
  const TrainResult nccl = trained<T>(c, Comm::Nccl, d);
  expect_verified<T>(nccl);
  expect_ranks_agree(nccl.params);
  c.verify = false;
  const TrainResult host = trained<T>(c, Comm::Host, d);
  if (comm::size() <= 2 || c.exact) {
    EXPECT_TRUE(flat(nccl.params) == flat(host.params)) << "--comm nccl's weights differ from --comm host's";
    EXPECT_EQ(nccl.test_precision, host.test_precision);
  }
}

TEST(NcclTrain, MatchesTheReferenceAndTheHostExchange) {
  if (const std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  Config c = small_config(6, 7, 2);
  expect_like_the_host_exchange<float>(c, "float, overlap");
  c.overlap = false;
  expect_like_the_host_exchange<float>(c, "float, no overlap");
  c = small_config(5, 9, 2);
  expect_like_the_host_exchange<double>(c, "double");
}

TEST(NcclTrain, GraphsAndTheSeparateKernels) {
  if (const std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  Config c = small_config(6, 7, 3);  // 3 epochs: graphs warm up, capture, then replay
  c.graph = Graphs::On;
  expect_like_the_host_exchange<float>(c, "--graph on");
  c.graph = Graphs::Off;
  c.fused = Fused::Off;
  c.gemm = 3;
  expect_like_the_host_exchange<float>(c, "--fused off --gemm 3");
}

TEST(NcclTrain, ExactSumsTheSameWordsAsMpi) {
  if (const std::string why = cannot_run(); !why.empty()) GTEST_SKIP() << why;
  Config c = small_config(6, 40, 2);
  c.exact = true;
  expect_like_the_host_exchange<float>(c, "--exact on");
}

// One line each, before anything trains.
void expect_refused(Config c, const std::string& words) {
  c.comm = Comm::Nccl;
  try {
    train_on<float>(c, make_data(60, 20), nullptr);
    ADD_FAILURE() << "accepted; expected: " << words;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(NcclTrain, RefusedWhereItCannotRun) {
  Config c = small_config(6, 7, 1);
  c.strategy = Strategy::ParamServer;
  expect_refused(c, comm::nccl_support().empty() ? "works with --strategy allreduce, not ps" : "no NCCL");
  c.strategy = Strategy::Model;
  expect_refused(c, comm::nccl_support().empty() ? "works with --strategy allreduce, not model" : "no NCCL");
  c.strategy = Strategy::Allreduce;
  c.device = Device::Cpu;
  expect_refused(c, "--comm nccl is for --device gpu");
  c.device = Device::Gpu;
  if (cannot_run() == "ranks share a GPU") expect_refused(c, "share the GPU");
}

}  // namespace
}  // namespace nn::train
