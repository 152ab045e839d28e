// GoogleTest suite for src/io/idx.{h,cpp} beyond the loaders' round trips: the in-memory parsers
// against the loaders, replay of the fuzzer's saved inputs (tests/fuzz/) and its seeds, x / 255
// normalisation, raw-then-gz file lookup and split loading, real Fashion-MNIST when present.
#include "idx_test_util.h"

namespace {

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// parse_images/parse_labels are the loaders without the file: the same results and the same
// messages, with the caller's name in place of the path.
TEST_F(IdxTest, ParseFromMemoryMatchesTheLoaders) {
  const Bytes img = image_file(3, 4, 5), lab = label_file({7, 0, 9});
  for (const Bytes& b : {img, gzip(img)}) {
    const auto m = nn::io::parse_images(b.data(), b.size(), "mem", 20);
    EXPECT_EQ(m.count, 3u);
    EXPECT_EQ(m.pixels, load_images(file("i", b), 20).pixels);
  }
  for (const Bytes& b : {lab, gzip(lab)})
    EXPECT_EQ(nn::io::parse_labels(b.data(), b.size(), "mem"), (Bytes{7, 0, 9}));
  Bytes cut = img;
  cut.resize(cut.size() - 5);
  const Bytes cut_gz = gzip(cut);
  for (const Bytes& b : {Bytes{}, cut, cut_gz, lab}) {
    const std::string p = file("bad", b);
    std::string from_file, from_memory;
    try {
      load_images(p, 20);
    } catch (const IdxError& e) {
      from_file = e.what();
    }
    try {
      nn::io::parse_images(b.data(), b.size(), p, 20);
    } catch (const IdxError& e) {
      from_memory = e.what();
    }
    EXPECT_FALSE(from_file.empty());
    EXPECT_EQ(from_memory, from_file);
  }
  // The name plays the path's part in the ".gz must be gzip" rule too.
  EXPECT_IDX_ERROR(nn::io::parse_images(img.data(), img.size(), "x.gz", 20), "x.gz",
                   ".gz file is not gzip-compressed");
}

// Inputs kept from fuzzing (tests/fuzz/targets/fuzz_idx.cpp): crashers that were fixed, and headers
// that probe the limits (counts that would need gigabytes, in files of a few bytes). Each must
// be refused, as images and as labels, from a file and from memory, with one clean IdxError.
TEST(IdxFuzzRegressions, EveryInputIsRefusedCleanly) {
  const std::string dir = nn::test::regression_dir("idx");
  ASSERT_FALSE(dir.empty()) << "tests/fuzz/regressions/idx not found from the working directory "
                               "or above the test binary";
  const auto files = nn::test::regression_files(dir);
  EXPECT_FALSE(files.empty()) << dir;
  for (const std::string& f : files) {
    EXPECT_IDX_ERROR(load_images(f, 0), f, ": ");
    EXPECT_IDX_ERROR(load_labels(f), f, ": ");
    const Bytes b = read_file(f);
    EXPECT_THROW(nn::io::parse_images(b.data(), b.size(), f, 0), IdxError) << f;
    EXPECT_THROW(nn::io::parse_labels(b.data(), b.size(), f), IdxError) << f;
  }
}

// The fuzzer's seeds (tests/fuzz/corpus/idx/, written by tests/fuzz/make_seeds.py) must stay
// valid, or fuzzing would start from refusals only: images-* load as images, labels-* as labels.
TEST(IdxFuzzRegressions, SeedsAreValid) {
  const std::string reg = nn::test::regression_dir("idx");
  ASSERT_FALSE(reg.empty());
  const auto seeds = nn::test::regression_files((fs::path(reg) / "../../corpus/idx").string());
  EXPECT_FALSE(seeds.empty());
  for (const std::string& f : seeds) {
    const std::string name = fs::path(f).filename().string();
    if (name.rfind("images", 0) == 0) {
      EXPECT_NO_THROW(load_images(f, 0)) << f;
    } else {
      EXPECT_EQ(name.rfind("labels", 0), 0u) << f;
      EXPECT_NO_THROW(load_labels(f)) << f;
    }
  }
}

template <class T>
void check_normalize() {
  Bytes src(256);
  for (int i = 0; i < 256; ++i) src[i] = static_cast<std::uint8_t>(i);
  std::vector<T> dst(256, T(-1));
  nn::io::normalize(src.data(), src.size(), dst.data());
  EXPECT_EQ(dst[0], T(0));
  EXPECT_EQ(dst[255], T(1));
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(dst[i], static_cast<T>(i) / static_cast<T>(255)) << i;
    EXPECT_NEAR(static_cast<double>(dst[i]), i / 255.0, sizeof(T) == 4 ? 6e-8 : 1e-16) << i;
  }
}

TEST(IdxNormalize, FloatIsExactlyXOver255) { check_normalize<float>(); }
TEST(IdxNormalize, DoubleIsExactlyXOver255) { check_normalize<double>(); }

TEST_F(IdxTest, FindIdxFilePrefersRawThenGz) {
  const std::string stem = "train-images-idx3-ubyte";
  EXPECT_IDX_ERROR(nn::io::find_idx_file(dir_, stem), dir_, "no " + stem + " or " + stem + ".gz");
  auto gz = file(stem + ".gz", gzip(image_file(1, 1, 1)));
  EXPECT_EQ(nn::io::find_idx_file(dir_, stem), gz);
  auto raw = file(stem, image_file(1, 1, 1));
  EXPECT_EQ(nn::io::find_idx_file(dir_, stem), raw);
  EXPECT_EQ(nn::io::find_idx_file(dir_ + "/", stem), raw);
}

TEST_F(IdxTest, LoadSplitMixesRawAndGz) {
  file("t10k-images-idx3-ubyte.gz", gzip(image_file(2, 28, 28)));
  file("t10k-labels-idx1-ubyte", label_file({3, 4}));
  auto d = nn::io::load_split(dir_, "t10k");
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.images.dim(), 784u);
  EXPECT_EQ(d.labels, (Bytes{3, 4}));
  EXPECT_IDX_ERROR(nn::io::load_split(dir_, "train"), dir_, "no train-images-idx3-ubyte");
}

TEST(IdxFashionMnist, RealFilesLoadBalanced) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " not present";
  for (auto [split, n] : {std::pair<const char*, std::size_t>{"train", 60000}, {"t10k", 10000}}) {
    auto d = nn::io::load_split(dir, split);
    EXPECT_EQ(d.size(), n);
    EXPECT_EQ(d.images.rows, 28u);
    EXPECT_EQ(d.images.cols, 28u);
    EXPECT_EQ(d.images.pixels.size(), n * 784);
    std::array<std::size_t, 10> hist{};
    for (auto l : d.labels) ++hist[l];
    for (int c = 0; c < 10; ++c) EXPECT_EQ(hist[c], n / 10) << split << " class " << c;
    EXPECT_EQ(*std::max_element(d.images.pixels.begin(), d.images.pixels.end()), 255);
  }
}

}  // namespace
