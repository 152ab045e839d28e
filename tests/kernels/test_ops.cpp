// Tests of the elementwise and reduction kernels (kernels/ops/ops.cu) against straightforward
// CPU computations in double, for float and double, each under every emulator thread order
// (schedules.h). Part of nn_tests: `make test` (emulator) or the CUDA build on a GPU.
// This file: gather, the elementwise kernels, grid sizes, empty sizes; softmax, cross-entropy,
// argmax and row sums: test_ops_softmax.cpp.
#include "ops_test_util.h"

namespace {

// NN_TEST_GPU_GRIDS=1 (make test-gpu-grid): the whole run launches the CUDA build's grids
// (nn::use_gpu_grids), so the emulator runs the many-block paths at GPU grid sizes.
bool gpu_grids_requested() {
  const char* v = std::getenv("NN_TEST_GPU_GRIDS");
  return v && *v && std::strcmp(v, "0") != 0;
}
class GpuGridEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (gpu_grids_requested()) nn::use_gpu_grids(true);
  }
};
[[maybe_unused]] ::testing::Environment* const kGpuGridEnvironment =
    ::testing::AddGlobalTestEnvironment(new GpuGridEnvironment);

// ---- gather ----------------------------------------------------------------------------------

TYPED_TEST(OpsTest, GatherNormalizeIsBitExactWithShuffledIndices) {
  using T = TypeParam;
  for (const auto& sz : {std::array{784, 60, 45}, std::array{5, 9, 13}, std::array{1, 3, 2}}) {
    const int D = sz[0], N = sz[1], b = sz[2];
    std::mt19937_64 rng(D * 1000 + b);
    std::vector<std::uint8_t> images(std::size_t(D) * N);
    for (auto& v : images) v = std::uint8_t(rng());
    images[0] = 0;
    images[images.size() - 1] = 255;
    // A shuffled permutation, cut or extended with repeats to b entries.
    std::vector<std::uint32_t> idx(static_cast<std::size_t>(N));
    std::iota(idx.begin(), idx.end(), 0u);
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(std::size_t(b));
    for (int j = std::min(N, b); j < b; ++j) idx[j] = std::uint32_t(rng() % unsigned(N));

    std::vector<T> want(std::size_t(D) * b);
    for (int j = 0; j < b; ++j)
      for (int i = 0; i < D; ++i)
        want[std::size_t(j) * D + i] = static_cast<T>(images[std::size_t(idx[j]) * D + i]) / T(255);

    auto d_img = to_device(images);
    auto d_idx = to_device(idx);
    nn::DeviceBuffer<T> d_X(want.size());
    nn::test::for_each_schedule([&] {
      CUDA_CHECK(cudaMemset(d_X.get(), 0xff, d_X.bytes()));
      nn::gather_normalize<T>(d_img.get(), D, d_idx.get(), b, d_X.get());
      const auto got = to_host(d_X);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(T)))
          << "D=" << D << " b=" << b;
    });
  }
}

// More columns than gridDim.y allows (65535): the column loop must stride.
TEST(OpsGather, GatherNormalizeStridesOverManyColumns) {
  const int D = 3, N = 7, b = 70001;
  std::vector<std::uint8_t> images(std::size_t(D) * N);
  for (std::size_t k = 0; k < images.size(); ++k) images[k] = std::uint8_t(k * 37 + 1);
  std::vector<std::uint32_t> idx(static_cast<std::size_t>(b));
  for (int j = 0; j < b; ++j) idx[j] = std::uint32_t((j * 5 + 3) % N);
  auto d_img = to_device(images);
  auto d_idx = to_device(idx);
  nn::DeviceBuffer<float> d_X(std::size_t(D) * b);
  CUDA_CHECK(cudaMemset(d_X.get(), 0xff, d_X.bytes()));
  nn::gather_normalize<float>(d_img.get(), D, d_idx.get(), b, d_X.get());
  const auto got = to_host(d_X);
  int bad = 0;
  for (int j = 0; j < b; ++j)
    for (int i = 0; i < D; ++i)
      bad += got[std::size_t(j) * D + i] !=
             static_cast<float>(images[std::size_t(idx[j]) * D + i]) / 255.0f;
  EXPECT_EQ(bad, 0);
}

TEST(OpsGather, GatherLabels) {
  const int N = 100, b = 333;
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(N));
  for (int k = 0; k < N; ++k) labels[k] = std::uint8_t((k * 7) % 10);
  std::vector<std::uint32_t> idx(static_cast<std::size_t>(b));
  std::mt19937 rng(5);
  for (auto& v : idx) v = rng() % N;
  auto d_lab = to_device(labels);
  auto d_idx = to_device(idx);
  nn::DeviceBuffer<std::uint8_t> d_out(static_cast<std::size_t>(b));
  nn::test::for_each_schedule([&] {
    CUDA_CHECK(cudaMemset(d_out.get(), 0xee, d_out.bytes()));
    nn::gather_labels<float>(d_lab.get(), d_idx.get(), b, d_out.get());
    const auto got = to_host(d_out);
    for (int j = 0; j < b; ++j) ASSERT_EQ(got[j], labels[idx[j]]) << "j=" << j;
  });
}

// ---- elementwise -----------------------------------------------------------------------------

TYPED_TEST(OpsTest, SigmoidMatchesCpuAndIsStable) {
  using T = TypeParam;
  std::vector<T> Z = uniform<T>(1000, -30.0, 30.0, 17);
  const T big = std::numeric_limits<T>::max();
  for (const double v : {0.0, -0.0, 1e-8, -1e-8, 20.0, -20.0, 88.0, -88.0, 100.0, -100.0, 800.0,
                         -800.0, 1e4, -1e4})
    Z.push_back(T(v));
  Z.push_back(big);
  Z.push_back(-big);
  const std::size_t n = Z.size();
  auto d_Z = to_device(Z);
  nn::DeviceBuffer<T> d_A(n);
  nn::test::for_each_schedule([&] {
    nn::sigmoid(d_Z.get(), n, d_A.get());
    auto d_W = to_device(Z);
    nn::sigmoid(d_W.get(), n, d_W.get());  // in place
    for (const auto& got : {to_host(d_A), to_host(d_W)})
      for (std::size_t k = 0; k < n; ++k) {
        const double z = Z[k], want = 1.0 / (1.0 + std::exp(-z));
        ASSERT_TRUE(got[k] >= T(0) && got[k] <= T(1)) << "z=" << z;
        ASSERT_NEAR(double(got[k]), want, 4 * kEps<T> * want + kTiny<T>) << "z=" << z;
      }
  });
}

TYPED_TEST(OpsTest, SigmoidBackwardMatchesCpuInPlace) {
  using T = TypeParam;
  const std::size_t n = 1037;
  const std::vector<T> dA = uniform<T>(n, -2.0, 2.0, 3);
  const std::vector<T> a = uniform<T>(n, 0.0, 1.0, 4);
  std::vector<double> want(n);
  for (std::size_t k = 0; k < n; ++k) want[k] = double(dA[k]) * a[k] * (1.0 - a[k]);
  auto d_a = to_device(a);
  auto d_dA = to_device(dA);
  nn::DeviceBuffer<T> d_dZ(n);
  nn::test::for_each_schedule([&] {
    nn::sigmoid_backward(d_dA.get(), d_a.get(), n, d_dZ.get());
    auto d_W = to_device(dA);
    nn::sigmoid_backward(d_W.get(), d_a.get(), n, d_W.get());  // in place: dZ1 == dA1
    for (const auto& got : {to_host(d_dZ), to_host(d_W)})
      for (std::size_t k = 0; k < n; ++k)
        ASSERT_NEAR(double(got[k]), want[k], 3 * kEps<T> * std::abs(want[k]) + kTiny<T>) << k;
  });
}

TYPED_TEST(OpsTest, SgdUpdateWithAndWithoutRegularisation) {
  using T = TypeParam;
  const std::size_t n = 2049;
  const std::vector<T> p0 = uniform<T>(n, -1.0, 1.0, 8);
  const std::vector<T> g = uniform<T>(n, -0.5, 0.5, 9);
  auto d_g = to_device(g);
  nn::DeviceBuffer<T> d_p(n);
  for (const double reg : {0.0, 1e-3, 0.25}) {
    const double lr = 0.1;
    nn::test::for_each_schedule([&] {
      d_p.upload(p0.data(), n);
      nn::sgd_update(d_p.get(), d_g.get(), n, T(lr), T(reg));
      const auto got = to_host(d_p);
      for (std::size_t k = 0; k < n; ++k) {
        const double p = p0[k], want = p - lr * (double(g[k]) + reg * p);
        const double tol = 4 * kEps<T> * (std::abs(p) + lr * (std::abs(double(g[k])) + reg * std::abs(p)));
        ASSERT_NEAR(double(got[k]), want, tol) << "reg=" << reg << " k=" << k;
      }
    });
  }
}

TYPED_TEST(OpsTest, SumSquaresAccumulatesInDouble) {
  using T = TypeParam;
  // 300007 entries are more than one grid (1024 blocks x 256 threads) covers, so the loop
  // strides; that size runs in the default order only, to keep the emulator run short.
  for (const std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(300007)}) {
    const std::vector<T> p = uniform<T>(n, -2.0, 2.0, n);
    long double want = 0;
    for (const T v : p) want += (long double)v * v;
    auto d_p = to_device(p);
    nn::DeviceBuffer<double> d_out(1);
    const auto check = [&] {
      const double start = 0.75;
      d_out.upload(&start, 1);
      nn::sum_squares(d_p.get(), n, d_out.get());
      EXPECT_NEAR(scalar_of(d_out) - start, double(want), 4.0 * n * kEps<double> * double(want))
          << "n=" << n;
    };
    if (n > 100000)
      check();
    else
      nn::test::for_each_schedule(check);
  }
}

// ---- grid sizes -------------------------------------------------------------------------------

#ifdef SIM_EMULATOR
// Blocks the emulator ran for what fn launches.
template <class F>
unsigned long long blocks_launched(F&& fn) {
  CUDA_CHECK(cudaDeviceSynchronize());
  const unsigned long long before = sim::stats().blocks;
  fn();
  CUDA_CHECK(cudaDeviceSynchronize());
  return sim::stats().blocks - before;
}

// The emulator's grids are capped at 8 blocks unless nn::use_gpu_grids(true), which gives the
// CUDA build's grids; the run under make test-gpu-grid (NN_TEST_GPU_GRIDS=1) launches them
// in every Ops test. The sizes below need more blocks than any cap allows.
TEST(OpsGrid, GpuGridSizesLaunchTheCudaBuildsGrids) {
  const bool requested = gpu_grids_requested();
  ASSERT_EQ(nn::gpu_grids(), requested) << "NN_TEST_GPU_GRIDS did not take effect";
  const std::size_t n = std::size_t(4096) * 256;
  nn::DeviceBuffer<float> p(n), g(n), Z(std::size_t(10) * 1000);
  nn::DeviceBuffer<double> sq(1);
  nn::DeviceBuffer<std::uint8_t> images(std::size_t(784) * 4);
  nn::DeviceBuffer<std::uint32_t> idx(100);
  p.zero();
  g.zero();
  Z.zero();
  sq.zero();
  images.zero();
  idx.zero();
  const auto sgd = [&] { return blocks_launched([&] { nn::sgd_update(p.get(), g.get(), n, 0.5f, 0.0f); }); };
  const auto squares = [&] { return blocks_launched([&] { nn::sum_squares(p.get(), n, sq.get()); }); };
  const auto softmax = [&] { return blocks_launched([&] { nn::softmax_columns(Z.get(), 10, 1000, Z.get()); }); };
  const auto rows = [&] { return blocks_launched([&] { nn::row_sums(g.get(), 200, 50, 200, p.get()); }); };
  const auto gather = [&] {
    return blocks_launched([&] { nn::gather_normalize(images.get(), 784, idx.get(), 100, g.get()); });
  };
  EXPECT_EQ(sgd(), requested ? 2048u : 8u) << "this run's grids";

  nn::use_gpu_grids(true);
  EXPECT_EQ(sgd(), 2048u);      // 4096 blocks' worth of elements, capped at 2048
  EXPECT_EQ(squares(), 1024u);  // the atomic reductions' cap
  EXPECT_EQ(softmax(), 63u);    // 1000 columns at 16 per block
  EXPECT_EQ(rows(), 25u);       // 200 rows in tiles of 8 floats
  EXPECT_EQ(gather(), 400u);    // 4 blocks down each of 100 columns
  nn::use_gpu_grids(false);
  EXPECT_EQ(sgd(), 8u);
  EXPECT_EQ(squares(), 8u);
  EXPECT_EQ(softmax(), 8u);
  EXPECT_EQ(rows(), 8u);
  EXPECT_EQ(gather(), 32u);     // 4 x 8: only gridDim.y is capped
  nn::use_gpu_grids(requested);
}
#endif

// ---- empty sizes: no launch, outputs untouched ------------------------------------------------

TYPED_TEST(OpsTest, EmptySizesLeaveOutputsUntouched) {
  using T = TypeParam;
  const std::vector<T> sentinel(40, T(7.5));
  nn::DeviceBuffer<std::uint8_t> d_bytes(64);
  nn::DeviceBuffer<std::uint32_t> d_idx(8);
  d_bytes.zero();
  d_idx.zero();
  auto d_in = to_device(sentinel);
  auto d_out = to_device(sentinel);
  nn::DeviceBuffer<double> d_loss(1);
  nn::DeviceBuffer<unsigned> d_cor(1);
  nn::test::for_each_schedule([&] {
    const double loss0 = 2.5;
    const unsigned cor0 = 9;
    d_loss.upload(&loss0, 1);
    d_cor.upload(&cor0, 1);
    nn::gather_normalize<T>(d_bytes.get(), 4, d_idx.get(), 0, d_out.get());
    nn::gather_normalize<T>(d_bytes.get(), 0, d_idx.get(), 4, d_out.get());
    nn::gather_labels<T>(d_bytes.get(), d_idx.get(), 0, d_bytes.get() + 32);
    nn::softmax_columns(d_in.get(), 10, 0, d_out.get());
    nn::softmax_xent(d_in.get(), d_bytes.get(), 10, 0, T(1), d_out.get(), d_out.get(),
                     d_loss.get(), d_cor.get());
    nn::count_correct(d_in.get(), d_bytes.get(), 10, 0, d_cor.get());
    nn::sigmoid(d_in.get(), 0, d_out.get());
    nn::sigmoid_backward(d_in.get(), d_in.get(), 0, d_out.get());
    nn::sgd_update(d_out.get(), d_in.get(), 0, T(1), T(1));
    nn::sum_squares(d_in.get(), 0, d_loss.get());
    EXPECT_EQ(to_host(d_out), sentinel);
    EXPECT_EQ(scalar_of(d_loss), loss0);
    EXPECT_EQ(scalar_of(d_cor), cor0);
    std::vector<std::uint8_t> bytes(64);
    d_bytes.download(bytes.data(), bytes.size());
    EXPECT_EQ(bytes, std::vector<std::uint8_t>(64, 0));
  });
}

}  // namespace
