// --exact on (src/train/exact.h): at every rank count the suite runs, the trainer's weights equal,
// bit for bit, those of a serial driver on rank 0 that takes the same chunks one after another
// on one model and sums their gradients in the fixed-point format without MPI -- so they are the
// same at 1, 2, 3 and 4 ranks (tests/cli/exact.sh compares the counts' files directly, and a run
// resumed at another count). Both models (--device cpu and the emulated GPU), float and double,
// shuffled, a partial last batch, uneven splits, allreduce and ps. Also: the options it refuses,
// a non-finite gradient, and what --report says it sends. Collective, like test_train.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/ref_net.h"  // Armadillo before the emulator's CUDA macros (__noinline__)
#include "comm/comm.h"
#include "common/errors.h"
#include "exchange/fixed_point.h"
#include "model/cpu_model.h"
#include "model/device_model.h"
#include "schedule/init.h"
#include "synthetic.h"
#include "../temp_dir.h"
#include "train/exact.h"
#include "train/params.h"
#include "train/plan.h"
#include "train/trainer.h"

namespace nn::train {
namespace {

namespace fx = exchange::fixed;

Config exact_config(Device dev, Strategy st = Strategy::Allreduce) {
  // n = 60, 10% held out: n_fit = 54, B = 40: chunks of 32 and 8, then a last batch of 14 (one
  // chunk), so 2-4 ranks split every batch unevenly and some own no chunk of the last one.
  Config c = small_config(6, 40, 3);
  c.device = dev;
  c.strategy = st;
  c.exact = true;
  return c;
}

// The chunks' gradients of batch k, summed in the fixed-point format as one process: each
// segment's scale from every chunk, the words added chunk by chunk, rounded once.
template <class T>
std::vector<T> serial_sum(const std::vector<std::vector<T>>& grads, const model::ParamLayout& L, std::size_t chunks) {
  std::vector<T> out(L.total());
  for (const exchange::ExactSegment& s : exact_segments(L)) {
    int e = fx::kAllZero;
    for (const auto& g : grads) e = std::max(e, fx::max_exponent(g.data() + s.begin, s.count));
    const fx::Format<T> f = fx::make_format<T>(e, chunks);
    std::vector<std::uint64_t> words(s.count * fx::Format<T>::words, 0);
    for (const auto& g : grads) EXPECT_EQ(fx::accumulate(g.data() + s.begin, s.count, f, words.data()), 0u);
    EXPECT_EQ(fx::round_back(words.data(), s.count, f, out.data() + s.begin), 0u);
  }
  return out;
}

// The whole training as one process: every chunk of every batch on one model, in slot order.
template <class T, class Model>
std::vector<double> serial_exact(const Config& cfg, const HostData& d) {
  const int D = kInputDim, H = cfg.hidden, C = kNumClasses;
  const std::size_t n_fit = d.train.size() - std::size_t(double(d.train.size()) * cfg.val_fraction);
  const schedule::ExactPlan plan = schedule::make_exact_plan(n_fit, cfg.batch, 1, cfg.seed, cfg.shuffle);
  const model::ParamLayout L{D, H, C};
  const auto make = [&] {
    if constexpr (Model::kOnHost) return Model(D, H, C, int(plan.c), model::resolved_cpu_gemm(cfg.cpu_gemm, std::is_same_v<T, double>));
    else return Model(D, H, C, int(plan.c), cfg.gemm);
  };
  Model m = make();
  if constexpr (Model::kOnHost) model::set_gemm_threads(1);
  else m.enable_fused(true);  // as the trainer's --gemm 4 (graphs stay off: they must not matter)
  std::vector<std::uint8_t> img, lab;
  for (const std::uint32_t i : schedule::shard_indices(plan, 0)) {
    img.insert(img.end(), d.train.images.begin() + std::ptrdiff_t(i) * D, d.train.images.begin() + std::ptrdiff_t(i + 1) * D);
    lab.push_back(d.train.labels[i]);
  }
  m.set_train_data(typename Model::Images(img.data(), lab.data(), lab.size(), D));
  const schedule::InitParams ip = schedule::init_params(D, H, C, cfg.seed);
  const std::vector<double> init = pack(ip.W1, ip.b1, ip.W2, ip.b2);
  m.set_params(std::vector<T>(init.begin(), init.end()));
  for (int e = 0; e < cfg.epochs; ++e) {
    const ExactEpoch ep = exact_epoch(plan, 0, e);
    m.set_order(ep.order);
    for (std::size_t k = 0; k < plan.num_batches(); ++k) {
      std::vector<std::vector<T>> grads;
      for (const ChunkAt& c : ep.batches[k]) {
        m.forward_backward(c.offset, c.count, T(1) / T(plan.batch_count(k)), false, T(0));
        grads.push_back(m.get_grads());
      }
      const std::vector<T> total = serial_sum(grads, L, plan.chunk_slots(k));
      m.upload_grads(total.data());
      m.add_l2(T(cfg.reg));
      m.sgd_step(T(cfg.lr));
      if constexpr (!Model::kOnHost) m.synchronize();  // the upload reads `total` until it is done
    }
  }
  const std::vector<T> p = m.get_params();
  return {p.begin(), p.end()};
}

template <class T>
void expect_serial_bits(Device dev, Strategy st) {
  SCOPED_TRACE(std::string(device_name(dev)) + " " + strategy_name(st) + (std::is_same_v<T, double> ? " double" : " float"));
  const Config c = exact_config(dev, st);
  const HostData d = make_data(60, 20);
  const TrainResult r = train_on<T>(c, d, nullptr);
  expect_verified<T>(r);
  expect_ranks_agree(r.params);
  if (comm::rank() != 0) return;
  const std::vector<double> want = dev == Device::Cpu ? serial_exact<T, model::CpuModel<T>>(c, d)
                                                      : serial_exact<T, model::DeviceModel<T>>(c, d);
  EXPECT_TRUE(flat(r.params) == want) << "the trainer's weights at " << comm::size()
                                      << " ranks differ from the serial chunked computation's";
}

TEST(Exact, WeightsAreTheSerialChunkedComputationsOnTheHost) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) expect_serial_bits<float>(Device::Cpu, st);
  expect_serial_bits<double>(Device::Cpu, Strategy::Allreduce);
}

TEST(Exact, WeightsAreTheSerialChunkedComputationsOnTheDevice) {
  for (Strategy st : {Strategy::Allreduce, Strategy::ParamServer}) expect_serial_bits<float>(Device::Gpu, st);
  expect_serial_bits<double>(Device::Gpu, Strategy::Allreduce);
}

TEST(Exact, OptionsThatDependOnTheRankCountAreRefused) {
  for (auto set : {+[](Config& c) { c.strategy = Strategy::Model; }, +[](Config& c) { c.persistent = Persistent::On; },
                   +[](Config& c) { c.node_shared = NodeShared::On; }}) {
    Config c = exact_config(Device::Cpu);
    set(c);
    EXPECT_THROW(validate(c), UserError);
    c.exact = false;
    if (c.persistent != Persistent::On) {
      EXPECT_NO_THROW(validate(c));
    }
  }
}

TEST(Exact, NonFiniteGradientStopsTheRunLikeANonFiniteLoss) {
  for (Device dev : {Device::Cpu, Device::Gpu}) {
    Config c = exact_config(dev);
    c.batch = 7;  // many steps: lr 1e6 overflows the weights within the run
    c.verify = false;
    c.lr = 1e6;
    EXPECT_THROW(train_on<float>(c, make_data(60, 20), nullptr), Diverged) << device_name(dev);
  }
}

TEST(Exact, ReportCountsTheFixedPointWordsSent) {
  nn::test::TempDir tmp("nn_exact_report");
  const std::string dir = comm::broadcast(comm::rank() == 0 ? tmp.str() : std::string());
  ASSERT_FALSE(dir.empty());
  Config c = exact_config(Device::Cpu);
  c.verify = false;
  c.report = dir + "/r.json";
  train_on<float>(c, make_data(60, 20), nullptr);
  if (comm::rank() != 0) return;
  const nlohmann::json r = nlohmann::json::parse(slurp(c.report));
  const std::size_t values = std::size_t(c.hidden) * (kInputDim + 1) + kNumClasses * (c.hidden + 1);
  EXPECT_EQ(r["exact"], true);
  // Two 8-byte words a float, there and back (as --report counts a float gradient's bytes).
  EXPECT_EQ(r["per_batch"]["mpi_bytes"].get<double>(), double(2 * values * 2 * 8));
}

}  // namespace
}  // namespace nn::train
