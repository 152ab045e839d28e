// nn_train: the trainer's entry point. Until the data-parallel GPU trainer lands it
// trains the CPU reference network (Armadillo) on rank 0 and reports test precision.
// Run: `make run`, or build/cpu/bin/nn_train --data data/current [--help].
#include <CLI/CLI.hpp>
#include <armadillo>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "comm/comm.h"
#include "common/check.h"
#include "data/idx.h"
#include "nn_real.h"
#include "reference/ref_net.h"

namespace {

struct Options {
  std::string data = "data/current";
  // Defaults: H=256, B=100, 10 epochs, lr=0.5 reach ~0.86 on Fashion-MNIST in ~15 s.
  nn::ref::TrainConfig train{.hidden = 256, .batch = 100, .epochs = 10, .lr = 0.5, .reg = 1e-4};
  std::size_t train_size = 0;  // 0 = all
  std::size_t test_size = 0;   // 0 = all
  double val_fraction = 0.1;
};

// Rejects values CLI11 cannot check by type alone; the same on every rank.
void validate(const Options& o) {
  auto bad = [](const std::string& m) { throw nn::UserError(m); };
  if (o.train.hidden < 1) bad("--hidden must be at least 1");
  if (o.train.batch < 1) bad("--batch must be at least 1");
  if (o.train.epochs < 0) bad("--epochs must not be negative");
  if (!(o.train.lr > 0) || !std::isfinite(o.train.lr)) bad("--lr must be a positive number");
  if (!(o.train.reg >= 0) || !std::isfinite(o.train.reg)) bad("--reg must be a number >= 0");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) bad("--val-fraction must be in [0, 1)");
}

arma::Mat<nn_real> to_matrix(const nn::data::Images& im, std::size_t first, std::size_t count) {
  arma::Mat<nn_real> X(im.dim(), count);
  nn::data::normalize(im.pixels.data() + first * im.dim(), im.dim() * count, X.memptr());
  return X;
}

double accuracy(const nn::ref::Params<nn_real>& p, const nn::data::Images& im,
                const std::vector<std::uint8_t>& labels, std::size_t first, std::size_t count) {
  if (count == 0) return 0.0;
  return nn::ref::accuracy(p, to_matrix(im, first, count), labels, first);
}

int run(const Options& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::printf("nn_train: CPU reference trainer (Armadillo, %s); the GPU trainer is not built yet\n",
              sizeof(nn_real) == 8 ? "double" : "float");
  std::error_code ec;
  const auto data_dir = std::filesystem::canonical(o.data, ec);
  if (ec) throw nn::UserError(o.data + ": data directory not found (run `make data`)");
  nn::data::Dataset train = nn::data::load_split(data_dir.string(), "train", kInputDim);
  nn::data::Dataset test = nn::data::load_split(data_dir.string(), "t10k", kInputDim);

  std::size_t n = train.size();
  if (o.train_size > 0) {
    if (o.train_size > n)
      throw nn::UserError("--train-size " + std::to_string(o.train_size) + " exceeds the " +
                          std::to_string(n) + " training images");
    n = o.train_size;
  }
  const auto n_val = static_cast<std::size_t>(static_cast<double>(n) * o.val_fraction);
  const std::size_t n_fit = n - n_val;
  std::size_t n_test = test.size();
  if (o.test_size > 0) n_test = std::min(n_test, o.test_size);
  if (n_fit == 0) throw nn::UserError("no training images left after the validation hold-out");
  if (o.train.batch > n_fit)
    throw nn::UserError("--batch " + std::to_string(o.train.batch) + " exceeds the " +
                        std::to_string(n_fit) + " training images");

  std::printf("data: %s (train %zu, validation %zu, test %zu images)\n", data_dir.c_str(), n_fit,
              n_val, n_test);
  std::printf("config: hidden=%d batch=%zu epochs=%d lr=%g reg=%g seed=%llu shuffle=%s\n",
              o.train.hidden, o.train.batch, o.train.epochs, o.train.lr, o.train.reg,
              static_cast<unsigned long long>(o.train.seed), o.train.shuffle ? "yes" : "no");

  // The validation set is the tail of the used training images; training sees the head.
  std::vector<std::uint8_t> fit_labels(train.labels.begin(), train.labels.begin() + n_fit);
  nn::ref::Params<nn_real> params;
  auto on_epoch = [&](const nn::ref::EpochStats& s, const nn::ref::Params<nn_real>& p) {
    const double val = n_val ? accuracy(p, train.images, train.labels, n_fit, n_val) : 0.0;
    std::printf("epoch %3d  loss %.5f  train acc %.4f  val acc %.4f  %.2f s  %.0f images/s\n",
                s.epoch + 1, s.loss, s.train_acc, val, s.seconds,
                static_cast<double>(n_fit) / std::max(s.seconds, 1e-9));
    std::fflush(stdout);
  };
  params = nn::ref::train<nn_real>(train.images.pixels.data(), train.images.dim(), fit_labels,
                                   o.train, on_epoch);
  const double prec = accuracy(params, test.images, test.labels, 0, n_test);
  std::printf("test precision: %.4f\n", prec);
  std::printf("total time: %.2f s\n", std::chrono::duration<double>(clock::now() - t0).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nn::comm::Session mpi(&argc, &argv);
  const bool root = nn::comm::rank() == 0;
  Options o;
  CLI::App app{"nn_train: two-layer MNIST network (784-H-10), data-parallel CUDA+MPI trainer"};
  app.option_defaults()->always_capture_default();
  app.add_option("--data", o.data, "directory with the IDX files (raw or .gz)");
  app.add_option("--hidden", o.train.hidden, "hidden units H");
  app.add_option("--batch", o.train.batch, "global batch size B");
  app.add_option("--epochs", o.train.epochs, "number of epochs");
  app.add_option("--lr", o.train.lr, "learning rate");
  app.add_option("--reg", o.train.reg, "L2 regularisation strength");
  app.add_option("--train-size", o.train_size, "use the first N training images (0 = all)");
  app.add_option("--test-size", o.test_size, "use the first N test images (0 = all)");
  app.add_option("--val-fraction", o.val_fraction, "fraction of training images held out");
  app.add_option("--seed", o.train.seed, "seed for initial weights and shuffling");
  bool no_shuffle = false;
  app.add_flag("--no-shuffle", no_shuffle, "batches in file order");
  try {
    app.parse(argc, argv);
    o.train.shuffle = !no_shuffle;
    validate(o);
  } catch (const CLI::CallForHelp& e) {
    if (root) std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    if (root) std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  } catch (const nn::UserError& e) {
    if (root) std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }

  try {
    // The reference runs on rank 0; the other ranks wait for its verdict.
    int rc = 0;
    std::string err;
    if (root) {
      try {
        rc = run(o);
      } catch (const nn::UserError& e) {
        err = e.what();
      } catch (const nn::data::IdxError& e) {
        err = e.what();
      }
    }
    err = nn::comm::broadcast(err);
    if (!err.empty()) {
      if (root) std::fprintf(stderr, "error: %s\n", err.c_str());
      return 1;
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error on rank %d: %s\n", nn::comm::rank(), e.what());
    nn::comm::abort_job(3);
  }
}
