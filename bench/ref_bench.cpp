// ref_bench: times the Armadillo CPU reference (nn::ref::train, src/reference/) alone, on the
// same data, split and hyper-parameters as nn_train, so that bench/peer_compare.sh can set it
// against a PyTorch CPU run of the same network (bench/peer_torch.py) at the same thread count.
// The reference's GEMMs go to the BLAS behind Armadillo (OpenBLAS on Debian): set
// OPENBLAS_NUM_THREADS / OMP_NUM_THREADS to fix its thread count; elementwise work is serial.
//
//   build/cpu/bin/ref_bench --data data/current --hidden 512 --batch 800 --epochs 3
//
// Prints one line per epoch, then machine-readable lines read by peer_compare.sh:
//   epoch_seconds: s1 s2 ...      (wall time of each epoch's batches, as nn_train's --metrics)
//   test precision: 0.xxxx
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "io/idx.h"
#include "reference/ref_net.h"

namespace {

struct Options {
  std::string data = "data/current";
  int hidden = 256;
  std::size_t batch = 100;
  int epochs = 10;
  double lr = 0.5, reg = 1e-4, val_fraction = 0.1;
  std::size_t train_size = 0, test_size = 0;
  std::uint64_t seed = 1;
  bool shuffle = true, dbl = false;
};

[[noreturn]] void usage(const char* argv0, const std::string& err = "") {
  if (!err.empty()) std::fprintf(stderr, "error: %s\n", err.c_str());
  std::fprintf(err.empty() ? stdout : stderr,
               "usage: %s [--data DIR] [--hidden H] [--batch B] [--epochs E] [--lr X] [--reg X]\n"
               "          [--train-size N] [--test-size N] [--val-fraction F] [--seed S] [--no-shuffle]\n"
               "          [--double]\n"
               "Trains the Armadillo reference (nn::ref::train) with nn_train's defaults and split\n"
               "(the first N training images, the last F of them held out) and prints the time of\n"
               "each epoch and the test precision. Threads: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS.\n",
               argv0);
  std::exit(err.empty() ? 0 : 2);
}

long long to_ll(const char* argv0, const std::string& opt, const std::string& v, long long lo) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo) usage(argv0, opt + ": bad value '" + v + "'");
  return x;
}
double to_d(const char* argv0, const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') usage(argv0, opt + ": bad value '" + v + "'");
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], a + " needs a value");
      return argv[++i];
    };
    if (a == "--data") o.data = value();
    else if (a == "--hidden") o.hidden = int(to_ll(argv[0], a, value(), 1));
    else if (a == "--batch") o.batch = std::size_t(to_ll(argv[0], a, value(), 1));
    else if (a == "--epochs") o.epochs = int(to_ll(argv[0], a, value(), 1));
    else if (a == "--lr") o.lr = to_d(argv[0], a, value());
    else if (a == "--reg") o.reg = to_d(argv[0], a, value());
    else if (a == "--train-size") o.train_size = std::size_t(to_ll(argv[0], a, value(), 0));
    else if (a == "--test-size") o.test_size = std::size_t(to_ll(argv[0], a, value(), 0));
    else if (a == "--val-fraction") {
      o.val_fraction = to_d(argv[0], a, value());
      if (!(o.val_fraction >= 0 && o.val_fraction < 1)) usage(argv[0], "--val-fraction must be in [0, 1)");
    } else if (a == "--seed") o.seed = std::uint64_t(to_ll(argv[0], a, value(), 0));
    else if (a == "--no-shuffle") o.shuffle = false;
    else if (a == "--double") o.dbl = true;
    else if (a == "--help" || a == "-h") usage(argv[0]);
    else usage(argv[0], "unknown option " + a);
  }
  return o;
}

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

template <class T>
int run(const Options& o) {
  const auto train = nn::io::load_split(o.data, "train");
  const auto test = nn::io::load_split(o.data, "t10k");
  const std::size_t D = train.images.dim();
  // nn_train's split (src/train/trainer.cpp): the first train_size images, the tail
  // floor(n * val_fraction) of them held out for validation, the rest fitted.
  const std::size_t n_used = o.train_size ? o.train_size : train.size();
  if (n_used > train.size()) {
    std::fprintf(stderr, "error: --train-size %zu exceeds the %zu training images\n", n_used, train.size());
    return 1;
  }
  const auto n_val = static_cast<std::size_t>(static_cast<double>(n_used) * o.val_fraction);
  const std::size_t n_fit = n_used - n_val;
  const std::size_t n_test = o.test_size ? std::min(o.test_size, test.size()) : test.size();
  if (o.batch > n_fit) {
    std::fprintf(stderr, "error: --batch %zu exceeds the %zu training images\n", o.batch, n_fit);
    return 1;
  }
  const std::vector<std::uint8_t> labels(train.labels.begin(), train.labels.begin() + std::ptrdiff_t(n_fit));

  std::printf("ref_bench: Armadillo reference (nn::ref::train), %s, OPENBLAS_NUM_THREADS=%s OMP_NUM_THREADS=%s\n",
              sizeof(T) == 8 ? "double" : "float", env_or("OPENBLAS_NUM_THREADS", "unset"),
              env_or("OMP_NUM_THREADS", "unset"));
  std::printf("data: %s (train %zu, validation %zu, test %zu images)\n", o.data.c_str(), n_fit, n_val, n_test);
  std::printf("config: hidden=%d batch=%zu epochs=%d lr=%g reg=%g seed=%llu shuffle=%s\n", o.hidden, o.batch,
              o.epochs, o.lr, o.reg, static_cast<unsigned long long>(o.seed), o.shuffle ? "yes" : "no");
  std::fflush(stdout);

  nn::ref::TrainConfig tc;
  tc.hidden = o.hidden;
  tc.batch = o.batch;
  tc.epochs = o.epochs;
  tc.lr = o.lr;
  tc.reg = o.reg;
  tc.seed = o.seed;
  tc.shuffle = o.shuffle;
  std::vector<double> secs;
  const auto params = nn::ref::train<T>(
      train.images.pixels.data(), D, labels, tc, [&](const nn::ref::EpochStats& s, const nn::ref::Params<T>&) {
        secs.push_back(s.seconds);
        std::printf("epoch %3d  loss %.5f  train acc %.4f  %.3f s  %.0f images/s\n", s.epoch + 1, s.loss,
                    s.train_acc, s.seconds, double(n_fit) / s.seconds);
        std::fflush(stdout);
      });

  double precision = 0;
  if (n_test) {
    arma::Mat<T> X(D, n_test);
    nn::io::normalize(test.images.pixels.data(), D * n_test, X.memptr());
    precision = nn::ref::accuracy(params, X, test.labels, 0);
  }
  std::printf("epoch_seconds:");
  for (const double s : secs) std::printf(" %.6f", s);
  std::printf("\ntest precision: %.4f\n", precision);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return o.dbl ? run<double>(o) : run<float>(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
