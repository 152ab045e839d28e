// Whole-trainer tests (src/train): the data-parallel GPU/emulator training matches the
// Armadillo reference on the same batches, in float and double, at every rank count.
// Collective: every rank runs each test in the same order (MPI-aware main, make test at 1-4 ranks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/ref_net.h"  // Armadillo before the emulator's CUDA macros (__noinline__)
#include "comm/comm.h"
#include "common/errors.h"
#include "schedule/rng.h"
#include "common/nn_real.h"
#include "gemm/gemm.h"
#include "io/checkpoint.h"
#include "model/device_model.h"
#include "train/trainer.h"
#include "app/exit_codes.h"
#include "app/run.h"
#include "train/verify.h"
#include "synthetic.h"

namespace nn::train {
namespace {

using app::kExitOk;
using app::kExitUserError;
using app::run_training;

using model::DeviceModel;
using model::DeviceImages;
using model::ParamLayout;

double rel_diff(const std::vector<double>& a, const arma::Mat<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// ---- the reference comparisons (the course's gtestTrain, in several shapes) ----

TEST(Train, SmallHiddenFloatMatchesReference) {
  // n_fit = 54 = 7 * 7 + 5: B = 7 is not a multiple of 2, 3 or 4 and the last batch is short.
  const auto r = train_on<float>(small_config(8, 7, 2), make_data(60, 20), nullptr);
  EXPECT_EQ(r.n_fit, 54u);
  EXPECT_EQ(r.n_val, 6u);
  EXPECT_EQ(r.epochs.size(), 2u);
  expect_verified<float>(r);
  expect_ranks_agree(r.params);
}

TEST(Train, Hidden64DoubleMatchesReference) {
  const auto r = train_on<double>(small_config(64, 10, 2), make_data(95, 20), nullptr);
  EXPECT_EQ(r.n_fit, 86u);
  expect_verified<double>(r);
  expect_ranks_agree(r.params);
}

TEST(Train, Hidden256SmallSetMatchesReference) {
  Config c = small_config(256, 16, 1);
  c.val_fraction = 0;
  const auto r = train_on<float>(c, make_data(40, 10), nullptr);
  EXPECT_EQ(r.n_val, 0u);
  expect_verified<float>(r);
}

TEST(Train, RanksWithEmptySlicesStillTakePart) {
  // B = 3: at 4 ranks rank 3 never holds an image and rank 2 none of the last batch (2
  // images); both must still add their (zero) gradients to every reduction.
  Config c = small_config(8, 3, 2);
  c.val_fraction = 0;
  const auto f = train_on<float>(c, make_data(20, 5), nullptr);
  expect_verified<float>(f);
  expect_ranks_agree(f.params);
  const auto d = train_on<double>(c, make_data(20, 5), nullptr);
  expect_verified<double>(d);
  expect_ranks_agree(d.params);
}

TEST(Train, FileOrderMatchesTheReferenceTrainerAtAnyRankCount) {
  // Independent of the --verify replay: without shuffling the batches are file order, so
  // nn::ref::train (the single-process reference trainer) must land on the same weights
  // whatever the number of ranks.
  Config c = small_config(16, 9, 2);
  c.shuffle = false;
  c.val_fraction = 0;
  c.verify = false;
  const HostData data = make_data(50, 5);
  const auto r = train_on<double>(c, data, nullptr);
  bool ok = true;
  if (comm::rank() == 0) {
    ref::TrainConfig tc;
    tc.hidden = c.hidden;
    tc.batch = c.batch;
    tc.epochs = c.epochs;
    tc.lr = c.lr;
    tc.reg = c.reg;
    tc.seed = c.seed;
    tc.shuffle = false;
    const auto P = ref::train<double>(data.train.images.data(), kInputDim, data.train.labels, tc, nullptr);
    const double eW1 = rel_diff(r.params.W1, P.W1), eW2 = rel_diff(r.params.W2, P.W2);
    const double eb1 = rel_diff(r.params.b1, P.b1), eb2 = rel_diff(r.params.b2, P.b2);
    const double tol = verify_tolerance(true);
    EXPECT_LE(eW1, tol);
    EXPECT_LE(eW2, tol);
    EXPECT_LE(eb1, tol);
    EXPECT_LE(eb2, tol);
    ok = eW1 <= tol && eW2 <= tol && eb1 <= tol && eb2 <= tol;
  }
  EXPECT_TRUE(comm::all_ok(ok));
}

TEST(Train, EveryGemmVariantMatchesReference) {
  Config c = small_config(8, 7, 1);
  c.val_fraction = 0;
  const HostData data = make_data(30, 5);
  for (int v = 0; v < kGemmVariants; ++v) {
    if (!gemm_variant_available(v)) continue;
    SCOPED_TRACE(std::string("GEMM variant ") + gemm_variant_name(v));
    c.gemm = v;
    expect_verified<float>(train_on<float>(c, data, nullptr));
  }
}

// Variant 5 with its wgmma kernel in the plan (NN_TF32_WGMMA=1: forward GEMM 1 and the dW1
// GEMM at H = 64 and 64 or more images a rank) trains as the reference does. The emulator and
// compute capability 9.0 have the kernel; elsewhere the plan keeps the mma.sync kernel. At one
// rank only: the emulated warpgroup MMA is slow (about 25 s a run at 2-4 ranks), and the
// exchange around it is every variant's (EveryGemmVariantMatchesReference).
TEST(Train, Gemm5OnWgmmaMatchesReference) {
  if (comm::size() > 1) GTEST_SKIP() << "the wgmma kernel's training runs at one rank";
  struct Env {
    Env() { setenv("NN_TF32_WGMMA", "1", 1); }
    ~Env() { unsetenv("NN_TF32_WGMMA"); }
  } env;
  if (gemm_tuning::tf32_wgmma_available()) {
    EXPECT_EQ(gemm_detail::tf32_plan(64, 64, 784), gemm_tuning::kTf32Wgmma);
  }
  Config c = small_config(64, 256, 1);
  c.val_fraction = 0;
  c.gemm = 5;
  expect_verified<float>(train_on<float>(c, make_data(256, 5), nullptr));  // one step
}

// ---- DeviceModel alone: one slice's gradient against nn::ref::backward (rank-local) ----

TEST(Train, DeviceModelGradientOfOneSlice) {
  const int D = kInputDim, H = 8, C = kNumClasses, b = 12;
  const double reg = 1e-2, inv_B = 1.0 / 30;  // the slice is part of a global batch of 30
  const HostSplit data = synth(b, 3);
  DeviceModel<double> m(D, H, C, b, gemm_default_variant());
  m.set_train_data(DeviceImages(data.images.data(), data.labels.data(), b, D));
  std::vector<std::uint32_t> order(b);
  for (int j = 0; j < b; ++j) order[j] = std::uint32_t(b - 1 - j);  // not the identity
  m.set_order(order);
  const ref::Params<double> P = ref::make_params<double>(D, H, C, 9);
  std::vector<double> packed(P.W1.begin(), P.W1.end());
  packed.insert(packed.end(), P.b1.begin(), P.b1.end());
  packed.insert(packed.end(), P.W2.begin(), P.W2.end());
  packed.insert(packed.end(), P.b2.begin(), P.b2.end());
  m.set_params(packed);
  const ParamLayout& L = m.layout();

  // Columns 2..9 of the order (offset 2, 8 images), with the regulariser.
  m.forward_backward(2, 8, inv_B, true, reg);
  arma::mat X(D, 8);
  std::vector<std::uint32_t> idx(order.begin() + 2, order.begin() + 10);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < D; ++i) X(i, j) = double(data.images[std::size_t(idx[j]) * D + i]) / 255.0;
  const arma::mat Y = ref::one_hot<double>(data.labels, std::span<const std::uint32_t>(idx), C);
  const ref::Grads<double> g = ref::backward(P, ref::forward(P, X), X, Y, reg, 30.0);
  const std::vector<double> G = m.get_grads();
  auto close = [&](std::size_t at, const arma::mat& ref_m) {
    double worst = 0;
    for (std::size_t i = 0; i < ref_m.n_elem; ++i)
      worst = std::max(worst, std::abs(G[at + i] - ref_m[i]) / (1e-12 + std::abs(ref_m[i])));
    return worst;
  };
  EXPECT_LT(close(L.W1(), g.W1), 1e-9);
  EXPECT_LT(close(L.b1(), g.b1), 1e-9);
  EXPECT_LT(close(L.W2(), g.W2), 1e-9);
  EXPECT_LT(close(L.b2(), g.b2), 1e-9);
  double loss = 0;
  std::uint64_t hits = 0;
  m.read_stats(loss, hits);
  EXPECT_NEAR(loss, ref::ce_sum(ref::forward(P, X), Y), 1e-9);
  EXPECT_LE(hits, 8u);

  // An empty slice: reg * W on the rank that carries the regulariser, zero elsewhere.
  m.forward_backward(0, 0, inv_B, true, reg);
  const std::vector<double> R = m.get_grads();
  for (std::size_t i = 0; i < R.size(); ++i) {
    const bool weight = i < L.b1() || (i >= L.W2() && i < L.b2());
    ASSERT_EQ(R[i], weight ? reg * packed[i] : 0.0) << i;
  }
  m.forward_backward(0, 0, inv_B, false, reg);
  const std::vector<double> Z = m.get_grads();
  EXPECT_TRUE(std::all_of(Z.begin(), Z.end(), [](double v) { return v == 0.0; }));
  EXPECT_THROW(m.forward_backward(10, 3, inv_B, false, reg), std::out_of_range);  // past the shard
}

// ---- the course's gtestProfile: a real run with a test set ----

TEST(Train, LearnsSeparableDataAndReportsTestPrecision) {
  Config c = small_config(32, 50, 3);
  c.verify = false;
  c.reg = 1e-4;
  const auto r = train_on<nn_real>(c, make_data(600, 200), nullptr);
  EXPECT_EQ(r.n_test, 200u);
  if (comm::rank() == 0)
    std::printf("    test precision %.3f, validation accuracy %.3f\n", r.test_precision, r.epochs.back().val_acc);
  EXPECT_GE(r.test_precision, 0.0);
  EXPECT_LE(r.test_precision, 1.0);
  EXPECT_GT(r.test_precision, 0.8);  // chance is 0.1; the classes are separable
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss);
  EXPECT_GT(r.epochs.back().val_acc, 0.8);
  for (const auto& e : r.epochs) {
    EXPECT_GT(e.seconds, 0.0);
    EXPECT_GT(e.images_per_s, 0.0);
    EXPECT_GE(e.train_acc, 0.0);
    EXPECT_LE(e.train_acc, 1.0);
  }
}

TEST(Train, SameSeedGivesBitIdenticalWeights) {
  Config c = small_config(8, 12, 2);
  c.verify = false;
  const HostData data = make_data(64, 8);
  const auto a = train_on<nn_real>(c, data, nullptr);
  const auto b = train_on<nn_real>(c, data, nullptr);
  EXPECT_EQ(a.params.W1, b.params.W1);
  EXPECT_EQ(a.params.b1, b.params.b1);
  EXPECT_EQ(a.params.W2, b.params.W2);
  EXPECT_EQ(a.params.b2, b.params.b2);
  c.seed = 6;
  const auto other = train_on<nn_real>(c, data, nullptr);
  EXPECT_NE(a.params.W1, other.params.W1);
}

// ---- checkpoints and errors ----

std::string shared_temp_dir() {
  std::string dir;
  if (comm::rank() == 0) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nn_train_test_XXXXXX").string();
    if (mkdtemp(tmpl.data())) dir = tmpl;
  }
  return comm::broadcast(dir);
}

TEST(Train, CheckpointRoundTrip) {
  const std::string dir = shared_temp_dir();
  ASSERT_FALSE(dir.empty());
  Config c = small_config(8, 10, 1);
  c.verify = false;
  c.save = dir + "/model.ckpt";
  const HostData data = make_data(40, 8);
  const auto a = train_on<nn_real>(c, data, nullptr);
  bool ok = true;
  if (comm::rank() == 0) {
    const Checkpoint ck = load_checkpoint(c.save);
    EXPECT_EQ(ck.H, 8);
    EXPECT_EQ(ck.is_double, sizeof(nn_real) == 8);
    ok = ck.W1 == a.params.W1 && ck.b1 == a.params.b1 && ck.W2 == a.params.W2 && ck.b2 == a.params.b2;
    EXPECT_TRUE(ok);
  }
  EXPECT_TRUE(comm::all_ok(ok));
  // Zero epochs from the checkpoint: the parameters come back unchanged on every rank.
  Config l = c;
  l.save.clear();
  l.load = dir + "/model.ckpt";
  l.epochs = 0;
  const auto b = train_on<nn_real>(l, data, nullptr);
  EXPECT_EQ(b.params.W1, a.params.W1);
  EXPECT_EQ(b.params.b2, a.params.b2);
  EXPECT_EQ(b.test_precision, a.test_precision);
  // One more epoch from the checkpoint = a two-epoch run? Only without shuffling would the
  // second epoch see the same batches; here just check a mismatch is refused everywhere.
  l.hidden = 16;
  EXPECT_THROW(train_on<nn_real>(l, data, nullptr), UserError);
  using Other = std::conditional_t<std::is_same_v<nn_real, float>, double, float>;
  l.hidden = 8;
  EXPECT_THROW(train_on<Other>(l, data, nullptr), UserError);  // precision mismatch
  comm::barrier();
  if (comm::rank() == 0) std::filesystem::remove_all(dir);
}

TEST(Train, UserErrorsReachEveryRank) {
  const HostData data = make_data(30, 5);
  Config c = small_config(8, 28, 1);  // n_fit = 27 < B
  c.verify = false;
  EXPECT_THROW(train_on<float>(c, data, nullptr), UserError);
  c.batch = 5;
  c.train_size = 31;  // more than there are
  EXPECT_THROW(train_on<float>(c, data, nullptr), UserError);
  c.train_size = 0;
  c.load = "/nonexistent/dir/model.ckpt";
  EXPECT_THROW(train_on<float>(c, data, nullptr), UserError);
  c.load.clear();
  c.save = "/nonexistent/dir/model.ckpt";
  EXPECT_THROW(train_on<float>(c, data, nullptr), UserError);
  c.save.clear();
  c.gemm = kGemmVariants;  // no such variant
  EXPECT_THROW(train_on<float>(c, data, nullptr), UserError);
}

// Raw IDX files, as in the MNIST distribution (big-endian header words).
void write_idx(const std::string& path, std::uint32_t magic, std::size_t count, bool images,
               const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  auto word = [&](std::uint32_t v) {
    const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    f.write(b, 4);
  };
  word(magic);
  word(std::uint32_t(count));
  if (images) {
    word(28);
    word(28);
  }
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

TEST(Train, RunTrainingFromIdxFiles) {
  const std::string dir = shared_temp_dir();
  ASSERT_FALSE(dir.empty());
  if (comm::rank() == 0) {
    const HostData d = make_data(120, 30);
    write_idx(dir + "/train-images-idx3-ubyte", 0x803, 120, true, d.train.images);
    write_idx(dir + "/train-labels-idx1-ubyte", 0x801, 120, false, d.train.labels);
    write_idx(dir + "/t10k-images-idx3-ubyte", 0x803, 30, true, d.test.images);
    write_idx(dir + "/t10k-labels-idx1-ubyte", 0x801, 30, false, d.test.labels);
  }
  Config c = small_config(16, 20, 2);
  c.data = dir;
  c.metrics = dir + "/metrics.csv";
  c.print_every = 2;
  const std::string log = dir + "/log.txt";
  std::FILE* out = comm::rank() == 0 ? std::fopen(log.c_str(), "w") : nullptr;
  const int rc = run_training(c, out);
  if (out) std::fclose(out);
  EXPECT_EQ(rc, kExitOk);
  if (comm::rank() == 0) {
    const std::string text = slurp(log);
    EXPECT_NE(text.find("MPI ranks: " + std::to_string(comm::size())), std::string::npos) << text;
    EXPECT_NE(text.find("epoch   2  loss"), std::string::npos) << text;
    EXPECT_NE(text.find("batch 2/"), std::string::npos) << text;
    EXPECT_NE(text.find("verify: relative error W1"), std::string::npos) << text;
    EXPECT_NE(text.find("test precision: "), std::string::npos) << text;
    EXPECT_NE(text.find("total time: "), std::string::npos) << text;
    const std::string csv = slurp(c.metrics);
    EXPECT_EQ(csv.rfind("epoch,loss,train_acc,val_acc,seconds,images_per_s\n1,", 0), 0u) << csv;
    EXPECT_NE(csv.find("\n2,"), std::string::npos) << csv;
  }
  // A missing directory: one error line on rank 0, the same non-zero code everywhere.
  c.data = dir + "/missing";
  EXPECT_EQ(run_training(c, nullptr), kExitUserError);
  comm::barrier();
  if (comm::rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nn::train
