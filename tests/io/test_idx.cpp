// GoogleTest suite for src/io/idx.{h,cpp}: round trips, one test per failure class, the in-memory
// parsers, replay of the fuzzer's saved inputs (tests/fuzz/), real Fashion-MNIST.
// Fixtures go to a fresh mkdtemp directory per test, so 1-4 MPI ranks can run the suite at once.
// No main() here (the project links its own); standalone: link -lgtest -lgtest_main -lz -pthread.
#include "io/idx.h"

#include "../fuzz/regression_files.h"
#include "../temp_dir.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nn::data::IdxError;
using Bytes = std::vector<std::uint8_t>;

void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

Bytes idx_header(std::uint32_t magic, std::initializer_list<std::uint32_t> dims) {
  Bytes b;
  put_be32(b, magic);
  for (auto d : dims) put_be32(b, d);
  return b;
}

// A pattern that differs between pixels and images, so misplaced bytes show up.
Bytes pixel_data(std::size_t n) {
  Bytes p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>((i * 37 + i / 7) & 0xFF);
  return p;
}

Bytes image_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b = idx_header(0x803, {count, rows, cols});
  Bytes p = pixel_data(std::size_t{count} * rows * cols);
  b.insert(b.end(), p.begin(), p.end());
  return b;
}

Bytes label_file(const Bytes& labels) {
  Bytes b = idx_header(0x801, {static_cast<std::uint32_t>(labels.size())});
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// In-memory gzip (windowBits 16+15), so tests can cut, corrupt and concatenate streams.
Bytes gzip(const Bytes& raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&zs, raw.size()) + 64);
  zs.next_in = const_cast<Bytes::value_type*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// EXPECT_THROW for the type, then the message: names the file, has the key phrase, one line.
#define EXPECT_IDX_ERROR(stmt, file, phrase)                                         \
  do {                                                                               \
    EXPECT_THROW(stmt, IdxError);                                                    \
    try {                                                                            \
      stmt;                                                                          \
    } catch (const IdxError& e) {                                                    \
      const std::string m = e.what();                                                \
      EXPECT_TRUE(contains(m, file)) << "message lacks file name: " << m;            \
      EXPECT_TRUE(contains(m, phrase)) << "message lacks '" << phrase << "': " << m; \
      EXPECT_FALSE(contains(m, "\n")) << "message spans lines: " << m;               \
    }                                                                                \
  } while (0)

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    dir_ = tmp_.str();
  }
  // Writes bytes under the test directory and returns the full path.
  std::string file(const std::string& name, const Bytes& b) {
    std::string p = dir_ + "/" + name;
    write_file(p, b);
    return p;
  }
  nn::test::TempDir tmp_{"nn_idx_test"};
  std::string dir_;
};

using nn::data::load_dataset;
using nn::data::load_images;
using nn::data::load_labels;

TEST_F(IdxTest, RawAndGzipRoundTripMatch) {
  const Bytes img = image_file(3, 4, 5), lab = label_file({7, 0, 9});
  auto raw = load_dataset(file("i", img), file("l", lab), 20);
  auto gz = load_dataset(file("i.gz", gzip(img)), file("l.gz", gzip(lab)), 20);
  EXPECT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw.images.count, 3u);
  EXPECT_EQ(raw.images.rows, 4u);
  EXPECT_EQ(raw.images.cols, 5u);
  EXPECT_EQ(raw.images.dim(), 20u);
  EXPECT_EQ(raw.images.pixels, Bytes(img.begin() + 16, img.end()));
  EXPECT_EQ(raw.labels, (Bytes{7, 0, 9}));
  EXPECT_EQ(gz.images.pixels, raw.images.pixels);
  EXPECT_EQ(gz.labels, raw.labels);
  EXPECT_EQ(gz.images_path, dir_ + "/i.gz");
  EXPECT_EQ(gz.labels_path, dir_ + "/l.gz");
  EXPECT_EQ(load_images(dir_ + "/i", 0).pixels, raw.images.pixels);  // 0 accepts any size
}

TEST_F(IdxTest, ContentNotNameDecidesGzip) {
  const Bytes img = image_file(2, 3, 3);
  auto p = file("plain-name-idx3-ubyte", gzip(img));
  EXPECT_EQ(load_images(p, 9).pixels, Bytes(img.begin() + 16, img.end()));
}

TEST_F(IdxTest, MultiMemberGzipIsReadWhole) {
  const Bytes img = image_file(4, 2, 8);
  Bytes cat = gzip(Bytes(img.begin(), img.begin() + 21));  // split mid-header and mid-image
  Bytes second = gzip(Bytes(img.begin() + 21, img.end()));
  cat.insert(cat.end(), second.begin(), second.end());
  EXPECT_EQ(load_images(file("multi.gz", cat), 16).pixels, Bytes(img.begin() + 16, img.end()));
}

TEST_F(IdxTest, MissingFileOrDirectory) {
  EXPECT_IDX_ERROR(load_images(dir_ + "/nope", 784), "/nope", "cannot open");
  EXPECT_IDX_ERROR(load_labels(dir_ + "/nope.gz"), "/nope.gz", "No such file");
  EXPECT_IDX_ERROR(load_images(dir_, 784), dir_, "is a directory");
}

TEST_F(IdxTest, EmptyFile) {
  auto p = file("empty", {});
  EXPECT_IDX_ERROR(load_images(p, 784), p, "file is empty");
}

TEST_F(IdxTest, BadMagic) {
  const std::string text = "hello world!!!!!";
  auto p = file("text", Bytes(text.begin(), text.end()));
  EXPECT_IDX_ERROR(load_images(p, 784), p,
                   "bad magic number: expected 0x00000803, found 0x68656C6C: not an IDX image file");
  EXPECT_IDX_ERROR(load_labels(p), p, "expected 0x00000801, found 0x68656C6C: not an IDX label file");
  auto q = file("dims2", idx_header(0x802, {1, 1}));
  EXPECT_IDX_ERROR(load_images(q, 0), q, "2 dimensions, expected 3");
}

TEST_F(IdxTest, ImagesAndLabelsSwapped) {
  auto img = file("img", image_file(2, 2, 2)), lab = file("lab", label_file({1, 2}));
  EXPECT_IDX_ERROR(load_images(lab, 4), lab, "labels file given where images expected");
  EXPECT_IDX_ERROR(load_labels(img), img, "images file given where labels expected");
  // Swapped arguments to load_dataset fail on the first file.
  EXPECT_IDX_ERROR(load_dataset(lab, img, 4), lab, "expected 0x00000803, found 0x00000801");
}

TEST_F(IdxTest, UnsupportedDataType) {
  Bytes b = idx_header(0x0D03, {1, 2, 2});
  b.resize(b.size() + 16);
  auto p = file("float", b);
  EXPECT_IDX_ERROR(load_images(p, 4), p, "unsupported IDX data type 0x0D (float32)");
  auto q = file("weird", idx_header(0x4201, {1}));
  EXPECT_IDX_ERROR(load_labels(q), q, "unsupported IDX data type 0x42");
}

TEST_F(IdxTest, ImageSizeDiffersFromExpected) {
  auto p = file("small", image_file(2, 4, 5));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "image size 4x5 = 20 pixels, expected 784");
  auto q = file("flat", idx_header(0x803, {1, 0, 28}));
  EXPECT_IDX_ERROR(load_images(q, 0), q, "image size 0x28 is empty");
}

TEST_F(IdxTest, TruncatedRaw) {
  Bytes b = image_file(3, 4, 5);  // 16 + 60 bytes
  b.resize(b.size() - 5);
  auto p = file("cut", b);
  EXPECT_IDX_ERROR(load_images(p, 20), p, "truncated: expected 76 bytes (per the header), file has 71");
  auto q = file("hdr", Bytes(b.begin(), b.begin() + 10));
  EXPECT_IDX_ERROR(load_images(q, 20), q, "truncated: the IDX header needs 16 bytes, file has 10");
  auto r = file("lab", label_file({1, 2, 3, 4}));
  std::filesystem::resize_file(r, 10);
  EXPECT_IDX_ERROR(load_labels(r), r, "truncated: expected 12 bytes");
}

TEST_F(IdxTest, TruncatedGzip) {
  Bytes b = image_file(3, 4, 5);
  b.resize(b.size() - 5);
  auto p = file("short.gz", gzip(b));  // a complete gzip stream of a short IDX file
  EXPECT_IDX_ERROR(load_images(p, 20), p,
                   "truncated: expected 76 bytes (per the header), decompressed data has 71");
  Bytes z = gzip(image_file(3, 4, 5));
  z.resize(z.size() - 6);  // a gzip stream cut short (lost trailer)
  auto q = file("cut.gz", z);
  EXPECT_IDX_ERROR(load_images(q, 20), q, "gzip stream is truncated");
  z.resize(15);  // cut inside the deflate data
  auto r = file("cut2.gz", z);
  EXPECT_THROW(load_images(r, 20), IdxError);
}

TEST_F(IdxTest, TrailingBytes) {
  Bytes b = image_file(2, 3, 3);
  b.insert(b.end(), {1, 2, 3});
  auto p = file("extra", b);
  EXPECT_IDX_ERROR(load_images(p, 9), p, "3 trailing bytes after the data (expected 34 bytes");
  auto q = file("extra.gz", gzip(b));
  EXPECT_IDX_ERROR(load_images(q, 9), q, "3 trailing bytes");
  Bytes l = label_file({1, 2});
  l.push_back(0);
  auto r = file("lextra", l);
  EXPECT_IDX_ERROR(load_labels(r), r, "1 trailing bytes");
}

TEST_F(IdxTest, ZeroImagesOrLabels) {
  auto p = file("none", image_file(0, 28, 28));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "contains zero images");
  auto q = file("none.gz", gzip(label_file({})));
  EXPECT_IDX_ERROR(load_labels(q), q, "contains zero labels");
}

TEST_F(IdxTest, LabelOutOfRange) {
  auto p = file("lab", label_file({1, 2, 10, 3, 255}));
  EXPECT_IDX_ERROR(load_labels(p), p, "label 10 at index 2 is out of range 0..9");
}

TEST_F(IdxTest, CountMismatch) {
  auto img = file("img", image_file(3, 2, 2)), lab = file("lab", label_file({1, 2, 3, 4}));
  EXPECT_IDX_ERROR(load_dataset(img, lab, 4), img, "image count 3 does not match label count 4 in " + lab);
}

TEST_F(IdxTest, GzNameButNotGzip) {
  auto p = file("raw.gz", image_file(1, 2, 2));
  EXPECT_IDX_ERROR(load_images(p, 4), p, ".gz file is not gzip-compressed");
}

TEST_F(IdxTest, CorruptGzip) {
  const Bytes good = gzip(image_file(5, 8, 8));
  Bytes crc = good;
  crc[crc.size() - 8] ^= 0xFF;  // CRC32 trailer: data decodes fine but fails the check
  auto p = file("crc.gz", crc);
  EXPECT_IDX_ERROR(load_images(p, 64), p, "corrupt gzip data (incorrect data check)");
  Bytes method = good;
  method[2] = 7;  // compression method must be 8 (deflate)
  auto q = file("method.gz", method);
  EXPECT_IDX_ERROR(load_images(q, 64), q, "corrupt gzip data");
  Bytes garbage = good;
  garbage.insert(garbage.end(), {0, 0, 0, 0});
  auto r = file("garbage.gz", garbage);
  EXPECT_IDX_ERROR(load_images(r, 64), r, "4 bytes of trailing garbage after the gzip stream");
  Bytes body = good;
  for (std::size_t i = 10; i < body.size() - 8; ++i) body[i] = 0xFF;  // reserved block type 3
  auto s = file("body.gz", body);
  EXPECT_IDX_ERROR(load_images(s, 64), s, "corrupt gzip data");
}

TEST_F(IdxTest, HugeDeclaredCountFailsWithoutAllocating) {
  auto p = file("huge", idx_header(0x803, {0xFFFFFFFFu, 28, 28}));
  EXPECT_IDX_ERROR(load_images(p, 784), p, "image count 4294967295 exceeds the limit of 2147483647");
  auto q = file("big", idx_header(0x803, {1u << 30, 28, 28}));  // plausible count, ~800 GB of pixels
  EXPECT_IDX_ERROR(load_images(q, 784), q, "truncated: expected 841813590032 bytes");
  auto r = file("big.gz", gzip(idx_header(0x803, {1u << 30, 28, 28})));
  EXPECT_IDX_ERROR(load_images(r, 784), r, "compressed input is too small");
  auto s = file("wide", idx_header(0x803, {0x7FFFFFFF, 0xFFFFFFFFu, 0xFFFFFFFFu}));
  EXPECT_IDX_ERROR(load_images(s, 0), s, "too large");
  auto t = file("lhuge.gz", gzip(idx_header(0x801, {0x80000000u})));
  EXPECT_IDX_ERROR(load_labels(t), t, "label count 2147483648 exceeds the limit");
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// parse_images/parse_labels are the loaders without the file: the same results and the same
// messages, with the caller's name in place of the path.
TEST_F(IdxTest, ParseFromMemoryMatchesTheLoaders) {
  const Bytes img = image_file(3, 4, 5), lab = label_file({7, 0, 9});
  for (const Bytes& b : {img, gzip(img)}) {
    const auto m = nn::data::parse_images(b.data(), b.size(), "mem", 20);
    EXPECT_EQ(m.count, 3u);
    EXPECT_EQ(m.pixels, load_images(file("i", b), 20).pixels);
  }
  for (const Bytes& b : {lab, gzip(lab)})
    EXPECT_EQ(nn::data::parse_labels(b.data(), b.size(), "mem"), (Bytes{7, 0, 9}));
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
      nn::data::parse_images(b.data(), b.size(), p, 20);
    } catch (const IdxError& e) {
      from_memory = e.what();
    }
    EXPECT_FALSE(from_file.empty());
    EXPECT_EQ(from_memory, from_file);
  }
  // The name plays the path's part in the ".gz must be gzip" rule too.
  EXPECT_IDX_ERROR(nn::data::parse_images(img.data(), img.size(), "x.gz", 20), "x.gz",
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
    EXPECT_THROW(nn::data::parse_images(b.data(), b.size(), f, 0), IdxError) << f;
    EXPECT_THROW(nn::data::parse_labels(b.data(), b.size(), f), IdxError) << f;
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
  nn::data::normalize(src.data(), src.size(), dst.data());
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
  EXPECT_IDX_ERROR(nn::data::find_idx_file(dir_, stem), dir_, "no " + stem + " or " + stem + ".gz");
  auto gz = file(stem + ".gz", gzip(image_file(1, 1, 1)));
  EXPECT_EQ(nn::data::find_idx_file(dir_, stem), gz);
  auto raw = file(stem, image_file(1, 1, 1));
  EXPECT_EQ(nn::data::find_idx_file(dir_, stem), raw);
  EXPECT_EQ(nn::data::find_idx_file(dir_ + "/", stem), raw);
}

TEST_F(IdxTest, LoadSplitMixesRawAndGz) {
  file("t10k-images-idx3-ubyte.gz", gzip(image_file(2, 28, 28)));
  file("t10k-labels-idx1-ubyte", label_file({3, 4}));
  auto d = nn::data::load_split(dir_, "t10k");
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.images.dim(), 784u);
  EXPECT_EQ(d.labels, (Bytes{3, 4}));
  EXPECT_IDX_ERROR(nn::data::load_split(dir_, "train"), dir_, "no train-images-idx3-ubyte");
}

TEST(IdxFashionMnist, RealFilesLoadBalanced) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " not present";
  for (auto [split, n] : {std::pair<const char*, std::size_t>{"train", 60000}, {"t10k", 10000}}) {
    auto d = nn::data::load_split(dir, split);
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
